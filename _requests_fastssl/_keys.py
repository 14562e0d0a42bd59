"""What makes two shared contexts different (the registry key, ``Spec``), and file identity.

A ``Spec`` holds what urllib3 would feed into a fresh context for one pool: the pool's
``cert_reqs``, the CA and client-certificate paths exactly as urllib3 passes them to
``load_verify_locations`` / ``load_cert_chain``, and the snapshot of every module-level
setting urllib3's connection set-up reads (``Target.settings()``). File *contents* are not in
the key: a context records the identity of every file it read (``FileCheck``), and every new
connection made with it checks that identity again, as stock urllib3 would read the file
again. ``FileCheck`` also applies git's "racily clean" rule: an identity taken within the
file system's timestamp granularity of the file's last change proves nothing, so until it
does, the file's contents are compared instead.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Any, NamedTuple

__all__ = ["RACY_WINDOW_NS", "FileCheck", "FileId", "Spec", "dir_identity", "file_identity"]

# (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns). ctime is in it because mtime can be
# set back by the writer (cp -p, tar, rsync -t); ctime cannot be set from user space.
FileId = tuple[int, int, int, int, int]
# The coarsest timestamp granularity we allow for: FAT keeps mtimes in 2 s steps, ext3 in 1 s,
# and a kernel's coarse clock ticks every few ms. A change closer than this to the moment
# an identity was taken could be followed by another with the same timestamps.
RACY_WINDOW_NS = 2_000_000_000


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


def _changed_ns(identity: Any) -> int:
    """The latest change time recorded in an identity (file or directory)."""
    if identity and isinstance(identity[0], int):
        return int(max(identity[3], identity[4]))
    latest = max(identity[0][3], identity[0][4])
    for _, entry in identity[1]:
        if entry is not None:
            latest = max(latest, entry[3], entry[4])
    return int(latest)


def _digest(path: str) -> bytes | None:
    import hashlib

    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).digest()
    except OSError:
        return None


class FileCheck:
    """The identity of one file or directory a context read, and whether it still holds."""

    __slots__ = ("clean", "digest", "identity", "is_dir", "path")

    def __init__(self, path: str, is_dir: bool) -> None:
        self.path = path
        self.is_dir = is_dir
        taken = time.time_ns()
        self.identity = dir_identity(path) if is_dir else file_identity(path)
        # The contents are hashed before they are loaded; the caller checks the identity
        # again afterwards, so the hash is of what was loaded.
        self.digest = None if is_dir or self.identity is None else _digest(path)
        self.clean = self.identity is not None and taken - _changed_ns(self.identity) > (
            RACY_WINDOW_NS
        )

    def _current(self) -> Any:
        return dir_identity(self.path) if self.is_dir else file_identity(self.path)

    def usable(self) -> bool:
        return self.identity is not None and (self.is_dir or self.digest is not None)

    def unchanged(self) -> bool:
        """Whether the file is still the one that was read (a stat, or a hash while racy)."""
        checked = time.time_ns()
        if self._current() != self.identity:
            return False
        if self.clean:
            return True
        if self.is_dir or _digest(self.path) != self.digest:
            return False  # a racy directory is never trusted: the context is rebuilt
        if checked - _changed_ns(self.identity) > RACY_WINDOW_NS:
            # Any later change gets a later timestamp than this one, so from now on the
            # identity alone tells.
            self.clean = True
        return True


class Spec(NamedTuple):
    """Everything that distinguishes one shared context from another (the registry key)."""

    cert_reqs: Any  # the pool's cert_reqs, as requests' cert_verify left it
    cafile: str | None  # as urllib3 passes them to load_verify_locations
    capath: str | None
    cert_file: str | None  # as urllib3 passes them to load_cert_chain
    key_file: str | None
    pool_tls: Any  # _compat.PoolTLS: the pool's own TLS settings (versions, host checks, ...)
    settings: Any  # _compat.Settings: Target.settings() when the key was made
