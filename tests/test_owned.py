"""Adapters that own their context (requests' pattern for in-memory client certificates,
toolbelt's X509Adapter, httpie): the context stays the user's, and its CA file is loaded once
per file contents instead of once per connection (``_owned``). Every test runs stock and
shimmed."""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
from adapters import ContextAdapter
from support import (
    PKI,
    other_contents_during_first_load,
    outcome,
    same_size,
    session_with,
    stock_and_shim,
)

import requests_fastssl


class CLoads:
    """Counts calls of the C ``load_verify_locations`` made in this thread, seen through the
    profiler: the ``loads`` fixture replaces the method with a spy, and a replaced method is
    exactly what the shim must leave alone (it might do more than load)."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> CLoads:
        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "c_call" and getattr(arg, "__name__", "") == "load_verify_locations":
                self.count += 1

        sys.setprofile(profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


def fresh_context() -> ssl.SSLContext:
    from urllib3.util.ssl_ import create_urllib3_context

    return create_urllib3_context()


def get(adapter: requests.adapters.HTTPAdapter, url: str, verify: Any) -> Callable[[], Any]:
    """A request on a new connection through ``adapter`` (its pool stays, its connection not)."""

    def call() -> Any:
        return session_with(adapter).get(url, verify=verify, headers={"Connection": "close"})

    return call


@pytest.mark.urllib3_2
def test_owned_context_loads_its_bundle_once_and_answers_as_stock(
    pki: PKI, make_server: Any
) -> None:
    good, rogue = make_server(), make_server(ca=pki.rogue_ca)
    mtls = make_server(client_certs="required")

    def calls() -> tuple[list[Any], int, int]:
        ctx = fresh_context()
        ctx.load_cert_chain(*pki.client_a.pair)  # the in-memory-certificate pattern
        adapter = ContextAdapter(ctx)
        before = requests_fastssl.stats()
        with CLoads() as loads:
            results = [
                outcome(get(adapter, server.url, pki.bundle))
                for server in (good, good, rogue, mtls, good, mtls)
            ]
        avoided = requests_fastssl.stats().since(before).owned_loads_avoided
        return results, loads.count, avoided

    (stock, stock_loads, _), (shim, shim_loads, avoided) = stock_and_shim(calls)
    assert shim == stock
    assert [r[0] for r in stock] == ["200", "200", "SSLError", "200", "200", "200"]
    assert stock[3] == ("200", "client-a")  # the adapter's certificate, presented
    assert stock_loads == 6  # one per connection
    assert shim_loads == 1
    assert avoided == 5


def test_a_rewritten_bundle_is_loaded_again_on_top_as_stock_does(
    pki: PKI, make_server: Any, tmp_path: Path
) -> None:
    """Stock loads the new contents into the same store, which keeps the old CAs: a server
    of a CA that left the file stays trusted. The shim must give the same answers."""
    server_a, server_b = make_server(), make_server(ca=pki.rogue_ca)
    bundle = tmp_path / "bundle.pem"

    def calls() -> list[Any]:
        bundle.write_bytes(Path(pki.bundle).read_bytes())
        adapter = ContextAdapter(fresh_context())
        results = [outcome(get(adapter, server_a.url, str(bundle)))]
        results.append(outcome(get(adapter, server_b.url, str(bundle))))  # not trusted yet
        tmp = tmp_path / "bundle.new"
        tmp.write_bytes(Path(pki.rogue_bundle).read_bytes())
        os.replace(tmp, bundle)  # atomically: only B's CA in the file now
        results.append(outcome(get(adapter, server_b.url, str(bundle))))
        results.append(outcome(get(adapter, server_a.url, str(bundle))))  # A's CA: still held
        bundle.write_bytes(Path(pki.bundle).read_bytes())  # in place, back to A's only
        results.append(outcome(get(adapter, server_b.url, str(bundle))))
        return results

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert [r[0] for r in stock] == ["200", "SSLError", "200", "200", "200"]


def test_a_deleted_bundle_fails_as_stock_does(pki: PKI, make_server: Any, tmp_path: Path) -> None:
    server = make_server()
    bundle = tmp_path / "bundle.pem"

    def calls() -> list[Any]:
        bundle.write_bytes(Path(pki.bundle).read_bytes())
        adapter = ContextAdapter(fresh_context())
        results = [outcome(get(adapter, server.url, str(bundle)))]
        bundle.unlink()
        results.append(outcome(get(adapter, server.url, str(bundle))))
        return results

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[0][0] == "200"
    assert stock[1][0] == "OSError"  # requests' own check, before any connection


class CountingContext(ssl.SSLContext):
    """A context subclass whose loads have a side effect the user relies on."""

    calls = 0

    def load_verify_locations(self, *args: Any, **kwargs: Any) -> None:
        type(self).calls += 1
        super().load_verify_locations(*args, **kwargs)


def test_a_replaced_load_method_is_called_every_time(
    pki: PKI, make_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spy patched onto ``ssl.SSLContext`` stands for any patch (a tracer, a test
    double): stock calls it on every connection, so the shim must too."""
    server = make_server()
    calls_seen: list[int] = []
    original = ssl.SSLContext.load_verify_locations

    def spy(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> Any:
        calls_seen.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", spy)

    def calls() -> tuple[list[Any], int]:
        before = len(calls_seen)
        adapter = ContextAdapter(fresh_context())
        results = [outcome(get(adapter, server.url, pki.bundle)) for _ in range(3)]
        return results, len(calls_seen) - before

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[1] == 3


def test_a_context_whose_load_does_more_is_called_every_time(pki: PKI, make_server: Any) -> None:
    server = make_server()

    def calls() -> tuple[list[Any], int]:
        CountingContext.calls = 0
        ctx = CountingContext(ssl.PROTOCOL_TLS_CLIENT)
        adapter = ContextAdapter(ctx)
        results = [outcome(get(adapter, server.url, pki.bundle)) for _ in range(3)]
        return results, CountingContext.calls

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[1] == 3


@pytest.mark.urllib3_2
def test_urllib3_users_outside_requests_get_the_same(pki: PKI, make_server: Any) -> None:
    """The decision is made where urllib3 sets up a connection, whoever made the pool."""
    server, rogue = make_server(), make_server(ca=pki.rogue_ca)

    def calls() -> tuple[list[str], int]:
        ctx = fresh_context()
        out = []
        with (
            CLoads() as loads,
            urllib3.PoolManager(ssl_context=ctx, ca_certs=pki.bundle, retries=False) as manager,
        ):
            for url in (server.url, server.url, rogue.url, server.url):
                try:
                    out.append(
                        str(manager.request("GET", url, headers={"Connection": "close"}).status)
                    )
                except urllib3.exceptions.SSLError as exc:
                    out.append(type(exc).__name__)
        return out, loads.count

    (stock, stock_loads), (shim, shim_loads) = stock_and_shim(calls)
    assert shim == stock == ["200", "200", "SSLError", "200"]
    assert (stock_loads, shim_loads) == (4, 1)


def test_uninstall_removes_the_urllib3_layer() -> None:
    from _requests_fastssl import _compat

    owner, name, _wrapper = _compat.hook()
    original = vars(owner)[name]
    requests_fastssl.install()
    assert vars(owner)[name] is not original  # ours, on top
    requests_fastssl.uninstall()
    assert vars(owner)[name] is original


@pytest.mark.urllib3_2
def test_after_uninstall_an_adopted_context_loads_every_time(pki: PKI, make_server: Any) -> None:
    server = make_server()
    requests_fastssl.install()
    adapter = ContextAdapter(fresh_context())
    with CLoads() as loads:
        for _ in range(2):
            assert get(adapter, server.url, pki.bundle)().status_code == 200
        assert loads.count == 1
        requests_fastssl.uninstall()
        for _ in range(2):
            assert get(adapter, server.url, pki.bundle)().status_code == 200
        assert loads.count == 3


def test_contents_seen_only_during_the_first_load_are_kept_as_stock(
    pki: PKI, make_server: Any, tmp_path: Path
) -> None:
    """The bundle holds other contents exactly while the first load into the adapter's
    context reads it (see ``other_contents_during_first_load``). Stock's context keeps what
    that load read, so a certificate only those contents held verifies from then on. The
    first load is stock's own with the shim too, so the answers are stock's."""
    import mmap

    good, rogue = make_server(), make_server(ca=pki.rogue_ca)
    bundle = tmp_path / "bundle.pem"
    trusted, other = same_size(Path(pki.bundle).read_bytes(), Path(pki.rogue_bundle).read_bytes())
    bundle.write_bytes(trusted)

    def calls() -> list[Any]:
        adapter = ContextAdapter(fresh_context())
        with open(bundle, "r+b") as f, mmap.mmap(f.fileno(), len(trusted)) as m:
            m[:] = trusted  # dirty pages: later writes move no timestamp
            with other_contents_during_first_load(m, other, trusted):
                first = outcome(get(adapter, good.url, str(bundle)))
            return [
                first,
                outcome(get(adapter, good.url, str(bundle))),
                outcome(get(adapter, rogue.url, str(bundle))),
            ]

    stock, shim = stock_and_shim(calls)
    assert [status for status, _ in stock] == ["SSLError", "200", "200"]
    assert shim == stock
