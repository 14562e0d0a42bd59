"""What makes two shared contexts different (the registry key, ``Spec``), and file checks.

A ``Spec`` holds what urllib3 would feed into a fresh context for one pool: the pool's
``cert_reqs``, the CA and client-certificate paths exactly as urllib3 passes them to
``load_verify_locations`` / ``load_cert_chain``, and the snapshot of every module-level
setting urllib3's connection set-up reads (``Target.settings()``). File *contents* are not in
the key: a context records what it read (``FileCheck``), and every new connection made with
it checks the file again, as stock urllib3 would read it again: the same identity (a stat)
and the same contents (read and compared byte for byte: a write through a shared mapping
can leave every timestamp alone, a coarse clock can give two writes one timestamp, and a
file that can no longer be opened, after the process dropped privileges, must fail as
stock's read fails). Comparing a bundle costs some 30 microseconds; loading it, tens of
milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import Any, NamedTuple

__all__ = ["FileCheck", "FileId", "Spec", "dir_identity", "file_identity"]

# (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns). ctime is in it because mtime can be
# set back by the writer (cp -p, tar, rsync -t); ctime cannot be set from user space.
FileId = tuple[int, int, int, int, int]


def _identity(st: os.stat_result) -> FileId:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_identity(path: str) -> FileId | None:
    """Identity of a regular file (symlinks followed, as OpenSSL does); None if unusable."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return _identity(st) if stat.S_ISREG(st.st_mode) else None


def dir_identity(path: str) -> tuple[Any, ...] | None:
    """Identity of a CA directory: the directory itself plus every entry in it.

    OpenSSL reads hashed files from a CA directory lazily during verification and keeps
    what it read, so an entry rewritten in place must count as much as an entry added or
    removed (which the directory's own mtime would show).
    """
    try:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            return None
        entries: list[tuple[str, FileId | None]] = []
        with os.scandir(path) as it:
            for entry in it:
                try:
                    entries.append((entry.name, _identity(entry.stat())))
                except OSError:  # a dangling c_rehash link: present, unreadable
                    entries.append((entry.name, None))
    except (OSError, ValueError):
        return None
    entries.sort()
    return (_identity(st), tuple(entries))


def _read(path: str) -> bytes | None:
    """The file's contents, None if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _same_contents(path: str, expected: bytes) -> bool:
    """Whether the file holds exactly ``expected`` (False if it cannot be read). Compared in
    64 KiB pieces, without hashing: every new connection checks, and 300 of them at once
    must not hold 300 copies of a bundle."""
    offset = 0
    try:
        with open(path, "rb") as f:
            while piece := f.read(65536):
                if not expected.startswith(piece, offset):  # (a memcmp, no copy)
                    return False
                offset += len(piece)
    except OSError:
        return False
    return offset == len(expected)


def _path_to(fd: int) -> str | None:
    """A path that opens ``fd`` itself, in this thread's file table (a thread that called
    unshare(CLONE_FILES) has its own: /proc/self/fd is the main thread's), checked to name
    that very file; None if /proc cannot give one."""
    mine = os.fstat(fd)
    for table in ("/proc/thread-self/fd", "/proc/self/fd"):
        path = f"{table}/{fd}"
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            return path
    return None


class FileCheck:
    """What a context read from one file (or CA directory), and whether it still holds."""

    __slots__ = ("contents", "identity", "is_dir", "path")

    def __init__(self, path: str, is_dir: bool) -> None:
        self.path = path
        self.is_dir = is_dir
        self.identity = dir_identity(path) if is_dir else file_identity(path)
        # Read after the identity: a change in between gives another identity by the next
        # check, so such a check never holds (a rebuild, not a wrong context).
        self.contents = None if is_dir or self.identity is None else _read(path)

    def _current(self) -> Any:
        return dir_identity(self.path) if self.is_dir else file_identity(self.path)

    def usable(self) -> bool:
        return self.identity is not None and (self.is_dir or self.contents is not None)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[str]:
        """A path that reads exactly the contents this check holds, to load from: a file
        that changes while OpenSSL reads it (and changes back) cannot leave the context
        with contents other than those every later check compares against. Linux: an
        in-memory file, gone when the block ends. Elsewhere (or without a /proc that leads
        to it) the file's own path, and the caller checks again after loading."""
        fd = -1
        if self.contents is not None and hasattr(os, "memfd_create"):
            try:
                fd = os.memfd_create("requests_fastssl", os.MFD_CLOEXEC)
            except OSError:
                fd = -1
        if fd < 0:
            yield self.path
            return
        try:
            view = memoryview(self.contents or b"")
            while view:
                view = view[os.write(fd, view) :]
            yield _path_to(fd) or self.path
        finally:
            os.close(fd)

    def unchanged(self) -> bool:
        """Whether reading the file now would give what was read then: the same identity,
        and the same contents, read again (False if it can no longer be read). A directory
        never counts as unchanged: OpenSSL reads its entries lazily, with the process's
        rights at that moment, and keeps them, so no check here could stand for that."""
        if self.is_dir or self.contents is None or self._current() != self.identity:
            return False
        return _same_contents(self.path, self.contents)


class Spec(NamedTuple):
    """Everything that distinguishes one shared context from another (the registry key)."""

    cert_reqs: Any  # the pool's cert_reqs, as requests' cert_verify left it
    cafile: str | None  # as urllib3 passes them to load_verify_locations
    capath: str | None
    cert_file: str | None  # as urllib3 passes them to load_cert_chain
    key_file: str | None
    pool_tls: Any  # _compat.PoolTLS: the pool's own TLS settings (versions, host checks, ...)
    settings: Any  # _compat.Settings: Target.settings() when the key was made
