"""What a CA file may hold, stock and shimmed: the shim's build makes stock's own call,
OpenSSL's file load, on the file its check read (named by the descriptor open on it,
``/proc/thread-self/fd/N``), so every form stock reads (CRLs, TRUSTED CERTIFICATE with its
trust settings, bytes beyond ASCII, NULs, blocks in other layouts) is shared with stock's
outcomes, and every form stock's load fails on fails the building connection with stock's
error (then remembered while the file is unchanged: stock for the next ones)."""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import certifi
import pytest
import requests
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import PKI, URLLIB3_1, ServerFactory, clean_env, outcome, stock_and_shim

import requests_fastssl

CLOSE = {"Connection": "close"}


def _crl(ca: trustme.CA) -> bytes:
    """An empty CRL signed by ``ca``: a file load puts it in the store (a ``cadata`` load, the
    shim's before issue 40, skipped it)."""
    key = serialization.load_pem_private_key(ca.private_key_pem.bytes(), password=None)
    issuer = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    now = datetime.datetime.now(datetime.UTC)
    crl = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(issuer.subject)
        .last_update(now - datetime.timedelta(days=1))
        .next_update(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())  # type: ignore[arg-type]
    )
    return crl.public_bytes(serialization.Encoding.PEM)


def _odd_block(pem: bytes, header: bytes) -> bytes:
    """The certificate in a block with ``header`` lines and 76-character base64 lines: OpenSSL
    fails such a block without recording an error, which a file load reports ('PEM lib') and a
    ``cadata`` load (the shim's before issue 40) took for the end of the data."""
    der = ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
    body = base64.encodebytes(der)
    return b"-----BEGIN CERTIFICATE-----\n" + header + body + b"-----END CERTIFICATE-----\n"


def _encrypted(pem: bytes) -> bytes:
    """The certificate as an encrypted PEM block (AES-128-CBC, an empty pass phrase), in
    64-character lines: a file load decrypts it with "", a ``cadata`` load (the shim's before
    issue 40) would ask for a pass phrase (the terminal, else standard input)."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    der = ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
    iv = os.urandom(16)
    key = hashlib.md5(iv[:8]).digest()  # (EVP_BytesToKey, MD5, one round, empty pass phrase)
    padder = padding.PKCS7(128).padder()
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    data = encryptor.update(padder.update(der) + padder.finalize()) + encryptor.finalize()
    text = base64.b64encode(data)
    lines = b"".join(text[i : i + 64] + b"\n" for i in range(0, len(text), 64))
    header = b"Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC," + iv.hex().upper().encode()
    return (
        b"-----BEGIN CERTIFICATE-----\n" + header + b"\n\n" + lines + b"-----END CERTIFICATE-----\n"
    )


def _trusted(pem: bytes, reject_server_auth: bool) -> bytes:
    """The certificate as OpenSSL's TRUSTED CERTIFICATE (X509_AUX): its DER and trust
    settings, here "rejected for serverAuth", which only a file load keeps."""
    import base64
    import ssl

    der = ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
    server_auth = bytes.fromhex("06082b06010505070301")
    aux = b"\xa0" + bytes([len(server_auth)]) + server_auth if reject_server_auth else b""
    aux = b"\x30" + bytes([len(aux)]) + aux
    body = base64.encodebytes(der + aux)
    return b"-----BEGIN TRUSTED CERTIFICATE-----\n" + body + b"-----END TRUSTED CERTIFICATE-----\n"


def _bundles(pki: PKI) -> dict[str, tuple[bytes, bool]]:
    """Name -> (the file's bytes, whether stock's file load of it succeeds: the shim then shares
    a context built from it; else its build raises stock's error to that connection)."""
    ca, rogue = pki.ca.cert_pem.bytes(), pki.rogue_ca.cert_pem.bytes()
    lines = ca.split(b"\n")
    return {
        "certifi-and-ca": (Path(certifi.where()).read_bytes() + b"\n" + ca, True),
        "crlf": (ca.replace(b"\n", b"\r\n"), True),
        "comment-beyond-ascii": ("# Főtanúsítvány\n".encode() + ca, True),
        "text-around": (b"subject=CN x\n" + ca + b"\ntrailing words\n", True),
        "with-a-crl": (ca + _crl(pki.ca), True),
        "trusted-certificate": (_trusted(ca, reject_server_auth=False), True),
        "trusted-rejecting-server-auth": (_trusted(ca, reject_server_auth=True), True),
        # (a cadata load skipped TRUSTED blocks: this file would have trusted the rogue CA alone)
        "trusted-beside-a-certificate": (rogue + _trusted(ca, reject_server_auth=False), True),
        "byte-beyond-ascii-in-a-block": (b"\n".join([*lines[:3], b"\xc3\xa9", *lines[3:]]), False),
        "begin-not-at-line-start": (b" " + ca, False),
        "dashes-beside-bytes-beyond-ascii": ("----- é\n".encode() + ca, True),
        "no-certificate": (b"# nothing\n", False),
        # (a file load's fgets ends a line at a NUL: there, the rest of the file is not read)
        "nul-line-before-the-ca": (b"\0\n" + ca, False),
        "nul-line-between": (rogue + b"\0\n" + ca, True),
        "nul-after-a-begin-line": (rogue + ca.replace(b"-----\n", b"-----\0\n", 1), True),
        "header-and-long-lines-after-the-ca": (ca + _odd_block(rogue, b"Comment: x\n\n"), False),
        "blank-line-and-long-lines-after-the-ca": (ca + _odd_block(rogue, b"\n"), False),
        "long-lines-alone": (_odd_block(ca, b""), True),
        "encrypted-after-the-rogue": (rogue + _encrypted(ca), True),
        "cut-short": (ca[: len(ca) // 2], False),
    }


_NAMES = [
    "certifi-and-ca",
    "crlf",
    "comment-beyond-ascii",
    "text-around",
    "with-a-crl",
    "trusted-certificate",
    "trusted-rejecting-server-auth",
    "trusted-beside-a-certificate",
    "byte-beyond-ascii-in-a-block",
    "begin-not-at-line-start",
    "dashes-beside-bytes-beyond-ascii",
    "no-certificate",
    "nul-line-before-the-ca",
    "nul-line-between",
    "nul-after-a-begin-line",
    "header-and-long-lines-after-the-ca",
    "blank-line-and-long-lines-after-the-ca",
    "long-lines-alone",
    "encrypted-after-the-rogue",
    "cut-short",
]


@pytest.mark.parametrize("name", _NAMES)
def test_every_form_of_a_ca_file_is_loaded_by_the_build_with_stocks_outcomes(
    name: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    contents, loads = _bundles(pki)[name]
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(contents)
    server = make_server()

    def calls() -> list[Any]:
        requests_fastssl.clear()
        return [
            outcome(lambda: requests.get(server.url, verify=str(bundle), headers=CLOSE))
            for _ in range(3)
        ]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    assert shim == stock
    counts = requests_fastssl.stats().since(before)
    if URLLIB3_1:  # (urllib3 1.26 is left stock: nothing built there)
        return
    built = (counts.contexts_built, counts.reuses, counts.connections, counts.build_failures)
    if loads:  # shared: one context, built by the first connection, for all three
        assert (*built, counts.step_aside_reasons) == (1, 2, 3, 0, {}), counts
    else:  # the build's load raised stock's error to the first; remembered for the next two
        assert stock[0][0] == "SSLError"
        assert (*built, counts.failures_skipped) == (0, 0, 0, 1, 2), counts
        assert counts.step_aside_reasons == {"build-failed": 2}


_PASS_PHRASE = """
    import sys, urllib3, requests_fastssl
    if sys.argv[1] == "shim":
        requests_fastssl.install()
    try:
        with urllib3.PoolManager(ca_certs=sys.argv[2], key_password="pw", retries=False) as pool:
            print(pool.request("GET", sys.argv[3]).status)
    except Exception as exc:
        print(type(exc).__name__, exc)
    print(sys.stdin.read() == "typed\\n")
"""


@pytest.mark.subprocess
def test_an_encrypted_block_never_makes_the_shim_ask_for_a_pass_phrase(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """urllib3 with ``key_password`` set (no client certificate needed) sets a password
    callback on its context: a ``cadata`` load of an encrypted block (the shim's before issue
    40) would ask OpenSSL's prompt (reading the terminal, else standard input), where stock's
    file load, the shim's now, decrypts with an empty pass phrase and asks nothing. Same
    output, same standard input left."""
    server = make_server()
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(pki.rogue_ca.cert_pem.bytes() + _encrypted(pki.ca.cert_pem.bytes()))
    runs = {}
    for mode in ("stock", "shim"):
        argv = [sys.executable, "-c", textwrap.dedent(_PASS_PHRASE), mode, str(bundle), server.url]
        proc = subprocess.run(
            argv, input="typed\n", capture_output=True, text=True, env=clean_env(), timeout=120
        )
        runs[mode] = (proc.returncode, proc.stdout, proc.stderr)
    assert runs["shim"] == runs["stock"]
    assert runs["stock"][1].splitlines()[-1] == "True"  # (nobody read standard input)


def test_a_ca_file_over_the_size_bound_goes_to_stock(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """A build's check reads a trust file whole and holds it until the build ends, where stock
    reads a file line by line: a CA file over ``LARGEST`` goes to stock, its outcomes stock's."""
    from _requests_fastssl._files import LARGEST

    server = make_server()
    bundle = tmp_path / "bundle.pem"
    comment = b"# " + b"x" * 1021 + b"\n"
    bundle.write_bytes(comment * (LARGEST // len(comment) + 1) + pki.ca.cert_pem.bytes())
    assert bundle.stat().st_size > LARGEST

    def calls() -> list[Any]:
        requests_fastssl.clear()
        return [
            outcome(lambda: requests.get(server.url, verify=str(bundle), headers=CLOSE))
            for _ in range(2)
        ]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    assert shim == stock == [("200", None)] * 2
    counts = requests_fastssl.stats().since(before)
    reason = "urllib3-1.26" if URLLIB3_1 else "not-a-file"
    assert (counts.contexts_built, counts.step_aside_reasons) == (0, {reason: 2})


_PIECES = [b"\0", b"\r", b"\n", b"\r\n", b" ", b"-", b"-----", b"-----BEGIN ", b"=", b":"]
_PIECES += [_BEGIN_LINE := b"-----BEGIN CERTIFICATE-----", b"-----END CERTIFICATE-----"]
_PIECES += [b"\xc3\xa9", b"A", b"\t", b"x" * 70, _BEGIN_LINE + b"\n", b"Proc-Type: 4,ENCRYPTED\n"]
_PIECES += [b"-----BEGIN X509 CRL-----", b"-----BEGIN TRUSTED CERTIFICATE-----"]


def _load(path: str) -> Any:
    """What a CA load of ``path`` gives: its error, or the store it makes."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_verify_locations(path)
    except (OSError, ValueError) as exc:
        return type(exc), str(exc)
    return ctx.cert_store_stats(), sorted(ctx.get_ca_certs(True))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 4), st.sampled_from(_PIECES))))
def test_the_builds_load_through_the_descriptor_is_the_file_load(
    edits: list[tuple[float, int, bytes]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two CA certificates and a comment beyond ASCII, edited at random (inserted, replaced,
    deleted markers, line ends, NULs, headers, CRL and TRUSTED lines): the build's load, given
    the file its check read by its descriptor's /proc name, gives what stock's load of the path
    gives, the same store or the same error, whatever the file holds."""
    from _requests_fastssl._files import pinned, read_checks

    data = bytearray(b"# \xc3\xa9\n" + _CAS[0] + b"\n" + _CAS[1])
    for where, cut, piece in edits:
        at = int(where * len(data))
        data[at : at + cut] = piece
    path = tmp_path_factory.mktemp("fuzz") / "bundle.pem"
    path.write_bytes(bytes(data))
    checks = read_checks((str(path),))
    assert checks is not None
    with pinned(checks) as names:
        through = _load(names[0])
    assert through == _load(str(path))


_CAS = [trustme.CA().cert_pem.bytes(), trustme.CA().cert_pem.bytes()]
