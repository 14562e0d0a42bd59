"""A forward proxy on 127.0.0.1 for the proxy tests: CONNECT tunnels to loopback targets,
and for absolute-form requests (``GET http://...``) a JSON answer of its own. With a
server-side SSLContext it is an HTTPS proxy (TLS between client and proxy; it records the
client certificate each TLS connection showed it, if its context asks for one); with
``socks=True`` a SOCKS5 proxy (no authentication, CONNECT only)."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import ssl
import threading
from typing import Any

from _requests_fastssl.cli.server import _common_name


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed mid-handshake")
        data += chunk
    return data


def _tunnel(sock: socket.socket, upstream: socket.socket) -> None:
    back = threading.Thread(target=_pipe, args=(upstream, sock), daemon=True)
    back.start()
    _pipe(sock, upstream)
    back.join()


class _Handler(socketserver.BaseRequestHandler):
    server: _ProxyServer

    def handle(self) -> None:
        sock: Any = self.request
        if self.server.socks:
            self.handle_socks(sock)
            return
        if self.server.tls is not None:
            try:
                sock = self.server.tls.wrap_socket(sock, server_side=True)
            except (OSError, ssl.SSLError):
                return
            # The client certificate shown to the proxy (its common name), if any.
            self.server.owner.client_cns.append(_common_name(sock.getpeercert()))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                return
            head += chunk
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        self.server.owner.requests.append((method, target))
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            if host not in ("127.0.0.1", "localhost"):  # loopback only, whatever is asked
                sock.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            with socket.create_connection(("127.0.0.1", int(port))) as upstream:
                sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _tunnel(sock, upstream)
            return
        body = json.dumps({"proxied": target}).encode()
        sock.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    def handle_socks(self, sock: socket.socket) -> None:
        """RFC 1928, the parts a client making CONNECTs without authentication uses."""
        try:
            _version, count = _recv_exactly(sock, 2)
            _recv_exactly(sock, count)  # the methods offered; "no authentication" is taken
            sock.sendall(b"\x05\x00")
            _version, command, _reserved, kind = _recv_exactly(sock, 4)
            if kind == 1:
                host = socket.inet_ntoa(_recv_exactly(sock, 4))
            elif kind == 3:
                host = _recv_exactly(sock, _recv_exactly(sock, 1)[0]).decode()
            else:
                host = socket.inet_ntop(socket.AF_INET6, _recv_exactly(sock, 16))
            port = int.from_bytes(_recv_exactly(sock, 2), "big")
        except (ConnectionError, OSError):
            return
        self.server.owner.requests.append(("SOCKS", f"{host}:{port}"))
        if command != 1 or host not in ("127.0.0.1", "localhost"):  # loopback only
            sock.sendall(b"\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00")  # not allowed
            return
        with socket.create_connection(("127.0.0.1", port)) as upstream:
            sock.sendall(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
            _tunnel(sock, upstream)


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls: ssl.SSLContext | None
    socks: bool
    owner: LoopbackProxy


class LoopbackProxy:
    def __init__(self, tls: ssl.SSLContext | None = None, *, socks: bool = False) -> None:
        self.tls, self.socks = tls, socks
        self.requests: list[tuple[str, str]] = []
        self.client_cns: list[str | None] = []  # per TLS leg to the proxy
        self._server: _ProxyServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        assert self._server is not None
        scheme = "socks5" if self.socks else "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LoopbackProxy:
        server = _ProxyServer(("127.0.0.1", 0), _Handler)
        server.tls, server.socks, server.owner = self.tls, self.socks, self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        assert self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
