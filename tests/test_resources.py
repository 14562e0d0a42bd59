"""Bounded resources: cycling through 10,000 distinct trust sources or client certificates
keeps the registry at its bound and memory flat; install, load and uninstall leave no file
descriptor or thread behind. Each runs in a fresh interpreter, so that what is measured is
the shim's and requests' own use, not the test servers' (which stay in this process)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import PKI, ServerFactory, run_python

# Distinct CA paths; client certificates cost more to load, and a tenth as many show
# the same bound.
PATHS = {"ca": 10_000, "cert": 1_000}
CYCLE_CHILD = """
import gc, json, os, sys
import requests, requests_fastssl

url, where, kind, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
bundle, key = os.path.join(where, "ca.pem"), os.path.join(where, "a.key")

def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024

def one(i, seen):
    link = os.path.join(where, "links", f"{i}.pem")
    verify, cert = (link, None) if kind == "ca" else (bundle, (link, key))
    if i % 50 == 0:  # a real request now and then: the contexts built still work
        response = requests.get(url, verify=verify, cert=cert, headers={"Connection": "close"})
        assert response.status_code == 200, response.status_code
        seen.add(str(response.json()["client_cn"]))
    else:  # what a new connection would do, short of connecting: the context is built
        assert requests_fastssl.warm(verify=verify, cert=cert)

assert requests_fastssl.status().state.value == "active"
seen = set()
for i in range(n // 10):  # warm-up: allocator arenas, imports, the first pools
    one(i, seen)
gc.collect()
warm = rss_kb()
for i in range(n // 10, n):
    one(i, seen)
gc.collect()
end = rss_kb()
print(json.dumps({"warm_kb": warm, "end_kb": end, "seen": sorted(seen),
                  "stats": requests_fastssl.stats()._asdict()}))
"""


@pytest.mark.parametrize("kind", ["ca", "cert"])
@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.urllib3_2
def test_ten_thousand_distinct_paths_keep_the_registry_bounded(
    kind: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = make_server(client_certs="optional")
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(pki.bundle, tmp_path / "ca.pem")
    os.symlink(pki.client_a.cert, tmp_path / "a.crt")
    os.symlink(pki.client_a.key, tmp_path / "a.key")
    target = pki.bundle if kind == "ca" else pki.client_a.cert
    n = PATHS[kind]
    for i in range(n):  # distinct paths, one file: each path is its own registry key
        os.symlink(target, links / f"{i}.pem")
    out = run_python(
        "import sys; sys.argv[1:] = "
        + repr([server.url, str(tmp_path), kind, str(n)])
        + "\n"
        + CYCLE_CHILD
    )
    report = json.loads(out.strip().splitlines()[-1])
    stats = report["stats"]
    assert report["seen"] == (["None"] if kind == "ca" else ["client-a"])
    assert stats["contexts_built"] == n  # one per distinct path: nothing shared wrongly
    assert stats["entries"] == 64  # the default bound
    assert stats["evictions"] == n - 64
    # Memory flat: 90% of the contexts are built after the warm-up, for under 16 MiB more
    # RSS. Kept, 9,000 CA contexts take 170 MB here (measured with the bound lifted).
    growth_kb = report["end_kb"] - report["warm_kb"]
    assert growth_kb < 16 * 1024, report


LEAK_CHILD = """
import gc, json, os, threading
import requests, requests_fastssl
from concurrent.futures import ThreadPoolExecutor

url, bundle, cert, key = {args!r}
requests_fastssl.uninstall()

def fds():
    return sorted(os.listdir("/proc/self/fd"))

def load():
    def one(i):
        kwargs = [
            {{}}, {{"verify": bundle}}, {{"verify": False}},
            {{"verify": bundle, "cert": (cert, key)}},
        ][i % 4]
        with requests.Session() as session:
            assert session.get(url, **kwargs).status_code == 200
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(200)))

gc.collect()
before = (fds(), threading.active_count())
requests_fastssl.install()
load()
built = requests_fastssl.stats().contexts_built
requests_fastssl.uninstall()
load()  # stock again, on the same interpreter
gc.collect()
after = (fds(), threading.active_count())
print(json.dumps({{"before": before, "after": after, "built": built}}))
"""


@pytest.mark.urllib3_2
def test_no_fd_or_thread_leak_after_uninstall(
    make_server: ServerFactory, pki: PKI, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = make_server(client_certs="optional")
    args = (server.url, pki.bundle, pki.client_a.cert, pki.client_a.key)
    out = run_python(LEAK_CHILD.format(args=args), env={"REQUESTS_CA_BUNDLE": pki.bundle})
    report = json.loads(out.strip().splitlines()[-1])
    assert report["built"] >= 3  # the shim really shared contexts during the load
    assert report["after"] == report["before"]
