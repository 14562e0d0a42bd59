"""What a shared context read from each file, and whether reading it now gives the same.

A shared context equals stock's (which reads the CA file, client certificate and key on every
new connection) only while those files hold what it read, so each new connection stats them
and compares their bytes (about 25 us for certifi's bundle; a load takes tens of ms): stat
misses a coarse clock's or a shared mapping's writes, and a read fails where stock's would
(privileges dropped, no descriptors left). Only ``os.stat``/``open``/``read``/``close`` touch
the file, as in OpenSSL's load (``open()`` adds an ioctl and an lseek, which a seccomp
allow-list from stock refuses); whatever they raise, audit hooks included, means "stock".
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable

from ._flight import Flight, Token

__all__ = ["FileChanged", "FileCheck", "read_checks"]

_PIECE = 65536
_MOST = 1 << 20
CHECK_WAIT = 0.25  # a check takes microseconds; a waiter given up on checks for itself
_tickets = itertools.count()  # (next() is one C call: no two threads get the same ticket)


def _identity(path: str) -> tuple[int, ...] | None:
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        return None
    # ctime too: mtime can be set back by the writer (cp -p, tar, rsync -t); ctime cannot.
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)  # (the flags OpenSSL's fopen("r") uses)
    try:
        pieces = []
        while piece := os.read(fd, _PIECE):
            pieces.append(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def _same(path: str, expected: bytes) -> bool:
    """One read up to ``_MOST`` (one byte more than expected shows growth): each system call
    releases the GIL, and under 300 threads taking it back costs more than the read. Larger
    files in pieces, so that 300 connections never hold 300 copies of a large bundle."""
    fd = os.open(path, os.O_RDONLY)  # (the flags OpenSSL's fopen("r") uses)
    try:
        offset, size = 0, len(expected)
        while True:
            asked = min(size - offset + 1, _MOST)
            piece = os.read(fd, asked)
            if not expected.startswith(piece, offset):  # (a memcmp, no copy)
                return False
            offset += len(piece)
            if offset > size:
                return False
            if len(piece) < asked:  # (a regular file reads short only at its end)
                return offset == size
    finally:
        os.close(fd)


class FileChanged(OSError):
    """A file held other contents while a build read it: not a lasting failure."""


class FileCheck:
    """One file as a build read it: its identity and its contents.

    Concurrent connections share checks: a check that started after a connection asked is an
    observation of the file while that connection was being set up, as good as its own, so one
    read serves every connection waiting when it starts (a burst of 300 makes a few, not 300).
    """

    __slots__ = ("contents", "identity", "last", "path", "running")

    def __init__(self, path: str, identity: tuple[int, ...], contents: bytes) -> None:
        self.path, self.identity, self.contents = path, identity, contents
        self.last = (-1, False)  # (ticket when the latest finished check started, its answer)
        self.running: dict[int, Flight] = {}  # {0: the check under way}

    def unchanged(self) -> bool:
        """Whether the file holds what was read, seen after this call began (False if that
        cannot be told)."""
        asked = next(_tickets)
        # Identity in this thread: a thread can have its own view of a path (a private cwd
        # or root after os.unshare(CLONE_FS)); the same inode is the same contents for all.
        if not self._now(lambda: _identity(self.path) == self.identity):
            return False
        for _ in range(3):
            started, answer = self.last
            if started > asked:
                return answer
            token = Token()
            me = Flight(token, CHECK_WAIT)
            running = self.running.setdefault(0, me)
            if running is not me and running.stale():
                running = self.running[0] = me
            if running is me:
                started = next(_tickets)
                try:
                    answer = self._now(self._same)
                    if started > self.last[0]:
                        self.last = (started, answer)
                    return answer
                finally:
                    del token  # whoever waits wakes (and does if this line is never reached)
                    if self.running.get(0) is me:
                        self.running.pop(0, None)
            if running.mine() or not running.wait():
                break  # (our own stack is checking, or too slowly): a check of our own
        return self._now(self._same)

    def _same(self) -> bool:
        return _same(self.path, self.contents)

    @staticmethod
    def _now(test: Callable[[], bool]) -> bool:
        try:
            return test()
        except RecursionError:  # (a RuntimeError, as stock would raise it)
            raise
        except (OSError, ValueError, RuntimeError):  # (an audit hook's refusal included)
            return False


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
    except RecursionError:
        raise
    except (OSError, ValueError, RuntimeError):  # (an audit hook's refusal included)
        return None
    return tuple(checks)
