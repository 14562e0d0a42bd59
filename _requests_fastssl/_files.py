"""What a shared context read from each file, and whether the file still holds it: per new
connection one ``stat`` (its identity: device, inode, size, timestamps, mode, owners) and the
process's credentials, compared with those last found; the contents are read and compared by
digest only when they differ, or while the file is racily clean. Reads go through a raw
``FileIO`` (only the system calls OpenSSL's load makes; it owns its descriptor, so an exception
at any bytecode closes it). Why: docs/design.md, File checks. An error of the checks means
"stock"; what stock's code would raise too propagates (``propagate``)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
import time
import types
from collections.abc import Iterator
from io import FileIO
from itertools import pairwise
from types import FrameType
from typing import Any, Literal

__all__ = [
    "LARGEST", "RACY_WINDOW_NS", "FileCheck", "Unpinned", "credentials", "from_signal_handler",
    "pinned", "propagate", "read_checks",
]  # fmt: skip

_MOST = 1 << 20
# Larger trust files go to stock, which reads them line by line: a build holds a few copies.
LARGEST = 8 << 20
# A file whose mtime or ctime is this close to the moment its contents were last compared is
# read again at each check (a coarse or FAT clock stamps a later write no later than that).
RACY_WINDOW_NS = 2_000_000_000


def from_signal_handler(exc: BaseException) -> bool:
    """Whether a signal handler raised ``exc``: a frame of its traceback was called with a
    signal number and a frame among its first locals, or in a tuple there (``*args``)."""
    signals: set[Any] = getattr(sys.modules.get("signal"), "valid_signals", set)()
    tb = exc.__traceback__
    while tb is not None:
        values = [tb.tb_frame.f_locals.get(n) for n in tb.tb_frame.f_code.co_varnames[:3]]
        flat = [x for v in values for x in (v if type(v) is tuple else (v,))]
        if any(type(a) is int and a in signals and type(b) is FrameType for a, b in pairwise(flat)):
            return True
        tb = tb.tb_next
    return False


# What a green library throws into a greenlet at a switch (a kill, a timeout): like a signal
# handler's, it is the greenlet's to raise, wherever it lands ("module", "class").
_THROWN_IN = (("greenlet", "GreenletExit"), ("gevent.timeout", "Timeout"),
              ("eventlet.timeout", "Timeout"))  # fmt: skip


def propagate(exc: BaseException) -> Literal[False]:
    """Raise ``exc`` again where stock's code would raise it too: what a signal handler raised
    (``from_signal_handler``) or a green library threw in, whatever its class, and anything not
    an Exception, MemoryError and RecursionError, unless an audit hook raised it for an
    ``open`` of ours (stock's loads are OpenSSL's, which fire none). Else False: "stock for
    this connection"."""
    kinds = [getattr(sys.modules.get(module), name, None) for module, name in _THROWN_IN]
    if from_signal_handler(exc) or any(type(k) is type and isinstance(exc, k) for k in kinds):
        raise exc
    if isinstance(exc, Exception) and not isinstance(exc, MemoryError | RecursionError):
        return False
    tb = exc.__traceback__
    while tb is not None:
        values = [tb.tb_frame.f_locals.get(n) for n in tb.tb_frame.f_code.co_varnames[:2]]
        if values[:1] == ["open"] and len(values) > 1 and isinstance(values[1], tuple):
            return False
        tb = tb.tb_next
    raise exc


def _identity(path: str | int) -> tuple[int, ...] | None:
    """What one ``stat`` says of a regular file (ctime: no call sets it back, and chmod, chown
    and ACL changes move it; mode and owners: the rights stock's open meets), else None."""
    st = os.stat(path)  # (a descriptor: fstat)
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
            st.st_mode, st.st_uid, st.st_gid)  # fmt: skip


_geteuid, _getegid = getattr(os, "geteuid", int), getattr(os, "getegid", int)


def credentials() -> tuple[int, int]:
    """The process's own rights stock's open is made with (docs/design.md, File checks)."""
    return _geteuid(), _getegid()


# The wall clock that stamps files, as the earlier of two readings: time_ns, and monotonic_ns
# plus their distance at import. A library that moves time_ns ahead in place (time-machine)
# leaves the second; a step of the wall clock back after import, the first. A mock in place
# at import leaves no clock: every file is then read at every check.
_real, _mono = time.time_ns, time.monotonic_ns
_base = _real() - _mono() if type(_real) is type(_mono) is types.BuiltinFunctionType else None
_clock: Any = (lambda: None) if _base is None else (lambda: min(_real(), _mono() + _base))


def _racy(identity: tuple[int, ...], moment: int | None) -> bool:
    """Whether the file was written too close to ``moment``, when its contents were last
    compared, for its timestamps to show a later write (git's racily-clean rule)."""
    return moment is None or max(identity[3], identity[4]) >= moment - RACY_WINDOW_NS


def _pieces(path: str, identity: tuple[int, ...]) -> Iterator[bytes]:
    """The contents in pieces of at most ``_MOST``, each asked for at the size expected plus one
    byte (no buffer allocated and shrunk: OpenSSL's system calls alone; one call a bundle: each
    lets the GIL go). OSError unless the file read is the one ``identity`` describes, unwritten
    meanwhile (a path may name another only while opened: a symlink swapped and back)."""
    with FileIO(path, "r") as file:
        left = identity[2]
        while True:
            asked = min(left + 1, _MOST)
            piece = file.read(asked)
            yield piece
            if len(piece) < asked:  # (a regular file reads short only at its end)
                break
            left = max(left - len(piece), 0)
        if _identity(file.fileno()) != identity:  # (fstat: the descriptor read)
            raise OSError(f"{path} changed, or named another file, while it was read")


# hashlib lets the GIL go from 2048 bytes: a build under 300 threads took it back 400 ms later.
_HELD = 2047


def _digest(pieces: Iterator[bytes]) -> bytes:
    digest = hashlib.sha256()  # (a check holds no copy of a large bundle)
    for piece in pieces:
        view = memoryview(piece)
        for start in range(0, len(view), _HELD):
            digest.update(view[start : start + _HELD])
    return digest.digest()


class FileCheck:
    """One file as a build read it: its identity then and the digest of its contents (the
    contents themselves only until the build ends), and when it was last found the same."""

    __slots__ = ("contents", "digest", "identity", "path", "seen")

    def __init__(self, path: str, identity: tuple[int, ...], contents: bytes, moment: Any) -> None:
        self.path, self.identity, self.contents = path, identity, contents
        self.digest = _digest(iter((contents,)))
        # (identity, credentials, moment) replaced whole: a thread reads one consistent triple
        self.seen = (identity, credentials(), moment)

    def unchanged(self, strict: bool = False) -> bool:
        """Whether the file still holds what was read: by one ``stat`` if identity and
        credentials are as last found, outside the racily-clean window, else by its contents
        (False if that cannot be told). ``strict``: also the identity the build read."""
        try:
            identity = _identity(self.path)
            if identity is None or (strict and identity != self.identity):
                return False
            known, creds, then = self.seen
            if identity == known and credentials() == creds and not _racy(identity, then):
                return True
            # (before the read: a later write is stamped later; one before its end fails it)
            moment = _clock()
            if _digest(_pieces(self.path, identity)) != self.digest:
                return False
            self.seen = (identity, credentials(), moment)
            return True
        except BaseException as exc:  # (an audit hook's refusal included, whatever its class)
            return propagate(exc)


# procfs's link to a read-only descriptor: a symlink of mode 0500, which no other file system
# makes (a /proc that is a plain directory, in a hostile container, could name anything).
_PROC_LINK = stat.S_IFLNK | 0o500


class Unpinned(OSError):
    """``pinned``'s own finding, never stock's error: /proc is not procfs (``procfs`` False), or
    a file is not the one its check read, or was written before its load ended."""

    def __init__(self, message: str, procfs: bool = True) -> None:
        super().__init__(message)
        self.procfs = procfs


@contextlib.contextmanager
def pinned(checks: tuple[FileCheck, ...]) -> Iterator[list[str]]:
    """The files ``checks`` read, open again, as ``/proc/thread-self/fd`` names for a load (a
    path can name another file, swapped in and back, exactly while OpenSSL opens it; an open
    descriptor can't; thread-self: a thread may have a descriptor table of its own). Each must
    have its check's identity when opened and when the load ends, however it ends: else
    ``Unpinned``, as when /proc is not procfs (what the load raised is then not stock's)."""
    files: list[FileIO] = []

    def same() -> bool:
        return [_identity(f.fileno()) for f in files] == [c.identity for c in checks]

    try:
        try:
            files += (FileIO(check.path, "r") for check in checks)  # (one raising: all freed)
            fit = same()
        except BaseException as exc:  # (an audit hook's refusal included, whatever its class)
            fit = propagate(exc)
        if not fit:
            raise Unpinned("a trust file is not the one read: left to stock")
        names = [f"/proc/thread-self/fd/{file.fileno()}" for file in files]
        try:
            procfs = all(os.lstat(name).st_mode == _PROC_LINK for name in names)
        except BaseException as exc:
            procfs = propagate(exc)
        if not procfs:
            raise Unpinned("/proc is not procfs: left to stock", procfs=False)
        written = "a trust file was written while it was loaded: left to stock"
        try:
            yield names
        except BaseException as exc:  # (its error is stock's, unless a file changed under it)
            # (a StockError made of a signal handler's OSError is stock's however the file is)
            if same() or from_signal_handler(exc.__context__ or exc) or propagate(exc):
                raise
            raise Unpinned(written) from None
        if not same():
            raise Unpinned(written)
    finally:
        for file in files:
            file.close()


def read_checks(paths: tuple[str, ...]) -> tuple[FileCheck, ...] | None:
    """A check for each file, read now; None if any is not a regular, readable file up to
    ``LARGEST`` (stock reads it: a pipe is read once, a missing file fails with its error)."""
    checks = []
    try:
        for path in map(os.fspath, paths):  # (an int is a descriptor: FileIO would close it)
            moment = _clock()
            identity = _identity(path)
            if identity is None or identity[2] > LARGEST:
                return None
            contents = b"".join(_pieces(path, identity))  # (changed while read: stock reads it)
            checks.append(FileCheck(path, identity, contents, moment))
    except BaseException as exc:  # (an audit hook's refusal included, whatever its class)
        propagate(exc)
        return None
    return tuple(checks)
