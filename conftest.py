"""Shared fixtures: trustme PKI, loopback HTTPS servers, the shim on or off, load counters.

Every test starts and ends with the shim uninstalled, an empty registry and none of the
environment variables that change what requests trusts (our machines export
REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE; a test that wants them sets them itself).
"""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import trustme
from cryptography.hazmat.primitives import serialization

import requests_fastssl
from _requests_fastssl._server import HTTPSServer, server_context

requests_fastssl.uninstall()  # importing it installed the shim; each test decides for itself

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent
TRUST_ENV = (
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "SSLKEYLOGFILE",
    "REQUESTS_FASTSSL_DISABLE",
    *(f"{name}_proxy" for name in ("http", "https", "all", "no")),
    *(f"{name}_PROXY" for name in ("HTTP", "HTTPS", "ALL", "NO")),
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in TRUST_ENV:
        monkeypatch.delenv(name, raising=False)
    requests_fastssl.uninstall()
    yield
    requests_fastssl.uninstall()


@dataclass(frozen=True)
class Client:
    """A client identity on disk: separate cert and key files, and the two in one file."""

    name: str
    cert: str
    key: str
    combined: str

    @property
    def pair(self) -> tuple[str, str]:
        return (self.cert, self.key)


@dataclass(frozen=True)
class PKI:
    ca: trustme.CA  # trusted by the tests' bundle
    rogue_ca: trustme.CA  # trusted by nobody
    bundle: str  # PEM file with ca only
    rogue_bundle: str  # PEM file with rogue_ca only
    both_bundle: str  # PEM file with both
    client_a: Client
    client_b: Client
    encrypted_key: str  # client-a's key, encrypted with b"secret"
    directory: Path


def _write_client(ca: trustme.CA, name: str, where: Path) -> Client:
    leaf = ca.issue_cert(f"{name}@example.test", common_name=name)
    cert, key, combined = where / f"{name}.crt", where / f"{name}.key", where / f"{name}.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(combined))
    return Client(name, str(cert), str(key), str(combined))


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


ServerFactory = Callable[..., HTTPSServer]


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


PRELOADED = getattr(requests.adapters, "_preloaded_ssl_context", None) is not None


def set_default_bundle(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Make ``path`` the bundle verify=True uses, as if certifi's file were that file.

    requests >= 2.32.5 reads requests.adapters.DEFAULT_CA_BUNDLE_PATH at request time.
    2.32.3 and 2.32.4 use a context built at import instead, with the bugs that made
    requests revert it; the shim leaves those requests stock. There the tests name the
    bundle through REQUESTS_CA_BUNDLE, as our machines do, so that the behaviour under test
    (stock's, and the shim's sharing) is the same on every version.
    """
    monkeypatch.setattr(requests.adapters, "DEFAULT_CA_BUNDLE_PATH", path)
    if PRELOADED:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", path)


URLLIB3_1 = __import__("urllib3").__version__.startswith("1.")
needs_urllib3_2 = pytest.mark.skipif(
    URLLIB3_1, reason="ca_cert_data is not a pool keyword in urllib3 1.26 (regressions.md: n/a)"
)


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


@dataclass
class LoadCounter:
    verify_locations: int = 0
    default_certs: int = 0
    cert_chains: int = 0


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> LoadCounter:
    """Count real loads into client-side SSLContexts (the real methods still run)."""
    counter = LoadCounter()

    def counting(name: str, field: str) -> Any:
        original = getattr(ssl.SSLContext, name)

        def spy(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> Any:
            if self.protocol != ssl.PROTOCOL_TLS_SERVER:  # the test servers load too
                setattr(counter, field, getattr(counter, field) + 1)
            return original(self, *args, **kwargs)

        return spy

    monkeypatch.setattr(
        ssl.SSLContext,
        "load_verify_locations",
        counting("load_verify_locations", "verify_locations"),
    )
    monkeypatch.setattr(
        ssl.SSLContext, "load_default_certs", counting("load_default_certs", "default_certs")
    )
    monkeypatch.setattr(
        ssl.SSLContext, "load_cert_chain", counting("load_cert_chain", "cert_chains")
    )
    return counter


def _outcome(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        response = call()
    except Exception as exc:
        return type(exc).__qualname__, str(exc)
    return "ok", str(response.status_code)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def outcome(call: Callable[[], requests.Response]) -> tuple[str, str | None]:
    """What a request gave, comparable between stock and shim: the exception type and
    message (object addresses blanked), or the status and the client certificate the
    server saw (``_requests_fastssl._server`` answers with it)."""
    try:
        response = call()
    except Exception as exc:
        return type(exc).__qualname__, _ADDRESS.sub(" at 0x?", str(exc))
    seen = response.json()["client_cn"] if response.status_code == 200 else None
    return str(response.status_code), None if seen is None else str(seen)


@pytest.fixture
def both_modes() -> Callable[[Callable[[], Any]], tuple[Any, Any]]:
    """Run one call against stock requests, then with the shim; return both outcomes."""

    def run(call: Callable[[], Any]) -> tuple[Any, Any]:
        requests_fastssl.uninstall()
        stock = _outcome(call)
        requests_fastssl.install()
        try:
            return stock, _outcome(call)
        finally:
            requests_fastssl.uninstall()

    return run


def session_with(adapter: requests.adapters.HTTPAdapter) -> requests.Session:
    """A Session with ``adapter`` mounted for https://."""
    session = requests.Session()
    session.mount("https://", adapter)
    return session


def run_python(code: str, *, env: dict[str, str] | None = None, check: bool = True) -> str:
    """Run ``code`` in a fresh interpreter (import order matters there); returns stdout."""
    full_env = {k: v for k, v in os.environ.items() if k not in TRUST_ENV}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(ROOT),
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    if not check and proc.returncode != 0:  # the caller compares failures: give it the last line
        return proc.stdout + proc.stderr.strip().splitlines()[-1]
    return proc.stdout
