"""What a shared context read from each file, and whether reading it now gives the same: a stat
and a byte comparison per new connection, through a raw ``FileIO`` (only the system calls
OpenSSL's load makes; it owns its descriptor, so an exception at any bytecode closes it). Why
bytes and not timestamps, and why each thread checks for itself: docs/design.md, File checks.
Whatever the checks raise means "stock"; only ``MemoryError`` and ``RecursionError`` propagate.
"""

from __future__ import annotations

import os
import stat
import sys
from io import FileIO
from itertools import pairwise
from types import FrameType
from typing import Any

__all__ = ["FileChanged", "FileCheck", "openable", "propagate", "read_checks"]

_PIECE = 65536
_MOST = 1 << 20


def propagate(exc: BaseException) -> bool:
    """Raise ``exc`` again where stock's code would raise it too: what a signal handler raised
    (a frame called with a signal number and a frame), whatever its class, and anything not an
    Exception, MemoryError and RecursionError, unless an audit hook raised it for an ``open`` of
    ours (stock's loads are OpenSSL's, which fire none). Else False: "stock for this connection"."""
    signals: set[Any] = getattr(sys.modules.get("signal"), "valid_signals", set)()
    tb, audit = exc.__traceback__, False
    while tb is not None:
        values = [tb.tb_frame.f_locals.get(n) for n in tb.tb_frame.f_code.co_varnames[:3]]
        if any(
            type(a) is int and a in signals and type(b) is FrameType for a, b in pairwise(values)
        ):
            raise exc
        audit = audit or (
            values[:1] == ["open"] and len(values) > 1 and isinstance(values[1], tuple)
        )
        tb = tb.tb_next
    if not audit and (
        not isinstance(exc, Exception) or isinstance(exc, MemoryError | RecursionError)
    ):
        raise exc
    return False


def _identity(path: str) -> tuple[int, ...] | None:
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return None
    # ctime too: mtime can be set back by the writer (cp -p, tar, rsync -t); ctime cannot.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(path: str) -> bytes:
    with FileIO(path, "r") as file:
        pieces = []
        while piece := file.read(_PIECE):
            pieces.append(piece)
        return b"".join(pieces)


def _same(path: str, expected: bytes) -> bool:
    """One read up to ``_MOST`` (one byte more than expected shows growth): each system call
    releases the GIL, and under 300 threads taking it back costs more than the read. Larger
    files in pieces, so that 300 connections never hold 300 copies of a large bundle."""
    with FileIO(path, "r") as file:
        offset, size = 0, len(expected)
        while True:
            asked = min(size - offset + 1, _MOST)
            piece = file.read(asked)
            if not expected.startswith(piece, offset):  # (a memcmp, no copy)
                return False
            offset += len(piece)
            if offset > size:
                return False
            if len(piece) < asked:  # (a regular file reads short only at its end)
                return offset == size


class FileChanged(OSError):
    """A file held other contents while a build read it: not a lasting failure."""


class FileCheck:
    """One file as a build read it: its identity and its contents."""

    __slots__ = ("contents", "identity", "path")

    def __init__(self, path: str, identity: tuple[int, ...], contents: bytes) -> None:
        self.path, self.identity, self.contents = path, identity, contents

    def unchanged(self) -> bool:
        """Whether the file still holds what was read (False if that cannot be told)."""
        try:
            return _identity(self.path) == self.identity and _same(self.path, self.contents)
        except BaseException as exc:  # (an audit hook's refusal included, whatever its class)
            return propagate(exc)


def openable(paths: tuple[str, ...]) -> bool:
    """Whether this thread can open each file, a regular one, now, before it waits for another's
    build (access can differ between threads: per-thread credentials, Landlock, a root)."""
    try:
        for path in paths:
            if _identity(path) is None:
                return False
            FileIO(path, "r").close()
    except BaseException as exc:  # (an audit hook's refusal included, whatever its class)
        return propagate(exc)
    return True


def read_checks(paths: tuple[str, ...]) -> tuple[FileCheck, ...] | None:
    """A check for each file, read now; None if any is not a regular, readable file (stock then
    reads it: a pipe must be read once, and a missing file fails with stock's own error)."""
    checks = []
    try:
        for path in paths:
            identity = _identity(path)
            if identity is None:
                return None
            contents = _read(path)
            if _identity(path) != identity:  # changed while read: let stock read it
                return None
            checks.append(FileCheck(path, identity, contents))
    except BaseException as exc:  # (an audit hook's refusal included, whatever its class)
        propagate(exc)
        return None
    return tuple(checks)
