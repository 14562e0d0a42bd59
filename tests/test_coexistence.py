"""Exact beside other patchers and under races (issue 26), each case against stock in one run.

- Another layer on urllib3's set-up, below the shim's (a company's start-up hook, an APM):
  it gets the caller's inputs, never the shim's rewritten ones (``layer-below``).
- Settings switched while a context is built or used (urllib3's ALPN list, as
  ``urllib3.http2.inject_into_urllib3()`` switches it): never a context stored under the
  key of other settings, never an error stock would not raise.
- An error of stock's own load during a build reaches the connection whose build ran it.
- The shim's layer removed by someone else, or urllib3 reloaded: ``status()`` says so and
  ``install()`` wraps again; ``uninstall()`` removes only the shim's layer, in every order
  with OpenTelemetry and ddtrace.

An outcome here is the status or the exception's type and message, with the client
certificate and the TLS version the server saw.
"""

from __future__ import annotations

import functools
import mmap
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3.connection
import urllib3.util
import urllib3.util.ssl_
import wrapt
from support import (
    PKI,
    ServerFactory,
    other_contents_during_first_load,
    run_python,
    stock_and_shim,
)

import requests_fastssl

pytestmark = pytest.mark.urllib3_2  # (urllib3 1.26 has no set-up function to layer on)

Outcome = tuple[str, ...]
SET_UP = "_ssl_wrap_socket_and_match_hostname"


def seen(call: Callable[[], requests.Response]) -> Outcome:
    """Status, client certificate and TLS version the server saw; or the error."""
    try:
        response = call()
    except Exception as exc:
        return type(exc).__qualname__, str(exc)
    body = response.json()
    return str(response.status_code), str(body["client_cn"]), str(body["tls"])


def new_connection(url: str, **kwargs: Any) -> Callable[[], requests.Response]:
    """A request on a connection of its own (a Session per call, closed after)."""

    def call() -> requests.Response:
        with requests.Session() as session:
            return session.get(url, **kwargs)

    return call


# --- a layer below the shim's --------------------------------------------------------------


def _swap_ca(pki: PKI, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, "ca_certs": pki.bundle}  # the "corporate" bundle


def _add_ca(pki: PKI, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, "ca_cert_data": Path(pki.bundle).read_text()}


def _verify_off(pki: PKI, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**kwargs, "cert_reqs": "CERT_NONE"}


CHANGES = {"swap-ca": _swap_ca, "add-ca": _add_ca, "verify-off": _verify_off}


@contextmanager
def layer(kind: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[None]:
    """A start-up hook's layer on urllib3's set-up that changes its inputs: a wrapt layer, or
    a plain replacement (functools.wraps), put there before the shim wraps the function."""
    original = getattr(urllib3.connection, SET_UP)
    if kind == "wrapt":

        def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            return wrapped(*args, **change(kwargs))

        handle = wrapt.wrap_function_wrapper(urllib3.connection, SET_UP, wrapper)
    else:

        @functools.wraps(original)
        def replacement(*args: Any, **kwargs: Any) -> Any:
            return original(*args, **change(kwargs))

        setattr(urllib3.connection, SET_UP, replacement)
    try:
        yield
    finally:
        if kind == "wrapt":
            wrapt.unwrap_object(urllib3.connection, SET_UP, handle)
        else:
            setattr(urllib3.connection, SET_UP, original)
        assert getattr(urllib3.connection, SET_UP) is original


@pytest.mark.parametrize("kind", ["wrapt", "plain"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_layer_below_gets_the_callers_inputs(
    kind: str, change: str, make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server(client_certs="optional")
    # verify names a CA nobody trusts: only the layer's change lets the request through.
    call = new_connection(server.url, verify=pki.rogue_bundle, cert=pki.client_a.pair)
    with layer(kind, functools.partial(CHANGES[change], pki)):
        stock, shim = stock_and_shim(lambda: [seen(call) for _ in range(3)])
        requests_fastssl.install()
        before = requests_fastssl.stats()
        seen(call)
        stats = requests_fastssl.stats().since(before)
        requests_fastssl.uninstall()
    assert shim == stock
    assert stock[0][:2] == ("200", "client-a")
    assert stats.step_aside_reasons == {"layer-below": 1}
    assert stats.contexts_built == 0


def test_a_layer_above_is_served_with_what_it_passes_down(
    make_server: ServerFactory, pki: PKI
) -> None:
    """A layer installed after the shim (above it) that swaps the CA file: the shim decides on
    what reaches it, which is what urllib3's own code would get, and shares it."""
    server = make_server()
    call = new_connection(server.url, verify=pki.rogue_bundle)

    def calls() -> list[Outcome]:
        with layer("wrapt", functools.partial(_swap_ca, pki)):
            return [seen(call) for _ in range(3)]

    requests_fastssl.uninstall()
    stock = calls()
    requests_fastssl.install()
    before = requests_fastssl.stats()
    shim = calls()
    stats = requests_fastssl.stats().since(before)
    assert shim == stock
    assert stock[0][0] == "200"
    assert (stats.connections, stats.contexts_built, stats.step_asides) == (3, 1, 0)


# --- settings switched while a context is built or used ------------------------------------


def _set_alpn(protocols: list[str]) -> None:
    # What urllib3.http2.inject_into_urllib3() and extract_from_urllib3() assign.
    urllib3.util.ALPN_PROTOCOLS = protocols
    urllib3.util.ssl_.ALPN_PROTOCOLS = protocols


@contextmanager
def alpn_switched(at: str, until: str | None) -> Iterator[None]:
    """In this thread, ALPN becomes h2 at the first client-side call named ``at`` (a C method
    of the context, or a Python function of urllib3's) and, with ``until``, http/1.1 again when
    the first ``until`` after it returns: another thread's inject/extract, at the worst moment."""
    events: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        name = getattr(arg, "__name__", "") if event.startswith("c_") else frame.f_code.co_name
        if event in ("c_call", "call") and name == at and not events:
            _set_alpn(["h2", "http/1.1"])
            events.append("h2")
        elif event == "c_return" and name == until and events == ["h2"]:
            _set_alpn(["http/1.1"])
            events.append("back")

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        _set_alpn(["http/1.1"])
    assert events == (["h2", "back"] if until else ["h2"]), events


@pytest.mark.parametrize(
    ("at", "until"),
    [
        ("load_verify_locations", "_set_alpn_protocols"),  # inject, extract during the build
        ("load_verify_locations", None),  # inject during the build
        ("ssl_wrap_socket", None),  # inject between the decision and urllib3's own write
    ],
    ids=["during-build-and-back", "during-build", "after-decision"],
)
def test_alpn_switched_by_another_thread(
    at: str, until: str | None, make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    call = new_connection(server.url, verify=pki.bundle)

    def calls() -> list[Outcome]:
        with alpn_switched(at, until):
            first = seen(call)
        return [first, *(seen(call) for _ in range(3))]

    requests_fastssl.clear()
    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert [o[0] for o in stock] == ["200"] * 4


# --- an error of stock's own load -----------------------------------------------------------


@contextmanager
def fails_once(path: Path, method: str) -> Iterator[None]:
    """The first client-side ``method`` call in this thread reads garbage from ``path`` (the
    same size, written through a shared mapping whose pages are dirty already, so that no
    timestamp moves) and the file holds its bytes again when the call ends: a real load
    error, once, at that call, of a file whose identity never changed (one whose ctime moved
    during the load is the shim's own finding, not stock's error: test_equivalence's
    test_a_bundle_written_while_the_build_loads_it_is_not_kept)."""
    original = path.read_bytes()
    with open(path, "r+b") as file, mmap.mmap(file.fileno(), 0) as mapping:
        mapping[:] = original  # (the write fault, which moves the timestamps, happens here)
        garbage = b"x" * len(original)
        with other_contents_during_first_load(mapping, garbage, original, method):
            yield


@pytest.mark.parametrize("method", ["load_verify_locations", "load_cert_chain"])
def test_an_error_of_the_load_reaches_the_connection_that_ran_it(
    method: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = make_server(client_certs="optional")
    bundle, cert = tmp_path / "ca.pem", tmp_path / "client.crt"
    bundle.write_bytes(Path(pki.bundle).read_bytes())
    cert.write_bytes(Path(pki.client_a.cert).read_bytes())
    call = new_connection(server.url, verify=str(bundle), cert=(str(cert), pki.client_a.key))

    def calls() -> list[Outcome]:
        with fails_once(cert if method == "load_cert_chain" else bundle, method):
            first = seen(call)
        return [first, seen(call), seen(call)]

    requests_fastssl.clear()
    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[0][0] == "SSLError"
    assert [o[:2] for o in stock[1:]] == [("200", "client-a")] * 2


# --- the shim's own layer: removed by others, reloaded, uninstalled in every order -----------


def test_a_foreign_unwrap_is_noticed_and_install_wraps_again(pki: PKI) -> None:
    out = run_python(
        """
        import requests_fastssl, requests, urllib3.connection
        from opentelemetry.instrumentation.utils import unwrap
        original = urllib3.connection._ssl_wrap_socket_and_match_hostname.__wrapped__
        # An instrumentation library's unwrap() of the same function takes the outermost
        # layer off, whoever put it there: the shim's.
        unwrap(urllib3.connection, "_ssl_wrap_socket_and_match_hostname")
        print(urllib3.connection._ssl_wrap_socket_and_match_hostname is original)
        print(requests_fastssl.status())
        print(requests_fastssl.install())
        print(urllib3.connection._ssl_wrap_socket_and_match_hostname is original)
        print(requests_fastssl.uninstall())
        print(urllib3.connection._ssl_wrap_socket_and_match_hostname is original)
        """
    )
    lines = out.splitlines()
    assert lines[0] == "True"
    assert lines[1].startswith("not-installed: another library removed the shim's layer from ")
    assert lines[2:] == ["active", "False", "not-installed", "True"]


def test_a_reload_of_urllib3_is_noticed_and_install_wraps_again(
    make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    out = run_python(
        f"""
        import importlib, requests_fastssl, requests, urllib3.connection
        importlib.reload(urllib3.connection)
        print(requests_fastssl.status())
        print(requests_fastssl.install())
        before = requests_fastssl.stats()
        for _ in range(3):
            with requests.Session() as s:
                s.get({server.url!r}, verify={pki.bundle!r})
        delta = requests_fastssl.stats().since(before)
        print(delta.connections, delta.contexts_built)
        """
    )
    lines = out.splitlines()
    assert lines[0].startswith("not-installed: urllib3.connection.")
    assert "no longer the function the shim wrapped" in lines[0]
    assert lines[1:] == ["active", "3 1"]


_ORDERS = """
    import itertools, os, requests, urllib3.connection, urllib3.connectionpool, wrapt
    import requests_fastssl
    from ddtrace.contrib.internal.requests import patch as dd_requests
    from ddtrace.contrib.internal.urllib3 import patch as dd_urllib3
    from opentelemetry.instrumentation.requests import RequestsInstrumentor

    requests_fastssl.uninstall()
    SET_UP = "_ssl_wrap_socket_and_match_hostname"
    Pool = urllib3.connectionpool.HTTPConnectionPool
    originals = (
        getattr(urllib3.connection, SET_UP), requests.Session.send,
        urllib3.connectionpool.HTTPConnectionPool.urlopen,
    )

    def apm(wrapped, instance, args, kwargs):  # an APM's own layer on the same function
        return wrapped(*args, **kwargs)

    apm_handle = []
    on = {
        "shim": requests_fastssl.install,
        "otel": lambda: RequestsInstrumentor().instrument(),
        "ddtrace": lambda: (dd_requests.patch(), dd_urllib3.patch()),
        "apm": lambda: apm_handle.append(
            wrapt.wrap_function_wrapper(urllib3.connection, SET_UP, apm)),
    }
    off = {
        "shim": requests_fastssl.uninstall,
        "otel": lambda: RequestsInstrumentor().uninstrument(),
        "ddtrace": lambda: (dd_requests.unpatch(), dd_urllib3.unpatch()),
        "apm": lambda: wrapt.unwrap_object(urllib3.connection, SET_UP, apm_handle.pop()),
    }

    def layers():
        found, current = [], getattr(urllib3.connection, SET_UP)
        while current is not None:
            found.append(current)
            current = getattr(current, "__wrapped__", None)
        return found

    failures = 0
    combos = [
        (ons, offs)
        for names in (("shim", "otel", "ddtrace"), ("shim", "apm", "ddtrace"))
        for ons in itertools.permutations(names)
        for offs in itertools.permutations(names)
    ]
    for ons, offs in combos:
        if True:
            for name in ons:
                on[name]()
            assert str(requests_fastssl.status()) == "active", (ons, offs)
            for i, name in enumerate(offs):
                others = (vars(requests.Session)["send"], vars(Pool)["urlopen"])
                off[name]()
                if name == "shim" and any(a is not b for a, b in zip(others, (
                        vars(requests.Session)["send"], vars(Pool)["urlopen"]))):
                    failures += 1
                    print("the shim's uninstall changed another library's layer", ons, offs)
                left = set(offs[i + 1:])
                # the shim's layer is gone exactly when the shim was uninstalled
                wrappers = [getattr(l, "_self_wrapper", None) for l in layers()]
                ours = any(getattr(w, "__module__", "") == "_requests_fastssl._hook"
                           for w in wrappers)
                if ours != ("shim" in left):
                    failures += 1
                    print("shim layer", ours, "after", ons, offs[:i + 1])
                if ("apm" in left) != any(w is apm for w in wrappers):
                    failures += 1
                    print("apm layer wrong after", ons, offs[:i + 1])
            if getattr(urllib3.connection, SET_UP) is not originals[0]:
                failures += 1
                print("not restored after", ons, offs)
    print(len(combos), "orders, failures", failures)
"""


@pytest.mark.subprocess
def test_uninstall_removes_only_its_layer_in_every_order_with_otel_and_ddtrace() -> None:
    env = {
        "DD_TRACE_ENABLED": "false",
        "DD_INSTRUMENTATION_TELEMETRY_ENABLED": "false",
        "DD_REMOTE_CONFIGURATION_ENABLED": "false",
    }
    out = run_python(_ORDERS, env=env)
    assert out.strip().splitlines()[-1] == "72 orders, failures 0", out


@pytest.mark.subprocess
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_context_method_replaced_before_or_after_the_first_import(
    when: str, make_server: ServerFactory, pki: PKI
) -> None:
    """A tracer's replacement of SSLContext.load_verify_locations runs on every connection in
    stock; judged by where its code comes from, it is not ssl.py's, whenever it was put there."""
    server = make_server()
    patch = (
        "import ssl\n"
        "calls = []\n"
        "_load = ssl.SSLContext.load_verify_locations\n"
        "def traced(self, *args, **kwargs):\n"
        "    calls.append(args)\n"
        "    return _load(self, *args, **kwargs)\n"
        "ssl.SSLContext.load_verify_locations = traced\n"
    )
    shim = "import requests_fastssl, requests\n"
    requests_ = (
        "for _ in range(3):\n"
        "    with requests.Session() as s:\n"
        f"        print(s.get({server.url!r}, verify={pki.bundle!r}).status_code)\n"
        "print(len(calls), dict(requests_fastssl.stats().step_aside_reasons))\n"
    )
    code = (patch + shim if when == "before" else shim + patch) + requests_
    lines = run_python(code).splitlines()
    assert lines == ["200", "200", "200", "3 {'context-patched': 3}"]


# --- found by attacking the change (helper-1) ------------------------------------------------


@pytest.mark.parametrize("target", ["set-up", "factory"])
def test_bytecode_rewritten_in_place_is_not_urllib3s_own(
    target: str, make_server: ServerFactory, pki: PKI
) -> None:
    """ddtrace's code-level wrapping keeps the function object, its file name and module and
    replaces its __code__: a layer by file name would pass for urllib3's. Below the shim it
    adds a corporate CA by passing a context; on the factory it caps TLS at 1.2 on demand."""
    from ddtrace.internal.wrapping import unwrap, wrap

    server = make_server(ca=pki.rogue_ca)  # the corporate proxy's certificate
    cap = [False]

    def corporate(f: Any, args: Any, kwargs: Any) -> Any:
        if kwargs.get("ssl_context") is None:
            ctx = __import__("ssl").create_default_context(cafile=pki.rogue_bundle)
            kwargs = {**kwargs, "ssl_context": ctx}
        return f(*args, **kwargs)

    def capped(f: Any, args: Any, kwargs: Any) -> Any:
        ctx = f(*args, **kwargs)
        if cap[0]:  # (an operator's switch, read at each call)
            ctx.maximum_version = __import__("ssl").TLSVersion.TLSv1_2
        return ctx

    owner = urllib3.connection if target == "set-up" else urllib3.util.ssl_
    name = SET_UP if target == "set-up" else "create_urllib3_context"
    function = getattr(owner, name)
    wrap(function, corporate if target == "set-up" else capped)
    try:
        verify = pki.bundle if target == "set-up" else pki.rogue_bundle

        def calls() -> list[Outcome]:
            first = seen(new_connection(server.url, verify=verify))
            cap[0] = True
            try:
                return [first, seen(new_connection(server.url, verify=verify))]
            finally:
                cap[0] = False

        stock, shim = stock_and_shim(calls)
    finally:
        unwrap(function, corporate if target == "set-up" else capped)
    assert shim == stock
    assert [o[0] for o in stock] == ["200", "200"]
    if target == "factory":
        assert [o[2] for o in stock] == ["TLSv1.3", "TLSv1.2"]


class Deadline(Exception):
    """What a signal handler raises: any class, not only KeyboardInterrupt."""


class _Handler:
    """A handler that is an instance (its frame is __call__'s, not a function's)."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def __call__(self, signum: int, frame: Any) -> None:
        raise self.error("deadline")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cache", "error", "kind", "verify"),
    [
        ("warm", Deadline, "function", "bundle"),
        ("warm", TimeoutError, "function", "bundle"),
        ("cold", Deadline, "function", "bundle"),
        ("cold", TimeoutError, "function", "bundle"),
        ("warm", Deadline, "instance", "bundle"),
        ("cold", ValueError, "one-shot", "bundle"),
        ("warm", TypeError, "function", "off"),
        ("cold", Deadline, "one-shot", "off"),
    ],
)
def test_a_signal_handlers_exception_at_any_line_of_the_shim_escapes(
    cache: str,
    error: type[Exception],
    kind: str,
    verify: str,
    make_server: ServerFactory,
    pki: PKI,
) -> None:
    """A real signal, raised at each line the shim runs in turn; its Python handler raises. From
    stock's code the exception always escapes requests.get: from the shim's it must too, never
    taken for "stock for this connection" (a TimeoutError is an OSError, which a file check
    would otherwise read as an unreadable file)."""
    import signal

    import _requests_fastssl

    server = make_server()
    package = _requests_fastssl.__path__[0]

    def handler(signum: int, frame: Any) -> None:
        if kind == "one-shot":  # (no longer the current handler when the exception is seen)
            signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        raise error("deadline")

    def install_handler() -> None:
        signal.signal(signal.SIGUSR1, _Handler(error) if kind == "instance" else handler)

    trust: Any = pki.bundle if verify == "bundle" else False

    def run(n: int) -> tuple[str, int]:
        lines = [0]

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                lines[0] += 1
                if lines[0] == n:
                    signal.raise_signal(signal.SIGUSR1)
            return local

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            return local if frame.f_code.co_filename.startswith(package) else None

        sys.settrace(tracer)
        try:
            status = str(requests.get(server.url, verify=trust, timeout=5).status_code)
        except Exception as exc:
            status = type(exc).__name__
        finally:
            sys.settrace(None)
        return status, lines[0]

    previous = signal.getsignal(signal.SIGUSR1)
    requests_fastssl.install()
    try:

        def prepare() -> None:
            if cache == "cold":
                requests_fastssl.clear()
            else:
                requests.get(server.url, verify=trust)
            install_handler()

        for _ in range(2):  # (the second: without the process's one-time work)
            prepare()
            status, total = run(0)  # (no signal: every line the shim runs for this request)
        assert status == "200"
        escaped = []
        for n in range(1, total + 1):
            prepare()
            status, reached = run(n)
            escaped += [status] if reached >= n else []
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert len(escaped) > 50  # (the shim ran: the points were there)
    # Never swallowed: the handler's exception, or what urllib3 makes of a TimeoutError raised
    # in its own frames (a ReadTimeout), as it would of one raised in stock's; at the build's
    # CA load, the SSLError urllib3's `except OSError` around its own load makes of it.
    assert "200" not in escaped
    load = cache == "cold" and verify == "bundle" and issubclass(error, OSError)
    assert escaped.count("SSLError") == (1 if load else 0)
    assert set(escaped) <= {error.__name__, "ReadTimeout", "ConnectTimeout", "SSLError"}


def test_an_error_of_the_load_chains_as_stocks(make_server: ServerFactory, pki: PKI) -> None:
    """urllib3 raises its SSLError from the load's, in the handler: cause and context both."""
    server = make_server()

    def chain() -> list[str]:
        try:
            new_connection(server.url, verify=pki.client_a.key)()  # (a key: no certificate)
        except requests.exceptions.SSLError as exc:
            error = exc.args[0].reason
            return [type(x).__name__ for x in (error, error.__cause__, error.__context__)]
        return []

    requests_fastssl.clear()
    stock, shim = stock_and_shim(chain)
    assert shim == stock == ["SSLError", "SSLError", "SSLError"]


def test_a_writable_memoryview_is_left_to_stock_without_a_word(
    make_server: ServerFactory, pki: PKI, caplog: pytest.LogCaptureFixture
) -> None:
    """hash() of a writable memoryview raises ValueError, not TypeError: still unhashable."""
    import ssl

    server = make_server()
    der = ssl.PEM_cert_to_DER_cert(Path(pki.bundle).read_text())

    def get() -> int:
        pool = urllib3.HTTPSConnectionPool(
            "127.0.0.1", server.port, ca_cert_data=memoryview(bytearray(der))
        )
        with pool:
            return pool.request("GET", "/").status

    stock, shim = stock_and_shim(lambda: [get(), get()])
    assert shim == stock == [200, 200]
    assert not [r for r in caplog.records if r.name == "requests_fastssl" and r.levelno >= 40]


@pytest.mark.subprocess
def test_a_sourceless_standard_library(
    tmp_path: Path, make_server: ServerFactory, pki: PKI
) -> None:
    """ssl deployed as ssl.pyc only (compileall -b): ssl.__file__ is not the name its code was
    compiled under, and the code is still ssl.py's own."""
    import py_compile
    import ssl

    py_compile.compile(ssl.__file__, cfile=str(tmp_path / "ssl.pyc"), doraise=True)
    server = make_server()
    out = run_python(
        f"""
        import ssl, requests, requests_fastssl
        print(ssl.__file__.endswith("ssl.pyc"), requests_fastssl.status())
        for _ in range(2):
            with requests.Session() as s:
                s.get({server.url!r}, verify={pki.bundle!r})
        print(requests_fastssl.stats().connections)
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert out.splitlines() == ["True active", "2"]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "raised", ["Violation", "MemoryError", "RecursionError", "PermissionError"]
)
def test_an_audit_hook_refusing_our_own_reads_is_not_an_error(
    raised: str, make_server: ServerFactory, pki: PKI
) -> None:
    """A sandbox's audit hook refusing Python-level opens of the bundle, with any exception
    class (a BaseException of its own, MemoryError...): stock's loads are OpenSSL's and fire no
    audit event, so stock never sees it; the shim's checks must not raise it either."""
    server = make_server()
    code = f"""
        import sys, requests
        class Violation(BaseException):
            pass
        error = Violation if {raised!r} == "Violation" else getattr(__builtins__, {raised!r})
        def hook(event, args):
            if event == "open" and args and args[0] == {pki.bundle!r}:
                raise error("sandbox: no Python open of the bundle")
        sys.addaudithook(hook)
        import requests_fastssl
        if sys.argv[-1] == "stock":
            requests_fastssl.uninstall()
        for _ in range(2):
            with requests.Session() as s:
                print(s.get({server.url!r}, verify={pki.bundle!r}).status_code)
    """
    import textwrap

    outs = []
    for mode in ("stock", "shim"):
        proc = subprocess_run([sys.executable, "-c", textwrap.dedent(code), mode])
        outs.append((proc.returncode, proc.stdout))
    assert outs[0] == outs[1] == (0, "200\n200\n")


def subprocess_run(argv: list[str]) -> Any:
    import subprocess

    from support import ROOT, clean_env

    return subprocess.run(
        argv, capture_output=True, text=True, env=clean_env(), cwd=ROOT, timeout=120
    )


def test_a_context_method_rewritten_in_place_after_the_first_connection(
    make_server: ServerFactory, pki: PKI
) -> None:
    """A tracer rewrites SSLContext.set_alpn_protocols's code in place (the function object and
    the class's namespace stay) after contexts were shared: it runs on every connection in
    stock, so from then on the shim leaves them to stock."""
    import ssl

    from ddtrace.internal.wrapping import unwrap, wrap

    server = make_server()
    calls: list[int] = []

    def hook(f: Any, args: Any, kwargs: Any) -> Any:
        calls.append(1)
        return f(*args, **kwargs)

    method: Any = ssl.SSLContext.set_alpn_protocols

    def run() -> list[Any]:
        first = seen(new_connection(server.url, verify=pki.bundle))
        wrap(method, hook)
        try:
            calls.clear()
            rest = [seen(new_connection(server.url, verify=pki.bundle)) for _ in range(3)]
            return [first, *rest, len(calls)]
        finally:
            unwrap(method, hook)

    requests_fastssl.clear()
    stock, shim = stock_and_shim(run)
    assert shim == stock
    assert stock[-1] == 3


@pytest.mark.subprocess
@pytest.mark.parametrize("green", ["none", "gevent"])
def test_a_setter_only_layer_on_a_context_class_is_judged_as_code(
    green: str, make_server: ServerFactory, pki: PKI
) -> None:
    """An auditing layer that forwards each write of ``minimum_version`` and has no ``__get__``
    (so reads go to the instance, as before): stock runs it on every connection. It is not
    plain data, on ssl.py's class or on gevent's (attack round of issue 42)."""
    if green == "gevent":
        pytest.importorskip("gevent", reason="gevent has no wheel for this Python")
    server = make_server()
    code = f"""
{"from gevent import monkey; monkey.patch_all()" if green == "gevent" else ""}
import inspect, ssl, requests_fastssl, requests
cls = ssl.SSLContext
inner = inspect.getattr_static(cls, "minimum_version")  # (ssl.py's property, or gevent's)
writes = []
class Audited:
    def __set__(self, obj, value):
        writes.append(value)
        inner.__set__(obj, value)
cls.minimum_version = Audited()
for _ in range(3):
    with requests.Session() as s:
        print(s.get({server.url!r}, verify={pki.bundle!r}).status_code)
print(len(writes), dict(requests_fastssl.stats().step_aside_reasons))
"""
    lines = run_python(code).splitlines()
    assert lines == ["200", "200", "200", "3 {'context-patched': 3}"]
