"""Issue 19: the shim decides where urllib3 sets up each TLS connection, from that set-up's
own inputs. Every case runs the same requests against stock requests and with the shim in
one run and compares what they gave: status, the client certificate and TLS version the
server saw, or the exception type and message.

One section per root: (1) decisions at the point of use, (2) no wait without a bound and
none on one's own build, (3) nothing observable that stock does not do, (4) the standard
library's SSLContext known by its definition.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Any

import pytest
import requests
import urllib3
from requests.adapters import HTTPAdapter
from support import (
    PKI,
    ROOT,
    ServerFactory,
    interrupted_at,
    run_python,
    session_with,
    stock_and_shim,
)

import requests_fastssl
from _requests_fastssl import _genuine
from _requests_fastssl._registry import REGISTRY

CLOSE = {"Connection": "close"}
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
URLLIB3_1 = urllib3.__version__.startswith("1.")  # type: ignore[attr-defined]
needs_urllib3_2 = pytest.mark.skipif(URLLIB3_1, reason="urllib3 1.26 is left to stock (counted)")


def seen(call: Callable[[], requests.Response]) -> tuple[str, ...]:
    """What a request gave: the status, client certificate and TLS version the server saw,
    or the exception's type and message (object addresses blanked)."""
    try:
        response = call()
    except Exception as exc:
        return type(exc).__qualname__, _ADDRESS.sub(" at 0x?", str(exc))
    body = response.json()
    return str(response.status_code), str(body["client_cn"]), str(body["tls"])


# --- (1) decided at the point of use --------------------------------------------------------


class LateSettingAdapter(HTTPAdapter):
    """Runs requests' cert_verify, then changes the pool's TLS settings after it."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        super().__init__()

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        super().cert_verify(conn, url, verify, cert)
        for name, value in self.settings.items():
            setattr(conn, name, value)


def _fingerprint(server_url: str, pki: PKI) -> str:
    host, port = server_url.split("//")[1].rstrip("/").split(":")
    der = ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((host, int(port))))
    return hashlib.sha256(der).hexdigest()


@needs_urllib3_2
@pytest.mark.parametrize(
    "settings",
    [
        {"ssl_minimum_version": ssl.TLSVersion.TLSv1_3},
        {"ssl_maximum_version": ssl.TLSVersion.TLSv1_2},
        {"assert_hostname": "wrong.example"},
        {"assert_hostname": False},
        {"assert_fingerprint": "00" * 32},
        {"assert_fingerprint": "right"},
        {"cert_reqs": "CERT_NONE"},
    ],
    ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()),
)
@pytest.mark.parametrize("server_tls", ["tls1.2-only", "any"])
def test_a_subclass_changing_the_pool_after_cert_verify(
    settings: dict[str, Any], server_tls: str, make_server: ServerFactory, pki: PKI
) -> None:
    bounded = server_tls == "tls1.2-only"
    server = make_server(maximum_version=ssl.TLSVersion.TLSv1_2 if bounded else None)
    rogue = make_server(ca=pki.rogue_ca)
    if settings.get("assert_fingerprint") == "right":
        settings = {"assert_fingerprint": _fingerprint(server.url, pki)}

    def calls() -> list[tuple[str, ...]]:
        session = session_with(LateSettingAdapter(**settings))
        return [
            seen(lambda: session.get(server.url, verify=pki.bundle, headers=CLOSE)),
            seen(lambda: session.get(server.url, verify=pki.bundle)),  # a new Session each
            seen(
                lambda: session_with(LateSettingAdapter(**settings)).get(
                    server.url, verify=pki.bundle
                )
            ),
            seen(lambda: session.get(rogue.url, verify=pki.bundle)),
        ]

    stock, shim = stock_and_shim(calls)
    assert shim == stock


@needs_urllib3_2
# (urllib3 2.0's pyOpenSSL backend calls what pyOpenSSL now deprecates, in stock too)
@pytest.mark.filterwarnings("ignore:X509.get_subject is deprecated:DeprecationWarning")
def test_pyopenssl_injected_between_requests(make_server: ServerFactory, pki: PKI) -> None:
    pyopenssl = pytest.importorskip("urllib3.contrib.pyopenssl")
    server = make_server()

    def calls() -> list[tuple[str, ...]]:
        session = requests.Session()
        session.verify = pki.bundle
        first = seen(lambda: session.get(server.url, headers=CLOSE))  # the pool keeps the conn
        pyopenssl.inject_into_urllib3()
        try:
            second = seen(lambda: session.get(server.url))  # the same connection reconnects
        finally:
            pyopenssl.extract_from_urllib3()
        return [first, second]

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[1][0] == "200"


@pytest.mark.parametrize("key", ["", b"", False], ids=repr)
def test_an_empty_or_false_key_in_cert(key: Any, make_server: ServerFactory, pki: PKI) -> None:
    server = make_server(client_certs="optional")
    stock, shim = stock_and_shim(
        lambda: seen(
            lambda: requests.get(server.url, verify=pki.bundle, cert=(pki.client_a.combined, key))
        )
    )
    assert shim == stock


def test_a_pool_used_directly_shares_and_answers_as_stock(
    make_server: ServerFactory, pki: PKI
) -> None:
    server, rogue = make_server(client_certs="optional"), make_server(ca=pki.rogue_ca)

    def calls() -> list[str]:
        manager = urllib3.PoolManager(ca_certs=pki.bundle, cert_reqs="CERT_REQUIRED")
        out = []
        for url in (server.url, server.url, rogue.url):
            try:
                out.append(str(manager.request("GET", url, headers=CLOSE, retries=False).status))
            except Exception as exc:
                out.append(type(exc).__name__)
        return out

    stock, shim = stock_and_shim(calls)
    assert shim == stock == ["200", "200", "SSLError"]


@needs_urllib3_2
def test_keep_alive_requests_never_reach_the_shim(
    make_server: ServerFactory, pki: PKI, shim: None
) -> None:
    server = make_server()
    session = requests.Session()
    session.verify = pki.bundle
    assert session.get(server.url).status_code == 200
    before = requests_fastssl.stats()
    calls: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and "_requests_fastssl" in name and "/cli/" not in name:
            calls.append(frame.f_code.co_name)

    sys.setprofile(tracer)
    try:
        for _ in range(20):
            assert session.get(server.url).status_code == 200
    finally:
        sys.setprofile(None)
    assert calls == []
    assert requests_fastssl.stats().since(before).connections == 0


# --- (2) no wait without a bound, none on one's own build -----------------------------------


def _script(body: str, pki: PKI) -> str:
    return textwrap.dedent(
        f"""
        import os, signal, ssl, sys, threading
        import trustme, requests, requests_fastssl
        from _requests_fastssl.cli.server import HTTPSServer, server_context
        ca = trustme.CA()
        bundle = {str(pki.directory / "own-ca.pem")!r} + str(os.getpid())
        ca.cert_pem.write_to_path(bundle)
        server = HTTPSServer(server_context(ca)).start()
        url = server.url
        """
    ) + textwrap.dedent(body)


@pytest.mark.subprocess
@pytest.mark.parametrize("installed", [False, True], ids=["stock", "shim"])
def test_a_signal_handler_requesting_inside_the_first_load(installed: bool, pki: PKI) -> None:
    out = run_python(
        _script(
            f"""
            if not {installed}:
                requests_fastssl.uninstall()
            results = []
            close = {{"Connection": "close"}}
            signal.signal(signal.SIGUSR1, lambda *a: results.append(
                ("handler", requests.get(url, verify=bundle, headers=close).status_code)))
            fired = []
            def profile(frame, event, arg):
                if (event == "c_call" and getattr(arg, "__name__", "") == "load_verify_locations"
                        and not fired):
                    fired.append(1)
                    os.kill(os.getpid(), signal.SIGUSR1)
            sys.setprofile(profile)
            r = requests.get(url, verify=bundle, headers={{"Connection": "close"}})
            sys.setprofile(None)
            results.append(("main", r.status_code))
            print(sorted(results), fired)
            """,
            pki,
        )
    )
    assert out.strip() == "[('handler', 200), ('main', 200)] [1]"


@needs_urllib3_2
@pytest.mark.slow
def test_an_exception_at_every_point_of_the_bookkeeping(
    make_server: ServerFactory, pki: PKI, shim: None
) -> None:
    """KeyboardInterrupt raised at each line and opcode of the registry's code in turn (a
    trace hook injects it, as a signal handler would): the interrupted request raises it,
    then a retry and a thread that was waiting for the same context both complete, and
    nothing stays registered."""
    from _requests_fastssl import _files, _registry

    server = make_server()
    codes = {
        f.__code__
        for f in (_registry.Registry.get, _registry.Registry._join, _registry.Registry._build,
                  _registry.Registry._published, _registry.Flight.__init__, _registry.Flight.wait,
                  _files.FileCheck.unchanged)
    }  # fmt: skip

    def run_with_interrupt_at(n: int) -> int:
        requests_fastssl.clear()
        return interrupted_at(
            n, codes, lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE)
        )

    def fetch(into: list[int]) -> None:
        into.append(requests.get(server.url, verify=pki.bundle, headers=CLOSE).status_code)

    points = run_with_interrupt_at(10**9)
    assert points > 20
    for n in range(1, points + 1):
        run_with_interrupt_at(n)
        results: list[int] = []
        waiter = threading.Thread(target=fetch, args=(results,))
        waiter.start()
        fetch(results)
        waiter.join(timeout=30)
        assert not waiter.is_alive(), f"a waiting thread hung after an interrupt at point {n}"
        assert results == [200, 200]
        assert all(flight.stale() for flight in REGISTRY._flights.values())
    assert "wait-timeout" not in requests_fastssl.stats().step_aside_reasons


# --- (3) nothing observable that stock does not do ------------------------------------------


@needs_urllib3_2
@pytest.mark.subprocess
@pytest.mark.parametrize("error", ["PermissionError", "Refused"])
def test_an_audit_hook_refusing_the_shims_opens(pki: PKI, error: str) -> None:
    """An audit hook that refuses Python-level opens of the bundle (stock's loads are
    OpenSSL's own, which raise no audit event), with an OSError or with an exception class
    of its own: the shim's file checks fail, the connection goes to stock, and nothing is
    raised that stock would not raise."""
    out = run_python(
        _script(
            f"""
            class Refused(Exception):
                pass
            refused = []
            def hook(event, args):
                if event == "open" and str(args[0]) == bundle:
                    refused.append(1)
                    raise {error}("refused by policy")
            sys.addaudithook(hook)
            codes = [requests.get(url, verify=bundle, headers={{"Connection": "close"}}).status_code
                     for _ in range(3)]
            print(codes, bool(refused), requests_fastssl.stats().step_aside_reasons)
            """,
            pki,
        )
    )
    assert out.strip() == "[200, 200, 200] True {'not-a-file': 3}"


def _syscalls(code: str, *flags: str) -> set[str]:
    """The system calls a script makes after it prints START (strace, fresh interpreter)."""
    return _syscalls_around_start(code, *flags)[1]


def _syscalls_around_start(
    code: str, *flags: str, python: str = sys.executable
) -> tuple[set[str], set[str]]:
    """The system calls a script makes before and after it prints START."""
    argv = ["strace", "-f", "-qq", "-e", "trace=all", "-o", "/dev/stderr", python, *flags]
    proc = subprocess.run(
        [*argv, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(ROOT),
        env={k: v for k, v in os.environ.items() if k != "PYTHONNOUSERSITE"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if 'write(1, "START' in line)
    before: set[str] = set()
    after: set[str] = set()
    for i, line in enumerate(lines):
        match = re.match(r"(?:\d+\s+)?(\w+)\(", line)
        if match and i != start:
            (before if i < start else after).add(match.group(1))
    return before, after


# The process's credentials, compared with the build's per new connection (docs/design.md,
# File checks): CPython's own start-up asks for them (site.py's user-site check).
CREDENTIALS = {"geteuid", "getegid"}


@needs_urllib3_2
@pytest.mark.subprocess
@pytest.mark.skipif(subprocess.run(["which", "strace"], capture_output=True).returncode != 0,
                    reason="strace is installed by .ci/run")  # fmt: skip
def test_no_system_call_that_stock_never_makes(pki: PKI) -> None:
    """A seccomp allow-list recorded from a stock run holds for the shim: every system call
    the shimmed requests make (first connection, build included, then new connections, with
    a client certificate too: loaded through /proc/thread-self/fd), stock's made too."""
    body = f"""
        import sys
        if sys.argv[-1] == "stock":
            requests_fastssl.uninstall()
        s = requests.Session()
        sys.stdout.write("START\\n"); sys.stdout.flush()
        for cert in (None, None, None, {pki.client_a.pair!r}, {pki.client_a.pair!r}):
            got = s.get(url, verify=bundle, cert=cert, headers={{"Connection": "close"}})
            assert got.status_code == 200
        assert requests.get(url, verify=False).status_code == 200
        server.stop()
    """
    stock = _syscalls(_script(body, pki).replace('sys.argv[-1] == "stock"', "True"))
    shim = _syscalls(_script(body, pki).replace('sys.argv[-1] == "stock"', "False"))
    # But for the credentials, compared with the build's per new connection: calls the
    # interpreter's own start-up makes (site.py's user-site check), outside a virtual
    # environment and without -s or -I. The docs say which allow-lists lack them.
    assert shim - stock <= CREDENTIALS, shim - stock
    base = getattr(sys, "_base_executable", sys.executable)
    assert _syscalls_around_start('print("START")', python=base)[0] >= CREDENTIALS
    assert not CREDENTIALS & _syscalls_around_start('print("START")', "-I", python=base)[0]


# --- (4) the standard library's SSLContext, known by its definition -------------------------


class _StatefulContext(ssl.SSLContext):
    """What green libraries and applications put at ssl.SSLContext: state of its own."""

    handshakes = 0

    def wrap_socket(self, *args: Any, **kwargs: Any) -> Any:
        type(self).handshakes += 1
        return super().wrap_socket(*args, **kwargs)


@pytest.fixture
def stateful_ssl_context(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3.util.ssl_

    # (urllib3's name only: ssl.py's own properties call super() through the module's name)
    monkeypatch.setattr(urllib3.util.ssl_, "SSLContext", _StatefulContext)


@needs_urllib3_2
def test_a_replaced_ssl_context_class_is_left_to_stock(
    make_server: ServerFactory, pki: PKI, stateful_ssl_context: None
) -> None:
    server = make_server()

    def calls() -> tuple[list[tuple[str, ...]], int]:
        _StatefulContext.handshakes = 0
        out = [
            seen(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
            for _ in range(3)
        ]
        return out, _StatefulContext.handshakes

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[1] == 3


def test_the_genuine_class_is_found_by_its_definition() -> None:
    assert _genuine.GENUINE_CONTEXT.__module__ == "ssl"
    assert _genuine.GENUINE_CONTEXT.__bases__[0].__name__ == "_SSLContext"
    assert _genuine.GENUINE_CONTEXT is not _StatefulContext


# --- found by an attack on this design ------------------------------------------------------


@needs_urllib3_2
def test_a_method_patched_onto_the_genuine_class(make_server: ServerFactory, pki: PKI) -> None:
    """mock.patch.object on ssl.SSLContext.load_cert_chain: stock calls it on every
    connection; a context built once would have kept the real certificate."""
    from unittest import mock

    server = make_server(client_certs="optional")

    def calls() -> list[Any]:
        session = requests.Session()
        session.cert = pki.client_a.pair
        first = seen(lambda: session.get(server.url, verify=pki.bundle, headers=CLOSE))
        with mock.patch.object(ssl.SSLContext, "load_cert_chain") as patched:
            second = seen(lambda: session.get(server.url, verify=pki.bundle, headers=CLOSE))
        return [first, second, patched.call_count]

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[1][1] == "None"  # the mock loaded nothing: no certificate was sent


class Deadline(Exception):
    """What a signal handler (a request deadline) raises in the middle of a load."""


def test_an_exception_raised_inside_a_build_propagates() -> None:
    """A signal handler's exception (a request deadline) landing in a build propagates, as
    it would from stock's own load, instead of sending the connection to stock."""
    from _requests_fastssl._registry import Registry

    def build(checks: Any) -> Any:
        raise Deadline("time is up")

    registry = Registry()
    with pytest.raises(Deadline):
        registry.get("k", (), build)
    assert registry.get("k", (), lambda checks: 1) == 1  # nothing left registered


@needs_urllib3_2
def test_the_factorys_defaults_are_part_of_the_key(
    make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib3.util.ssl_

    server = make_server()
    factory = urllib3.util.ssl_.create_urllib3_context
    assert factory.__defaults__ is not None
    no_tls13 = list(factory.__defaults__)
    no_tls13[2] = ssl.OP_NO_SSLv2 | ssl.OP_NO_SSLv3 | ssl.OP_NO_COMPRESSION | ssl.OP_NO_TLSv1_3

    def calls() -> list[tuple[str, ...]]:
        first = seen(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
        with monkeypatch.context() as patch:
            patch.setattr(factory, "__defaults__", tuple(no_tls13))
            second = seen(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
        return [first, second]

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[1] != stock[0]  # the defaults changed what stock did


@needs_urllib3_2
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"assert_hostname": 0}, {"assert_hostname": False}),
        ({"assert_hostname": False}, {"assert_hostname": 0}),
        ({"ssl_minimum_version": ssl.TLSVersion.TLSv1_2}, {"ssl_minimum_version": 771.0}),
    ],
    ids=["0-then-False", "False-then-0", "TLSv1_2-then-771.0"],
)
def test_equal_values_of_other_types_are_other_inputs(
    first: dict[str, Any], second: dict[str, Any], make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server(names=("other.example",))  # a name that does not match the URL

    def one(tls: dict[str, Any]) -> tuple[str, ...]:
        return seen(
            lambda: session_with(LateSettingAdapter(**tls)).get(server.url, verify=pki.bundle)
        )

    def calls() -> list[tuple[str, ...]]:
        return [one(first), one(second)]

    stock, shim = stock_and_shim(calls)
    assert shim == stock


@needs_urllib3_2
def test_a_deprecated_version_bound_warns_on_every_connection(
    make_server: ServerFactory, pki: PKI
) -> None:
    import warnings

    server = make_server()

    def calls() -> int:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                adapter = LateSettingAdapter(ssl_minimum_version=ssl.TLSVersion.TLSv1)
                session_with(adapter).get(server.url, verify=pki.bundle, headers=CLOSE)
        return sum(issubclass(w.category, DeprecationWarning) for w in caught)

    stock, shim = stock_and_shim(calls)
    assert shim == stock == 3


@pytest.mark.skipif(not URLLIB3_1, reason="the urllib3 1.26 leg of the matrix (nox -s tests)")
def test_urllib3_1_is_left_to_stock_and_counted(make_server: ServerFactory, pki: PKI) -> None:
    server = make_server(client_certs="optional")

    def calls() -> list[tuple[str, ...]]:
        return [
            seen(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE)),
            seen(lambda: requests.get(server.url, verify=pki.bundle, cert=pki.client_a.pair)),
        ]

    requests_fastssl.install()
    before = requests_fastssl.stats()
    requests_fastssl.uninstall()
    stock, shim = stock_and_shim(calls)
    assert shim == stock
    delta = requests_fastssl.stats().since(before)
    assert (delta.connections, delta.step_aside_reasons) == (0, {"urllib3-1.26": 2})
