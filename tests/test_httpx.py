"""httpx 0.28's transports share contexts (issue 43): stock httpx and the shim in one run, sync
and async, compared on what came back (status, exception type and message, the client
certificate the server saw, the HTTP version), and on the warnings httpx issues."""

from __future__ import annotations

import asyncio
import re
import ssl
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx  # (in the test group)
import pytest
from support import PKI, ServerFactory, run_python

import requests_fastssl
from _requests_fastssl import _contexts, _httpx_anyio
from _requests_fastssl.cli.server import HTTPSServer, server_context

pytestmark = pytest.mark.skipif(
    not httpx.__version__.startswith("0.28."), reason="httpx 0.28 is the release reviewed"
)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
Outcome = tuple[Any, ...]


@pytest.fixture(autouse=True)
def _no_trust_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx reads SSL_CERT_FILE and SSL_CERT_DIR (our machines export them): each test sets
    what it wants."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE"):
        monkeypatch.delenv(name, raising=False)


def _said(exc: BaseException) -> Outcome:
    return type(exc).__qualname__, _ADDRESS.sub(" at 0x?", str(exc))


def get(url: str, flavour: str, **client: Any) -> Outcome:
    """One GET on a new client (``flavour``: sync, or async under asyncio): what came back."""
    try:
        if flavour == "sync":
            with httpx.Client(**client) as c:
                response = c.get(url)
        else:

            async def run() -> Any:
                async with httpx.AsyncClient(**client) as c:
                    return await c.get(url)

            response = asyncio.run(run())
    except Exception as exc:
        return _said(exc)
    return response.status_code, response.json()["client_cn"], response.http_version


def both(call: Callable[[], Any]) -> tuple[Any, Any, requests_fastssl.Stats]:
    """``call()`` against stock httpx, then with the shim (its counters for that run)."""
    requests_fastssl.uninstall()
    stock = call()
    assert requests_fastssl.install().state is not requests_fastssl.State.DISABLED
    requests_fastssl.clear()
    before = requests_fastssl.stats()
    try:
        shim = call()
        counted = requests_fastssl.stats().since(before)
    finally:
        requests_fastssl.uninstall()
    return stock, shim, counted


FLAVOURS = pytest.mark.parametrize("flavour", ["sync", "async"])


def shared(flavour: str, clients: int) -> int:
    """How many of ``clients`` new clients share here: pytest loads anyio (it ships a pytest
    plugin) through its assertion-rewriting loader, which cannot give the shim anyio's code, so
    async transports are stock in this process (a child checks them: worker-thread test)."""
    return clients if flavour == "sync" or _httpx_anyio.tls_known() else 0


@pytest.fixture
def url(make_server: ServerFactory) -> str:
    return make_server(client_certs="optional").url


@FLAVOURS
@pytest.mark.parametrize(
    "case",
    ["success", "wrong-ca", "verify-false", "verify-path", "cert", "cert-password", "cert-one-file",
     "http2", "http2-only", "no-trust-env", "missing-ca", "malformed-ca", "malformed-cert",
     "verify-path-with-cert"],
)  # fmt: skip
def test_stock_and_shim_agree(
    case: str, flavour: str, url: str, pki: PKI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    kwargs: dict[str, Any] = {  # type: ignore[assignment]
        "success": {},
        "wrong-ca": {"verify": pki.rogue_bundle},
        "verify-false": {"verify": False},
        "verify-path": {"verify": pki.bundle},
        "cert": {"cert": pki.client_a.pair},
        "cert-password": {"cert": (pki.client_a.cert, pki.encrypted_key, "secret")},
        "cert-one-file": {"cert": pki.client_b.combined},
        "http2": {"http2": True},
        "http2-only": {"http1": False, "http2": True},
        "no-trust-env": {"trust_env": False},
        "missing-ca": {"verify": str(tmp_path / "missing.pem")},
        "malformed-ca": {"verify": str(bad)},
        "malformed-cert": {"cert": str(bad)},
        "verify-path-with-cert": {"verify": pki.bundle, "cert": pki.client_a.pair},
    }[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        stock, shim, counted = both(lambda: [get(url, flavour, **kwargs) for _ in range(3)])
    assert shim == stock
    if case not in ("missing-ca", "malformed-ca", "malformed-cert"):
        assert counted.httpx_transports == shared(flavour, 3), counted  # (every client)
        assert counted.ca_loads <= 1
    if case in ("cert", "cert-password", "cert-one-file"):
        assert stock[0][1] in ("client-a", "client-b")  # (the server saw it)
    if case == "verify-path-with-cert":
        assert stock[0][1] is None  # (0.28 returns before cert is handled)


def test_a_hostname_mismatch_fails_as_stock(make_server: ServerFactory, pki: PKI,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    server = make_server(names=("other.example",))
    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    stock, shim, _ = both(lambda: [get(server.url, f) for f in ("sync", "async")])
    assert shim == stock
    assert stock[0][0] == "ConnectError"


@pytest.mark.parametrize("variable", ["SSLKEYLOGFILE", "SSL_CERT_DIR"])
def test_key_log_and_a_ca_directory_are_left_to_stock(
    variable: str, url: str, pki: PKI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    value = str(tmp_path / "keys.log") if variable == "SSLKEYLOGFILE" else str(pki.directory)
    monkeypatch.setenv(variable, value)
    if variable == "SSLKEYLOGFILE":
        monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    stock, shim, counted = both(lambda: [get(url, f) for f in ("sync", "async")])
    assert shim == stock
    assert counted.httpx_transports == 0
    code = "key-log" if variable == "SSLKEYLOGFILE" else "ca-directory"
    assert counted.httpx_step_aside_reasons == {code: 2}


def test_a_context_the_caller_passes_stays_the_callers(url: str, pki: PKI) -> None:
    requests_fastssl.install()
    before = requests_fastssl.stats()
    ctx = ssl.create_default_context(cafile=pki.bundle)
    with httpx.Client(verify=ctx) as client:
        assert client.get(url).status_code == 200
        pool: Any = client._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context is ctx
    ctx.load_cert_chain(*pki.client_a.pair)  # (still mutable)
    ctx.check_hostname = False
    assert type(httpx.create_ssl_context()) is ssl.SSLContext  # (a program's own call)
    counted = requests_fastssl.stats().since(before)
    assert counted.httpx_step_aside_reasons == {"own-context": 1}


def test_the_shared_context_is_frozen_but_takes_httpcores_alpn(
    pki: PKI, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    requests_fastssl.install()
    with httpx.Client(http2=True) as client:
        ctx = client._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert type(ctx) is _contexts.FrozenContext
        client.get(url)
        ctx.set_alpn_protocols(["http/1.1", "h2"])  # (what httpcore writes: accepted)
        with pytest.raises(requests_fastssl.FrozenContextError):
            ctx.set_alpn_protocols(["http/1.1"])
        with pytest.raises(requests_fastssl.FrozenContextError):
            ctx.load_verify_locations(pki.rogue_bundle)


def test_transport_mounts_proxies_and_subclasses_share(
    url: str, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopback_proxy import LoopbackProxy

    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)

    class Transport(httpx.HTTPTransport):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(retries=1, **kwargs)

    class Client(httpx.Client):
        pass

    with LoopbackProxy() as proxy:

        def calls() -> list[Outcome]:
            got = []
            makers: tuple[Callable[[], httpx.Client], ...] = (
                lambda: httpx.Client(transport=httpx.HTTPTransport(trust_env=True)),
                lambda: httpx.Client(mounts={"all://": httpx.HTTPTransport(http2=True)}),
                lambda: httpx.Client(transport=Transport()),
                lambda: Client(),
                lambda: httpx.Client(proxy=proxy.url),
            )
            for make in makers:
                try:
                    with make() as client:
                        response = client.get(url)
                    got.append((response.status_code, response.json()["client_cn"]))
                except Exception as exc:
                    got.append(_said(exc))
            monkeypatch.setenv("HTTPS_PROXY", proxy.url)
            got.append(get(url, "sync"))
            monkeypatch.delenv("HTTPS_PROXY")
            return got

        stock, shim, counted = both(calls)
    assert shim == stock
    assert all(o[0] == 200 for o in stock), stock
    assert counted.httpx_step_asides == 0, counted
    assert counted.httpx_transports >= 7  # (a proxy from the environment: a transport of its own)


def test_truststore_injected_is_left_to_stock(
    url: str, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    truststore = pytest.importorskip("truststore")
    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    truststore.inject_into_ssl()
    try:
        stock, shim, counted = both(lambda: [get(url, f) for f in ("sync", "async")])
    finally:
        truststore.extract_from_ssl()
    assert shim == stock
    assert counted.httpx_step_aside_reasons == {"context-class": 2}


def test_a_bundle_rotated_between_clients(make_server: ServerFactory, pki: PKI,
                                          tmp_path: Path) -> None:  # fmt: skip
    server = make_server()
    bundle = tmp_path / "bundle.pem"

    def calls() -> list[Outcome]:
        got = []
        for source in (pki.bundle, pki.rogue_bundle, pki.bundle):
            bundle.write_bytes(Path(source).read_bytes())
            got += [get(server.url, f, verify=str(bundle)) for f in ("sync", "async")]
        return got

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        stock, shim, _ = both(calls)
    assert shim == stock
    assert [o[0] for o in stock] == [200, 200, "ConnectError", "ConnectError", 200, 200]


def _recorded(pki: PKI, action: str) -> list[tuple[Any, ...]]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter(action)  # type: ignore[arg-type]
        for _ in range(2):
            for kwargs in ({"verify": pki.bundle}, {"cert": pki.client_a.pair},
                           {"verify": pki.bundle, "cert": pki.client_a.pair}):  # fmt: skip
                httpx.Client(**kwargs).close()
                httpx.AsyncClient(**kwargs)
    return [(w.filename, w.lineno, w.category, str(w.message), w.line, w.source) for w in seen]


@pytest.mark.parametrize("action", ["always", "default", "once"])
def test_warnings_are_stocks(pki: PKI, monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    stock, shim, counted = both(lambda: _recorded(pki, action))
    assert shim == stock
    assert stock
    assert all(w[0].endswith(str(Path("httpx", "_config.py"))) for w in stock)
    assert counted.httpx_transports == 6 + shared("async", 6)


@pytest.mark.subprocess
def test_warnings_as_errors_as_stock(pki: PKI) -> None:
    code = f"""
        import sys, httpx
        if sys.argv[-1:] != ["stock"]:
            import requests_fastssl
        for kwargs in ({{"verify": {pki.bundle!r}}}, {{"cert": {pki.client_a.pair!r}}}):
            try:
                httpx.Client(**kwargs)
            except DeprecationWarning as exc:
                print(type(exc).__name__, exc)
        import requests_fastssl
        print(requests_fastssl.stats().httpx_transports)
    """
    flags = "-W error::DeprecationWarning:httpx._config"
    env = {"PYTHONWARNINGS": flags[3:], "SSL_CERT_FILE": pki.bundle}
    stock = run_python(code.replace('sys.argv[-1:] != ["stock"]', "False"), env=env)
    shim = run_python(code.replace('sys.argv[-1:] != ["stock"]', "True"), env=env)
    assert shim.splitlines()[:2] == stock.splitlines()[:2]
    assert stock.count("DeprecationWarning") == 2
    assert shim.splitlines()[2] == "0"  # (raised where stock raises: no client made)


def test_a_shared_clients_requests_reach_no_shim_code(
    url: str, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", pki.bundle)
    requests_fastssl.install()
    with httpx.Client() as client:
        client.get(url)
        ours: list[str] = []

        def profile(frame: Any, event: str, arg: Any) -> None:
            if frame.f_globals.get("__name__", "").startswith("_requests_fastssl"):
                ours.append(frame.f_code.co_qualname)

        sys.setprofile(profile)
        try:
            for _ in range(5):
                client.get(url)
        finally:
            sys.setprofile(None)
    assert ours == []


@pytest.mark.subprocess
@pytest.mark.parametrize("order", ["shim-first", "httpx-first"])
def test_activation_follows_httpx(order: str) -> None:
    code = """
        import sys
        FIRST
        print(*(n in sys.modules for n in ("wrapt", "ssl", "_requests_fastssl._httpx")))
        import httpx
        import httpx._transports.default as d
        print(type(d.create_ssl_context).__name__, type(httpx.create_ssl_context).__name__)
        import requests_fastssl
        requests_fastssl.uninstall()
        print(type(d.create_ssl_context).__name__)
    """
    first = "import requests_fastssl" if order == "shim-first" else "import httpx, requests_fastssl"
    out = run_python(code.replace("FIRST", first)).split()
    if order == "shim-first":
        assert out[:3] == ["False", "False", "False"]  # (nothing imported before httpx is)
    assert out[3:] == ["FunctionWrapper", "function", "function"]


@pytest.fixture
def h2_server(pki: PKI) -> Iterator[HTTPSServer]:
    ctx = server_context(pki.ca)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with HTTPSServer(ctx) as server:
        yield server


_HOPS = """
    import asyncio, sys
    import anyio.to_thread, httpx, requests_fastssl

    run_sync = vars(anyio.to_thread)["run_sync"]
    code = getattr(run_sync, "__wrapped__", run_sync).__code__

    def hops(url, clients):
        started = []

        def profile(frame, event, arg):  # (watches; changes nothing the program does)
            if event == "call" and frame.f_code is code and frame not in started:
                started.append(frame)  # (a coroutine's frame is called again at each resume)

        async def one():
            async with httpx.AsyncClient() as client:
                return (await client.get(url)).status_code

        async def run():
            return list(await asyncio.gather(*(one() for _ in range(clients))))

        sys.setprofile(profile)
        try:
            statuses = asyncio.run(run())
        finally:
            sys.setprofile(None)
        return statuses, len(started)

    requests_fastssl.uninstall()
    print(*hops(sys.argv[-1], 8))
    requests_fastssl.install()
    print(*hops(sys.argv[-1], 8))
    print(requests_fastssl.stats().httpx_transports)
"""


@pytest.mark.subprocess
def test_async_connections_take_no_worker_thread(url: str, pki: PKI) -> None:
    """anyio runs ``wrap_bio`` through ``to_thread.run_sync`` (a worker thread) for a context
    whose type is not exactly ``ssl.SSLContext``; stock's is, so stock never hops. Nor may the
    shim's frozen context: an AsyncClient per task, counted by a profiler in the loop's thread.
    (In a child: pytest loads anyio through its assertion-rewriting loader, from which the
    shim cannot read anyio's code; async transports are stock in this process.)"""
    code = _HOPS.replace("sys.argv[-1]", repr(url))
    stock, shim, shared = run_python(code, env={"SSL_CERT_FILE": pki.bundle}).splitlines()
    assert stock == "[200, 200, 200, 200, 200, 200, 200, 200] 0"
    assert shim == stock
    assert shared == "8"


@pytest.mark.subprocess
def test_the_anyio_layer_follows_its_import_and_uninstall() -> None:
    code = """
        import sys, requests_fastssl, httpx
        httpx.AsyncHTTPTransport()
        print("anyio.to_thread" in sys.modules)  # (anyio 4.16 imports it lazily)
        import anyio.to_thread as t
        from _requests_fastssl import _httpx_anyio
        print(type(t.run_sync).__name__, _httpx_anyio.reason())
        requests_fastssl.uninstall()
        print(type(t.run_sync).__name__)
    """
    out = run_python(code).split()
    assert out[1:] == ["FunctionWrapper", "None", "function"], out


@pytest.mark.subprocess
def test_a_forked_childs_new_client_works_as_stock(url: str, pki: PKI) -> None:
    """A client made before ``os.fork()``: the child's new client (sync and async) gets what
    stock's gets, from a context the child builds (a parent's is dropped at the fork)."""
    code = """
        import asyncio, os, sys, httpx, requests_fastssl

        def one():
            with httpx.Client() as c:
                return c.get(URL).status_code

        async def one_async():
            async with httpx.AsyncClient() as c:
                return (await c.get(URL)).status_code

        for shim in (False, True):
            requests_fastssl.install() if shim else requests_fastssl.uninstall()
            first = one()
            pid = os.fork()
            if pid == 0:
                before = requests_fastssl.stats()
                got = (one(), asyncio.run(one_async()))
                counted = requests_fastssl.stats().since(before)
                print(shim, first, *got, counted.httpx_transports, counted.contexts_built)
                sys.stdout.flush()
                os._exit(0)
            os.waitpid(pid, 0)
    """
    out = run_python(code.replace("URL", repr(url)), env={"SSL_CERT_FILE": pki.bundle})
    assert out.splitlines() == ["False 200 200 200 0 0", "True 200 200 200 2 1"], out


def test_an_empty_verify_string_is_the_system_store_as_stock(
    pki: PKI, caplog: pytest.LogCaptureFixture
) -> None:
    """``verify=""``: 0.28 warns, then ``create_default_context(cafile="")`` loads the system
    store: left to stock (default-store), with no internal error logged (attack round)."""

    def make() -> list[Any]:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            httpx.Client(verify="").close()
        return [(w.category, str(w.message), w.lineno) for w in seen]

    stock, shim, counted = both(make)
    assert shim == stock
    assert len(stock) == 1
    assert counted.httpx_step_aside_reasons == {"default-store": 1}
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_warning_hook_that_raises_is_called_once_and_its_error_is_the_programs(
    pki: PKI, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``showwarning`` that raises (a ValueError): stock calls it once and the program gets
    its error, with no context of the shim's (attack round: the shim had read it as its own
    bug, logged it, and let stock warn a second time)."""

    def make() -> list[Any]:
        calls: list[str] = []

        def hook(message: Any, *args: Any, **kwargs: Any) -> None:
            calls.append(str(message))
            raise ValueError("hook says no")

        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = hook
            try:
                httpx.Client(verify=pki.bundle, cert=pki.client_a.pair)
            except ValueError as exc:
                return [calls, str(exc), exc.__context__]
        return [calls, None, None]

    stock, shim, _ = both(make)
    assert shim == stock
    assert stock[1] == "hook says no"
    assert len(stock[0]) == 1
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_deprecation_warning_raised_as_an_error_carries_no_context_of_ours(
    tmp_path: Path,
) -> None:
    """A CA file whose load fails, under ``-W error``: stock raises the ``verify=<str>``
    warning before its load; the shim's build failed first, and raised the warning inside its
    handler, so the program saw our exception as its context (attack round)."""
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")

    def make() -> list[Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            try:
                httpx.Client(verify=str(bad))
            except DeprecationWarning as exc:
                return [str(exc), exc.__context__, exc.__cause__]
        return []

    stock, shim, _ = both(make)
    assert shim == stock
    assert stock[1:] == [None, None]


@pytest.mark.subprocess
def test_a_reloaded_transports_module_is_wrapped_again_by_install(pki: PKI) -> None:
    code = f"""
        import importlib, httpx, httpx._transports.default as d
        import requests_fastssl
        importlib.reload(d)  # (a new function there: our layer is gone)
        d.HTTPTransport(verify={pki.bundle!r}).close()
        before = requests_fastssl.stats().httpx_transports
        requests_fastssl.uninstall(); requests_fastssl.install()
        for _ in range(2):  # (the reloaded module's class: httpx.Client holds the old one,
            d.HTTPTransport(verify={pki.bundle!r}).close()  # whose calls stay stock)
        httpx.Client(verify={pki.bundle!r}).close()
        print(before, requests_fastssl.stats().httpx_transports)
    """
    assert run_python(code).split() == ["0", "2"]
