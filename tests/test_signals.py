"""Issue 39: a signal handler's exception during the first CA load. Stock urllib3 loads the CA
source inside ``try: ... except OSError as e: raise SSLError(e) from e``, so an alarm handler's
``TimeoutError`` landing there fails that request with urllib3's ``SSLError`` (requests':
``requests.exceptions.SSLError``); the shim's build must fail it the same way, and must not take
the alarm for a fault of the files: the next connection builds again and shares."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import certifi
import pytest
from support import PKI, ServerFactory, run_python

# A fresh interpreter per mode: a SIGALRM timer ticks every millisecond during the first
# request, and its handler raises TimeoutError the first time it runs at a line calling
# load_verify_locations (the handler of a real signal runs as the C call returns, at the
# call's line: inside urllib3's try block in stock; `step(...)` is that call in the shim's
# `_stock`, through which the build makes both its loads). A kernel timer, not a thread
# sending signals: a cadata load (urllib3's ca_cert_data) holds the GIL for most of its run,
# so a thread could not send one then. The server lives in the
# test's process: the child's main thread is its only thread, so the process-wide SIGALRM
# reaches the thread that handles it.
_CHILD = """
import json, linecache, signal
import requests, urllib3, requests_fastssl

if {mode!r} == "stock":
    requests_fastssl.uninstall()
url, bundle, via = {url!r}, {bundle!r}, {via!r}
fired = []

def handler(signum, frame):
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno or 0)  # (None: no line)
    step = getattr(frame.f_locals.get("step"), "__name__", "")
    called = step if " step(" in line else line  # (the shim's _stock: `step(*args, **kwargs)`)
    if fired or "load_verify_locations" not in called:
        return
    signal.setitimer(signal.ITIMER_REAL, 0)
    fired.append(frame.f_code.co_filename)
    raise TimeoutError("alarm during the CA load")

def request():
    if via == "requests":
        return requests.get(url, verify=bundle, headers={{"Connection": "close"}}, timeout=30)
    with open(bundle, "rb") as f:  # (cadata takes ASCII: certifi's other comments left out)
        data = b"".join(line for line in f if line.isascii()).decode()
    # (a pool, not a PoolManager: urllib3 before 2.1 keys no pool by ca_cert_data)
    parsed = urllib3.util.parse_url(url)
    with urllib3.HTTPSConnectionPool(parsed.host, parsed.port, ca_cert_data=data,
                                     cert_reqs="CERT_REQUIRED") as pool:
        return pool.request("GET", "/", retries=False, timeout=30)

def get():
    try:
        response = request()
    except Exception as exc:
        reason = getattr(exc.args[0] if exc.args else None, "reason", None) or exc
        cause = reason.__cause__
        chain = [type(reason).__module__ + "." + type(reason).__qualname__,
                 type(cause).__qualname__, str(cause),
                 reason.__context__ is cause, reason.__suppress_context__]
        return [type(exc).__module__ + "." + type(exc).__qualname__, str(exc), chain]
    return [getattr(response, "status_code", None) or response.status]

signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
try:
    first = get()
finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
second = get()
stats = requests_fastssl.stats()._asdict()
print(json.dumps({{"first": first, "second": second, "fired": fired, "stats": stats}}))
"""


@pytest.mark.subprocess
@pytest.mark.urllib3_2
@pytest.mark.parametrize(
    ("via", "raised"),
    [
        ("requests", "requests.exceptions.SSLError"),  # verify=<file>: the build's file load
        ("ca-cert-data", "urllib3.exceptions.SSLError"),  # urllib3's ca_cert_data: stock's step
    ],
)
def test_an_alarm_during_the_first_ca_load_fails_that_request_as_stock(
    via: str, raised: str, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = make_server()
    bundle = tmp_path / "bundle.pem"  # (certifi's: a load of many milliseconds, many ticks)
    shutil.copyfile(certifi.where(), bundle)
    with bundle.open("ab") as f:
        f.write(Path(pki.bundle).read_bytes())
    runs = {
        mode: json.loads(
            run_python(_CHILD.format(mode=mode, url=server.url, bundle=str(bundle), via=via))
        )
        for mode in ("stock", "shim")
    }
    stock, shim = runs["stock"], runs["shim"]
    # The alarm landed in each run's load: urllib3's in stock, the build's under the shim.
    assert [Path(f).parts[-3:] for f in stock["fired"]] == [("urllib3", "util", "ssl_.py")]
    assert [Path(f).parts[-2:] for f in shim["fired"]] == [("_requests_fastssl", "_contexts.py")]
    # Wrapped as urllib3 wraps it: `raise SSLError(e) from e`, raised to that request.
    assert shim["first"] == stock["first"]
    assert stock["first"][0] == raised
    assert stock["first"][2] == [
        "urllib3.exceptions.SSLError", "TimeoutError", "alarm during the CA load", True, True
    ]  # fmt: skip
    # Not remembered as the files' failure: the next connection builds again and shares.
    assert shim["second"] == stock["second"] == [200]
    stats = shim["stats"]
    assert stats["failures_skipped"] == 0, stats
    assert (stats["build_failures"], stats["contexts_built"], stats["connections"]) == (1, 1, 1)
    assert stats["step_asides"] == 0, stats
