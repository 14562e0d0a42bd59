"""Plain helpers the tests import (``from support import ...``): the PKI types, the
environment variables that change trust, running code in a fresh interpreter, comparing what
a request gave with and without the shim. Fixtures live in the root ``conftest.py``."""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import trustme

import requests_fastssl
from _requests_fastssl.cli.loads import LoadCount
from _requests_fastssl.cli.server import HTTPSServer

ROOT = Path(__file__).resolve().parent.parent
TRUST_ENV = (
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "SSLKEYLOGFILE",
    "REQUESTS_FASTSSL_DISABLE",
    *(f"{name}_proxy" for name in ("http", "https", "all", "no")),
    *(f"{name}_PROXY" for name in ("HTTP", "HTTPS", "ALL", "NO")),
)


def clean_env(*also: str) -> dict[str, str]:
    """This process's environment for a child, without the trust variables (our machines
    export them), any REQUESTS_FASTSSL_* switch a developer may have set, and ``also``."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in TRUST_ENV and k not in also and not k.startswith("REQUESTS_FASTSSL_")
    }


def private_startup(where: Path, sitecustomize: str = "") -> dict[str, str]:
    """Environment variables for programs whose start-up is what the test wrote: ``where``
    first on PYTHONPATH, with a sitecustomize.py of ``sitecustomize`` and an empty
    usercustomize.py (they shadow any the machine has), and no user site. (A .pth file in the
    interpreter's own site-packages cannot be shadowed without -S; the project's venv has
    none that imports the shim.)"""
    where.mkdir(parents=True, exist_ok=True)
    (where / "sitecustomize.py").write_text(sitecustomize)
    (where / "usercustomize.py").write_text("")
    return {"PYTHONPATH": str(where), "PYTHONNOUSERSITE": "1"}


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


ServerFactory = Callable[..., HTTPSServer]


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
    "key_ca_cert_data" not in __import__("urllib3.poolmanager").poolmanager.PoolKey._fields,
    reason="ca_cert_data is not a pool keyword in this urllib3 (1.26, 2.0; regressions.md: n/a)",
)


LoadCounter = LoadCount  # (the one counter: _requests_fastssl.cli.loads)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def outcome(call: Callable[[], requests.Response]) -> tuple[str, str | None]:
    """What a request gave, comparable between stock and shim: the exception type and
    message (object addresses blanked), or the status and the client certificate the
    server saw (``_requests_fastssl.cli.server`` answers with it)."""
    try:
        response = call()
    except Exception as exc:
        return type(exc).__qualname__, _ADDRESS.sub(" at 0x?", str(exc))
    seen = response.json()["client_cn"] if response.status_code == 200 else None
    return str(response.status_code), None if seen is None else str(seen)


def session_with(adapter: requests.adapters.HTTPAdapter) -> requests.Session:
    """A Session with ``adapter`` mounted for https://."""
    session = requests.Session()
    session.mount("https://", adapter)
    return session


def run_python(
    code: str,
    *,
    env: dict[str, str] | None = None,
    check: bool = True,
    stderr: bool = False,
    prefix: tuple[str, ...] = (),
) -> str:
    """Run ``code`` in a fresh interpreter (import order matters there), under the command
    ``prefix`` if given (``unshare ...``); returns stdout (followed by stderr with
    ``stderr=True``)."""
    full_env = clean_env()
    full_env.update(env or {})
    proc = subprocess.run(
        [*prefix, sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
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
    return proc.stdout + proc.stderr if stderr else proc.stdout


def stock_and_shim(calls: Callable[[], Any]) -> tuple[Any, Any]:
    """Run ``calls`` (requests, returning what they gave) against stock requests, then with
    the shim installed; the shim is uninstalled afterwards."""
    requests_fastssl.uninstall()
    stock = calls()
    requests_fastssl.install()
    try:
        shim = calls()
    finally:
        requests_fastssl.uninstall()
    return stock, shim


@contextlib.contextmanager
def other_contents_during_first_load(
    mapping: mmap.mmap, during: bytes, after: bytes, method: str = "load_verify_locations"
) -> Iterator[None]:
    """Within the block, the first client-side ``method`` load in this thread reads ``during``
    from the file behind ``mapping`` (a shared mmap of it), which holds ``after`` again before
    the load returns: a change no timestamp shows and no check can see, timed by the profiler
    (an attacker's best case)."""
    flips: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if getattr(arg, "__name__", "") != method:
            return
        if getattr(getattr(arg, "__self__", None), "protocol", None) == ssl.PROTOCOL_TLS_SERVER:
            return
        if event == "c_call" and not flips:
            mapping[:] = during
            flips.append("during")
        elif event in ("c_return", "c_exception") and flips == ["during"]:
            mapping[:] = after
            flips.append("after")

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)
    assert flips == ["during", "after"], "no client-side load happened in the block"


def aged(*paths: str | Path) -> None:
    """Return once each file's mtime and ctime are older than the racily-clean window (a wait
    on the wall clock, at most the window itself, for files written just now): the shim then
    proves them unchanged by their identity alone. ctime cannot be set back by any call."""
    from _requests_fastssl._files import RACY_WINDOW_NS

    for path in paths:
        st = os.stat(path)
        ready = max(st.st_mtime_ns, st.st_ctime_ns) + RACY_WINDOW_NS + 50_000_000
        while (left := ready - time.time_ns()) > 0:
            time.sleep(left / 1e9)


def two_bundles(pki: PKI, where: Path) -> tuple[Path, bytes, bytes]:
    """``where``/bundle.pem holding the trusted CA, its bytes, and the rogue CA's bytes padded
    to the same size (for rewrites in place that leave the size alone)."""
    bundle = where / "bundle.pem"
    trusted, rogue = same_size(Path(pki.bundle).read_bytes(), Path(pki.rogue_bundle).read_bytes())
    bundle.write_bytes(trusted)
    return bundle, trusted, rogue


def same_size(a: bytes, b: bytes) -> tuple[bytes, bytes]:
    """Two PEM files padded to one size (OpenSSL ignores text outside the PEM blocks)."""
    size = max(len(a), len(b))
    return a + b"\n" * (size - len(a)), b + b"\n" * (size - len(b))


def interrupted_at(n: int, codes: set[Any], call: Callable[[], object]) -> int:
    """Run ``call`` with ``KeyboardInterrupt`` raised at the n-th line or opcode executed in
    ``codes`` (a trace hook raises it where a signal handler could); returns how many such
    points the call passed (all of them for an ``n`` beyond the last)."""
    seen = [0]

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event in ("line", "opcode"):
            seen[0] += 1
            if seen[0] == n:
                raise KeyboardInterrupt
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code in codes:
            frame.f_trace_opcodes = True
            return local
        return None

    sys.settrace(tracer)
    try:
        call()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return seen[0]


# For a script run in a fresh interpreter (after ``import os, threading``): ``in_own_table(f,
# holder)`` runs ``f()`` in a thread that called unshare(CLONE_FILES), a descriptor table of
# its own, while the main thread holds ``holder`` at every free descriptor number: there
# /proc/self/fd/N names the main thread's N. Gives f's result, or ["refused", errno] where
# unshare is forbidden (a container's seccomp policy).
IN_OWN_FILE_TABLE = """
import ctypes as _ctypes

def in_own_table(f, holder):
    libc = _ctypes.CDLL(None, use_errno=True)
    got, ready, go = [], threading.Event(), threading.Event()

    def worker():
        if libc.unshare(0x400) != 0:  # CLONE_FILES
            got.append(["refused", _ctypes.get_errno()])
            ready.set()
            return
        ready.set()
        go.wait()
        got.extend(f())

    thread = threading.Thread(target=worker)
    thread.start()
    ready.wait()
    source, copies = os.open(holder, os.O_RDONLY), []
    for n in range(3, 256):
        try:
            os.fstat(n)
        except OSError:
            os.dup2(source, n)
            copies.append(n)
    go.set()
    thread.join()
    for n in copies + [source]:
        os.close(n)
    return got
"""


# A conftest for pytester projects: `server`, a loopback HTTPS server with a throwaway CA.
SERVER_CONFTEST = """
import ssl
import pytest, trustme
from _requests_fastssl.cli.server import HTTPSServer

@pytest.fixture
def server(tmp_path):
    # (url, bundle) of a loopback HTTPS server with a throwaway CA
    ca = trustme.CA()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    with HTTPSServer(ctx) as running:
        yield running.url, str(bundle)
"""
