"""Waits under gevent never freeze the hub (issue 42): a greenlet that finds another one's build
under way waits on a lock that yields to its hub, and goes on whatever ends the build (a
timeout, a kill). In a single-threaded gevent process a build never yields by itself (its reads
and OpenSSL's load block the hub), so each test makes it yield: an audit hook on the shim's own
open of the CA file switches greenlets there (stock's load opens it in C: no event). Each runs
in a fresh interpreter, patched first; the server runs in this process."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import PKI, ServerFactory, run_python

# (urllib3 1.26 is left stock altogether: no build to wait for)
pytestmark = [pytest.mark.subprocess, pytest.mark.urllib3_2]
pytest.importorskip("gevent", reason="gevent has no wheel for this Python")

# {patch}: the patching line; {during}: what the hook does in the first open of the CA file;
# {spawn}: how the requests are started (``spawn(one)`` gives a joinable).
_CHILD = """
{patch}
import json, sys
import gevent
import requests_fastssl
requests_fastssl.install()
import requests

URL, BUNDLE = {url!r}, {bundle!r}
first = []

def hook(event, args):
    if event == "open" and args[0] == BUNDLE and not first:
        first.append(gevent.getcurrent())
        {during}

sys.addaudithook(hook)

def one():
    try:
        return str(requests.get(URL, verify=BUNDLE, timeout=30).status_code)
    except BaseException as exc:  # (a gevent.Timeout, a kill: the greenlet's own outcome)
        return type(exc).__name__

{spawn}
jobs = [spawn(one) for _ in range(8)]
gevent.joinall(jobs, timeout=60)
stats = requests_fastssl.stats()
print(json.dumps({{
    "results": sorted(str(job.value if job.ready() else "hung") for job in jobs),
    "loads": stats.ca_loads, "reasons": stats.step_aside_reasons,
}}))
"""
_SPAWN = "spawn = gevent.spawn"
_YIELD = "gevent.sleep(0.05)"


def _run(
    server_url: str, pki: PKI, *, patch: str, during: str = _YIELD, spawn: str = _SPAWN
) -> Any:
    out = run_python(
        _CHILD.format(patch=patch, url=server_url, bundle=pki.bundle, during=during, spawn=spawn)
    )
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "patch",
    [
        "from gevent import monkey; monkey.patch_all()",
        # every greenlet has the one OS thread's ident: not each other's builder
        "from gevent import monkey; monkey.patch_all(thread=False)",
    ],
)
def test_greenlets_wait_for_a_build_that_yields(
    make_server: ServerFactory, pki: PKI, patch: str
) -> None:
    found = _run(make_server().url, pki, patch=patch)
    assert found == {"results": ["200"] * 8, "loads": 1, "reasons": {}}


def test_a_timeout_landing_in_the_build_fails_that_request_and_the_others_go_on(
    make_server: ServerFactory, pki: PKI
) -> None:
    during = "gevent.Timeout(0.001).start(); gevent.sleep(0.05)"
    found = _run(make_server().url, pki, patch="from gevent import monkey; monkey.patch_all()",
                 during=during)  # fmt: skip
    # (a waiter builds in its place: one load, nobody left to stock)
    assert found == {"results": ["200"] * 7 + ["Timeout"], "loads": 1, "reasons": {}}


def test_a_kill_landing_in_the_build_ends_that_greenlet_and_the_others_go_on(
    make_server: ServerFactory, pki: PKI
) -> None:
    during = "gevent.spawn(first[0].kill, block=False); gevent.sleep(0.05)"
    found = _run(make_server().url, pki, patch="from gevent import monkey; monkey.patch_all()",
                 during=during)  # fmt: skip
    assert found == {"results": ["200"] * 7 + ["GreenletExit"], "loads": 1, "reasons": {}}


def test_greenlets_and_gevent_threadpool_threads_wait_for_one_another(
    make_server: ServerFactory, pki: PKI
) -> None:
    # Half the requests in gevent's threadpool (OS threads, each with a hub of its own): a
    # greenlet's lock released from another thread, and the other way round.
    spawn = (
        "pool = gevent.get_hub().threadpool\n"
        "turn = iter(range(100))\n"
        "spawn = lambda f: pool.spawn(f) if next(turn) % 2 else gevent.spawn(f)"
    )
    found = _run(make_server().url, pki, patch="from gevent import monkey; monkey.patch_all()",
                 spawn=spawn)  # fmt: skip
    assert found == {"results": ["200"] * 8, "loads": 1, "reasons": {}}


@pytest.mark.parametrize("order", ["install-then-patch", "patch-then-import"])
def test_activation_before_or_after_patching_shares(
    make_server: ServerFactory, pki: PKI, order: str
) -> None:
    server = make_server()
    patch = "from gevent import monkey; monkey.patch_all()"
    first, second = ("import requests_fastssl", patch)
    if order == "install-then-patch":  # (as sitecustomize or `run` would: before the program)
        first, second = ("import requests_fastssl; requests_fastssl.install()", patch)
    else:
        first, second = (patch, "import requests_fastssl")
    code = f"""
{first}
{second}
import json, gevent, requests, requests_fastssl, ssl, urllib3.util.ssl_ as u
jobs = [gevent.spawn(requests.get, {server.url!r}, verify={pki.bundle!r}) for _ in range(5)]
gevent.joinall(jobs, timeout=60)
stats = requests_fastssl.stats()
print(json.dumps([[j.value.status_code for j in jobs], stats.ca_loads,
                  stats.step_aside_reasons, u.SSLContext.__module__]))
"""
    found = json.loads(run_python(code).strip().splitlines()[-1])
    assert found == [[200] * 5, 1, {}, "gevent.ssl"]


def test_a_thread_started_before_patching_waits_beside_greenlets(
    make_server: ServerFactory, pki: PKI
) -> None:
    # A real OS thread, started before monkey.patch_all(), that has no hub: its wait for a
    # greenlet's build (made to yield) is on a lock of its own thread, released from the hub's.
    code = f"""
import threading
go, out = threading.Event(), []
def later():
    go.wait()
    out.append(one())
early = threading.Thread(target=later)
early.start()
{
        _CHILD.format(
            patch="from gevent import monkey; monkey.patch_all()",
            url=make_server().url,
            bundle=pki.bundle,
            during=_YIELD,
            spawn="spawn = gevent.spawn; go.set()",
        )
    }
early.join(60)
print(json.dumps(out))
"""
    lines = run_python(code).strip().splitlines()
    found, early = json.loads(lines[-2]), json.loads(lines[-1])
    assert early == ["200"]
    assert found["results"] == ["200"] * 8
    assert (found["loads"], found["reasons"]) == (1, {})


def test_an_exception_thrown_into_a_waiting_greenlet_reaches_it(
    make_server: ServerFactory, pki: PKI
) -> None:
    # A gevent threadpool thread builds (its hook yields that thread's hub); a greenlet waiting
    # for it has its timeout fire, with an Exception class: that greenlet raises it, as its
    # timeout would in stock (not swallowed as a bug of the shim's, the request succeeding).
    spawn = (
        "pool = gevent.get_hub().threadpool\n"
        "def timed():\n"
        "    for _ in range(10000):  # (bounded: if the build never yields, it is over)\n"
        "        if first: break\n"
        "        gevent.sleep(0.001)\n"
        "    with gevent.Timeout(0.01, ValueError):\n"
        "        return one()\n"
        "turn = iter(range(100))\n"
        "spawn = lambda f: pool.spawn(f) if next(turn) == 0 else gevent.spawn(timed)"
    )
    found = _run(make_server().url, pki, patch="from gevent import monkey; monkey.patch_all()",
                 spawn=spawn, during="gevent.sleep(0.2)")  # fmt: skip
    assert found["results"] == ["200"] + ["ValueError"] * 7
    assert "internal-error" not in found["reasons"]


def test_a_plain_program_that_runs_a_gevent_hub_waits_without_yielding(
    make_server: ServerFactory, pki: PKI
) -> None:
    # gevent imported, not patched, a hub in the main thread: stock's request never yields, so
    # a gevent.Timeout around it cannot fire; nor may the shim's wait for another thread's build.
    code = f"""
import json, sys, threading, time
import gevent, gevent.lock
import requests_fastssl, requests
gevent.sleep(0)  # (a hub in this thread now)
URL, BUNDLE = {make_server().url!r}, {pki.bundle!r}
inside, first = threading.Event(), []
def hook(event, args):
    if event == "open" and args[0] == BUNDLE and not first:
        first.append(1)
        inside.set()
        time.sleep(0.1)
sys.addaudithook(hook)
builder = threading.Thread(target=lambda: requests.get(URL, verify=BUNDLE))
builder.start()
inside.wait(30)
with gevent.Timeout(0.02):
    print(requests.get(URL, verify=BUNDLE).status_code)
builder.join(30)
print(json.dumps(requests_fastssl.stats().step_aside_reasons))
"""
    assert run_python(code).splitlines() == ["200", "{}"]
