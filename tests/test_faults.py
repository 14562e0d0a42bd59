"""Faults between requests: the CA bundle or the client key deleted, truncated, replaced
(atomically and in place) or unreadable; a bundle growing to thousands of certificates;
SSLContext creation failing. Each scenario runs against stock requests and with the shim,
on the same paths, and every request must give the same outcome (status and client
certificate seen, or exception type and message). Every scenario ends with the files
restored: the shim's next request must succeed, so no broken context was kept."""

from __future__ import annotations

import datetime
import os
import shutil
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3.connection
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from support import PKI, ROOT, LoadCounter, ServerFactory, clean_env, outcome

import requests_fastssl
from _requests_fastssl._registry import REGISTRY
from _requests_fastssl._status import Stats
from _requests_fastssl.cli.server import HTTPSServer

Outcome = tuple[str, "str | None"]


@dataclass
class Files:
    """The files one scenario plays with, at fixed paths (error messages name them)."""

    pki: PKI
    where: Path

    @property
    def bundle(self) -> Path:
        return self.where / "bundle.pem"

    @property
    def cert(self) -> Path:
        return self.where / "client.crt"

    @property
    def key(self) -> Path:
        return self.where / "client.key"

    def restore(self) -> None:
        """The good files, written atomically (new inodes), readable."""
        for path, source in (
            (self.bundle, self.pki.bundle),
            (self.cert, self.pki.client_a.cert),
            (self.key, self.pki.client_a.key),
        ):
            replace_atomically(path, read(source))
            path.chmod(0o644)


def replace_atomically(path: Path, data: bytes) -> None:
    staged = path.with_name(path.name + ".staged")
    staged.write_bytes(data)
    os.replace(staged, path)


def truncate_in_place(path: Path) -> None:
    with path.open("r+b") as f:
        f.truncate(path.stat().st_size // 2)


def read(path: str) -> bytes:
    return Path(path).read_bytes()


def bundle_becomes_directory(f: Files) -> None:
    f.bundle.unlink()
    f.bundle.mkdir()


def pair_b_atomically(f: Files) -> None:
    replace_atomically(f.cert, read(f.pki.client_b.cert))
    replace_atomically(f.key, read(f.pki.client_b.key))


def pair_b_in_place(f: Files) -> None:
    f.cert.write_bytes(read(f.pki.client_b.cert))
    f.key.write_bytes(read(f.pki.client_b.key))


# What can happen to the files between two requests.
ACTIONS: dict[str, Callable[[Files], object]] = {
    "delete-bundle": lambda f: f.bundle.unlink(),
    "truncate-bundle": lambda f: truncate_in_place(f.bundle),
    "empty-bundle": lambda f: f.bundle.write_bytes(b""),
    "rogue-bundle-atomic": lambda f: replace_atomically(f.bundle, read(f.pki.rogue_bundle)),
    "rogue-bundle-in-place": lambda f: f.bundle.write_bytes(read(f.pki.rogue_bundle)),
    "bundle-becomes-directory": bundle_becomes_directory,
    "delete-key": lambda f: f.key.unlink(),
    "delete-cert": lambda f: f.cert.unlink(),
    "truncate-key": lambda f: truncate_in_place(f.key),
    "garbage-key-in-place": lambda f: f.key.write_bytes(b"-----BEGIN PRIVATE KEY-----\nxx\n"),
    "b-key-atomic": lambda f: replace_atomically(f.key, read(f.pki.client_b.key)),
    "b-key-in-place": lambda f: f.key.write_bytes(read(f.pki.client_b.key)),
    "b-pair-atomic": pair_b_atomically,
    "b-pair-in-place": pair_b_in_place,
    "encrypted-key-in-place": lambda f: f.key.write_bytes(read(f.pki.encrypted_key)),
    "unreadable-bundle": lambda f: f.bundle.chmod(0),
    "unreadable-key": lambda f: f.key.chmod(0),
}

SCENARIOS = {
    "bundle-deleted": ["delete-bundle"],
    "bundle-truncated-in-place": ["truncate-bundle"],
    "bundle-emptied-in-place": ["empty-bundle"],
    "bundle-replaced-atomically": ["rogue-bundle-atomic"],
    "bundle-replaced-in-place": ["rogue-bundle-in-place"],
    "bundle-replaced-by-directory": ["bundle-becomes-directory"],
    "key-deleted": ["delete-key"],
    "cert-deleted": ["delete-cert"],
    "key-truncated-in-place": ["truncate-key"],
    "key-garbage-in-place": ["garbage-key-in-place"],
    "key-replaced-atomically": ["b-key-atomic"],
    "key-replaced-in-place": ["b-key-in-place"],
    "key-encrypted-in-place": ["encrypted-key-in-place"],
    "pair-replaced-atomically": ["b-pair-atomic"],
    "pair-replaced-in-place": ["b-pair-in-place"],
}


def request(url: str, files: Files) -> Outcome:
    return outcome(
        lambda: requests.get(
            url,
            verify=str(files.bundle),
            cert=(str(files.cert), str(files.key)),
            headers={"Connection": "close"},
        )
    )


@contextmanager
def shim_if(shim: bool) -> Iterator[Callable[[], Stats]]:
    """The shim installed with an empty registry (or stock) for the block, uninstalled after;
    yields a function giving the shim's counters since the block began."""
    if shim:
        requests_fastssl.install()
        requests_fastssl.clear()
    before = requests_fastssl.stats()
    try:
        yield lambda: requests_fastssl.stats().since(before)
    finally:
        requests_fastssl.uninstall()


def play(url: str, files: Files, steps: list[str], *, shim: bool) -> list[Outcome]:
    """request, fault, request, request, restore, request: the same for both modes."""
    if files.bundle.is_dir():
        files.bundle.rmdir()
    files.restore()
    with shim_if(shim):
        outcomes = [request(url, files)]
        for step in steps:
            ACTIONS[step](files)
        outcomes += [request(url, files), request(url, files)]
        if files.bundle.is_dir():
            files.bundle.rmdir()
        files.restore()
        outcomes.append(request(url, files))
    return outcomes


def assert_same_as_stock(url: str, files: Files, steps: list[str]) -> list[Outcome]:
    stock = play(url, files, steps, shim=False)
    shim = play(url, files, steps, shim=True)
    assert shim == stock
    assert stock[0] == stock[-1] == ("200", "client-a")  # good before, good after restore
    return stock


@pytest.fixture
def client_cert_server(make_server: ServerFactory) -> HTTPSServer:
    # TLS 1.2: a refused client certificate fails in the handshake, not on a later read.
    return make_server(client_certs="required", maximum_version=ssl.TLSVersion.TLSv1_2)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_file_fault_between_requests(
    scenario: str, client_cert_server: HTTPSServer, pki: PKI, tmp_path: Path
) -> None:
    outcomes = assert_same_as_stock(
        client_cert_server.url, Files(pki, tmp_path), SCENARIOS[scenario]
    )
    # The fault was real: stock's requests after it did not both succeed as client-a
    # (the atomic replacement of the pair is the one fault that is supposed to succeed).
    if scenario.startswith("pair-replaced"):
        assert outcomes[1] == ("200", "client-b")
    else:
        assert outcomes[1] != ("200", "client-a"), outcomes


def _ignores_permissions(where: Path) -> bool:
    """True when this process reads mode-000 files (root with CAP_DAC_OVERRIDE)."""
    probe = where / "probe"
    probe.write_bytes(b"x")
    probe.chmod(0)
    try:
        probe.read_bytes()
    except PermissionError:
        return False
    finally:
        probe.unlink()
    return True


@pytest.mark.parametrize("what", ["bundle", "key"])
def test_unreadable_file_between_requests(
    what: str, client_cert_server: HTTPSServer, pki: PKI, tmp_path: Path
) -> None:
    if _ignores_permissions(tmp_path):
        # Root reads mode-000 files. Run this test again in a child that keeps root but
        # loses the capabilities that bypass file permissions (util-linux setpriv).
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to test unreadable files as root"
        env = clean_env()
        proc = subprocess.run(
            [
                setpriv,
                "--bounding-set=-dac_override,-dac_read_search",
                sys.executable,
                "-X",
                "faulthandler",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"{__file__}::test_unreadable_file_between_requests[{what}]",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(ROOT),
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        assert "1 passed" in proc.stdout
        return
    outcomes = assert_same_as_stock(
        client_cert_server.url, Files(pki, tmp_path), [f"unreadable-{what}"]
    )
    assert outcomes[1][0] != "200"
    message = str(outcomes[1][1])
    assert "Permission denied" in message or "Errno 13" in message, outcomes


def _ca_certificates(n: int) -> list[bytes]:
    """n distinct self-signed CA certificates (one key: signing is the cheap part)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    pems = []
    for i in range(n):
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"filler CA {i}")])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(i + 1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        pems.append(cert.public_bytes(Encoding.PEM))
    return pems


@pytest.mark.slow
@pytest.mark.urllib3_2
def test_bundle_growing_to_thousands_of_certificates(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """The bundle grows in place between requests, the server's CA first and then last:
    each version is a new trust source, loaded once, with the stock outcome."""
    server = make_server()
    rogue_server = make_server(ca=pki.rogue_ca)
    filler = _ca_certificates(2500)
    ca = pki.ca.cert_pem.bytes()
    versions = [
        ca,
        ca + b"".join(filler[:100]),
        b"".join(filler[:1000]) + ca,
        b"".join(filler) + ca,
        b"".join(filler),  # the server's CA removed: nothing trusts it any more
    ]
    bundle = tmp_path / "growing.pem"
    results: dict[str, list[tuple[str, str]]] = {}
    for mode in ("stock", "shim"):
        seen = []
        with shim_if(mode == "shim") as counters:
            for data in versions:
                bundle.write_bytes(data)
                for url in (server.url, server.url, rogue_server.url):
                    try:
                        requests.get(url, verify=str(bundle), headers={"Connection": "close"})
                        seen.append(("ok", url))
                    except requests.exceptions.SSLError:
                        seen.append(("SSLError", url))
            stats = counters()  # the shim's, the last time round
        results[mode] = seen
    assert results["shim"] == results["stock"]
    assert [r[0] for r in results["stock"][:12]] == ["ok", "ok", "SSLError"] * 4
    assert [r[0] for r in results["stock"][12:]] == ["SSLError"] * 3
    # One load per version of the file, however big (stock: one per connection).
    assert stats.ca_loads == len(versions)
    assert stats.reuses == 2 * len(versions)


@pytest.mark.urllib3_2
def test_context_creation_failing_then_recovering(
    make_server: ServerFactory, default_bundle: str
) -> None:
    """As on a FIPS host: the context factory raises. Stock fails every request while it
    does; so does the shim. A factory that is not urllib3's own (as here, standing in for
    the failure) is one the shim never builds with: it steps aside, keeps nothing, and
    shares once urllib3's own factory is back."""
    server = make_server()
    real = getattr(urllib3.connection, "create_urllib3_context")  # noqa: B009  (not re-exported)

    def factory(*args: Any, **kwargs: Any) -> Any:
        raise ssl.SSLError("[CRYPTO] unknown error (FIPS mode)")

    results: dict[str, list[str]] = {}
    for mode in ("stock", "shim"):
        seen = []
        with shim_if(mode == "shim") as counters:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(urllib3.connection, "create_urllib3_context", factory)
                for _ in range(3):
                    try:
                        seen.append(str(requests.get(server.url).status_code))
                    except requests.exceptions.SSLError as exc:
                        seen.append(f"SSLError {'FIPS mode' in str(exc)}")
            assert getattr(urllib3.connection, "create_urllib3_context") is real  # noqa: B009
            seen += [str(requests.get(server.url).status_code) for _ in range(2)]
            stats = counters()  # the shim's, the last time round
        results[mode] = seen
    assert results["shim"] == results["stock"] == ["SSLError True"] * 3 + ["200", "200"]
    assert stats.step_aside_reasons == {"urllib3-replaced": 3}
    assert (stats.build_failures, stats.contexts_built, stats.entries) == (0, 1, 1)
    assert not [e for e, _checks in REGISTRY._entries.values() if e is None]


@pytest.mark.parametrize("broken", ["cert-not-a-certificate", "key-of-another-cert"])
@pytest.mark.urllib3_2
def test_a_file_that_fails_to_build_is_remembered_until_it_changes(
    broken: str, pki: PKI, make_server: ServerFactory, tmp_path: Path, loads: LoadCounter
) -> None:
    """A client certificate that cannot be loaded fails every request, stock and shimmed.
    The shim finds out by building once: that build is the first request's own load, whose
    error it raises as stock's set-up would; while the files stay the same, the next requests
    go straight to stock. Fixed files are
    built and shared again on the next request."""
    server = make_server(client_certs="optional")
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    results: dict[str, list[Outcome]] = {}
    counts: dict[str, tuple[int, Stats]] = {}
    for mode in ("stock", "shim"):
        if broken == "cert-not-a-certificate":
            cert.write_text("this is not a certificate\n")
            key.write_bytes(Path(pki.client_a.key).read_bytes())
        else:
            cert.write_bytes(Path(pki.client_a.cert).read_bytes())
            key.write_bytes(Path(pki.client_b.key).read_bytes())
        before = loads.verify_locations
        with shim_if(mode == "shim") as counters:

            def get() -> Outcome:
                return outcome(
                    lambda: requests.get(server.url, verify=pki.bundle, cert=(str(cert), str(key)))
                )

            seen = [get() for _ in range(4)]
            counts[mode] = (loads.verify_locations - before, counters())
            # Fixed atomically, as a deployment would: the broken file gets client A's.
            bad, good = (
                (cert, pki.client_a.cert) if broken.startswith("cert") else (key, pki.client_a.key)
            )
            tmp = tmp_path / "fixed.tmp"
            tmp.write_bytes(Path(good).read_bytes())
            os.replace(tmp, bad)
            seen += [get(), get()]
            stats = counters()
        results[mode] = seen
    assert results["shim"] == results["stock"]
    assert [o[0] for o in results["stock"]] == ["SSLError"] * 4 + ["200", "200"]
    assert results["stock"][-1] == ("200", "client-a")
    assert counts["stock"][0] == 4  # stock: one CA load per failing connection
    assert counts["shim"][0] == 4  # the same: the failed build was the first request's load
    assert counts["shim"][1].failures_skipped == 3
    assert (stats.build_failures, stats.contexts_built) == (1, 1)
