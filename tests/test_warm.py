"""``warm()`` and ``REQUESTS_FASTSSL_WARM``: the load moves to start-up, and a master that
warms before forking leaves its workers nothing to load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from support import PKI, PRELOADED, LoadCounter, clean_env, outcome, run_python, stock_and_shim

import requests_fastssl


@pytest.mark.urllib3_2
def test_warm_builds_the_context_a_later_request_uses(
    pki: PKI, make_server: Any, loads: LoadCounter
) -> None:
    """...and the requests after it load nothing."""
    server = make_server()
    requests_fastssl.install()
    assert requests_fastssl.warm(verify=pki.bundle) is True
    assert loads.verify_locations == 1
    before = requests_fastssl.stats()
    for _ in range(3):  # new Sessions: new pools, new connections
        assert requests.get(server.url, verify=pki.bundle).status_code == 200
    after = requests_fastssl.stats().since(before)
    assert (after.contexts_built, after.connections) == (0, 3)
    assert loads.verify_locations == 1  # (the requests loaded nothing)


def test_warm_gives_requests_the_stock_outcome(pki: PKI, make_server: Any) -> None:
    server, rogue = make_server(), make_server(ca=pki.rogue_ca)

    def calls() -> list[tuple[str, str | None]]:
        requests_fastssl.warm(verify=pki.bundle)
        requests_fastssl.warm(verify=pki.bundle, cert=pki.client_a.pair)
        return [
            outcome(lambda: requests.get(server.url, verify=pki.bundle)),
            outcome(lambda: requests.get(rogue.url, verify=pki.bundle)),
            outcome(lambda: requests.get(server.url, verify=pki.bundle, cert=pki.client_a.pair)),
        ]

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[0][0] == "200"
    assert stock[1][0] == "SSLError"


@pytest.mark.urllib3_2
def test_warm_follows_the_environment_as_a_session_does(
    pki: PKI, make_server: Any, monkeypatch: pytest.MonkeyPatch, loads: LoadCounter
) -> None:
    server = make_server()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", pki.bundle)
    requests_fastssl.install()
    before = requests_fastssl.stats()
    assert requests_fastssl.warm() is True  # verify=True: the variable's bundle
    assert requests.get(server.url).status_code == 200
    assert requests_fastssl.stats().since(before).contexts_built == 1
    assert loads.verify_locations == 1
    # trust_env=False: requests' own default, another trust source, another context (on
    # requests 2.32.3/2.32.4 served by the context requests built at import: left stock)
    assert requests_fastssl.warm(trust_env=False) is (not PRELOADED)
    assert requests_fastssl.stats().since(before).contexts_built == (1 if PRELOADED else 2)


def test_warm_raises_what_the_request_would_raise(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    requests_fastssl.install()
    with pytest.raises(OSError, match="Could not find a suitable TLS CA certificate bundle") as w:
        requests_fastssl.warm(verify=missing)
    with pytest.raises(OSError, match="suitable") as r:
        requests.get("https://127.0.0.1:9/", verify=missing)
    assert str(w.value) == str(r.value)


@pytest.mark.urllib3_2
def test_warm_raises_the_requests_error_a_request_raises_for_a_bad_bundle(
    tmp_path: Path, make_server: Any
) -> None:
    bad = tmp_path / "notpem.txt"
    bad.write_text("not a certificate\n")
    server = make_server()
    requests_fastssl.install()
    with pytest.raises(requests.exceptions.SSLError) as w:
        requests_fastssl.warm(verify=str(bad))
    with pytest.raises(requests.exceptions.SSLError) as r:
        requests.get(server.url, verify=str(bad))
    assert "NO_CERTIFICATE_OR_CRL_FOUND" in str(w.value)
    assert "NO_CERTIFICATE_OR_CRL_FOUND" in str(r.value)


def test_warm_without_the_shim_does_nothing(loads: LoadCounter) -> None:
    assert requests_fastssl.status().state is requests_fastssl.State.NOT_INSTALLED
    assert requests_fastssl.warm() is False
    assert loads.verify_locations == 0


# --- the environment switch, in fresh interpreters ----------------------------------------------

_REPORT = """
    import json, sys
    import requests_fastssl
    before = "requests" in sys.modules
    import requests
    s = requests_fastssl.stats()
    print(json.dumps({"imported_early": before, "built": s.contexts_built, "loads": s.ca_loads}))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize(("value", "built"), [("1", 1), ("true", 1), ("0", 0), ("", 0)])
@pytest.mark.urllib3_2
def test_env_warms_at_import_of_requests_never_earlier(pki: PKI, value: str, built: int) -> None:
    env = {"REQUESTS_FASTSSL_WARM": value, "REQUESTS_CA_BUNDLE": pki.bundle}
    report = json.loads(run_python(_REPORT, env=env))
    assert report == {"imported_early": False, "built": built, "loads": built}


@pytest.mark.subprocess
@pytest.mark.urllib3_2
def test_env_warm_with_requests_imported_first(pki: PKI) -> None:
    env = {"REQUESTS_FASTSSL_WARM": "1", "REQUESTS_CA_BUNDLE": pki.bundle}
    out = run_python(
        "import requests, requests_fastssl; print(requests_fastssl.stats().contexts_built)",
        env=env,
    )
    assert out.strip() == "1"


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("value", "bundle", "message"),
    [
        ("maybe", None, "REQUESTS_FASTSSL_WARM='maybe' is not understood; taken as off"),
        (
            "1",
            "/missing.pem",
            "warming verify=True failed, as every verify=True request will: OSError: Could not "
            "find a suitable",
        ),
        # (urllib3 1.26 leaves every connection to stock, and says that instead)
        pytest.param(
            "1",
            "NOTPEM",
            "warming verify=True failed, as every verify=True request will: SSLError:",
            marks=pytest.mark.urllib3_2,
        ),
        pytest.param(
            "1",
            "DIR",
            "verify=True is left to stock requests here (ca-directory: verify names a",
            marks=pytest.mark.urllib3_2,
        ),
    ],
)
def test_env_warm_problems_are_logged_never_raised(
    value: str, bundle: str | None, message: str, tmp_path: Path
) -> None:
    env = {"REQUESTS_FASTSSL_WARM": value}
    if bundle == "NOTPEM":
        bundle = str(tmp_path / "notpem.txt")
        Path(bundle).write_text("not a certificate\n")
    elif bundle == "DIR":
        bundle = str(tmp_path)
    if bundle:
        env["REQUESTS_CA_BUNDLE"] = bundle
    code = """
        import logging, sys
        logging.basicConfig(stream=sys.stdout, format="%(message)s")
        import requests_fastssl, requests
        print("built", requests_fastssl.stats().contexts_built)
    """
    code += "\n        print(requests_fastssl.stats())"  # a readable line
    out = run_python(code, env=env)  # exit status 0: the program's import went through
    assert message in out
    assert "built 0" in out
    # WARNING: seen without any logging set up (Python's last-resort handler shows it).
    bare = run_python("import requests_fastssl, requests", env=env, stderr=True)
    assert message in bare


# --- prefork: a master that warms, workers that load nothing --------------------------------------

_PREFORK = """
    import json, os, sys
    loads = [0]
    def counting(frame, event, arg):  # (the profiler survives fork; replacing the method
        if event == "c_call" and getattr(arg, "__name__", "") == "load_verify_locations":
            loads[0] += 1  # would make the shim step aside: context-patched)
    sys.setprofile(counting)

    import requests_fastssl  # (REQUESTS_FASTSSL_WARM=1 in the environment)
    import requests
    master_loads = loads[0]
    url = sys.argv[1]

    def worker():
        loads[0] = 0
        try:
            status = str(requests.get(url).status_code)
        except Exception as exc:
            status = type(exc).__name__
        return {"status": status, "loads": loads[0]}

    if sys.argv[2] == "fork":
        results = []
        for _ in range(3):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.write(w, json.dumps(worker()).encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r) as f:
                results.append(json.loads(f.read()))
            os.waitpid(pid, 0)
    else:
        import multiprocessing
        with multiprocessing.get_context("fork").Pool(3) as pool:
            results = [pool.apply_async(worker).get(60) for _ in range(3)]
    print(json.dumps({"master": master_loads, "workers": results}))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("how", ["fork", "multiprocessing"])
@pytest.mark.urllib3_2
def test_prefork_workers_of_a_warmed_master_load_nothing(
    pki: PKI, make_server: Any, how: str
) -> None:
    server = make_server()
    env = {"REQUESTS_FASTSSL_WARM": "1", "REQUESTS_CA_BUNDLE": pki.bundle}
    code = _PREFORK.replace("sys.argv[1]", repr(server.url)).replace("sys.argv[2]", repr(how))
    shim = json.loads(run_python(code, env=env))
    stock = json.loads(run_python(code, env={**env, "REQUESTS_FASTSSL_DISABLE": "1"}))
    assert [w["status"] for w in shim["workers"]] == [w["status"] for w in stock["workers"]]
    assert [w["status"] for w in shim["workers"]] == ["200"] * 3
    at_import = 1 if PRELOADED else 0  # requests 2.32.3/2.32.4 load certifi at import (R7)
    assert shim["master"] == 1 + at_import  # the warm-up
    assert [w["loads"] for w in shim["workers"]] == [0, 0, 0]
    assert [w["loads"] for w in stock["workers"]] == [1, 1, 1]  # stock: one per connection


_WSGI_APP = """
import json, os, sys

loads = [0]


def _counting(frame, event, arg):
    # The profiler, not a replaced method (the shim steps aside for that: context-patched);
    # gunicorn forks its workers from this thread, which keeps it.
    if event == "c_call" and getattr(arg, "__name__", "") == "load_verify_locations":
        loads[0] += 1


sys.setprofile(_counting)

import requests_fastssl  # noqa: E402  (REQUESTS_FASTSSL_WARM=1 in the environment)
import requests  # noqa: E402

MASTER_LOADS = loads[0]


def app(environ, start_response):
    before = loads[0]
    try:
        status = str(requests.get(os.environ["TARGET_URL"]).status_code)
    except Exception as exc:
        status = type(exc).__name__
    body = {"pid": os.getpid(), "status": status, "loads": loads[0] - before,
            "master": MASTER_LOADS}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(body).encode()]
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("mode", ["stock", "shim"])
@pytest.mark.urllib3_2
def test_gunicorn_preload_workers_load_nothing(
    pki: PKI, make_server: Any, tmp_path: Path, mode: str
) -> None:
    """The README's recipe as written: gunicorn --preload, 2 workers, the app imports the
    shim; each request the workers serve makes a new HTTPS connection to our server."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    from support import ROOT

    server = make_server()
    (tmp_path / "wsgi_app.py").write_text(_WSGI_APP)
    env = clean_env()
    env.update(
        REQUESTS_FASTSSL_WARM="1",
        REQUESTS_CA_BUNDLE=pki.bundle,
        TARGET_URL=server.url,
        PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]),
    )
    if mode == "stock":
        env["REQUESTS_FASTSSL_DISABLE"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--preload", "-w", "2", "-b", "127.0.0.1:0",
         "wsgi_app:app"],
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        port, booted = None, 0
        for line in proc.stderr:  # gunicorn logs when it listens and as each worker boots
            found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", line)
            port = int(found.group(1)) if found else port
            booted += "Booting worker with pid" in line
            if port and booted == 2:
                break
        assert port, "gunicorn did not start"
        answers = []
        for _ in range(6):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
                answers.append(json.loads(response.read()))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert {a["status"] for a in answers} == {"200"}
    if mode == "shim":
        at_import = 1 if PRELOADED else 0  # requests 2.32.3/2.32.4 load certifi at import
        assert {a["master"] for a in answers} == {1 + at_import}  # the warm-up, before the fork
        assert [a["loads"] for a in answers] == [0] * 6
    else:
        assert [a["loads"] for a in answers] == [1] * 6  # one per connection
