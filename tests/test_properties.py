"""Property-based: for any shape of ``verify`` and ``cert`` a user can pass, the shim gives
exactly the stock outcome: the same exception type with the same message, or success with
the same client certificate presented.

Shapes are drawn symbolically (a file's role and how its path is spelled) and resolved to
real files, so a failing example prints readably and shrinks to the smallest one.
"""

from __future__ import annotations

import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import PKI, outcome, set_default_bundle

import requests_fastssl
from _requests_fastssl.cli.server import HTTPSServer, server_context

# Roles of the files a path can name; each is created by the ``files`` fixture.
ROLES = (
    "bundle",  # the CA that issued the server's certificate
    "rogue-bundle",  # another CA
    "both-bundle",
    "hashed-dir",  # c_rehash'd directory holding the CA
    "empty-dir",
    "missing",
    "not-pem",
    "empty-file",
    "client-combined",  # client-a certificate and key in one file
    "client-cert",
    "client-key",
    "encrypted-key",  # client-a's key, encrypted: stock needs a password it cannot get
    "client-b-key",
)
# Strings, as most callers pass them, twice as often as pathlib.Path.
SPELLINGS = ("absolute", "relative", "absolute", "relative", "path-absolute", "path-relative")
CA_ROLES = (*ROLES[:9], "client-combined")
CLIENT_ROLES = (*ROLES[9:], "client-combined", "missing", "not-pem", "bundle", "empty-dir")

Shape = Any  # a symbolic value: True, None, ("path", role, spelling), ("tuple", [...]), ...


def paths(roles: tuple[str, ...]) -> st.SearchStrategy[Shape]:
    return st.tuples(st.just("path"), st.sampled_from(roles), st.sampled_from(SPELLINGS))


client_path = paths(CLIENT_ROLES)
verify_shapes = st.one_of(
    st.sampled_from([True, False, None, "", "~/missing.pem"]),
    paths(("bundle", "both-bundle", "hashed-dir")),  # the ones that trust the server
    paths(CA_ROLES),
    paths(ROLES),
)
_valid_pair = st.tuples(paths(("client-cert",)), paths(("client-key",)))
cert_shapes = st.one_of(
    st.just(None),
    paths(("client-combined",)),
    _valid_pair.map(lambda pair: ("tuple", list(pair))),
    client_path,  # one file: certificate and key together
    st.tuples(client_path, client_path).map(lambda pair: ("tuple", list(pair))),
    st.tuples(client_path, client_path).map(lambda pair: ("tuple", list(pair))),
    st.tuples(st.just("tuple"), st.lists(paths(ROLES), min_size=0, max_size=3)),
    st.tuples(st.just("list"), st.lists(client_path, min_size=2, max_size=2)),
    st.sampled_from(["", ("tuple", ["", ""]), ("tuple", ["", None])]),
)
env_shapes = st.sampled_from([None, "bundle", "rogue-bundle", "missing", "hashed-dir"])


def resolve(shape: Shape, files: dict[str, Path]) -> Any:
    if not isinstance(shape, tuple) or not shape:
        return shape
    if shape[0] == "path":
        _, role, spelling = shape
        where = files[role]
        text = str(where) if spelling.endswith("absolute") else where.name
        return Path(text) if spelling.startswith("path-") else text
    parts = [part if part in ("", None) else resolve(part, files) for part in shape[1]]
    return tuple(parts) if shape[0] == "tuple" else parts


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, pki: PKI) -> dict[str, Path]:
    import shutil

    where = tmp_path_factory.mktemp("shapes")
    found: dict[str, Path] = {}
    for role, source in (
        ("bundle", pki.bundle),
        ("rogue-bundle", pki.rogue_bundle),
        ("both-bundle", pki.both_bundle),
        ("client-combined", pki.client_a.combined),
        ("client-cert", pki.client_a.cert),
        ("client-key", pki.client_a.key),
        ("encrypted-key", pki.encrypted_key),
        ("client-b-key", pki.client_b.key),
    ):
        found[role] = where / f"{role}.pem"
        shutil.copyfile(source, found[role])
    (where / "not-pem.pem").write_text("this is not PEM\n")
    (where / "empty-file.pem").write_bytes(b"")
    (where / "empty-dir").mkdir()
    hashed = where / "hashed-dir"
    hashed.mkdir()
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command is needed to hash a CA directory"
    digest = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", pki.bundle],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    shutil.copyfile(pki.bundle, hashed / f"{digest}.0")
    found.update(
        {
            role: where / name
            for role, name in (
                ("not-pem", "not-pem.pem"),
                ("empty-file", "empty-file.pem"),
                ("empty-dir", "empty-dir"),
                ("hashed-dir", "hashed-dir"),
                ("missing", "missing.pem"),
            )
        }
    )
    return found


@pytest.fixture(scope="module")
def server(pki: PKI) -> Iterator[HTTPSServer]:
    """Trusted by ``bundle``; asks for a client certificate and reports the one it saw."""
    ctx = server_context(pki.ca, client_ca=pki.ca, client_mode=ssl.CERT_OPTIONAL)
    with HTTPSServer(ctx) as running:
        yield running


def request(url: str, verify: Any, cert: Any) -> tuple[str, str | None]:
    return outcome(
        lambda: requests.get(url, verify=verify, cert=cert, headers={"Connection": "close"})
    )


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same examples on every CI run
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # set once, never per example
)
@given(verify=verify_shapes, cert=cert_shapes, env=env_shapes)
@pytest.mark.slow
def test_any_verify_and_cert_shape_gives_the_stock_outcome(
    verify: Shape,
    cert: Shape,
    env: str | None,
    files: dict[str, Path],
    server: HTTPSServer,
    pki: PKI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(files["bundle"].parent)  # relative spellings resolve here
    set_default_bundle(monkeypatch, pki.bundle)
    if env is None:
        os.environ.pop("REQUESTS_CA_BUNDLE", None)
    else:
        os.environ["REQUESTS_CA_BUNDLE"] = str(files[env])
    real_verify, real_cert = resolve(verify, files), resolve(cert, files)
    try:
        requests_fastssl.uninstall()
        stock = request(server.url, real_verify, real_cert)
        requests_fastssl.install()
        shim = request(server.url, real_verify, real_cert)
    finally:
        requests_fastssl.uninstall()
        os.environ.pop("REQUESTS_CA_BUNDLE", None)
    summary = (stock[1] or "")[:60]
    event(f"stock outcome: {stock[0]} {summary}")  # pytest --hypothesis-show-statistics
    assert shim == stock, (real_verify, real_cert)
