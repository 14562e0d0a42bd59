"""What makes two shared contexts different: the ``Spec`` (the registry key) and file identity.

A ``Spec`` is an exact tuple, never a hash. It holds everything urllib3 would feed into a
context for one pool (trust source, client certificate, ``cert_reqs``, ALPN, key log file,
context class and factory) and the pool attributes requests' ``cert_verify`` is expected to
leave behind, so that the ``cert_verify`` wrapper can prove a pool matches its context.
Files are identified by ``os.stat`` data read at request time, so a rewritten, rotated or
replaced bundle or client certificate gives a new key on the next new pool.
"""

from __future__ import annotations

import os
import stat
from typing import Any, NamedTuple

__all__ = ["FileId", "Spec", "dir_identity", "file_identity", "trust_identity"]

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
    what it read, so an entry rewritten in place must change the key as much as an entry
    added or removed (which the directory's own mtime would show).
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


def trust_identity(cafile: str | None, capath: str | None) -> tuple[Any, ...] | None:
    """Identity of a trust source; ``()`` for none (CERT_NONE), None if it is unusable."""
    if cafile is not None:
        return file_identity(cafile)
    if capath is not None:
        return dir_identity(capath)
    return ()


class Spec(NamedTuple):
    """Everything that distinguishes one shared context from another (the registry key)."""

    # What requests' cert_verify leaves on the pool, compared at cert_verify time.
    cert_reqs: str
    ca_certs: str | None
    ca_cert_dir: str | None
    cert_file: str | None
    key_file: str | None
    # What the context loads at build time, with the identity of the files read.
    cafile: str | None
    capath: str | None
    trust_id: tuple[Any, ...]
    client_id: tuple[FileId | None, ...]
    # Build-time knobs urllib3 reads when it creates or wraps with a context.
    alpn: tuple[str, ...]
    keylog: str | None
    context_class: type
    factory: Any  # urllib3's create_urllib3_context as currently bound in urllib3.connection
    check_hostname_off: bool  # urllib3 would write check_hostname=False on every connection

    def client_identity(self) -> tuple[FileId | None, ...]:
        """Re-read the client certificate/key identity (to compare with ``client_id``)."""
        return tuple(file_identity(p) for p in (self.cert_file, self.key_file) if p)
