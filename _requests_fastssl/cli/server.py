"""A small threaded HTTPS server on loopback, for the tests and the benchmark.

Every response is a JSON object naming the client certificate the server saw
(``{"client_cn": "client-a", "tls": "TLSv1.3"}`` or ``{"client_cn": null, ...}``), so a
test can prove which identity a request presented, over which TLS version. Handshakes run
in the handler thread, so one slow or failing client never blocks the others, and failed
handshakes are counted, not printed.
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HTTPSServer", "server_context"]


def server_context(
    issuer: Any,
    names: tuple[str, ...] = ("127.0.0.1", "localhost"),
    *,
    expired: bool = False,
    client_ca: Any | None = None,
    client_mode: ssl.VerifyMode = ssl.CERT_REQUIRED,
    maximum_version: ssl.TLSVersion | None = None,
    minimum_version: ssl.TLSVersion | None = None,
) -> ssl.SSLContext:
    """A server-side context with a certificate from ``issuer`` (a ``trustme.CA``: a bench
    and test extra, so not imported here) for ``names``, expired a day ago if asked. With
    ``client_ca`` it asks for client certificates issued by that CA (``client_mode``)."""
    if expired:
        now = datetime.datetime.now(datetime.UTC)
        leaf = issuer.issue_cert(
            *names,
            not_before=now - datetime.timedelta(days=30),
            not_after=now - datetime.timedelta(days=1),
        )
    else:
        leaf = issuer.issue_cert(*names)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    leaf.configure_cert(ctx)
    if client_ca is not None:
        client_ca.configure_trust(ctx)
        ctx.verify_mode = client_mode
    if maximum_version is not None:
        ctx.maximum_version = maximum_version
    if minimum_version is not None:
        ctx.minimum_version = minimum_version
    return ctx


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm on, the second waits
    # for the client's delayed ACK, about 40 ms on every response (TCP_NODELAY).
    disable_nagle_algorithm = True
    server: _TLSServer

    def do_GET(self) -> None:
        cn = _common_name(self.connection.getpeercert())
        self.server.owner._saw(cn)
        tls = self.connection.version()
        s3 = "list-type=2" in self.path.partition("?")[2].split("&")
        if s3:  # S3's ListObjectsV2 (boto3's list_objects_v2), path-style: one key, the CN
            body = _list_objects(self.path.partition("?")[0].strip("/"), cn, tls)
        else:
            body = json.dumps({"client_cn": cn, "path": self.path, "tls": tls}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml" if s3 else "application/json")
        self.send_header("Content-Length", str(len(body)))
        # S3 answers close the connection, so that each call of a client is a new one (the
        # case measured: a keep-alive call never reaches any TLS set-up).
        if s3 or self.headers.get("Connection", "").lower() == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests assert on behaviour, not on server logs


def _list_objects(bucket: str, cn: str | None, tls: str | None) -> bytes:
    from xml.sax.saxutils import escape

    key = escape(f"client_cn={cn or '-'};tls={tls}")
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>{escape(bucket)}</Name><Prefix></Prefix><KeyCount>1</KeyCount>"
        "<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
        f"<Contents><Key>{key}</Key><Size>0</Size></Contents></ListBucketResult>"
    ).encode()


def _common_name(peercert: Any) -> str | None:
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of clients connect at once in the count tests
    owner: HTTPSServer

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.do_handshake()
        except (OSError, ssl.SSLError):
            self.owner._failed_handshake()
            request.close()
            return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-request is not the server's problem


class HTTPSServer:
    """``with HTTPSServer(ctx) as server: requests.get(server.url)``.

    ``ssl_context`` is a server-side context (certificate loaded; ``verify_mode`` set if
    client certificates are wanted). The server listens on 127.0.0.1; ``host`` is the name
    ``url`` uses (give the certificate a matching identity, or a different one on purpose).
    """

    def __init__(self, ssl_context: ssl.SSLContext, host: str = "127.0.0.1") -> None:
        self._context = ssl_context
        self._host = host
        self._lock = threading.Lock()
        self.clients_seen: list[str | None] = []
        self.failed_handshakes = 0
        self._server: _TLSServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"https://{self._host}:{self.port}/"

    def _saw(self, cn: str | None) -> None:
        with self._lock:
            self.clients_seen.append(cn)

    def _failed_handshake(self) -> None:
        with self._lock:
            self.failed_handshakes += 1

    def start(self) -> HTTPSServer:
        server = _TLSServer(("127.0.0.1", 0), _Handler, bind_and_activate=False)
        server.owner = self
        server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.server_bind()
        server.server_activate()
        server.socket = self._context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> HTTPSServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
