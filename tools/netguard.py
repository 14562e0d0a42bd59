"""pytest plugin for the peer run: no traffic may leave the machine.

Name lookups of anything but localhost and connections to anything but loopback raise
OSError, so a test that would reach the internet fails here instead of sending a packet.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

_current = {"test": "(outside a test)"}

_real_getaddrinfo = socket.getaddrinfo
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host in (None, "", "localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _refused(what: str) -> None:
    log = os.environ.get("NETGUARD_LOG")  # where to list refusals, one line each
    if log:
        with open(log, "a") as out:
            out.write(f"{_current['test']}\t{what}\n")


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _loopback(host):
        _refused(f"lookup {host!r}")
        raise socket.gaierror(socket.EAI_NONAME, f"netguard: no lookups of {host!r} here")
    return _real_getaddrinfo(host, *args, **kwargs)


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
        _refused(f"connect {address!r}")
        raise OSError(f"netguard: no connections to {address!r} here")


def _connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _real_connect(self, address)


def _connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def pytest_configure(config: Any) -> None:
    socket.getaddrinfo = _getaddrinfo
    socket.socket.connect = _connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign,assignment]


def pytest_runtest_setup(item: Any) -> None:
    _current["test"] = item.nodeid


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Deselect the node ids in NETGUARD_DESELECT (one a line), exactly: pytest's own
    --deselect matches prefixes, so test_proxy_error would take test_proxy_error_* along."""
    wanted = set(filter(None, os.environ.get("NETGUARD_DESELECT", "").splitlines()))
    if not wanted:
        return
    dropped = [item for item in items if item.nodeid in wanted]
    missing = wanted - {item.nodeid for item in dropped}
    if missing:
        raise RuntimeError(f"netguard: no such tests to deselect: {sorted(missing)}")
    items[:] = [item for item in items if item.nodeid not in wanted]
    config.hook.pytest_deselected(items=dropped)
