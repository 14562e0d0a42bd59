"""The argument checks run before any work: URLs, files and the JSON target, each refused
with the subcommand's usage (exit 2)."""

from __future__ import annotations

import argparse
import os

__all__ = ["check_file", "check_json_target", "check_url"]


def check_json_target(parser: argparse.ArgumentParser, path: str) -> None:
    """Fail now, not after the run, where the JSON could not be written: a directory, a link
    to nowhere, a folder without write access, a device that refuses writes (/dev/full). A
    FIFO is left unopened (opening it would block, or hand its reader an early end), and
    nothing is created or changed here."""
    import stat

    if not path:
        parser.error("--json: an empty file name")
    if os.path.isdir(path) or path.endswith(os.sep):
        parser.error(f"--json: {path!r} is a directory")
    if not os.path.exists(path):  # (a new file, or a link to nowhere: its target's folder)
        folder = os.path.dirname(os.path.realpath(path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            parser.error(f"--json: cannot write to {path!r} (no such writable folder)")
        return
    mode = os.stat(path).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        if not os.access(path, os.W_OK):
            parser.error(f"--json: cannot write to {path!r}: Permission denied")
        return
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK
        fd = os.open(path, flags)
        try:
            os.write(fd, b"")  # a device that refuses writes (/dev/full) says so here
        finally:
            os.close(fd)
    except OSError as exc:
        parser.error(f"--json: cannot write to {path!r}: {exc.strerror or exc}")


def check_url(parser: argparse.ArgumentParser, option: str, url: str) -> None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.hostname  # noqa: B018 (a malformed IPv6 literal raises only when read)
    except ValueError as exc:
        parser.error(f"{option}: not a URL: {url!r} ({exc})")
    if parts.scheme != "https" or not parts.hostname:
        parser.error(f"{option}: need an https:// URL with a host, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        parser.error(f"{option}: need a port from 1 to 65535, got {url!r}")
    if any(c.isspace() or not c.isprintable() for c in parts.netloc):
        # (newer urllib3 refuses it; older ones pass it on to a name lookup)
        parser.error(
            f"{option}: requests refuses {url!r}: a space or control character in the host"
        )
    from requests.models import PreparedRequest

    try:  # what requests itself refuses: refused here, not after the work began
        PreparedRequest().prepare_url(url, None)
    except Exception as exc:
        parser.error(f"{option}: requests refuses {url!r}: {exc}")


def check_file(parser: argparse.ArgumentParser, option: str, path: str) -> None:
    if os.path.isdir(path):
        parser.error(f"{option}: {path!r} is a directory, not a file")
    if not os.path.exists(path):
        parser.error(f"{option}: no such file: {path!r}")
    if not os.path.isfile(path):  # (a FIFO would block the load; a device is no PEM file)
        parser.error(f"{option}: {path!r} is not a regular file")
