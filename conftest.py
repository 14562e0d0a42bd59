"""Shared fixtures: trustme PKI, loopback HTTPS servers, the shim on or off, load counters.
Plain helpers are in tests/support.py.

Every test starts and ends with the shim uninstalled, an empty registry and none of the
environment variables that change what requests trusts (our machines export
REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE; a test that wants them sets them itself).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import requests.adapters
import trustme
from cryptography.hazmat.primitives import serialization
from support import (
    PKI,
    TRUST_ENV,
    LoadCounter,
    ServerFactory,
    _write_client,
    outcome,
    set_default_bundle,
    stock_and_shim,
)

import requests_fastssl
from _requests_fastssl.cli.loads import counting_loads
from _requests_fastssl.cli.server import HTTPSServer, server_context

requests_fastssl.uninstall()  # importing it installed the shim; each test decides for itself

pytest_plugins = ["pytester"]

_URLLIB3_1 = __import__("urllib3").__version__.startswith("1.")
_REQUESTS_2_32 = hasattr(requests.adapters.HTTPAdapter, "build_connection_pool_key_attributes")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """urllib3 1.26 is left to stock (every connection counted as urllib3-1.26): tests that
    assert sharing do not apply there; the comparisons with stock still run. Tests written
    against requests 2.32.2's adapter API, or asserting its fix of CVE-2024-35195 (stock
    requests 2.30/2.31 keep a pool's first TLS settings), do not apply to older requests."""
    skips = {
        "urllib3_2": _URLLIB3_1 and "urllib3 1.26 is left to stock: nothing is shared",
        "requests_2_32": not _REQUESTS_2_32 and "needs requests 2.32.2's adapter API or fix",
    }
    for marker, reason in skips.items():
        if reason:
            for item in items:
                if item.get_closest_marker(marker) is not None:
                    item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in TRUST_ENV:
        monkeypatch.delenv(name, raising=False)
    requests_fastssl.uninstall()
    yield
    requests_fastssl.uninstall()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    where = tmp_path_factory.mktemp("pki")
    ca, rogue = trustme.CA(), trustme.CA()
    bundle, rogue_bundle, both = where / "ca.pem", where / "rogue.pem", where / "both.pem"
    ca.cert_pem.write_to_path(str(bundle))
    rogue.cert_pem.write_to_path(str(rogue_bundle))
    both.write_bytes(ca.cert_pem.bytes() + rogue.cert_pem.bytes())
    client_a = _write_client(ca, "client-a", where)
    key = serialization.load_pem_private_key(Path(client_a.key).read_bytes(), password=None)
    encrypted = where / "client-a.encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    return PKI(
        ca=ca,
        rogue_ca=rogue,
        bundle=str(bundle),
        rogue_bundle=str(rogue_bundle),
        both_bundle=str(both),
        client_a=client_a,
        client_b=_write_client(ca, "client-b", where),
        encrypted_key=str(encrypted),
        directory=where,
    )


@pytest.fixture
def make_server(pki: PKI) -> Iterator[ServerFactory]:
    """Start HTTPS servers on 127.0.0.1 that stop with the test.

    ``ca``: the issuing CA (default: the trusted one); ``names``: certificate identities;
    ``expired``: issue an expired certificate; ``client_certs``: "optional" or "required"
    to ask for a client certificate from the trusted CA; ``maximum_version`` /
    ``minimum_version``: bound the TLS versions the server accepts.
    """
    with ExitStack() as stack:

        def factory(
            *,
            ca: trustme.CA | None = None,
            names: tuple[str, ...] = ("127.0.0.1", "localhost"),
            host: str = "127.0.0.1",
            expired: bool = False,
            client_certs: str | None = None,
            maximum_version: ssl.TLSVersion | None = None,
            minimum_version: ssl.TLSVersion | None = None,
        ) -> HTTPSServer:
            ctx = server_context(
                ca or pki.ca,
                names,
                expired=expired,
                client_ca=None if client_certs is None else pki.ca,
                client_mode=ssl.CERT_REQUIRED if client_certs == "required" else ssl.CERT_OPTIONAL,
                maximum_version=maximum_version,
                minimum_version=minimum_version,
            )
            return stack.enter_context(HTTPSServer(ctx, host=host))

        yield factory


@pytest.fixture
def default_bundle(pki: PKI, monkeypatch: pytest.MonkeyPatch) -> str:
    """verify=True trusts the tests' CA (see ``set_default_bundle``)."""
    set_default_bundle(monkeypatch, pki.bundle)
    return pki.bundle


@pytest.fixture(params=["stock", "shim"])
def mode(request: pytest.FixtureRequest) -> str:
    """Run a test once against stock requests and once with the shim: same outcome."""
    param: str = request.param
    if param == "shim":
        assert requests_fastssl.install().state is requests_fastssl.State.ACTIVE
    return param


@pytest.fixture
def shim() -> None:
    """The shim installed for this test, with an empty registry (uninstalled afterwards)."""
    assert requests_fastssl.install().state is requests_fastssl.State.ACTIVE
    requests_fastssl.clear()


@pytest.fixture
def loads() -> Iterator[LoadCounter]:
    """Count real loads into client-side SSLContexts, seen through the profiler: replacing
    the methods would make the shim step aside (context-patched), as it must for a class
    whose methods run once per build instead of once per connection."""
    with counting_loads() as counter:
        yield counter


@pytest.fixture
def both_modes() -> Callable[[Callable[[], Any]], tuple[Any, Any]]:
    """Run one call against stock requests, then with the shim; return both outcomes."""
    return lambda call: stock_and_shim(lambda: outcome(call))
