"""Other libraries that change how urllib3 builds TLS contexts: truststore and urllib3's
pyOpenSSL backend, injected before or after the shim is installed, and extracted again.
Each sequence of requests runs against stock requests and with the shim; the outcomes
must be the same, and the shim's shared contexts must be of the class in force (trust
follows the injected backend exactly as it does in stock requests).

(requests and certifi inside a zipapp, and pickling a Session with the shim active, are
regressions R14 and R15 in test_regressions.py.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from support import PKI, URLLIB3_1, ServerFactory, outcome, stock_and_shim

import requests_fastssl
from _requests_fastssl._registry import REGISTRY
from _requests_fastssl.cli.server import HTTPSServer, server_context

CLOSE = {"Connection": "close"}


class Servers:
    def __init__(self, make_server: ServerFactory, pki: PKI) -> None:
        self.pki = pki
        self.trusted: HTTPSServer = make_server(client_certs="optional")
        self.untrusted: HTTPSServer = make_server(ca=pki.rogue_ca)
        self.wrong_host: HTTPSServer = make_server(names=("localhost",))

    def requests(self) -> list[tuple[str, str | None]]:
        """One of everything trust decides: the shared path and the error paths."""
        pki = self.pki
        return [
            outcome(lambda: requests.get(self.trusted.url, headers=CLOSE)),
            outcome(lambda: requests.get(self.trusted.url, verify=pki.bundle, headers=CLOSE)),
            outcome(lambda: requests.get(self.trusted.url, cert=pki.client_a.pair, headers=CLOSE)),
            outcome(lambda: requests.get(self.untrusted.url, headers=CLOSE)),
            outcome(lambda: requests.get(self.untrusted.url, verify=pki.bundle)),
            outcome(lambda: requests.get(self.untrusted.url, verify=False, headers=CLOSE)),
            outcome(lambda: requests.get(self.wrong_host.url, headers=CLOSE)),
        ]


def shared_bases() -> set[str]:
    """The class each shared context was built as (the frozen subclass's base)."""
    return {
        type(ctx).__mro__[1].__module__.split(".")[0] for ctx, _checks in REGISTRY._entries.values()
    }


ORDERS = ["inject-then-install", "install-then-inject"]


def _sequence(
    servers: Servers,
    order: str,
    shim: bool,
    inject: Callable[[], None],
    extract: Callable[[], None],
) -> tuple[list[Any], set[str], set[str]]:
    """requests before injection, while injected, after extraction; with the shim
    installed before or after the injection (or never, for stock)."""
    seen: list[Any] = []
    injected_bases: set[str] = set()
    after_bases: set[str] = set()
    try:
        if shim and order == "install-then-inject":
            requests_fastssl.install()
            requests_fastssl.clear()
        seen += servers.requests()
        inject()
        try:
            if shim and order == "inject-then-install":
                requests_fastssl.install()
            requests_fastssl.clear()
            seen += servers.requests()
            injected_bases = shared_bases()
        finally:
            extract()
        requests_fastssl.clear()
        seen += servers.requests()
        after_bases = shared_bases()
    finally:
        requests_fastssl.uninstall()
    return seen, injected_bases, after_bases


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.urllib3_2
def test_truststore_injected_and_extracted(
    order: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    import truststore

    servers = Servers(make_server, pki)
    stock, _, _ = _sequence(
        servers, order, False, truststore.inject_into_ssl, truststore.extract_from_ssl
    )
    shim, injected, after = _sequence(
        servers, order, True, truststore.inject_into_ssl, truststore.extract_from_ssl
    )
    assert shim == stock
    assert stock[:7] == stock[7:14] == stock[14:]  # truststore + the bundle: same verdicts
    assert ("200", "client-a") in stock
    assert "SSLError" in {kind for kind, _ in stock}
    # Through OpenSSL (Linux) truststore loads the system store into its context at every
    # handshake, so its contexts are never shared; after extraction, ssl's are again.
    assert injected == set()
    assert after == {"ssl"}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.urllib3_2
def test_pyopenssl_injected_and_extracted(
    order: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    """urllib3.contrib.pyopenssl: while it is injected, urllib3's context class is not the
    standard library's, so the shim leaves connections to stock (context-class); stock
    outcomes throughout, and ssl's contexts shared again after extraction."""
    with warnings.catch_warnings():  # urllib3 1.26 deprecates the module on import
        warnings.simplefilter("ignore", DeprecationWarning)
        from urllib3.contrib import pyopenssl

    servers = Servers(make_server, pki)
    inject, extract = pyopenssl.inject_into_urllib3, pyopenssl.extract_from_urllib3
    with warnings.catch_warnings():  # urllib3 1.26 calls APIs pyOpenSSL now deprecates
        warnings.simplefilter("ignore", DeprecationWarning)
        stock, _, _ = _sequence(servers, order, False, inject, extract)
        shim, injected, after = _sequence(servers, order, True, inject, extract)
    assert shim == stock
    assert ("200", "client-a") in stock[7:14]
    assert "SSLError" in {kind for kind, _ in stock[7:14]}
    assert injected == set()
    assert after == {"ssl"}


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.urllib3_2
def test_stress_run_under_pyopenssl() -> None:
    """The differential stress run with urllib3's pyOpenSSL backend injected: 16 threads,
    the stock outcome every time, and every connection left to stock (context-class)."""
    from test_stress import stress

    rc, reports, stderr = stress("--threads", "16", "--requests", "600", "--pyopenssl")
    assert rc == 0, stderr[-4000:]
    (report,) = reports
    assert report["mismatches"] == report["bypasses"] == report["crashes"] == 0
    assert report["pyopenssl"] is True
    assert report["shim_stats"]["reuses"] == 0
    assert report["shim_stats"]["step_aside_reasons"]["context-class"] > 50


@pytest.mark.parametrize("leg", ["server", "https-proxy"])
def test_truststore_follows_the_system_store_as_stock(
    leg: str, make_server: ServerFactory, pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """truststore on Linux loads the system CA file into the context at every handshake, and
    OpenSSL's store only grows. A CA removed from the system store must stop being trusted on
    the next new connection, as in stock, where every connection has a fresh context: with
    the system store trusting the peer, then no longer (twice), stock gives 200 then errors."""
    import shutil

    import truststore
    from loopback_proxy import LoopbackProxy

    system = tmp_path / "system.pem"  # stands in for the operating system's bundle
    monkeypatch.setenv("SSL_CERT_FILE", str(system))
    # The peer trusted only through the system store: the server itself, or the proxy (the
    # server then trusted through verify=).
    server = make_server(ca=pki.rogue_ca if leg == "server" else None)
    proxy_ctx = server_context(pki.rogue_ca, ("127.0.0.1",))  # (made before injecting)
    with LoopbackProxy(tls=proxy_ctx) as proxy:
        proxies = {"https": proxy.url} if leg == "https-proxy" else None

        def calls() -> list[Any]:
            got = []
            for contents in (pki.rogue_bundle, pki.bundle, pki.bundle):
                shutil.copyfile(contents, system)
                got.append(
                    outcome(
                        lambda: requests.get(
                            server.url, verify=pki.bundle, proxies=proxies, headers=CLOSE
                        )
                    )
                )
            return got

        truststore.inject_into_ssl()
        try:
            stock, shim = stock_and_shim(calls)
        finally:
            truststore.extract_from_ssl()
    assert [status for status, _ in stock] == ["200", ERROR[leg], ERROR[leg]]
    assert shim == stock


# (urllib3 1.26 reports a failed proxy handshake as an SSLError)
ERROR = {"server": "SSLError", "https-proxy": "SSLError" if URLLIB3_1 else "ProxyError"}
