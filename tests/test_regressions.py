"""Every failure of requests' own context cache (2.32.0-2.32.4, regressions.md R1-R15) that
applies to requests >= 2.32.3, each run twice by the ``mode`` fixture: against stock requests
and with the shim, asserting the stock outcome both times. Names follow regressions.md."""

from __future__ import annotations

import collections.abc
import enum
import functools
import os
import pickle
import ssl
import sys
import threading
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

import pytest
import requests
import urllib3
from adapters import ContextAdapter, HostHeaderAdapter, KwargsAdapter, NoVerifyAdapter
from loopback_proxy import LoopbackProxy
from requests.adapters import HTTPAdapter
from support import (
    PKI,
    PRELOADED,
    URLLIB3_1,
    ServerFactory,
    clean_env,
    needs_urllib3_2,
    run_python,
    same_size,
    session_with,
    set_default_bundle,
    stock_and_shim,
)
from urllib3.util.ssl_ import create_urllib3_context

import requests_fastssl
from _requests_fastssl._contexts import _ALPN, FrozenContext
from _requests_fastssl._policy import Reason
from _requests_fastssl._registry import REGISTRY
from _requests_fastssl._state import STATE
from _requests_fastssl.cli.server import server_context

CLOSE = {"Connection": "close"}  # every request opens a new connection
RACE_N = 400


def cn(response: requests.Response) -> str | None:
    assert response.status_code == 200
    value: str | None = response.json()["client_cn"]
    return value


def shared_contexts() -> list[Any]:
    return [ctx for ctx, _checks in REGISTRY._entries.values()]


def assert_shared_contexts_untouched() -> None:
    """Whatever ran, every shared context still verifies and checks host names as built
    for its inputs (the key: cert_reqs first, assert_hostname and assert_fingerprint 8th
    and 9th, each with its type)."""
    for key, (ctx, _checks) in REGISTRY._entries.items():
        assert isinstance(key, tuple)
        assert type(ctx) is FrozenContext
        (_, cert_reqs), (_, hostname), (_, fingerprint) = key[0], key[7], key[8]
        expected = ssl.CERT_NONE if cert_reqs == "CERT_NONE" else ssl.CERT_REQUIRED
        fresh = create_urllib3_context(cert_reqs=expected)  # as this urllib3 line builds it
        assert ctx.verify_mode == expected
        host_checks_off = bool(fingerprint or hostname or hostname is False)
        assert ctx.check_hostname is (fresh.check_hostname and not host_checks_off)


def pools_of(session: requests.Session) -> Any:
    adapter = session.adapters["https://"]
    assert isinstance(adapter, HTTPAdapter)
    return adapter.poolmanager.pools


# --- R1, R2: client certificates ------------------------------------------------------------


def test_r1_client_cert_leak(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    one, two = make_server(client_certs="optional"), make_server(client_certs="optional")
    assert cn(requests.get(one.url, cert=pki.client_a.pair)) == "client-a"
    assert cn(requests.get(two.url)) is None
    sequence = [None, pki.client_a.pair, None, pki.client_b.combined, None]
    seen = [cn(requests.get(one.url, cert=c, headers=CLOSE)) for c in sequence]
    assert seen == [None, "client-a", None, "client-b", None]


def test_r2_concurrent_client_certs(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    servers = [make_server(client_certs="required"), make_server(client_certs="required")]
    identities: dict[str, str | tuple[str, str]] = {
        "client-a": pki.client_a.pair,
        "client-b": pki.client_b.combined,
    }

    def worker(i: int) -> list[tuple[str, str | None]]:
        name = "client-a" if i % 2 else "client-b"
        seen = []
        with requests.Session() as session:
            session.cert = identities[name]
            for n in range(40):
                response = session.get(servers[n % 2].url, headers=CLOSE)
                seen.append((name, cn(response)))
        return seen

    with ThreadPoolExecutor(4) as pool:
        results = [pair for seen in pool.map(worker, range(4)) for pair in seen]
    assert len(results) == 160
    assert [pair for pair in results if pair[0] != pair[1]] == []


# --- R3, R3b, R3c, R3d, R4: adapters with TLS settings of their own --------------------------


def test_r3_custom_ctx_ignored(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    ctx = create_urllib3_context()
    ctx.load_cert_chain(*pki.client_a.pair)
    server = make_server(client_certs="optional")
    assert cn(session_with(ContextAdapter(ctx)).get(server.url)) == "client-a"


def test_r3b_proxy_manager_ctx_ignored(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    ctx = create_urllib3_context()
    ctx.load_cert_chain(*pki.client_a.pair)
    server = make_server(client_certs="optional")
    session = session_with(ContextAdapter(ctx, direct=False, proxied=True))
    with LoopbackProxy() as proxy:
        response = session.get(server.url, proxies={"https": proxy.url})
        assert proxy.requests == [("CONNECT", f"127.0.0.1:{server.port}")]
    assert cn(response) == "client-a"
    assert cn(session.get(server.url)) is None  # the direct pool never saw that context


@pytest.mark.filterwarnings("ignore:ssl.PROTOCOL_TLSv1_1 is deprecated:DeprecationWarning")
def test_r3c_poolmanager_min_version_ignored(
    mode: str, make_server: ServerFactory, default_bundle: str
) -> None:
    server = make_server(maximum_version=ssl.TLSVersion.TLSv1_2)
    assert requests.get(server.url).status_code == 200
    if URLLIB3_1:  # 1.26 has no ssl_minimum_version: pin the version (regressions.md R3c)
        pinned = KwargsAdapter(ssl_version=ssl.PROTOCOL_TLSv1_1)
    else:
        pinned = KwargsAdapter(ssl_minimum_version=ssl.TLSVersion.TLSv1_3)
    session = session_with(pinned)
    with pytest.raises(requests.exceptions.SSLError):
        session.get(server.url)


@needs_urllib3_2
def test_r3d_ca_cert_data_trust_leak(
    mode: str, make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_default_bundle(monkeypatch, pki.rogue_bundle)
    server = make_server()
    extra_ca = session_with(KwargsAdapter(ca_cert_data=pki.ca.cert_pem.bytes().decode()))
    assert extra_ca.get(server.url).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.Session().get(server.url)
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url)


def test_r4_custom_ctx_no_cas(mode: str, make_server: ServerFactory, default_bundle: str) -> None:
    server = make_server()
    ctx = create_urllib3_context(ciphers="ECDHE+AESGCM")
    assert session_with(ContextAdapter(ctx)).get(server.url).status_code == 200


# --- R5, R5b, R6: verification turned off or host names asserted elsewhere --------------------


def test_r5_noverify_adapter(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    trusted, untrusted = make_server(), make_server(ca=pki.rogue_ca)
    assert requests.get(trusted.url).status_code == 200  # a shared context exists
    session = session_with(NoVerifyAdapter())
    assert session.get(untrusted.url).status_code == 200
    assert session.get(trusted.url).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(untrusted.url)
    assert_shared_contexts_untouched()


def test_r5_http_via_https_proxy(mode: str, pki: PKI, default_bundle: str) -> None:
    proxy_ctx = server_context(pki.ca, ("127.0.0.1",))
    with LoopbackProxy(tls=proxy_ctx) as proxy:
        response = requests.get("http://127.0.0.1:9/thing", proxies={"http": proxy.url})
    assert response.json() == {"proxied": "http://127.0.0.1:9/thing"}
    assert_shared_contexts_untouched()


def _race(
    make_server: ServerFactory,
    pki: PKI,
    noisemakers: list[tuple[requests.Session, dict[str, str]]],
    n: int = RACE_N,
) -> int:
    """Hammer a trusted server through each session (one thread each) while the main
    thread makes ``n`` verifying requests to an untrusted one; return how many succeeded."""
    trusted, untrusted = make_server(), make_server(ca=pki.rogue_ca)
    stop = threading.Event()
    noise_done: list[int] = []
    noise_errors: list[BaseException] = []

    def hammer(session: requests.Session, headers: dict[str, str]) -> None:
        done = 0
        try:
            while not stop.is_set():
                assert session.get(trusted.url, headers=headers).status_code == 200
                done += 1
        except BaseException as exc:
            noise_errors.append(exc)
        noise_done.append(done)

    threads = [threading.Thread(target=hammer, args=pair) for pair in noisemakers]
    for thread in threads:
        thread.start()
    successes = 0
    try:
        for _ in range(n):
            try:
                requests.get(untrusted.url, headers=CLOSE)
                successes += 1
            except requests.exceptions.SSLError:
                pass
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not noise_errors, noise_errors
    assert all(done > 0 for done in noise_done)  # the noise really ran alongside
    return successes


def test_r5b_race_global_cert_none(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    assert _race(make_server, pki, [(session_with(NoVerifyAdapter()), CLOSE)]) == 0
    assert_shared_contexts_untouched()


def test_r5b_r6_race_after_assert_hostname(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    noise = (session_with(HostHeaderAdapter()), {**CLOSE, "Host": "localhost"})
    assert _race(make_server, pki, [noise]) == 0
    assert_shared_contexts_untouched()


@pytest.mark.slow
def test_r5b_race_both_adapters_1500_verifying_requests(
    shim: None, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    """regressions.md R5b as written: a no-verify adapter thread and an assert_hostname
    adapter thread hammer one server during 1500 verifying requests to an untrusted one.
    (Shim only: the 400-request probes above run the same race against stock too.)"""
    noisemakers = [
        (session_with(NoVerifyAdapter()), CLOSE),
        (session_with(HostHeaderAdapter()), {**CLOSE, "Host": "localhost"}),
    ]
    assert _race(make_server, pki, noisemakers, n=1500) == 0
    assert_shared_contexts_untouched()


def test_r6_assert_hostname_mutates_shared(
    mode: str, make_server: ServerFactory, default_bundle: str
) -> None:
    server = make_server(names=("localhost",))  # a certificate for "localhost" only
    with pytest.raises(requests.exceptions.SSLError, match=r"match"):
        requests.get(server.url)  # the URL says 127.0.0.1
    session = session_with(HostHeaderAdapter())
    assert session.get(server.url, headers={"Host": "localhost"}).status_code == 200
    with pytest.raises(requests.exceptions.SSLError, match=r"match"):
        session.get(server.url)  # no Host header: the adapter asserts nothing this time
    assert_shared_contexts_untouched()


# --- R8, R9, R14: trust read at request time ---------------------------------------------------


def test_r8_bundle_changed_after_import(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str, tmp_path: Any
) -> None:
    import os

    server = make_server()
    bundle = tmp_path / "rotating.pem"
    good, rogue = pki.ca.cert_pem.bytes(), pki.rogue_ca.cert_pem.bytes()

    def replace_atomically(data: bytes) -> None:
        staged = tmp_path / "staged.pem"
        staged.write_bytes(data)
        os.replace(staged, bundle)

    outcomes: list[int | str] = []
    for write, data in [
        (bundle.write_bytes, rogue),
        (bundle.write_bytes, good),  # rewritten in place
        (bundle.write_bytes, rogue),
        (replace_atomically, good),  # a new inode, as package managers do it
        (replace_atomically, rogue),
    ]:
        write(data)
        try:
            outcomes.append(requests.get(server.url, verify=str(bundle)).status_code)
        except requests.exceptions.SSLError:
            outcomes.append("SSLError")
    assert outcomes == ["SSLError", 200, "SSLError", 200, "SSLError"]


def test_r8_bundle_rotated_with_same_size_and_mtime(
    mode: str, make_server: ServerFactory, pki: PKI, tmp_path: Any
) -> None:
    """A rewrite that keeps size and mtime (cp -p, tar) is still a new trust source."""
    import os

    # ECDSA signatures vary in length, so the two PEMs are padded to one size.
    good, other = same_size(pki.ca.cert_pem.bytes(), pki.rogue_ca.cert_pem.bytes())
    server = make_server()
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(good)
    assert requests.get(server.url, verify=str(bundle)).status_code == 200
    before = os.stat(bundle)
    bundle.write_bytes(other)
    os.utime(bundle, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url, verify=str(bundle))


def test_r8_where_patched_after_import(
    mode: str, make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server()
    outcomes: list[int | str] = []
    for path in (pki.rogue_bundle, pki.bundle, pki.rogue_bundle, pki.bundle):
        set_default_bundle(monkeypatch, path)
        try:
            outcomes.append(requests.get(server.url).status_code)
        except requests.exceptions.SSLError:
            outcomes.append("SSLError")
    assert outcomes == ["SSLError", 200, "SSLError", 200]


@pytest.mark.parametrize("how", ["setenv", "environ-replaced", "getitem-patched"])
def test_r8_sslkeylogfile_after_import(
    mode: str,
    how: str,
    make_server: ServerFactory,
    default_bundle: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Set in place, in an os.environ replaced by a plain dict, or answered by a patched
    ``os._Environ.__getitem__`` (a library injecting defaults): the shim asks os.environ as
    stock does (looking in its own table instead missed the patch)."""
    getitem = os._Environ.__getitem__

    def setenv(value: str | None) -> None:
        if how == "getitem-patched":

            def patched(self: Any, key: str) -> Any:
                return value if key == "SSLKEYLOGFILE" and value else getitem(self, key)

            monkeypatch.setattr(os._Environ, "__getitem__", patched)
        elif how == "setenv":
            if value is None:
                monkeypatch.delenv("SSLKEYLOGFILE")
            else:
                monkeypatch.setenv("SSLKEYLOGFILE", value)
        else:
            env = {k: v for k, v in os.environ.items() if k != "SSLKEYLOGFILE"}
            monkeypatch.setattr(
                os, "environ", env if value is None else {**env, "SSLKEYLOGFILE": value}
            )

    server = make_server()
    assert requests.get(server.url).status_code == 200  # before the variable is set
    keylog = tmp_path / "keys.log"
    setenv(str(keylog))
    assert requests.get(server.url, headers=CLOSE).status_code == 200
    assert keylog.exists()
    assert keylog.stat().st_size > 0
    setenv(None)
    size = keylog.stat().st_size
    assert requests.get(server.url, headers=CLOSE).status_code == 200
    assert keylog.stat().st_size == size  # unset again: nothing more is logged


@pytest.mark.urllib3_2
def test_an_empty_environment_at_activation_shares_and_logs_nothing(
    make_server: ServerFactory, pki: PKI
) -> None:
    """requests imported inside ``mock.patch.dict(os.environ, clear=True)`` (a test suite's
    way): the shim activates with os.environ empty. A key-log lookup set up from it once
    raised at every connection (an internal error, a traceback each, nothing shared)."""
    server = make_server()
    out = run_python(
        f"""
        import os, sys
        from unittest import mock
        import requests_fastssl
        with mock.patch.dict(os.environ, clear=True):
            import requests
        codes = [
            requests.get({server.url!r}, verify={pki.bundle!r}, headers={{"Connection": "close"}})
            .status_code
            for _ in range(3)
        ]
        stats = requests_fastssl.stats()
        print(codes, stats.contexts_built, stats.connections, dict(stats.step_aside_reasons))
        """,
        env={"REQUESTS_FASTSSL_LOG": "warning"},
        stderr=True,  # (a traceback logged would show there)
    )
    assert out.strip() == "[200, 200, 200] 1 3 {}"


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_r9_ca_bundle_env_switched_between_requests(
    mode: str,
    variable: str,
    make_server: ServerFactory,
    pki: PKI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = make_server()
    outcomes: list[int | str] = []
    for path in (pki.bundle, pki.rogue_bundle, pki.bundle, pki.rogue_bundle):
        monkeypatch.setenv(variable, path)
        try:
            outcomes.append(requests.get(server.url).status_code)
        except requests.exceptions.SSLError:
            outcomes.append("SSLError")
    assert outcomes == [200, "SSLError", 200, "SSLError"]


def test_r9_c_rehash_directory(
    mode: str, make_server: ServerFactory, pki: PKI, tmp_path: Any
) -> None:
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    assert openssl, "the openssl command is needed to hash a CA directory"
    directory = tmp_path / "certs"
    directory.mkdir()

    def add(pem: str, name: str) -> None:
        target = directory / name
        shutil.copy(pem, target)
        digest = subprocess.run(
            [openssl, "x509", "-hash", "-noout", "-in", str(target)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (directory / f"{digest}.0").symlink_to(target.name)

    server = make_server()
    add(pki.rogue_bundle, "rogue.pem")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url, verify=str(directory))
    add(pki.bundle, "ca.pem")  # the directory gains the right CA
    assert requests.get(server.url, verify=str(directory)).status_code == 200


# --- R11: HTTPS proxies ------------------------------------------------------------------------


@pytest.mark.parametrize("bundle", ["trusted", "rogue"])
def test_r11_https_via_https_proxy_trust(
    mode: str,
    bundle: str,
    make_server: ServerFactory,
    pki: PKI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = pki.bundle if bundle == "trusted" else pki.rogue_bundle
    set_default_bundle(monkeypatch, path)
    server = make_server()
    proxy_ctx = server_context(pki.ca, ("127.0.0.1",))
    with LoopbackProxy(tls=proxy_ctx) as proxy:
        if bundle == "trusted":
            assert requests.get(server.url, proxies={"https": proxy.url}).status_code == 200
        else:  # the proxy's own certificate fails first (urllib3 1.26 calls it an SSLError)
            error = requests.exceptions.SSLError if URLLIB3_1 else requests.exceptions.ProxyError
            with pytest.raises(error, match="CERTIFICATE_VERIFY_FAILED"):
                requests.get(server.url, proxies={"https": proxy.url})


# --- R12: CVE-2024-35195, every ordering to one origin ---------------------------------------


def _try(call: Callable[[], requests.Response]) -> Any:
    try:
        response = call()
    except requests.exceptions.SSLError:
        return "SSLError"
    return (
        response.status_code
        if response.headers.get("Content-Type") != "application/json"
        else (response.status_code, response.json()["client_cn"])
    )


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ({"verify": False}, {}, [(200, None), "SSLError"]),
        ({}, {"verify": False}, ["SSLError", (200, None)]),
        ({"verify": "other"}, {"verify": "trusting"}, ["SSLError", (200, None)]),
        ({"verify": "trusting"}, {"verify": "other"}, [(200, None), "SSLError"]),
        ({"cert": "a"}, {"cert": "b"}, [(200, "client-a"), (200, "client-b")]),
        ({}, {"cert": "a"}, [(200, None), (200, "client-a")]),
        ({"cert": "a"}, {}, [(200, "client-a"), (200, None)]),
    ],
    ids=[
        "False-True",
        "True-False",
        "pathA-pathB",
        "pathB-pathA",
        "certA-certB",
        "none-cert",
        "cert-none",
    ],
)
@pytest.mark.requests_2_32
def test_r12_cve_2024_35195_orderings(
    mode: str,
    first: dict[str, str | bool],
    second: dict[str, str | bool],
    expected: list[Any],
    make_server: ServerFactory,
    pki: PKI,
    default_bundle: str,
) -> None:
    # The verify orderings talk to a server whose CA only the "trusting" path holds, so a
    # reused unverified connection would show as a success where stock fails.
    verify_orderings = "verify" in first or "verify" in second
    server = make_server(ca=pki.rogue_ca if verify_orderings else pki.ca, client_certs="optional")
    paths = {"trusting": pki.rogue_bundle, "other": pki.bundle}
    certs = {"a": pki.client_a.pair, "b": pki.client_b.pair}

    def kwargs(spec: dict[str, str | bool]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "verify" in spec:
            value = spec["verify"]
            out["verify"] = paths[value] if isinstance(value, str) else value
        if "cert" in spec:
            out["cert"] = certs[str(spec["cert"])]
        return out

    session = requests.Session()
    outcomes = [
        _try(functools.partial(session.get, server.url, **kwargs(s))) for s in (first, second)
    ]
    assert outcomes == expected
    assert len(pools_of(session)) == 2


# --- R13: the documented adapter hooks, overridden ---------------------------------------------


class PostSuperAdapter(HTTPAdapter):
    """The docstring's recipe: edit the pool kwargs after build_connection_pool_key_attributes
    (``ssl_context=`` to swap the context, ``ca_cert_data=`` to add a CA)."""

    def __init__(self, **edits: Any) -> None:
        self._edits = edits
        super().__init__()

    def build_connection_pool_key_attributes(
        self, request: Any, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert
        )
        pool_kwargs.update(self._edits)
        return host_params, pool_kwargs


class PrivateCAAdapter(HTTPAdapter):
    def __init__(self, path: str) -> None:
        self._path = path
        super().__init__()

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        super().cert_verify(conn, url, self._path, cert)


class NoVerifyConnectionAdapter(HTTPAdapter):
    def get_connection_with_tls_context(
        self, request: Any, verify: Any, proxies: Any = None, cert: Any = None
    ) -> Any:
        return super().get_connection_with_tls_context(request, False, proxies, cert)


@pytest.mark.requests_2_32
def test_r13_swap_context_after_super(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    ctx = create_urllib3_context()
    ctx.load_cert_chain(*pki.client_b.pair)
    server = make_server(client_certs="optional")
    session = session_with(PostSuperAdapter(ssl_context=ctx))
    assert cn(session.get(server.url)) == "client-b"
    # The pool key still separates verify settings as stock does, context swapped or not.
    assert cn(session.get(server.url, verify=pki.both_bundle)) == "client-b"
    assert len(pools_of(session)) == 2


@needs_urllib3_2
@pytest.mark.requests_2_32
def test_r13_extra_ca_data_after_super(
    mode: str, make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_default_bundle(monkeypatch, pki.rogue_bundle)
    server = make_server()
    session = session_with(PostSuperAdapter(ca_cert_data=pki.ca.cert_pem.bytes().decode()))
    assert session.get(server.url).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url)  # R3d: the extra CA stays with that adapter
    assert_shared_contexts_untouched()


def test_r13_cert_verify_override_to_private_ca(
    mode: str, make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_default_bundle(monkeypatch, pki.rogue_bundle)
    server = make_server()
    assert session_with(PrivateCAAdapter(pki.bundle)).get(server.url).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url)
    assert_shared_contexts_untouched()


def test_r13_get_connection_with_tls_context_override(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    trusted, untrusted = make_server(), make_server(ca=pki.rogue_ca)
    session = session_with(NoVerifyConnectionAdapter())
    # The pool was chosen for verify=False, but send() still calls cert_verify with
    # verify=True, which re-enables verification on that pool: stock verifies.
    assert session.get(trusted.url).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        session.get(untrusted.url)
    assert_shared_contexts_untouched()


# --- R15: pickling and ALPN --------------------------------------------------------------------


def test_r15_pickle_session(mode: str, make_server: ServerFactory, default_bundle: str) -> None:
    server = make_server()
    session = requests.Session()
    assert session.get(server.url).status_code == 200
    revived = pickle.loads(pickle.dumps(session))
    assert revived.get(server.url).status_code == 200


@pytest.mark.urllib3_2
def test_r15_alpn_change_gets_a_new_context(
    make_server: ServerFactory, default_bundle: str, monkeypatch: pytest.MonkeyPatch, shim: None
) -> None:
    server = make_server()
    assert requests.get(server.url).status_code == 200
    (before,) = shared_contexts()
    built = requests_fastssl.stats().contexts_built
    monkeypatch.setattr(urllib3.util.ssl_, "ALPN_PROTOCOLS", ["h2", "http/1.1"])
    assert requests.get(server.url).status_code == 200
    assert requests_fastssl.stats().contexts_built == built + 1
    assert _ALPN[before] == ("http/1.1",)
    assert {_ALPN[c] for c in shared_contexts()} == {
        ("http/1.1",),
        ("h2", "http/1.1"),
    }


@pytest.mark.urllib3_2
@pytest.mark.parametrize(
    ("change", "new_context"),
    [
        ("alpn-items", True),  # the very list urllib3 and requests name, changed in place
        ("alpn-equal-item", False),  # another str object, equal: the same key
        ("table-value-as-int", True),  # TLSv1_2 -> 771, equal but typed apart (as urllib3 does)
        ("table-entry-added", True),
        ("table-equal-value", False),
        ("factory-defaults-equal", False),  # a new tuple of the same values
    ],
)
def test_a_setting_changed_in_place_is_a_new_key(
    change: str,
    new_context: bool,
    make_server: ServerFactory,
    default_bundle: str,
    monkeypatch: pytest.MonkeyPatch,
    shim: None,
) -> None:
    """urllib3's settings are read at every set-up and compared by identity with the last
    reading (freezing them, cold, was a third of a decision); what a list or dict holds is
    compared item by item, so a change in place is a new key, as a new object is."""
    server = make_server()
    assert requests.get(server.url).status_code == 200
    built = requests_fastssl.stats().contexts_built
    ssl_ = urllib3.util.ssl_
    alpn, factory = ssl_.ALPN_PROTOCOLS, ssl_.create_urllib3_context
    table: dict[Any, Any] = ssl_._SSL_VERSION_TO_TLS_VERSION
    saved = list(alpn)
    try:
        if change == "alpn-items":
            alpn[:] = ["h2", "http/1.1"]
        elif change == "alpn-equal-item":
            alpn[-1] = "".join(["http/", "1.1"])
        elif change == "table-value-as-int":
            monkeypatch.setitem(table, ssl.PROTOCOL_TLSv1_2, int(table[ssl.PROTOCOL_TLSv1_2]))
        elif change == "table-entry-added":
            monkeypatch.setitem(table, object(), ssl.TLSVersion.TLSv1_2)
        elif change == "table-equal-value":
            monkeypatch.setitem(table, ssl.PROTOCOL_TLSv1_2, ssl.TLSVersion.TLSv1_2)
        else:
            monkeypatch.setattr(factory, "__defaults__", (*(factory.__defaults__ or ()),))
        assert requests.get(server.url).status_code == 200
    finally:
        alpn[:] = saved
    assert requests_fastssl.stats().contexts_built == built + new_context
    if change == "alpn-items":
        assert {_ALPN[c] for c in shared_contexts()} == {("http/1.1",), ("h2", "http/1.1")}


@pytest.mark.urllib3_2
@pytest.mark.parametrize(("first", "then"), [((0,), (False,)), ((1,), (1.0,)), (0, False)])
def test_values_equal_across_types_are_apart_in_the_key(first: Any, then: Any, shim: None) -> None:
    """0, False and 0.0 are equal, and urllib3 may tell them apart: a setting holding one,
    then the other, gives two keys, in a tuple as at the top (the memo of a reading keeps
    the types of its values, not of a tuple's items)."""
    settings = STATE.settings
    assert settings is not None
    table: dict[Any, Any] = urllib3.util.ssl_._SSL_VERSION_TO_TLS_VERSION
    table["x"] = first
    try:
        before = settings.snapshot()
        table["x"] = then
        assert settings.snapshot() != before
    finally:
        del table["x"]


@pytest.mark.urllib3_2
def test_a_dict_inside_a_setting_changed_in_place_is_a_new_key(
    make_server: ServerFactory, default_bundle: str, monkeypatch: pytest.MonkeyPatch, shim: None
) -> None:
    """The items of urllib3's own dicts are compared by identity; a dict among them is no item
    that identity can vouch for: each change inside it is a new key."""
    server = make_server()
    inner: dict[str, Any] = {"a": 1}
    table: dict[Any, Any] = urllib3.util.ssl_._SSL_VERSION_TO_TLS_VERSION
    monkeypatch.setitem(table, object(), inner)
    built = []
    for value in (1, 2, 2, ["x"]):
        inner["a"] = value
        assert requests.get(server.url).status_code == 200
        built.append(requests_fastssl.stats().contexts_built)
    assert [b - built[0] for b in built] == [0, 1, 1, 2]


class _Sys(types.ModuleType):  # (urllib3 2.4+'s factory reads sys.version_info per context)
    version_info = property(lambda self: (3, 13))


@pytest.mark.urllib3_2
def test_a_module_the_factory_reads_given_another_class(
    make_server: ServerFactory, default_bundle: str
) -> None:
    """A module's class changed in place (its identity kept) is a new key: here sys's, whose
    version_info decides VERIFY_X509_STRICT in urllib3's factory. A memo that compared the
    settings by identity alone gave the context built before, without the flag stock sets."""
    server = make_server()

    def flags() -> int:
        response = requests.get(server.url, stream=True)
        try:
            return int(response.raw._connection.sock.context.verify_flags)
        finally:
            response.close()

    def calls() -> tuple[int, int]:
        before = flags()
        sys.__class__ = _Sys
        try:
            return before, flags()
        finally:
            sys.__class__ = types.ModuleType

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    # Where the factory adds VERIFY_X509_STRICT from 3.13 on (urllib3 2.4+), and this Python
    # is older, stock's context changes: the shim's must (on 3.13+ it has the flag anyway).
    names = urllib3.util.ssl_.create_urllib3_context.__code__.co_names
    if "VERIFY_X509_STRICT" in names and sys.version_info < (3, 13):
        assert stock[0] != stock[1]


class _ContentHash:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        return hash(self.value)  # (TypeError once the value is a list)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ContentHash) and other.value == self.value


def _key_hash(part: Any) -> Any:
    try:
        return hash(part)
    except TypeError:
        return "unhashable"  # (decide() then steps aside)


class _Module(types.ModuleType):
    pass


class _Tag(enum.Enum):
    A = 1


_CHANGES = [
    "class",
    "registered-mapping",
    "hash-by-contents",
    "unhashable",
    "race",
    "fake-enum",
    "module-in-tuple",
    "enum-hash",
    "enum-unhashable",
    "class-race",
]


@pytest.mark.urllib3_2
@pytest.mark.parametrize("change", _CHANGES)
def test_the_settings_memo_gives_what_a_fresh_reading_gives(change: str, shim: None) -> None:
    """After each change to something urllib3's table holds, the settings' key part is what a
    reading without the memo gives, and hashes alike (``unhashable``: both step aside). The
    races: the table, or a class, changes between the reading and its freezing (a profile
    hook, as another thread would), then back: later readings get no other state's key."""
    settings = STATE.settings
    assert settings is not None
    table: dict[Any, Any] = urllib3.util.ssl_._SSL_VERSION_TO_TLS_VERSION
    key: Any = object()
    value: Any = {
        "fake-enum": mock.Mock(spec=ssl.TLSVersion.TLSv1_2),
        "module-in-tuple": (types.ModuleType("m"),),
        "class-race": types.ModuleType("m"),
    }.get(change, _ContentHash(1))
    if change.startswith("enum-"):
        key, value = _Tag.A, 1

    def reading() -> Any:  # (what decide() gets, or raises: an AttributeError is a bug's)
        try:
            return settings.snapshot()
        except AttributeError as exc:
            return repr(exc)

    def fresh() -> Any:
        settings._memo = ()
        return reading()

    def flip_at_first_fixed(flip: Callable[[], None]) -> None:
        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_name in ("_fixed", "_frozen"):
                sys.setprofile(None)
                flip()

        sys.setprofile(profile)
        try:
            settings.snapshot()
        finally:
            sys.setprofile(None)

    table[key] = value
    try:
        assert reading() == fresh()
        reading()  # (the memo, made)
        if change == "class":
            value.__class__ = type("Other", (_ContentHash,), {})
        elif change == "registered-mapping":
            cls = type("Later", (_ContentHash,), {"items": lambda self: {"a": 1}.items()})
            value.__class__ = cls
            settings.snapshot()
            collections.abc.Mapping.register(cls)
        elif change in ("hash-by-contents", "unhashable"):
            value.value = 2 if change == "hash-by-contents" else [2]
        elif change == "race":
            version = ssl.PROTOCOL_TLSv1_2
            first, other = table[version], int(table[version])
            table[version] = other
            settings.snapshot()  # (a memo of the other state: the next reading makes a new one)
            table[version] = first
            flip_at_first_fixed(lambda: table.__setitem__(version, other))
            table[version] = first
        elif change == "fake-enum":
            value.__class__ = dict  # (a Mock claims any class: it never was an enum member)
        elif change == "module-in-tuple":
            value[0].__class__ = _Module
        elif change == "enum-hash":
            _Tag.__hash__ = lambda self: 42  # type: ignore[method-assign]
        elif change == "enum-unhashable":
            _Tag.__hash__ = None  # type: ignore[assignment]
        else:
            flip_at_first_fixed(lambda: setattr(value, "__class__", _Module))
            value.__class__ = types.ModuleType
        got = reading()
        assert got == fresh()
        assert _key_hash(got) == _key_hash(fresh())
        assert isinstance(got, Reason) == (change == "unhashable")
    finally:
        _Tag.__hash__ = enum.Enum.__hash__  # type: ignore[method-assign]
        del table[key]
        settings._memo = ()


# --- errors are stock errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "missing-bundle",
        "missing-default",
        "missing-cert",
        "missing-key",
        "untrusted",
        "wrong-host",
        "expired",
        "encrypted-key",
        "not-pem",
        "cert-is-key",
        "empty-verify",
        "path-object",
    ],
)
def test_errors_are_stock_errors(
    case: str,
    both_modes: Callable[[Callable[[], Any]], tuple[Any, Any]],
    make_server: ServerFactory,
    pki: PKI,
    default_bundle: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pathlib import Path

    server = make_server(
        ca=pki.rogue_ca if case == "untrusted" else pki.ca,
        names=("localhost",) if case == "wrong-host" else ("127.0.0.1",),
        expired=case == "expired",
        client_certs="optional",
    )
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    table: dict[str, dict[str, Any]] = {
        "missing-bundle": {"verify": str(tmp_path / "nope.pem")},
        "missing-default": {},
        "missing-cert": {"cert": (str(tmp_path / "nope.crt"), pki.client_a.key)},
        "missing-key": {"cert": (pki.client_a.cert, str(tmp_path / "nope.key"))},
        "untrusted": {},
        "wrong-host": {},
        "expired": {},
        "encrypted-key": {"cert": (pki.client_a.cert, pki.encrypted_key)},
        "not-pem": {"verify": str(not_pem)},
        "cert-is-key": {"cert": (pki.client_a.key, pki.client_a.key)},
        "empty-verify": {"verify": ""},
        "path-object": {"verify": Path(pki.bundle)},
    }
    kwargs = table[case]
    if case == "missing-default":
        set_default_bundle(monkeypatch, str(tmp_path / "x.pem"))
    stock, shim = both_modes(lambda: requests.get(server.url, **kwargs))
    assert shim == stock
    assert (stock[0] == "200") is (case in ("empty-verify", "path-object")), stock


# --- R10: truststore ---------------------------------------------------------------------------


@pytest.mark.urllib3_2
def test_r10_truststore_inject_and_extract_after_import(
    mode: str, make_server: ServerFactory, pki: PKI, default_bundle: str
) -> None:
    import truststore

    trusted, untrusted = make_server(), make_server(ca=pki.rogue_ca)
    assert requests.get(trusted.url).status_code == 200
    truststore.inject_into_ssl()
    try:
        # truststore verifies with the system store plus the loaded CA file, as stock does.
        assert requests.get(trusted.url, headers=CLOSE).status_code == 200
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(untrusted.url)
        if mode == "shim":
            # truststore's class is not the standard library's: never shared (on Linux it
            # also loads the system store at every handshake; see test_interop).
            classes = {type(ctx).__mro__[1] for ctx in shared_contexts()}
            assert truststore.SSLContext not in classes
            assert requests_fastssl.stats().step_aside_reasons.get("context-class", 0) > 0
    finally:
        truststore.extract_from_ssl()
    assert requests.get(trusted.url, headers=CLOSE).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(untrusted.url)
    assert_shared_contexts_untouched()


@pytest.mark.urllib3_2
def test_r10_no_class_but_the_standard_librarys_is_shared(
    monkeypatch: pytest.MonkeyPatch, make_server: ServerFactory, default_bundle: str
) -> None:
    """truststore (any version, any back end), pyOpenSSL's and any other context class are
    left to stock; the standard library's is known by its definition, not by its name."""
    import truststore
    import urllib3.util.ssl_

    from _requests_fastssl._genuine import GENUINE_CONTEXT

    class Lookalike(ssl.SSLContext):  # named like the standard library's, but not it
        __module__ = "ssl"
        __qualname__ = "SSLContext"

    server = make_server()
    requests_fastssl.install()
    for cls in (truststore.SSLContext, Lookalike):
        monkeypatch.setattr(urllib3.util.ssl_, "SSLContext", cls)
        before = requests_fastssl.stats()
        assert requests.get(server.url, headers=CLOSE).status_code == 200
        assert requests_fastssl.stats().since(before).step_aside_reasons == {"context-class": 1}
    monkeypatch.setattr(urllib3.util.ssl_, "SSLContext", GENUINE_CONTEXT)
    before = requests_fastssl.stats()
    assert requests.get(server.url, headers=CLOSE).status_code == 200
    assert requests_fastssl.stats().since(before).connections == 1


# --- R14: requests and certifi inside a zip file ------------------------------------------------

ZIPAPP_MAIN = """
import sys
import requests
import requests_fastssl
for url in sys.argv[1:]:
    try:
        print(requests.get(url, headers={"Connection": "close"}).status_code)
    except requests.exceptions.SSLError:
        print("SSLError")
print(requests.__file__.split(".pyz")[0][-3:], requests.utils.DEFAULT_CA_BUNDLE_PATH != "")
print(requests_fastssl.status().state.value, requests_fastssl.stats().ca_loads)
"""


def test_r14_zipapp_with_certifi_inside(
    make_server: ServerFactory, pki: PKI, tmp_path: Any
) -> None:
    import importlib.util
    import os
    import shutil
    import subprocess
    import zipapp

    from support import ROOT

    source = tmp_path / "app"
    source.mkdir()
    for name in ("requests", "urllib3", "certifi", "idna"):
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        shutil.copytree(
            os.path.dirname(spec.origin),
            source / name,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    for name in ("requests_fastssl", "_requests_fastssl"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    # certifi's bundle, as shipped inside the zip, trusts the test CA and nothing else.
    (source / "certifi" / "cacert.pem").write_bytes(pki.ca.cert_pem.bytes())
    (source / "__main__.py").write_text(ZIPAPP_MAIN)
    app = tmp_path / "app.pyz"
    zipapp.create_archive(source, app)
    shutil.rmtree(source)

    trusted, untrusted = make_server(), make_server(ca=pki.rogue_ca)
    env = clean_env()
    outputs = {}
    for mode, extra in (("stock", {"REQUESTS_FASTSSL_DISABLE": "1"}), ("shim", {})):
        outputs[mode] = subprocess.run(
            [sys.executable, str(app), trusted.url, trusted.url, untrusted.url],
            capture_output=True,
            text=True,
            env={**env, **extra},
            cwd=tmp_path,
            check=True,
        ).stdout.split("\n")
    assert outputs["stock"][:4] == outputs["shim"][:4] == ["200", "200", "SSLError", "app True"]
    assert outputs["stock"][4] == "disabled 0"
    # One load of the bundle certifi extracted; none on requests 2.32.3/2.32.4, whose own
    # import-time context serves verify=True and which the shim leaves alone, nor on urllib3
    # 1.26, left stock (CI's oldest leg pairs it with requests 2.30 now).
    assert outputs["shim"][4] == ("active 0" if PRELOADED or URLLIB3_1 else "active 1")
