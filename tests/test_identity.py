"""Issue 29's file checks, one test per decision: a trust file is proven unchanged by one stat
of its identity and the process's credentials, and read only while racily clean or when they
differ; with verification off and no client certificate nothing is checked. Each test runs the
same requests stock and shimmed and compares what they gave."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import requests
import urllib3
from support import (
    IN_OWN_FILE_TABLE,
    PKI,
    ROOT,
    ServerFactory,
    aged,
    clean_env,
    outcome,
    run_python,
    same_size,
    stock_and_shim,
    two_bundles,
)

import requests_fastssl

pytestmark = pytest.mark.urllib3_2  # (urllib3 1.26 stays stock: nothing shared to check)

CLOSE = {"Connection": "close"}
_OPENS: dict[str, int] = {}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str) and args[0] in _OPENS:
        _OPENS[args[0]] += 1


sys.addaudithook(_audit)  # (for good: audit hooks cannot be removed; it counts watched paths)


@contextlib.contextmanager
def opens_of(path: Path) -> Iterator[Callable[[], int]]:
    """Python-level opens of ``path`` within the block (the shim's reads; stock's loads are
    OpenSSL's own and raise no audit event)."""
    _OPENS[str(path)] = 0
    try:
        yield lambda: _OPENS[str(path)]
    finally:
        del _OPENS[str(path)]


def _restore_times(path: Path, st: os.stat_result) -> None:
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("window", ["inside", "outside"])
def test_a_same_size_rewrite_with_mtime_restored_is_seen(
    window: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """The bundle rewritten in place with another CA, same size, its mtime set back (cp -p,
    tar, rsync -t): within the racily-clean window its contents are read again; outside it,
    after connections that opened nothing, its ctime (which no call sets back) shows it."""
    server = make_server()
    bundle = tmp_path / "bundle.pem"
    trusted, rogue = same_size(Path(pki.bundle).read_bytes(), Path(pki.rogue_bundle).read_bytes())

    def get() -> Any:
        return outcome(lambda: requests.get(server.url, verify=str(bundle), headers=CLOSE))

    def calls() -> tuple[list[Any], int]:
        bundle.write_bytes(trusted)
        with opens_of(bundle) as opens:
            got = [get()]
            if window == "outside":
                aged(bundle)
                got.append(get())  # (moves the moment: the last read)
                before = opens()
                got.append(get())
                quiet = opens() - before
            else:
                quiet = 0
            st = bundle.stat()
            bundle.write_bytes(rogue)
            _restore_times(bundle, st)
            assert bundle.stat().st_mtime_ns == st.st_mtime_ns
            got += [get(), get()]
        return got, quiet

    (stock, _), (shim, quiet) = stock_and_shim(calls)
    assert [o[0] for o in stock] == ["200"] * (3 if window == "outside" else 1) + ["SSLError"] * 2
    assert shim == stock
    assert quiet == 0  # outside the window: a stat, no open


@pytest.mark.parametrize("clock", ["as-is", "moved-ahead"])
def test_a_write_through_a_shared_mapping_is_seen_inside_the_window(
    clock: str,
    make_server: ServerFactory,
    pki: PKI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writes through a shared mapping to pages already dirty move no timestamp: the identity
    is unchanged while the contents are not. Inside the racily-clean window the contents are
    compared, so the rewrite is seen (outside it, a documented limit). moved-ahead: a library
    that moves ``time.time_ns`` a day ahead in place after import (time-machine patches the
    builtin itself, so no captured reference escapes it) would make files stamped just now
    look a day old; the clock is the earlier of that and the monotonic clock at import's
    distance, so the window holds."""
    import mmap

    from _requests_fastssl import _files

    if clock == "moved-ahead":
        real = _files._real
        monkeypatch.setattr(_files, "_real", lambda: real() + 86_400 * 10**9)
    server_a, server_b = make_server(), make_server(ca=pki.rogue_ca)
    bundle, trusted, rogue = two_bundles(pki, tmp_path)

    def get(url: str) -> Any:
        return outcome(lambda: requests.get(url, verify=str(bundle), headers=CLOSE))

    def calls() -> tuple[list[Any], bool]:
        with open(bundle, "r+b") as f, mmap.mmap(f.fileno(), len(trusted)) as m:
            m[:] = trusted  # (dirty pages: later writes move no timestamp)
            before = bundle.stat()
            got = [get(server_a.url), get(server_b.url)]
            m[:] = rogue
            after = bundle.stat()
            got += [get(server_a.url), get(server_b.url)]
            m[:] = trusted
        unseen = (before.st_mtime_ns, before.st_ctime_ns) == (after.st_mtime_ns, after.st_ctime_ns)
        return got, unseen

    (stock, unseen), (shim, _) = stock_and_shim(calls)
    assert unseen  # (the condition: no timestamp moved)
    assert [o[0] for o in stock] == ["200", "SSLError", "SSLError", "200"]
    assert shim == stock


def test_a_fresh_bundle_leaves_the_window_after_its_first_checks(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """Just written, the bundle is read at every new connection; once its timestamps are older
    than the window, one comparison moves the moment and the next connections only stat it."""
    server = make_server()
    bundle = tmp_path / "bundle.pem"

    def get() -> Any:
        return outcome(lambda: requests.get(server.url, verify=str(bundle), headers=CLOSE))

    def calls() -> tuple[list[Any], list[int]]:
        requests_fastssl.clear()
        bundle.write_bytes(Path(pki.bundle).read_bytes())
        got, counts = [], []
        with opens_of(bundle) as opens:
            got.append(get())  # the build
            for _ in range(2):
                before = opens()
                got.append(get())
                counts.append(opens() - before)
            aged(bundle)
            for _ in range(3):
                before = opens()
                got.append(get())
                counts.append(opens() - before)
        return got, counts

    (stock, stock_counts), (shim, counts) = stock_and_shim(calls)
    assert stock == [("200", None)] * 6
    assert shim == stock
    assert stock_counts == [0] * 5  # (stock's reads are OpenSSL's: no audit event)
    assert counts == [1, 1, 1, 0, 0]  # read inside the window, the moment moved, then a stat


def test_verify_false_without_a_client_certificate_checks_no_file(
    make_server: ServerFactory, pki: PKI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify=False, no client certificate: the store decides nothing, so the default file it
    holds is neither stat'ed nor read, and its disappearing changes nothing, as in stock."""
    server = make_server()
    default = tmp_path / "default.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(default))
    touched: list[str] = []
    real_stat = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path) == str(default):
            touched.append(str(path))
        return real_stat(path, *args, **kwargs)

    def get() -> Any:
        return outcome(lambda: requests.get(server.url, verify=False, headers=CLOSE))

    def calls() -> list[Any]:
        requests_fastssl.clear()
        default.write_bytes(Path(pki.bundle).read_bytes())
        got = [get()]
        with monkeypatch.context() as m:
            m.setattr(os, "stat", stat)
            got += [get(), get()]
        default.unlink()
        return [*got, get()]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    after = requests_fastssl.stats().since(before)
    assert stock == [("200", None)] * 4
    assert shim == stock
    assert touched == []
    assert after.connections == 4
    assert after.contexts_built == 1


def test_verify_false_with_a_client_certificate(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """With a client certificate, the store completes the chain sent: stock does that work
    (default-store), and the server sees the same certificate, or the same error once the
    certificate is gone."""
    server = make_server(client_certs="optional")
    cert = tmp_path / "client.crt"

    def get() -> Any:
        return outcome(
            lambda: requests.get(
                server.url, verify=False, cert=(str(cert), pki.client_a.key), headers=CLOSE
            )
        )

    def calls() -> list[Any]:
        cert.write_bytes(Path(pki.client_a.cert).read_bytes())
        got = [get(), get()]
        cert.unlink()
        return [*got, get()]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    after = requests_fastssl.stats().since(before)
    assert stock[:2] == [("200", "client-a")] * 2
    assert stock[2][0] == "OSError"  # (requests' own check of the file)
    assert shim == stock
    assert after.step_aside_reasons.get("default-store") == 2


# --- rights: a chmod, and the process's own credentials (subprocesses, as another user) ------

_RIGHTS = """
import json, os, re, sys, time
import trustme, requests, requests_fastssl
from _requests_fastssl._files import RACY_WINDOW_NS
from _requests_fastssl.cli.server import HTTPSServer, server_context
mode, where, drop = sys.argv[1:4]
if mode == "stock":
    requests_fastssl.uninstall()
opens = [0]
bundle = os.path.join(where, "ca.pem")
ca = trustme.CA()
ca.cert_pem.write_to_path(bundle)
os.chmod(bundle, 0o600)
server = HTTPSServer(server_context(ca)).start()
# Once as the process starts, so that nothing is imported later: the interpreter and the
# packages may live where another user cannot read (a 0700 temporary directory).
requests.get(server.url, verify=bundle, headers={"Connection": "close"})
if drop == "user" and os.geteuid() == 0:  # (root reads whatever the mode: become nobody)
    os.chown(bundle, 65534, 65534)
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
def audit(event, args):
    if event == "open" and args and args[0] == bundle:
        opens[0] += 1
sys.addaudithook(audit)

def get():
    try:
        r = requests.get(server.url, verify=bundle, headers={"Connection": "close"})
        return [str(r.status_code), None]
    except Exception as exc:
        return [type(exc).__name__, re.sub(r"port=\\d+", "port=P", str(exc))]

out = [get()]
st = os.stat(bundle)
while time.time_ns() < max(st.st_mtime_ns, st.st_ctime_ns) + RACY_WINDOW_NS + 50_000_000:
    time.sleep(0.05)
out.append(get())
before = opens[0]
out.append(get())
quiet = opens[0] - before
if drop == "user":
    os.chmod(bundle, 0)
    out.append(get())
    os.chmod(bundle, 0o600)
else:
    os.setegid(65534); os.seteuid(65534)
    out.append(get())
    os.seteuid(0); os.setegid(0)
out.append(get())
server.stop()
print(json.dumps([out, quiet]))
"""


def _rights(drop: str) -> tuple[Any, Any]:
    where = tempfile.mkdtemp(prefix="fastssl-rights-")
    os.chmod(where, 0o777)
    results = []
    try:
        for mode in ("stock", "shim"):
            for name in os.listdir(where):
                os.unlink(os.path.join(where, name))
            proc = subprocess.run(
                [sys.executable, "-c", textwrap.dedent(_RIGHTS), mode, where, drop],
                capture_output=True, text=True, timeout=120, cwd=str(ROOT), env=clean_env(),
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return results[0], results[1]


@pytest.mark.subprocess
def test_chmod_000_and_back_as_a_non_root_user() -> None:
    """A bundle its owner can no longer read (chmod 000; root would read it anyway, so the
    client runs as nobody when the suite runs as root): stock's load fails; so must the
    shim's, after connections that proved it unchanged by a stat alone. Readable again: both
    succeed."""
    (stock, _), (shim, quiet) = _rights("user")
    assert [o[0] for o in stock] == ["200", "200", "200", "SSLError", "200"]
    assert "Permission denied" in stock[3][1]
    assert shim == stock
    assert quiet == 0


@pytest.mark.subprocess
@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="dropping to another uid and back needs root (CI runs as root)",
)
def test_a_drop_to_another_uid_and_back() -> None:
    """The process's effective uid and gid changed after the build (a daemon dropping its
    rights): the file's identity is the same, so the credentials are what shows it. Stock
    cannot open the bundle (mode 600, root's); neither can the shim. Back to root: both can."""
    (stock, _), (shim, quiet) = _rights("euid")
    assert [o[0] for o in stock] == ["200", "200", "200", "SSLError", "200"]
    assert "Permission denied" in stock[3][1]
    assert shim == stock
    assert quiet == 0


# --- system calls per new connection, counted by strace --------------------------------------

_COUNTED = """
import os, sys, time
import requests, requests_fastssl
from _requests_fastssl._files import RACY_WINDOW_NS
from _requests_fastssl.cli.server import HTTPSServer, server_context
import trustme
if sys.argv[1] == "stock":
    requests_fastssl.uninstall()
bundle, cert, key, default, marker = sys.argv[2:7]
ca = trustme.CA()
server = HTTPSServer(server_context(ca, client_ca=ca, client_mode=1)).start()
client = ca.issue_cert("client")
pem = ca.cert_pem.bytes()
for path, data in ((bundle, pem), (default, pem), (cert, client.cert_chain_pems[0].bytes()),
                   (key, client.private_key_pem.bytes())):
    with open(path, "wb") as f:
        f.write(data)
secure = dict(verify=bundle, cert=(cert, key), headers={"Connection": "close"})
insecure = dict(verify=False, headers={"Connection": "close"})
for kwargs in (secure, insecure):
    assert requests.get(server.url, **kwargs).status_code == 200  # (the build)
latest = max(max(os.stat(p).st_mtime_ns, os.stat(p).st_ctime_ns) for p in (bundle, cert, key))
while time.time_ns() < latest + RACY_WINDOW_NS + 50_000_000:
    time.sleep(0.05)
for kwargs in (secure, insecure):
    assert requests.get(server.url, **kwargs).status_code == 200  # (the moment moves)
for kwargs in (secure, insecure):
    os.stat(marker)
    for _ in range(5):
        assert requests.get(server.url, **kwargs).status_code == 200
os.stat(marker)
server.stop()
"""


@pytest.mark.subprocess
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is installed by .ci/run")
def test_one_stat_per_trust_file_per_new_connection(tmp_path: Path) -> None:
    """Five new connections with a CA file and a client certificate and key, then five with
    verify=False and a default file: the shim makes one stat per file per connection and no
    open (stock opens each one per connection), and touches no file under verify=False."""
    names = ("bundle", "cert", "key", "default", "marker")
    paths = {name: str(tmp_path / f"{name}.pem") for name in names}
    Path(paths["marker"]).touch()
    counts = {}
    for mode in ("stock", "shim"):
        trace = tmp_path / f"{mode}.trace"
        argv = ["strace", "-f", "-qq", "-o", str(trace)]
        for path in paths.values():
            argv += ["-P", path]
        env = {**clean_env(), "SSL_CERT_FILE": paths["default"]}
        script = textwrap.dedent(_COUNTED)
        argv += [sys.executable, "-c", script, mode, *paths.values()]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        phases: list[dict[tuple[str, str], int]] = []
        for line in trace.read_text().splitlines():
            match = re.match(r"(?:\d+\s+)?(\w+)\((?:AT_FDCWD, )?\"([^\"]+)\"", line)
            if match is None:
                continue
            call, path = match.groups()
            name = next((n for n, p in paths.items() if p == path), "?")
            if name == "marker":
                phases.append({})
            elif phases:
                kind = "stat" if "stat" in call else call
                phases[-1][name, kind] = phases[-1].get((name, kind), 0) + 1
        counts[mode] = phases[:2]
    (stock, stock_insecure), (shim, insecure) = counts["stock"], counts["shim"]
    files = ("bundle", "cert", "key")
    assert all(stock.get((n, "openat"), 0) >= 5 for n in files)  # stock loads each per connection
    assert stock_insecure.get(("default", "openat")) == 5
    # The shim: requests' own existence checks (stock's too), one stat of its own, no open.
    assert {shim.get((n, "stat"), 0) - stock.get((n, "stat"), 0) for n in files} == {5}
    assert set(shim) == {(n, "stat") for n in files}
    assert insecure == {}


# --- what the attack on this change found (a helper's review) --------------------------------


def _good_rogue_and_link(pki: PKI, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The tests' bundle and the rogue one, aged out of the racily-clean window, and the
    path of a symlink to point at either."""
    good, rogue, link = tmp_path / "good.pem", tmp_path / "rogue.pem", tmp_path / "bundle.pem"
    good.write_bytes(Path(pki.bundle).read_bytes())
    rogue.write_bytes(Path(pki.rogue_bundle).read_bytes())
    aged(good, rogue)
    return good, rogue, link


def _point(link: Path, target: Path) -> None:
    os.symlink(target, f"{link}.new")
    os.replace(f"{link}.new", link)


def _swapped_first_request(
    url: str, link: Path, good: Path, rogue: Path, at: set[str], first: bool = False
) -> Any:
    """The outcomes of three new connections after a first one during which ``link`` names
    ``rogue`` only while the build opens and reads the file (``read``: between its stats, a
    stat each side seeing ``good``) and/or only while OpenSSL loads it (``load``); with
    ``first``, that one's outcome before them."""

    def get() -> Any:
        return outcome(lambda: requests.get(url, verify=str(link), headers=CLOSE))

    requests_fastssl.clear()
    _point(link, good)
    flips: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        name = getattr(arg, "__name__", "")
        if "read" in at and event == "call" and frame.f_code.co_name == "_pieces" and not flips:
            _point(link, rogue)  # (before the build's open)
            flips.append("read")
        elif "read" in at and event == "c_call" and name == "read" and flips == ["read"]:
            _point(link, good)  # (the file is open: the stat after the read sees good)
            flips.append("read back")
        elif name == "load_verify_locations" and "load" in at:
            if event == "c_call" and "load" not in flips:
                _point(link, rogue)
                flips.append("load")
            elif event in ("c_return", "c_exception") and flips[-1:] == ["load"]:
                _point(link, good)
                flips.append("load back")

    sys.setprofile(profile)
    try:
        swapped = get()  # (stock's outcome depends on its load meeting the swap)
    finally:
        sys.setprofile(None)
    assert flips[-2:] == ["load", "load back"]  # (stock reads nothing in Python: no "read")
    return [swapped] * first + [get() for _ in range(3)]


def test_a_path_repointed_only_while_the_build_loads_it_is_not_kept(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """`ln -sfn` to another bundle and back exactly while OpenSSL loads the first one (timed by
    the profiler, an attacker's best case): no stat of the file read sees it, since its inode
    never changed. The build loads the file through the descriptor its check opened, which
    the swap cannot reach: nothing trusted from the other file is kept, and the connections
    after trust what the path names, as stock's loads do."""
    server = make_server(ca=pki.rogue_ca)  # only the rogue CA trusts this server
    good, rogue, link = _good_rogue_and_link(pki, tmp_path)
    stock, shim = stock_and_shim(
        lambda: _swapped_first_request(server.url, link, good, rogue, {"load"})
    )
    assert [o[0] for o in stock] == ["SSLError"] * 3
    assert shim == stock


def test_the_store_is_loaded_from_the_file_the_build_read(
    make_server: ServerFactory, pki: PKI, tmp_path: Path, shim: None
) -> None:
    """The CA file reaches OpenSSL through the descriptor open on the file the build's check
    read (``/proc/thread-self/fd/N``), not as its path a second time: the path repointed to
    another bundle exactly while the load runs changes nothing, for the building connection
    too (stock's own load reads the path at that moment; the shim opened it a moment before,
    in the same set-up), and no later one."""
    server = make_server()  # only the trusted CA's bundle trusts this server
    good, rogue, link = _good_rogue_and_link(pki, tmp_path)
    before = requests_fastssl.stats()
    outcomes = _swapped_first_request(server.url, link, good, rogue, {"load"}, first=True)
    assert [o[0] for o in outcomes] == ["200"] * 4
    counts = requests_fastssl.stats().since(before)
    assert (counts.contexts_built, counts.reuses, counts.discards) == (1, 3, 0)


def test_a_path_repointed_while_the_build_reads_it_and_again_while_it_loads_it_is_not_kept(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """The path names the rogue bundle while the build opens and reads it (a stat each side
    sees the good one) and again while OpenSSL loads it: the bytes read and the store agreed,
    both rogue, so the store comparison of an earlier design passed. The descriptor read is
    checked against the stat before it (fstat): the build reads what the path names, or
    nothing, and loads through a descriptor with that identity."""
    server = make_server(ca=pki.rogue_ca)  # only the rogue CA trusts this server
    good, rogue, link = _good_rogue_and_link(pki, tmp_path)
    stock, shim = stock_and_shim(
        lambda: _swapped_first_request(server.url, link, good, rogue, {"read", "load"})
    )
    assert [o[0] for o in stock] == ["SSLError"] * 3
    assert shim == stock


def _client_swapped_during_first_load(
    url: str, bundle: str, links: tuple[Path, Path], good: tuple[str, str], other: tuple[str, str]
) -> list[Any]:
    """Four new connections with a client certificate and key named by symlinks, which name
    ``other`` exactly while the first ``load_cert_chain`` runs (timed by the profiler, an
    attacker's best case) and ``good`` before and after it."""
    for link, target in zip(links, good, strict=True):
        _point(link, Path(target))
    swaps: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if getattr(arg, "__name__", "") != "load_cert_chain":
            return
        if event == "c_call" and not swaps:
            for link, target in zip(links, other, strict=True):
                _point(link, Path(target))
            swaps.append("other")
        elif event in ("c_return", "c_exception") and swaps == ["other"]:
            for link, target in zip(links, good, strict=True):
                _point(link, Path(target))
            swaps.append("back")

    def get() -> Any:
        cert = (str(links[0]), str(links[1]))
        return outcome(lambda: requests.get(url, verify=bundle, cert=cert, headers=CLOSE))

    requests_fastssl.clear()
    sys.setprofile(profile)
    try:
        first = get()
    finally:
        sys.setprofile(None)
    assert swaps == ["other", "back"]
    return [first, *(get() for _ in range(3))]


def test_a_client_certificate_swapped_in_only_while_the_build_loads_it_is_never_sent_again(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """`ln -sfn` of the certificate and key to another client's and back exactly while
    OpenSSL loads them: stock sends the other certificate on that connection only. A shared
    context loaded from the paths kept sending it, since no stat sees a symlink swapped and
    back; it is now loaded through descriptors open on the files the checks read."""
    server = make_server(client_certs="required")
    links = (tmp_path / "client.crt", tmp_path / "client.key")
    aged(*pki.client_a.pair, *pki.client_b.pair)
    stock, shim = stock_and_shim(
        lambda: _client_swapped_during_first_load(
            server.url, pki.bundle, links, pki.client_a.pair, pki.client_b.pair
        )
    )
    assert stock == [("200", "client-b")] + [("200", "client-a")] * 3
    # (the first: what the path named when the build read it, a moment before stock's load)
    assert shim == [("200", "client-a")] * 4


@pytest.mark.parametrize("which", ["ca-file", "client-certificate"])
def test_a_file_that_openssl_cannot_open_through_its_descriptor_goes_to_stock(
    which: str, make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenSSL's open of a ``/proc/thread-self/fd`` name fails (here a name that does not exist,
    as a security module's refusal or a descriptor closed by another thread would): an errno,
    not an SSLError of the file's bytes, so the shim's failure, not the connection's; stock
    loads the paths and sends the certificate, as it does without the shim."""
    from _requests_fastssl import _contexts
    from _requests_fastssl._files import pinned as real

    @contextlib.contextmanager
    def unopenable(checks: Any) -> Iterator[list[str]]:
        with real(checks) as names:
            if (checks[0].path == pki.bundle) == (which == "ca-file"):
                names = [f"/nonexistent/proc/thread-self/fd/{n}" for n in range(len(checks))]
            yield names

    monkeypatch.setattr(_contexts, "pinned", unopenable)
    server = make_server(client_certs="required")

    def calls() -> list[Any]:
        requests_fastssl.clear()
        return [
            outcome(lambda: requests.get(server.url, verify=pki.bundle, cert=pki.client_a.pair))
            for _ in range(2)
        ]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    after = requests_fastssl.stats().since(before)
    assert stock == shim == [("200", "client-a")] * 2
    assert (after.contexts_built, after.build_failures, after.connections) == (0, 1, 0)
    assert after.step_aside_reasons == {"build-failed": 2}


_CLIENT_RUN = """
import json, os, sys, threading
import requests, requests_fastssl

def get():
    try:
        r = requests.get(URL, verify=BUNDLE, cert=CERT, headers={"Connection": "close"})
        return [str(r.status_code), r.json()["client_cn"]]
    except Exception as exc:
        return [type(exc).__name__, str(exc)]

def twice():
    return [get(), get()]

requests_fastssl.uninstall()
stock = RUN()
requests_fastssl.install()
shim = RUN()
stats = requests_fastssl.stats()
print(json.dumps([stock, shim, stats.contexts_built, stats.step_aside_reasons]))
"""


def _client_run(pki: PKI, url: str, prelude: str, run: str, prefix: tuple[str, ...] = ()) -> Any:
    """Stock's and the shim's outcomes of ``run`` (a function of the script, after
    ``prelude``) in a fresh interpreter, with client-a's certificate and key."""
    names = f"URL, BUNDLE, CERT = {url!r}, {pki.bundle!r}, {pki.client_a.pair!r}\n"
    code = names + textwrap.dedent(prelude) + _CLIENT_RUN.replace("RUN()", f"{run}()")
    return json.loads(run_python(code, prefix=prefix).strip().splitlines()[-1])


@pytest.mark.subprocess
def test_a_thread_with_its_own_file_table_presents_the_named_client_certificate(
    make_server: ServerFactory, pki: PKI
) -> None:
    """A thread that called unshare(CLONE_FILES) has a descriptor table of its own: in it,
    /proc/self/fd/N names the main thread's descriptor N, here client-b's certificate and key
    at every free number. The load goes through /proc/thread-self/fd: client-a, as stock."""
    server = make_server(client_certs="required")
    prelude = IN_OWN_FILE_TABLE + textwrap.dedent(
        f"""
        def own_table():
            return in_own_table(twice, {pki.client_b.combined!r})
        """
    )
    stock, shim, built, _ = _client_run(pki, server.url, prelude, "own_table")
    if stock[0][0] == "refused":
        # A seccomp policy (a container's default) that forbids unshare(): no thread here
        # can have a descriptor table of its own, so the case cannot arise on this machine.
        pytest.skip(f"unshare refused ({stock[0]}): no thread can have a table of its own")
    assert stock == [["200", "client-a"]] * 2
    assert shim == stock
    assert built == 1


# The client certificate alone through a descriptor: the CA as urllib3's ca_cert_data
# (stock's own cadata step in the build), not a file.
_VIA_CA_DATA = """
import urllib3

def via_ca_data():
    def get():
        with open(BUNDLE) as f:
            data = f.read()
        # (a pool, not a PoolManager: urllib3 before 2.1 keys no pool by ca_cert_data)
        url = urllib3.util.parse_url(URL)
        with urllib3.HTTPSConnectionPool(url.host, url.port, ca_cert_data=data,
                                         cert_file=CERT[0], key_file=CERT[1]) as pool:
            r = pool.request("GET", "/", retries=False, headers={"Connection": "close"})
        return [str(r.status), json.loads(r.data)["client_cn"]]
    return [get(), get()]
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("entries", ["symlinks", "files"])
@pytest.mark.parametrize("loaded", ["ca-file", "client-certificate", "both"])
def test_a_proc_that_is_not_procfs_leaves_the_files_to_stock(
    make_server: ServerFactory, pki: PKI, tmp_path: Path, entries: str, loaded: str
) -> None:
    """A /proc that is a plain directory (a hostile container's, here bind-mounted in a
    mount namespace of the test's own) whose thread-self/fd entries name other files (the
    rogue bundle, client-b's certificate and key): procfs's links are symlinks of mode 0500,
    which no other file system makes; anything else there, and stock loads the paths the
    caller gave (``no-procfs``, not the files' failure). A CA file, a client certificate
    (with urllib3's ``ca_cert_data``), and both (the CA file's load comes first)."""
    server = make_server(client_certs="optional")
    other = pki.rogue_bundle if loaded == "ca-file" else pki.client_b.combined
    for n, table in itertools.product(range(3, 256), ("self", "thread-self")):
        entry = tmp_path / "proc" / table / "fd" / str(n)
        entry.parent.mkdir(parents=True, exist_ok=True)
        if entries == "symlinks":
            entry.symlink_to(other)
        else:
            entry.write_bytes(Path(other).read_bytes())
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    mount = f'mount --make-rprivate / && mount --bind {tmp_path / "proc"} /proc && exec "$@"'
    prefix = ("unshare", "-m" if root else "-rm", "sh", "-c", mount, "sh")
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        # Neither root nor user namespaces (a container's seccomp policy): nothing on this
        # machine can put another file system at /proc for this process.
        pytest.skip(f"no mount namespace here: {probe.stderr.strip()}")
    prelude, run = {
        "ca-file": ("CERT = None\n", "twice"),
        "client-certificate": (_VIA_CA_DATA, "via_ca_data"),
        "both": ("", "twice"),
    }[loaded]
    stock, shim, built, reasons = _client_run(pki, server.url, prelude, run, prefix)
    assert stock == [["200", None if loaded == "ca-file" else "client-a"]] * 2
    assert shim == stock
    assert (built, reasons) == (0, {"no-procfs": 2})


class _PoolResponse:
    """What ``outcome`` reads of a response, from urllib3's own request."""

    def __init__(self, pool: Any, url: str) -> None:
        response = pool.request("GET", url, retries=False)
        self.status_code, self.body = response.status, response.data

    def json(self) -> Any:
        return json.loads(self.body)


@pytest.mark.parametrize("which", ["verify", "key"])
def test_a_descriptor_number_for_a_trust_file_is_left_to_stock(
    make_server: ServerFactory, pki: PKI, which: str
) -> None:
    """An int where a path goes (an open descriptor of the file): stock's load refuses it
    (TypeError), where the checks read it as a descriptor, and closed it (a CA bundle so read
    was trusted; a key's descriptor was gone for urllib3's own read). Only paths are read."""
    server = make_server(client_certs="optional")

    def calls() -> list[Any]:
        requests_fastssl.clear()
        path = pki.bundle if which == "verify" else pki.client_a.key
        fd = os.open(path, os.O_RDONLY)
        try:
            if which == "verify":  # (requests refuses an int itself: urllib3 takes it)
                pool: Any = urllib3.PoolManager(ca_certs=fd)
                got = outcome(lambda: cast(Any, _PoolResponse(pool, server.url)))
            else:
                cert: Any = (pki.client_a.cert, fd)
                got = outcome(lambda: requests.get(server.url, verify=pki.bundle, cert=cert))
        finally:
            # (still that file: a number closed may be reused meanwhile, by a server's
            # socket, which is not ours to close)
            try:
                open_after = os.path.samestat(os.fstat(fd), os.stat(path))
            except OSError:
                open_after = False
            if open_after:
                os.close(fd)
        return [got, open_after]

    stock, shim = stock_and_shim(calls)
    assert stock[0][0] == "TypeError", stock
    assert shim == stock


class _MovablePath:
    """A path object whose ``__fspath__`` follows an attribute (a config object, a rotating
    credentials holder): the same object, hashed by identity, names another file later."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return self.path


def test_a_path_object_that_names_another_file_later_presents_that_file(
    make_server: ServerFactory, pki: PKI
) -> None:
    """Stock reads ``__fspath__`` at each load. The key and the checks now come from one
    reading of it in the decision; the checks once kept the first file's name under a key
    that stayed the object's, and the first certificate was sent again."""
    server = make_server(client_certs="required")

    def calls() -> list[Any]:
        requests_fastssl.clear()
        cert = _MovablePath(pki.client_a.combined)
        got = []
        pair: Any = (cert, None)  # (requests takes a non-str as a (cert, key) pair)
        for target in (pki.client_a, pki.client_b, pki.client_a):
            cert.path = target.combined
            got.append(outcome(lambda: requests.get(server.url, verify=pki.bundle, cert=pair)))
        return got

    stock, shim = stock_and_shim(calls)
    assert stock == [("200", "client-a"), ("200", "client-b"), ("200", "client-a")]
    assert shim == stock


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")
def test_a_signal_handler_taking_args_raises_through_the_checks(
    make_server: ServerFactory, pki: PKI
) -> None:
    """A timeout handler written ``def handler(*args)`` that raises an Exception of its own,
    fired at the first system call of the TLS set-up (the checks' stat in the shim, the load
    in stock): the request raises it in both. The checks took only a handler's frame with a
    signal number and a frame in its first locals for a signal's, and this one's exception
    for theirs: the request then succeeded through stock."""

    class Timeout(Exception):
        pass

    def handler(*args: Any) -> None:
        raise Timeout("deadline")

    server = make_server()

    def profile(frame: Any, event: str, arg: Any) -> None:
        name = getattr(arg, "__name__", "")
        ours = name == "stat" and "_requests_fastssl" in frame.f_code.co_filename
        if event == "c_call" and (ours or name == "load_verify_locations"):
            sys.setprofile(None)
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

    def calls() -> Any:
        requests_fastssl.clear()
        sys.setprofile(profile)
        try:
            return outcome(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
        finally:
            sys.setprofile(None)

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        stock, shim = stock_and_shim(calls)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert stock[0].endswith(".Timeout")
    assert stock[1] == "deadline"
    assert shim == stock


def test_a_file_is_loaded_only_as_the_file_its_check_read(pki: PKI, tmp_path: Path) -> None:
    """The descriptors a CA file or client certificate is loaded through: refused if the path
    names another file than the one read, or if the file is written before the load ends
    (ctime), however the load ends: a load that failed meanwhile did not fail for the file."""
    from _requests_fastssl._files import Unpinned, pinned, read_checks

    link = tmp_path / "client.crt"
    _point(link, Path(pki.client_a.cert))
    checks = read_checks((str(link),))
    assert checks is not None
    with pinned(checks) as names:
        assert Path(names[0]).read_bytes() == Path(pki.client_a.cert).read_bytes()
    _point(link, Path(pki.client_b.cert))
    with pytest.raises(OSError, match="not the one read"), pinned(checks):
        pass
    _point(link, Path(pki.client_a.cert))
    with pytest.raises(Unpinned, match="written while it was loaded"), pinned(checks):
        os.chmod(pki.client_a.cert, os.stat(pki.client_a.cert).st_mode)  # (ctime moves)
    checks = read_checks((str(link),))
    assert checks is not None
    with pytest.raises(ValueError, match="the load's own"), pinned(checks):
        raise ValueError("the load's own error")  # (the file unchanged: the load's error)

    def failed_while_written() -> None:
        os.chmod(pki.client_a.cert, os.stat(pki.client_a.cert).st_mode)
        raise ValueError("the load's own error")

    with pytest.raises(Unpinned, match="written while it was loaded") as caught, pinned(checks):
        failed_while_written()
    assert caught.value.procfs


def _self_signed_leaf(name: str) -> tuple[bytes, bytes]:
    """A self-signed certificate for 127.0.0.1 that is not a CA (a pinned server certificate
    in a bundle), and its key."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def test_a_pinned_certificate_swapped_while_the_build_loads_it_is_not_kept(
    pki: PKI, tmp_path: Path
) -> None:
    """A bundle with a CA and a pinned self-signed server certificate (not a CA), swapped only
    while OpenSSL loads it for the same CA and another pinned certificate: the certificate
    count matches and ``get_ca_certs()`` shows CAs alone, so the store comparison of an
    earlier design could not see it. The load goes through the descriptor the build's check
    opened: the swap does not reach it."""
    import ssl

    from _requests_fastssl.cli.server import HTTPSServer

    pin, _ = _self_signed_leaf("pinned")
    rogue_pin, rogue_key = _self_signed_leaf("rogue")
    good, rogue, link = tmp_path / "good.pem", tmp_path / "rogue.pem", tmp_path / "bundle.pem"
    good.write_bytes(pki.ca.cert_pem.bytes() + pin)
    rogue.write_bytes(pki.ca.cert_pem.bytes() + rogue_pin)
    (tmp_path / "rogue.crt").write_bytes(rogue_pin)
    (tmp_path / "rogue.key").write_bytes(rogue_key)
    aged(good, rogue)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(tmp_path / "rogue.crt", tmp_path / "rogue.key")
    with HTTPSServer(served) as server:  # the rogue pin's server
        stock, shim = stock_and_shim(
            lambda: _swapped_first_request(server.url, link, good, rogue, {"load"})
        )
    assert [o[0] for o in stock] == ["SSLError"] * 3
    assert shim == stock
