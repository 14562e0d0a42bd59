"""Stock equivalence by construction: every root of a divergence, and an example of each.

Each test runs the same requests against stock requests and with the shim in one run, and
compares what came back: status, exception type and message, and the client certificate
the server saw (``support.outcome``). See docs/design.md, "Equivalence".
"""

from __future__ import annotations

import functools
import json
import os
import ssl
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
import urllib3.connection
import urllib3.util.ssl_
from adapters import KwargsAdapter
from requests.adapters import HTTPAdapter
from support import (
    IN_OWN_FILE_TABLE,
    PKI,
    ROOT,
    URLLIB3_1,
    LoadCounter,
    ServerFactory,
    aged,
    clean_env,
    other_contents_during_first_load,
    outcome,
    run_python,
    same_size,
    session_with,
    stock_and_shim,
    two_bundles,
)

import requests_fastssl
from _requests_fastssl import _files
from _requests_fastssl._registry import REGISTRY
from _requests_fastssl.cli.server import HTTPSServer, server_context

CLOSE = {"Connection": "close"}
PROXY_FAILURE = "SSLError" if URLLIB3_1 else "ProxyError"  # a failed TLS leg to a proxy


# --- root 1: the key covers what the context depends on ----------------------------------


def test_tightening_urllib3_after_the_first_request(
    make_server: ServerFactory, default_bundle: str, pki: PKI
) -> None:
    """A program that tightens urllib3's TLS settings after its first request: on urllib3
    1.26 its default cipher list, on 2.x (which has none) a factory that caps the TLS
    version. Stock refuses the next handshake; so must the shim, with the same error."""
    if URLLIB3_1:
        ctx = server_context(pki.ca, maximum_version=ssl.TLSVersion.TLSv1_2)
        ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256")
        server = make_server_from(ctx)
    else:
        server = make_server(minimum_version=ssl.TLSVersion.TLSv1_3)

    def tighten(patch: pytest.MonkeyPatch) -> None:
        if URLLIB3_1:
            patch.setattr(urllib3.util.ssl_, "DEFAULT_CIPHERS", "ECDHE-ECDSA-AES256-GCM-SHA384")
            return
        original = urllib3.util.ssl_.create_urllib3_context  # (urllib3.connection's)

        def capped(*args: Any, **kwargs: Any) -> Any:
            ctx = original(*args, **kwargs)
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            return ctx

        patch.setattr(urllib3.connection, "create_urllib3_context", capped)

    def calls() -> list[Any]:
        # (A path: requests 2.32.3/2.32.4 give verify=True pools a context made at import.)
        # A new Session for the second request: urllib3 1.26 reuses a connection object's
        # context when it reconnects (README, "Known limits").
        first = outcome(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
        with pytest.MonkeyPatch.context() as patch:
            tighten(patch)
            second = outcome(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
        return [first, second]

    stock, shim = stock_and_shim(calls)
    assert stock[0] == ("200", None)
    assert stock[1][0] == "SSLError"
    assert shim == stock


def make_server_from(ctx: ssl.SSLContext) -> HTTPSServer:
    server = HTTPSServer(ctx).start()
    _servers.append(server)
    return server


_servers: list[HTTPSServer] = []


@pytest.fixture(autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    while _servers:
        _servers.pop().stop()


def test_a_partially_applied_factory_sees_the_nones_urllib3_passes(
    make_server: ServerFactory, default_bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """urllib3 passes ssl_maximum_version=None explicitly, which overrides a partial's
    keyword: stock connects. The shim calls the factory with the same arguments."""
    server = make_server(minimum_version=ssl.TLSVersion.TLSv1_3)
    if URLLIB3_1:
        factory = functools.partial(urllib3.util.ssl_.create_urllib3_context, ssl_version=None)
    else:
        factory = functools.partial(
            urllib3.util.ssl_.create_urllib3_context,
            ssl_maximum_version=ssl.TLSVersion.TLSv1_2,
        )
    monkeypatch.setattr(urllib3.connection, "create_urllib3_context", factory)
    stock, shim = stock_and_shim(lambda: [outcome(lambda: requests.get(server.url))])
    assert stock == [("200", None)]
    assert shim == stock


def test_a_key_log_file_replaced_under_the_same_name(
    make_server: ServerFactory, default_bundle: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fresh context opens SSLKEYLOGFILE when it is created: after the file is moved
    away and a new one made under the name, stock writes to the new one."""
    server = make_server()
    keylog = tmp_path / "keys.log"
    monkeypatch.setenv("SSLKEYLOGFILE", str(keylog))

    def calls() -> list[Any]:
        keylog.unlink(missing_ok=True)
        first = outcome(lambda: requests.get(server.url, headers=CLOSE))
        keylog.rename(tmp_path / "old.log")
        keylog.write_text("")
        second = outcome(lambda: requests.get(server.url, headers=CLOSE))
        return [first, second, keylog.stat().st_size > 0]

    stock, shim = stock_and_shim(calls)
    assert stock == [("200", None), ("200", None), True]
    assert shim == stock


# --- root 2: no pool holds a shared context before it is proven ----------------------------


class SelfSendingAdapter(HTTPAdapter):
    """send() that gets its pool and calls urlopen() itself: cert_verify never runs."""

    def send(self, request: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        pool = self.get_connection_with_tls_context(
            request, kwargs.get("verify", True), cert=kwargs.get("cert")
        )
        raw = pool.urlopen(
            method=request.method,
            url=request.path_url,
            headers=request.headers,
            retries=0,
            preload_content=False,
            decode_content=False,
        )
        return self.build_response(request, raw)


@pytest.mark.parametrize("kind", ["verify-true", "verify-path", "client-cert"])
@pytest.mark.requests_2_32
def test_a_pool_used_without_cert_verify(
    kind: str, make_server: ServerFactory, default_bundle: str, pki: PKI
) -> None:
    """Stock: such a pool trusts the system store (the CA paths are only set by
    cert_verify), so our private CA fails. The shim must not make it trust the bundle."""
    server = make_server(client_certs="optional")
    options: dict[str, Any] = {  # type: ignore[assignment]
        "verify-true": {},
        "verify-path": {"verify": pki.bundle},
        "client-cert": {"verify": pki.bundle, "cert": pki.client_a.pair},
    }[kind]

    def calls() -> list[Any]:
        session = session_with(SelfSendingAdapter())
        return [outcome(lambda: session.get(server.url, **options)) for _ in range(2)]

    stock, shim = stock_and_shim(calls)
    assert stock[0][0] in ("MaxRetryError", "200")  # (urlopen called directly: urllib3 errors)
    assert shim == stock


@pytest.mark.requests_2_32
def test_a_pool_first_proven_then_used_directly(
    make_server: ServerFactory, default_bundle: str, pki: PKI
) -> None:
    server = make_server(client_certs="optional")

    def calls() -> list[Any]:
        session = requests.Session()
        first = outcome(
            lambda: session.get(
                server.url, verify=pki.bundle, cert=pki.client_a.pair, headers=CLOSE
            )
        )
        adapter = session.get_adapter(server.url)
        assert isinstance(adapter, HTTPAdapter)
        request = requests.Request("GET", server.url).prepare()
        pool = adapter.get_connection_with_tls_context(request, pki.bundle, cert=pki.client_a.pair)
        raw = pool.urlopen("GET", "/", headers=CLOSE, retries=0)
        return [first, (raw.status, json.loads(raw.data)["client_cn"])]

    stock, shim = stock_and_shim(calls)
    assert stock == [("200", "client-a"), (200, "client-a")]
    assert shim == stock


# --- reach: HTTPS proxies share both legs' contexts ---------------------------------------


def _proxy_context(pki: PKI, ca: Any) -> ssl.SSLContext:
    """An HTTPS proxy's server side with a certificate from ``ca``, asking every client for a
    certificate (optional), so the test sees whether the proxy leg presents one."""
    return server_context(ca, ("127.0.0.1",), client_ca=pki.ca, client_mode=ssl.CERT_OPTIONAL)


@pytest.mark.parametrize("cert", [None, "client-a"])
@pytest.mark.parametrize("case", ["trusted", "proxy-untrusted", "server-untrusted", "verify-false"])
@pytest.mark.urllib3_2
def test_https_proxy_both_legs_as_stock(
    case: str, cert: str | None, make_server: ServerFactory, pki: PKI, loads: LoadCounter
) -> None:
    """Through an HTTPS proxy the pool's CA file verifies both the proxy (its own leg, which
    never presents a client certificate) and the server (TLS in TLS, with the client
    certificate). With the shim both legs use shared contexts: one for both without a
    client certificate, one per leg with one. Outcomes, the identity each peer saw and
    trust are stock's; loads are not."""
    from loopback_proxy import LoopbackProxy

    server = make_server(
        client_certs="optional", ca=pki.rogue_ca if case == "server-untrusted" else None
    )
    proxy_ca = pki.rogue_ca if case == "proxy-untrusted" else pki.ca
    seen: list[Any] = []
    with LoopbackProxy(tls=_proxy_context(pki, proxy_ca)) as proxy:

        def calls() -> list[Any]:
            session = requests.Session()
            kwargs: dict[str, Any] = {
                "verify": False if case == "verify-false" else pki.bundle,
                "cert": pki.client_a.pair if cert else None,
                "proxies": {"https": proxy.url},
                "headers": CLOSE,
            }
            before = (loads.verify_locations, loads.default_certs)
            del proxy.client_cns[:]
            got = [outcome(lambda: session.get(server.url, **kwargs)) for _ in range(3)]
            seen.append((loads.verify_locations - before[0], loads.default_certs - before[1]))
            return [got, list(proxy.client_cns)]

        before = requests_fastssl.stats()
        stock, shim = stock_and_shim(calls)
        shared = requests_fastssl.stats().since(before)
    assert shim == stock
    results, proxy_saw = stock
    assert proxy_saw == [None] * len(proxy_saw)  # no leg to the proxy showed a certificate
    if case == "trusted":
        assert results == [("200", cert)] * 3
        assert len(proxy_saw) == 3
    elif case == "verify-false":
        assert results == [("200", cert)] * 3
    else:
        assert results[0][0] in ("SSLError", "ProxyError")
    (stock_loads, stock_defaults), (shim_loads, shim_defaults) = seen
    if case == "trusted":
        assert stock_loads == 6  # two legs, three connections
        if URLLIB3_1:  # (1.26 sets up the proxy leg its own way: left stock)
            assert shim_loads == 1 + 3
        else:
            assert shim_loads == (2 if cert else 1)  # the proxy leg never has a certificate
            assert shared.connections == 6
            assert shared.step_asides == 0
    elif case == "verify-false":
        # Stock loads the system store for each unverified leg. The shim loads it once for
        # both legs; with a client certificate the server legs are left to stock
        # (default-store: the store then builds the chain the certificate is sent with).
        assert (stock_loads, shim_loads) == (0, 0)
        if not URLLIB3_1:
            assert (stock_defaults, shim_defaults) == (6, 4 if cert else 1)


@pytest.mark.parametrize(
    "proxy_kwargs",
    [
        {"proxy_assert_hostname": "127.0.0.1"},
        {"proxy_assert_hostname": "other.example"},
        {"proxy_assert_hostname": False},
        {"proxy_assert_fingerprint": "right"},
        {"proxy_assert_fingerprint": "00" * 32},
        {"proxy_ssl_context": "trusting-rogue"},
    ],
    ids=lambda kwargs: "-".join(f"{k}={v}" for k, v in kwargs.items()),
)
def test_https_proxy_leg_host_checks_as_stock(
    proxy_kwargs: dict[str, Any], make_server: ServerFactory, pki: PKI
) -> None:
    """urllib3's own checks of the proxy (an asserted host name, a fingerprint) and a
    proxy context of the user's: each value its own context (or stock), same outcomes."""
    from adapters import ProxyKwargsAdapter
    from loopback_proxy import LoopbackProxy

    server = make_server()
    proxy_context = _proxy_context(pki, pki.rogue_ca)  # trusted only by the user's context
    kwargs = dict(proxy_kwargs)
    with LoopbackProxy(tls=proxy_context) as proxy:
        der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", proxy.port)))
        if kwargs.get("proxy_assert_fingerprint") == "right":
            import hashlib

            kwargs["proxy_assert_fingerprint"] = hashlib.sha256(der).hexdigest()
        if kwargs.get("proxy_ssl_context") == "trusting-rogue":
            user_ctx = ssl.create_default_context(cafile=pki.rogue_bundle)
            kwargs["proxy_ssl_context"] = user_ctx
        # The pool's bundle trusts the proxy too, except with the user's proxy context.
        bundle = pki.bundle if "proxy_ssl_context" in kwargs else pki.both_bundle

        def calls() -> list[Any]:
            session = session_with(ProxyKwargsAdapter(**kwargs))
            return [
                outcome(
                    lambda: session.get(
                        server.url, verify=bundle, proxies={"https": proxy.url}, headers=CLOSE
                    )
                )
                for _ in range(2)
            ]

        before = requests_fastssl.stats()
        stock, shim = stock_and_shim(calls)
        shared = requests_fastssl.stats().since(before)
    assert shim == stock
    wrong = proxy_kwargs.get("proxy_assert_hostname") == "other.example" or (
        proxy_kwargs.get("proxy_assert_fingerprint") == "00" * 32
    )
    if URLLIB3_1:  # (1.26 has no proxy host checks: its ProxyManager refuses the keywords)
        return
    assert (stock[0][0] != "200") == wrong, stock
    if not wrong:  # both legs of both connections, unless the proxy leg has its own context
        assert shared.connections == (2 if "proxy_ssl_context" in kwargs else 4)


def test_https_proxy_leg_sees_a_rewritten_bundle(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """The proxy leg's shared context checks the CA file on every connection, as stock loads
    it: trust in the proxy (here the only leg the rewrite affects) changes with it."""
    from loopback_proxy import LoopbackProxy

    server = make_server()  # from the CA both bundles hold
    bundle = tmp_path / "bundle.pem"
    with LoopbackProxy(tls=_proxy_context(pki, pki.rogue_ca)) as proxy:

        def calls() -> list[Any]:
            got = []
            for contents in (pki.both_bundle, pki.bundle, pki.both_bundle):
                bundle.write_bytes(Path(contents).read_bytes())
                got.append(
                    outcome(
                        lambda: requests.get(
                            server.url,
                            verify=str(bundle),
                            proxies={"https": proxy.url},
                            headers=CLOSE,
                        )
                    )
                )
            return got

        stock, shim = stock_and_shim(calls)
    assert shim == stock
    # (urllib3 1.26 reports a failed proxy handshake as an SSLError)
    assert [status for status, _ in stock] == ["200", PROXY_FAILURE, "200"], stock


# --- reach: SOCKS proxies change how the socket is made, nothing of TLS -----------------


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
@pytest.mark.parametrize("server_ca", ["trusted", "untrusted"])
@pytest.mark.urllib3_2
def test_socks_proxy_shares_and_answers_as_stock(
    scheme: str, server_ca: str, make_server: ServerFactory, pki: PKI
) -> None:
    """requests[socks]: the destination's TLS runs through a SOCKS5 tunnel; the pool is
    urllib3's SOCKS subclass, which only replaces _new_conn. socks5h: the proxy resolves."""
    from loopback_proxy import LoopbackProxy

    server = make_server(
        client_certs="optional", ca=pki.rogue_ca if server_ca == "untrusted" else None
    )
    url = server.url.replace("127.0.0.1", "localhost") if scheme == "socks5h" else server.url
    with LoopbackProxy(socks=True) as proxy:
        proxy_url = proxy.url.replace("socks5://", f"{scheme}://")

        def calls() -> list[Any]:
            kwargs: dict[str, Any] = {"verify": pki.bundle, "proxies": {"https": proxy_url}}
            return [
                outcome(lambda: requests.get(url, **kwargs)),
                outcome(lambda: requests.get(url, **kwargs, cert=pki.client_a.pair)),
                outcome(lambda: requests.get(url, **kwargs)),
            ]

        before = requests_fastssl.stats()
        stock, shim = stock_and_shim(calls)
        shared = requests_fastssl.stats().since(before)
        tunnels = [target for kind, target in proxy.requests if kind == "SOCKS"]
    assert shim == stock
    assert len(tunnels) == 6  # every request went through the proxy, stock and shimmed
    if server_ca == "trusted":
        assert stock == [("200", None), ("200", "client-a"), ("200", None)]
        assert shared.step_asides == 0
        assert (shared.contexts_built, shared.connections) == (2, 3)  # one per client identity
    else:
        assert {o[0] for o in stock} == {"SSLError"}


# --- reach: the pool's own TLS settings are part of the key ------------------------------


@pytest.mark.parametrize(
    "setting",
    ["assert-hostname", "assert-hostname-wrong", "tls-1.2-max", "tls-1.3-min", "key-password"],
)
@pytest.mark.urllib3_2
def test_pool_tls_settings_share_a_context_per_value(
    setting: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """TLS version bounds, assert_hostname (requests-toolbelt's HostHeaderSSLAdapter) and a
    client key password given through the pool manager: each value gets a context of its
    own, and each gives stock's outcome and client certificate."""
    server = make_server(
        client_certs="optional",
        names=("example.test", "127.0.0.1"),
        maximum_version=ssl.TLSVersion.TLSv1_2 if setting == "tls-1.3-min" else None,
    )
    tls: dict[str, Any] = {  # type: ignore[assignment]
        "assert-hostname": {"assert_hostname": "example.test"},
        "assert-hostname-wrong": {"assert_hostname": "other.test"},
        "tls-1.2-max": {"ssl_maximum_version": ssl.TLSVersion.TLSv1_2},
        "tls-1.3-min": {"ssl_minimum_version": ssl.TLSVersion.TLSv1_3},
        "key-password": {"key_password": "secret", "assert_hostname": "example.test"},
    }[setting]
    if URLLIB3_1 and "ssl_minimum_version" in tls:
        tls = {"ssl_version": ssl.PROTOCOL_TLS_CLIENT}  # 1.26 pools have no version bounds
    if URLLIB3_1 and "ssl_maximum_version" in tls:
        tls = {"ssl_version": ssl.PROTOCOL_TLS_CLIENT}
    cert: Any = (pki.client_a.cert, pki.encrypted_key) if setting == "key-password" else None

    shown: list[str] = []

    def calls() -> list[Any]:
        session = session_with(KwargsAdapter(**tls))
        got = [
            outcome(lambda: session.get(server.url, verify=pki.bundle, cert=cert, headers=CLOSE))
            for _ in range(3)
        ]
        shown.append(repr(list(REGISTRY._entries)) + repr(requests_fastssl.stats()))
        return got

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    shared = requests_fastssl.stats().since(before)
    assert shim == stock
    if setting in ("assert-hostname", "tls-1.2-max"):
        assert stock == [("200", None)] * 3
    if setting == "key-password":
        assert stock == [("200", "client-a")] * 3
    assert shared.step_asides == 0
    assert shared.contexts_built == 1
    assert "secret" not in "".join(shown)  # (read while the shim held its contexts)


# --- root 3: fork safety -----------------------------------------------------------------


@pytest.mark.urllib3_2
def test_fork_while_another_thread_builds(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """A fork while a thread of the parent is inside a build: the child must not wait
    for that build (it would for ever), and contexts complete before the fork are reused.
    The builder thread is held inside the build's CA load by a profiler hook (each round
    a copy of the bundle under a new name: a new key, so a new build)."""
    server = make_server()
    out = run_python(
        f"""
        import os, shutil, signal, sys, threading, requests, requests_fastssl
        url, bundle, where = {server.url!r}, {pki.bundle!r}, {str(tmp_path)!r}
        requests.get(url, verify=bundle)                  # complete before any fork
        inside, release = threading.Event(), threading.Event()
        parent = os.getpid()

        def hold(frame, event, arg):
            # In the builder thread only: inside the build's load, until the fork is done.
            if event == "c_call" and getattr(arg, "__name__", "") == "load_verify_locations":
                if os.getpid() == parent:
                    inside.set()
                    release.wait(30)

        results = []
        for round in range(20):
            inside.clear(); release.clear()
            copy = os.path.join(where, f"bundle-{{round}}.pem")
            shutil.copyfile(bundle, copy)

            def build():
                sys.setprofile(hold)
                requests.get(url, verify=copy)

            builder = threading.Thread(target=build)
            builder.start()
            assert inside.wait(30)
            pid = os.fork()
            if pid == 0:
                signal.alarm(15)  # a child left waiting for the parent's build dies of it
                # the key the parent's thread is building, and the completed one
                try:
                    code = requests.get(url, verify=copy, timeout=20).status_code
                    before = requests_fastssl.stats().contexts_built
                    code2 = requests.get(url, verify=bundle, timeout=20).status_code
                    reused = requests_fastssl.stats().contexts_built == before
                    os._exit(0 if (code, code2, reused) == (200, 200, True) else 3)
                except BaseException:
                    os._exit(4)
            release.set()
            builder.join()
            _, status = os.waitpid(pid, 0)
            results.append(os.waitstatus_to_exitcode(status))
        print(results, requests_fastssl.stats().contexts_built)
        """
    )
    assert out.strip() == f"{[0] * 20} 21"  # the first bundle's, and one per round


@pytest.mark.urllib3_2
def test_fork_during_a_handshake_on_a_shared_context(make_server: ServerFactory, pki: PKI) -> None:
    """OpenSSL may hold a lock inside a context while a handshake runs; in a child forked
    meanwhile nobody would release it. Such contexts are not used again in the child."""
    server = make_server()
    out = run_python(
        f"""
        import os, signal, socket, threading, requests, requests_fastssl
        url, bundle = {server.url!r}, {pki.bundle!r}
        silent = socket.create_server(("127.0.0.1", 0))
        hello, held = threading.Event(), []
        def hold():
            conn, _ = silent.accept()
            held.append(conn)
            conn.recv(1)          # the ClientHello: the client is inside its handshake now
            hello.set()
            while conn.recv(4096):  # no answer, until we hang up below
                pass
        threading.Thread(target=hold).start()
        port = silent.getsockname()[1]
        def stuck_request():
            try:
                requests.get(f"https://127.0.0.1:{{port}}/", verify=bundle, timeout=30)
            except requests.exceptions.SSLError:
                pass  # the hang-up
        stuck = threading.Thread(target=stuck_request)
        stuck.start()
        assert hello.wait(30)
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)
            before = requests_fastssl.stats()
            code = requests.get(url, verify=bundle, headers={{"Connection": "close"}}).status_code
            # The context a thread of the parent was in a handshake with is not used here.
            fresh = requests_fastssl.stats().since(before).contexts_built
            os._exit(0 if (code, fresh) == (200, 1) else 10 + fresh)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        held[0].shutdown(socket.SHUT_RDWR)  # the stuck handshake fails now
        stuck.join()
        """
    )
    assert out.strip() == "0"


# --- root 4: install, uninstall, clear and max_contexts while requests run -------------------


@pytest.mark.slow
def test_lifecycle_flips_under_load(make_server: ServerFactory, pki: PKI) -> None:
    trusted, untrusted = make_server(), make_server(ca=pki.rogue_ca)
    stop = threading.Event()
    flips = [0]
    errors: list[BaseException] = []

    def flipper() -> None:
        while not stop.is_set():
            for action in (
                requests_fastssl.install,
                requests_fastssl.clear,
                lambda: requests_fastssl.install(max_contexts=1),
                requests_fastssl.uninstall,
                lambda: requests_fastssl.install(max_contexts=64),
                requests_fastssl.uninstall,
            ):
                action()
                flips[0] += 1

    seen: dict[tuple[str, str], set[tuple[str, str | None]]] = {}
    lock = threading.Lock()

    def worker() -> None:
        try:
            session = requests.Session()
            for n in range(40):
                for name, server in (("trusted", trusted), ("untrusted", untrusted)):
                    verify = pki.bundle if n % 2 else pki.both_bundle
                    url = server.url
                    got = outcome(lambda: session.get(url, verify=verify, headers=CLOSE))  # noqa: B023
                    with lock:
                        seen.setdefault((name, verify), set()).add(got)
        except BaseException as exc:
            errors.append(exc)

    flip = threading.Thread(target=flipper)
    flip.start()
    workers = [threading.Thread(target=worker) for _ in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stop.set()
    flip.join()
    requests_fastssl.uninstall()
    assert not errors
    assert flips[0] > 12
    # Stock gives one outcome per case; so must every request made during the flips.
    assert seen[("trusted", pki.bundle)] == {("200", None)}
    assert seen[("trusted", pki.both_bundle)] == {("200", None)}
    (failure,) = seen[("untrusted", pki.bundle)]
    assert failure[0] == "SSLError"
    assert seen[("untrusted", pki.both_bundle)] == {("200", None)}


def test_uninstall_leaves_pooled_connections_to_stock(make_server: ServerFactory, pki: PKI) -> None:
    """Pools never hold a shared context: a pooled connection that reconnects after
    uninstall() is set up by stock urllib3 alone."""
    server = make_server()
    requests_fastssl.install()
    session = requests.Session()
    assert session.get(server.url, verify=pki.bundle, headers=CLOSE).status_code == 200
    (pool,) = session.get_adapter(server.url).poolmanager.pools._container.values()  # type: ignore[attr-defined]
    assert pool.conn_kw.get("ssl_context") is None
    requests_fastssl.uninstall()
    before = requests_fastssl.stats()
    assert session.get(server.url, verify=pki.bundle, headers=CLOSE).status_code == 200
    assert requests_fastssl.stats().since(before) == requests_fastssl.stats().since(
        requests_fastssl.stats()
    )


# --- root 5: only classes we know are shared ---------------------------------------------


@pytest.mark.urllib3_2
def test_an_application_context_class_with_python_state(
    make_server: ServerFactory, default_bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    handshakes: list[int] = []

    class CountingContext(ssl.SSLContext):
        lazily_configured = False

        def wrap_socket(self, *args: Any, **kwargs: Any) -> Any:
            if not self.lazily_configured:
                self.lazily_configured = True  # plain Python state, set on first use
            handshakes.append(1)
            return super().wrap_socket(*args, **kwargs)

    monkeypatch.setattr(urllib3.util.ssl_, "SSLContext", CountingContext)

    def calls() -> list[Any]:
        handshakes.clear()
        got = [outcome(lambda: requests.get(server.url, headers=CLOSE)) for _ in range(3)]
        return [*got, len(handshakes)]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    assert stock == [("200", None)] * 3 + [3]
    assert shim == stock
    assert requests_fastssl.stats().since(before).step_aside_reasons == {"context-class": 3}


# --- root 6: pools and keep-alive connections as stock, bundle rewrites included -------------


@pytest.mark.parametrize("content", ["same", "new"])
@pytest.mark.urllib3_2
def test_bundle_rewrites_keep_pools_and_connections_as_stock(
    content: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = make_server()
    bundle = tmp_path / "bundle.pem"

    def calls() -> list[Any]:
        bundle.write_bytes(Path(pki.bundle).read_bytes())
        session = requests.Session()
        got = [outcome(lambda: session.get(server.url, verify=str(bundle)))]
        replacement = Path(pki.bundle if content == "same" else pki.rogue_bundle).read_bytes()
        for _ in range(3):
            bundle.write_bytes(replacement)  # rewritten in place, as a refreshing sidecar does
            got.append(outcome(lambda: session.get(server.url, verify=str(bundle))))
        # a new connection on the same pool after the rewrites
        got.append(outcome(lambda: session.get(server.url, verify=str(bundle), headers=CLOSE)))
        got.append(outcome(lambda: session.get(server.url, verify=str(bundle))))
        pools = session.get_adapter(server.url).poolmanager.pools  # type: ignore[attr-defined]
        return [*got, len(pools), [p.num_connections for p in pools._container.values()]]

    stock, shim = stock_and_shim(calls)
    assert stock[-2] == 1
    if content == "new" and not URLLIB3_1:
        assert stock[-3][0] == "SSLError"  # the new connection trusts the new content
    if content == "new" and URLLIB3_1:
        # A known difference (README, "Known limits"): urllib3 1.26 keeps a connection
        # object's context across reconnects and loads the bundle into it again, so stock
        # then trusts the old and the new contents together; the shim, the new file only.
        assert stock[-3] == ("200", None)
        assert shim[-3][0] == "SSLError"
        stock[-3] = shim[-3]
    assert shim == stock


# --- root 7: activation is invisible ----------------------------------------------------------


def _regular_install(where: Path) -> Path:
    """Our packages as a non-editable install lays them out (pytest only marks the packages
    of a dist-info RECORD for assertion rewriting, which editable installs do not list)."""
    from support import ROOT

    site = where / "site"
    info = site / "requests_fastssl-0.0.0.dist-info"
    info.mkdir(parents=True)
    files = []
    for package in ("requests_fastssl", "_requests_fastssl"):
        for path in (ROOT / package).rglob("*.py"):
            target = site / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
            files.append(str(path.relative_to(ROOT)))
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: requests-fastssl\nVersion: 0.0.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[pytest11]\nrequests_fastssl = _requests_fastssl.pytest_plugin\n"
    )
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    return site


@pytest.mark.parametrize("activation", ["none", "sitecustomize", "run", "plugin-only"])
def test_activation_adds_no_warning_to_a_strict_pytest_session(
    activation: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    site = _regular_install(tmp_path)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (suite / "test_app.py").write_text(
        "import requests\n\ndef test_app():\n    assert requests.codes.ok == 200\n"
    )
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "sitecustomize.py").write_text("import requests_fastssl\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(site)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if activation == "sitecustomize":
        env["PYTHONPATH"] += os.pathsep + str(startup)
    elif activation == "run":
        argv = [sys.executable, "-m", "requests_fastssl", "run", "--", *argv]
    elif activation == "plugin-only":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        argv += ["-p", "_requests_fastssl.pytest_plugin", "--fastssl"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=suite, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert "arning" not in proc.stdout + proc.stderr


# --- root 8: coarse timestamps --------------------------------------------------------------


def test_contents_are_compared_whatever_the_timestamps(tmp_path: Path, pki: PKI) -> None:
    """A same-size rewrite that leaves the identity equal (a coarse clock, a write through a
    shared mapping) is seen in the contents; the same contents written back are unchanged."""
    bundle, trusted, rogue = two_bundles(pki, tmp_path)
    checks = _files.read_checks((str(bundle),))
    assert checks is not None
    (check,) = checks
    assert check.unchanged()
    _, creds, moment = check.seen
    bundle.write_bytes(rogue)
    # As a coarse clock leaves it: the identity as last seen, the file racily clean.
    check.seen = (_files._identity(str(bundle)), creds, moment)  # type: ignore[assignment]
    assert _files._racy(check.seen[0], moment)
    assert not check.unchanged()
    bundle.write_bytes(trusted)
    check.seen = (_files._identity(str(bundle)), creds, moment)  # type: ignore[assignment]
    assert check.unchanged()
    bundle.unlink()
    assert not check.unchanged()


def test_a_bundle_rewritten_through_a_shared_mapping_is_seen(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """Writes through a shared mmap to pages already dirty update no timestamp: stat says
    nothing changed while the contents did. Stock reads the new contents; so must the shim."""
    import mmap

    server_a, server_b = make_server(), make_server(ca=pki.rogue_ca)
    bundle, trusted, rogue = two_bundles(pki, tmp_path)

    def get(url: str) -> Any:
        return outcome(lambda: requests.get(url, verify=str(bundle)))

    def calls() -> list[Any]:
        with open(bundle, "r+b") as f, mmap.mmap(f.fileno(), len(trusted)) as m:
            m[:] = trusted
            before = _files._identity(str(bundle))
            first = [get(server_a.url), get(server_b.url)]
            m[:] = rogue  # the same pages, dirty already
            unseen = _files._identity(str(bundle)) == before
            second = [get(server_a.url), get(server_b.url)]
            m[:] = trusted
        return [first, second, unseen]

    stock, shim = stock_and_shim(calls)
    assert [o[0] for o in stock[0]] == ["200", "SSLError"]
    assert [o[0] for o in stock[1]] == ["SSLError", "200"]  # the new contents, read again
    assert shim[:2] == stock[:2]


@pytest.mark.urllib3_2
def test_contents_written_through_a_mapping_only_during_the_load_stay_in_the_shared_context(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """A known limit (README, Known limits): the bundle holds other contents exactly while the
    first load runs, and its own again before the load returns, written through a shared
    mapping whose pages are dirty already, so that no timestamp moves (the profiler times it:
    an attacker's best case). Stock holds the other contents in that one connection's context;
    the shim's build loads the file as stock does, through the descriptor its check opened,
    and no stat can tell, so its shared context holds them for every later connection with
    this file (until the file's identity or contents change, or the context is dropped)."""
    import mmap

    server_a, server_b = make_server(), make_server(ca=pki.rogue_ca)
    bundle, trusted, rogue = two_bundles(pki, tmp_path)

    def get(url: str) -> Any:
        return outcome(lambda: requests.get(url, verify=str(bundle), headers=CLOSE))

    def calls() -> tuple[list[Any], bool]:
        requests_fastssl.clear()
        with open(bundle, "r+b") as f, mmap.mmap(f.fileno(), len(trusted)) as m:
            m[:] = trusted  # dirty pages: later writes move no timestamp
            before = _files._identity(str(bundle))
            with other_contents_during_first_load(m, rogue, trusted):
                during = get(server_a.url)  # its load reads the other contents
            unseen = _files._identity(str(bundle)) == before
            return [during, get(server_a.url), get(server_b.url), get(server_a.url)], unseen

    before = requests_fastssl.stats()
    (stock, stock_unseen), (shim, shim_unseen) = stock_and_shim(calls)
    shared = requests_fastssl.stats().since(before)
    assert stock_unseen  # (the case itself: no timestamp moved)
    assert shim_unseen
    # Stock: the other contents (the rogue CA) for the connection whose load read them only.
    assert [status for status, _ in stock] == ["SSLError", "200", "SSLError", "200"]
    # The shim: the context that load built holds them for all four connections.
    assert [status for status, _ in shim] == ["SSLError", "SSLError", "200", "SSLError"]
    assert shim[0] == stock[0]
    assert shim[2][0] == "200"  # (trusts server_b, as only the rogue CA does)
    assert (shared.connections, shared.contexts_built, shared.reuses) == (4, 1, 3)
    assert (shared.discards, shared.step_asides) == (0, 0)


@pytest.mark.urllib3_2
@pytest.mark.parametrize("other", ["rogue", "garbage"])
def test_a_bundle_written_while_the_build_loads_it_is_not_kept(
    other: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """The bundle rewritten with write(2) (same size, same inode) exactly while each load of
    the first request runs, and written back before each returns (the profiler times it).
    A write moves the ctime, which ``pinned``'s fstat after the build's load sees, whether
    the load succeeded (the rogue CA) or failed (garbage: its error is not stock's for the
    file, nor remembered as the file's failure): what that load read is not kept, and the
    connection goes to stock, whose own load, rewritten the same way, reads the other
    contents as stock's does. The next connection builds afresh and shares the file's own."""
    server_a, server_b = make_server(), make_server(ca=pki.rogue_ca)
    bundle, trusted, rogue = two_bundles(pki, tmp_path)
    rogue = rogue if other == "rogue" else b"x" * len(trusted)
    aged(bundle)  # (so the write moves the ctime, whatever the clock's tick)

    def get(url: str) -> Any:
        return outcome(lambda: requests.get(url, verify=str(bundle), headers=CLOSE))

    def calls() -> tuple[list[Any], int]:
        requests_fastssl.clear()
        writes: list[bytes] = []
        fd = os.open(bundle, os.O_WRONLY)

        def profile(frame: Any, event: str, arg: Any) -> None:
            if getattr(arg, "__name__", "") != "load_verify_locations":
                return
            if getattr(getattr(arg, "__self__", None), "protocol", 0) == ssl.PROTOCOL_TLS_SERVER:
                return
            if event == "c_call" or (event in ("c_return", "c_exception") and writes):
                writes.append(rogue if event == "c_call" else trusted)
                os.pwrite(fd, writes[-1], 0)

        sys.setprofile(profile)
        try:
            during = get(server_a.url)  # every load it makes reads the other contents
        finally:
            sys.setprofile(None)
            os.close(fd)
        assert bundle.read_bytes() == trusted
        return [during, get(server_a.url), get(server_b.url), get(server_a.url)], len(writes)

    before = requests_fastssl.stats()
    (stock, stock_writes), (shim, shim_writes) = stock_and_shim(calls)
    counts = requests_fastssl.stats().since(before)
    assert [status for status, _ in stock] == ["SSLError", "200", "SSLError", "200"]
    failed = "no certificate or crl found" if other == "garbage" else "certificate verify failed"
    assert failed in stock[0][1]  # (the first connection's load read the other contents)
    assert shim == stock
    # Stock's one load; the shim's build's, then stock's for that connection.
    assert (stock_writes, shim_writes) == (2, 4)
    assert (counts.contexts_built, counts.build_failures, counts.discards) == (1, 1, 0)
    assert (counts.connections, counts.reuses) == (3, 2)
    assert counts.step_aside_reasons == {"file-changed": 1}


@pytest.mark.urllib3_2
def test_a_thread_with_its_own_file_table_loads_the_named_file(
    make_server: ServerFactory, pki: PKI
) -> None:
    """Builds load the file through its descriptor's /proc name. A thread that called
    unshare(CLONE_FILES) has a file table of its own, so /proc/self/fd/N (the main
    thread's table) names another file there: here the main thread holds the rogue bundle
    at every free number. The context must hold the file ``verify`` names, as in stock.
    In a fresh interpreter: the test fills a file table."""
    trusted, rogue = make_server(), make_server(ca=pki.rogue_ca)
    out = run_python(
        "import json, os, threading\nimport requests, requests_fastssl\n"
        + IN_OWN_FILE_TABLE
        + textwrap.dedent(
            f"""
            def requests_there():
                got = []
                for url in ({trusted.url!r}, {rogue.url!r}):
                    try:
                        status = requests.get(url, verify={pki.bundle!r}).status_code
                        got.append(str(status))
                    except requests.exceptions.SSLError:
                        got.append("SSLError")
                return got

            def run():
                return in_own_table(requests_there, {pki.rogue_bundle!r})

            requests_fastssl.uninstall()
            stock = run()
            requests_fastssl.install()
            shim = run()
            print(json.dumps([stock, shim, requests_fastssl.stats().contexts_built]))
            """
        )
    )
    stock, shim, built = json.loads(out.strip().splitlines()[-1])
    if stock and stock[0][0] == "refused":
        # A seccomp policy (a container's default) that forbids unshare(): no thread here
        # can have a file table of its own, so the case cannot arise on this machine.
        pytest.skip(
            f"unshare refused {stock[0]}: threads with their own file table cannot exist here"
        )
    assert stock == ["200", "SSLError"]
    assert shim == stock
    assert built == 1  # shared, from the right file


def test_no_descriptor_left_for_the_bundle_is_a_documented_limit(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """Unchanged on disk, but no file descriptor left for stock's load at exactly that
    connection (the socket takes the last one): stock fails; the shim, which proves the file
    unchanged by a stat, does not (docs/usage.md, Known limits: issue 29's decision 3).
    Rights dropped or taken away are seen: test_identity.py. Pinned here so that the limit
    stays what the docs say. The client runs in its own process, so that only its
    descriptors run out."""
    server = make_server()
    aged(pki.bundle)
    script = tmp_path / "no_fd.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, resource, sys
            import requests
            import requests_fastssl

            mode, url, bundle = sys.argv[1:4]
            if mode == "stock":
                requests_fastssl.uninstall()

            def get():
                try:
                    r = requests.get(url, verify=bundle, headers={"Connection": "close"})
                    return [str(r.status_code), None]
                except Exception as exc:
                    return [type(exc).__name__, str(exc)]

            out = [get()]
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 4096), hard))
            held = []
            try:
                while True:
                    held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                pass
            os.close(held.pop())  # one descriptor left: the connection's socket takes it
            out.append(get())
            for fd in held:
                os.close(fd)
            out.append(get())
            print(json.dumps(out))
            """
        )
    )
    env = clean_env()
    results = {}
    for mode in ("stock", "shim"):
        proc = subprocess.run(
            [sys.executable, str(script), mode, server.url, pki.bundle],
            capture_output=True, text=True, timeout=120, cwd=str(ROOT), env=env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r[0] for r in results["stock"]] == ["200", "SSLError", "200"]
    assert "Too many open files" in results["stock"][1][1]
    if URLLIB3_1:  # (left stock: it loads at every connection)
        assert results["shim"] == results["stock"]
    else:
        assert [r[0] for r in results["shim"]] == ["200", "200", "200"]


@pytest.mark.urllib3_2
def test_a_bundle_with_a_block_other_than_certificates_is_shared_as_stock_loads_it(
    make_server: ServerFactory, pki: PKI, tmp_path: Path, loads: LoadCounter
) -> None:
    """A bundle with a block other than certificates (here a private key, which OpenSSL's
    file load skips): the build makes stock's file load of it, so it is shared, one load for
    four connections, with stock's answers (the ``cadata`` load of the shim before issue 40
    could not take it, and left every connection to stock)."""
    server = make_server()
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(Path(pki.bundle).read_bytes() + Path(pki.client_a.key).read_bytes())

    def calls() -> tuple[list[Any], int]:
        before = loads.verify_locations
        got = [
            outcome(lambda: requests.get(server.url, verify=str(bundle), headers=CLOSE))
            for _ in range(4)
        ]
        return got, loads.verify_locations - before

    (stock, stock_loads), (shim, shim_loads) = stock_and_shim(calls)
    assert shim == stock == [("200", None)] * 4
    assert (stock_loads, shim_loads) == (4, 1)


def test_a_racy_bundle_rewrite_is_seen_end_to_end(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = make_server()
    bundle = tmp_path / "bundle.pem"
    trusted, rogue = same_size(Path(pki.bundle).read_bytes(), Path(pki.rogue_bundle).read_bytes())

    def calls() -> list[Any]:
        bundle.write_bytes(trusted)
        first = outcome(lambda: requests.get(server.url, verify=str(bundle)))
        bundle.write_bytes(rogue)  # in place, same size
        for _ctx, checks in list(REGISTRY._entries.values()):  # as a coarse clock leaves them
            for check in checks:
                _, creds, moment = check.seen
                check.seen = (_files._identity(check.path), creds, moment)  # type: ignore[assignment]
        return [first, outcome(lambda: requests.get(server.url, verify=str(bundle)))]

    stock, shim = stock_and_shim(calls)
    assert stock[0] == ("200", None)
    assert stock[1][0] == "SSLError"
    assert shim == stock


# --- files that must be read once, and secrets that must be asked for every time ---------------


@pytest.mark.parametrize("what", ["bundle", "client-cert"])
def test_a_file_given_as_a_pipe_is_read_once_as_stock(
    what: str, make_server: ServerFactory, pki: PKI
) -> None:
    """`verify=/dev/fd/N` (a shell's `<(vault read ...)`): a pipe can be read once. The shim
    must not read it to build a context, or stock's own load finds it empty."""
    server = make_server(client_certs="optional")
    data = Path(pki.bundle if what == "bundle" else pki.client_a.cert).read_bytes()

    def calls() -> Any:
        r, w = os.pipe()
        os.write(w, data)  # (small enough for the pipe's buffer)
        os.close(w)
        try:
            if what == "bundle":
                return outcome(lambda: requests.get(server.url, verify=f"/dev/fd/{r}"))
            cert = (f"/dev/fd/{r}", pki.client_a.key)
            return outcome(lambda: requests.get(server.url, verify=pki.bundle, cert=cert))
        finally:
            os.close(r)

    stock, shim = stock_and_shim(calls)
    assert stock == ("200", None if what == "bundle" else "client-a")
    assert shim == stock


def test_a_key_password_callable_is_asked_on_every_connection(
    make_server: ServerFactory, pki: PKI
) -> None:
    """OpenSSL calls a callable password at every load; a secret revoked after the first
    connection must fail the second, as in stock."""
    server = make_server(client_certs="optional")

    def calls() -> list[Any]:
        answers = iter(["secret", "revoked"])
        adapter = KwargsAdapter(key_password=lambda: next(answers))
        session = session_with(adapter)
        cert = (pki.client_a.cert, pki.encrypted_key)
        return [
            outcome(lambda: session.get(server.url, verify=pki.bundle, cert=cert, headers=CLOSE))
            for _ in range(2)
        ]

    stock, shim = stock_and_shim(calls)
    assert stock[0] == ("200", "client-a")
    assert stock[1][0] == "SSLError"
    assert shim == stock


# --- the factory's own warnings ------------------------------------------------------------


def test_the_factory_warns_from_urllib3s_own_call_site(
    make_server: ServerFactory, pki: PKI
) -> None:
    """urllib3 warns about the deprecated ``ssl_version`` from its context factory, on every
    new connection (stock calls the factory for each), with stacklevel=2: attributed to
    urllib3.connection's call site. The shim calls it likewise for each connection of such
    a pool, as from that site: the same warnings, as many, from the same file and line; and
    a filter that turns them into errors, by module, set after the context was built,
    fails the next request in both."""
    import warnings

    server = make_server()

    def calls() -> list[Any]:
        session = session_with(KwargsAdapter(ssl_version=ssl.PROTOCOL_TLSv1_2))

        def get() -> Any:
            return outcome(lambda: session.get(server.url, verify=pki.bundle, headers=CLOSE))

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            got = [get() for _ in range(3)]
        # (a FutureWarning; urllib3 2.0 raised a DeprecationWarning)
        ours = [w for w in seen if "'ssl_version' option is deprecated" in str(w.message)]
        where = [(w.filename, w.lineno) for w in ours]
        category = ours[0].category if ours else FutureWarning
        with warnings.catch_warnings():
            warnings.filterwarnings("error", category=category, module=r"urllib3\.")
            got.append(get())
        return [got, where]

    stock, shim = stock_and_shim(calls)
    if URLLIB3_1:  # (1.26 does not deprecate ssl_version: no warning to compare)
        assert shim == stock
        return
    assert stock[0][:3] == [("200", None)] * 3
    assert stock[0][3][0] in ("FutureWarning", "DeprecationWarning")
    assert len(stock[1]) == 3
    assert {filename for filename, _ in stock[1]} == {urllib3.connection.__file__}
    assert shim == stock


def _common_name_only_server(pki: PKI, tmp_path: Path) -> HTTPSServer:
    """A legacy server certificate from the trusted CA: a common name, no subjectAltName."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    issuer = x509.load_pem_x509_certificate(pki.ca.cert_pem.bytes())
    signer = serialization.load_pem_private_key(pki.ca.private_key_pem.bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "legacy.test")]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=9))
        .sign(signer, hashes.SHA256())  # type: ignore[arg-type]
    )
    pem = tmp_path / "legacy.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pem))
    return make_server_from(ctx)


@pytest.mark.parametrize("factory", ["state-of-its-own", "common-names"])
@pytest.mark.urllib3_2
def test_a_factory_that_is_not_urllib3s_own_is_left_to_stock(
    factory: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """A program that wraps urllib3's context factory may make it depend on anything: here,
    a policy of its own changed between requests, or common-name matching turned on (which
    urllib3 ignores for a context it creates, and reads from a context it is given). No key
    covers that: such pools step aside, and every outcome is stock's."""
    from adapters import HostHeaderAdapter

    original = urllib3.util.ssl_.create_urllib3_context  # (urllib3.connection's)
    policy = {"max": ssl.TLSVersion.MAXIMUM_SUPPORTED}

    def wrapped(**kwargs: Any) -> Any:
        ctx = original(**kwargs)
        if factory == "state-of-its-own":
            ctx.maximum_version = policy["max"]
        else:
            ctx.hostname_checks_common_name = True
        return ctx

    if factory == "state-of-its-own":
        server = make_server(minimum_version=ssl.TLSVersion.TLSv1_3)
    else:
        server = _common_name_only_server(pki, tmp_path)

    def calls() -> list[Any]:
        policy["max"] = ssl.TLSVersion.MAXIMUM_SUPPORTED
        got = []
        for step in range(2):
            if factory == "state-of-its-own":
                session = requests.Session()
                headers = CLOSE
                if step == 1:
                    policy["max"] = ssl.TLSVersion.TLSv1_2
            else:
                session = session_with(HostHeaderAdapter())
                headers = {**CLOSE, "Host": ("legacy.test", "other.test")[step]}
            got.append(
                outcome(
                    functools.partial(session.get, server.url, verify=pki.bundle, headers=headers)
                )
            )
        return got

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(urllib3.connection, "create_urllib3_context", wrapped)
        before = requests_fastssl.stats()
        stock, shim = stock_and_shim(calls)
        shared = requests_fastssl.stats().since(before)
    assert shim == stock
    if factory == "state-of-its-own":
        assert [status for status, _ in stock] == ["200", "SSLError"]
    elif not URLLIB3_1:  # (1.26 warns of the missing subjectAltName, an error in this suite)
        assert [status for status, _ in stock] == ["SSLError", "SSLError"]
    assert shared.step_aside_reasons == {"urllib3-replaced": 2}
