"""requests' own test suite, stock and then with the shim on for the whole session.

    python tools/peer_suite.py            (nox -s peer installs what it needs and runs this)

Downloads the sdist of the installed requests from PyPI (it ships tests/), runs its tests
offline twice against the installed requests, first stock, then with ``--fastssl`` (our
pytest plugin), and compares the outcome of every test. Exit status 0 only if both runs
give the same outcome test for test and the stock run has no failures.

Offline means: tools/netguard.py refuses name lookups and connections to anything but
loopback (set NETGUARD_LOG=FILE to list what it refused, by test), and the tests listed in
DESELECTED, which need the internet, are not run; the guard found exactly these six.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Tests that connect to a non-loopback address or resolve public names, by node id, with why.
DESELECTED = {
    "tests/test_requests.py::TestRequests::test_errors"
    "[http://doesnotexist.google.com-ConnectionError]": "resolves a public name",
    "tests/test_requests.py::TestRequests::test_proxy_error": "resolves a name on the network",
    **{
        f"tests/test_requests.py::TestTimeout::{test}[{timeout}]": (
            "connects to 10.255.255.1 to provoke a connect timeout"
        )
        for test in ("test_connect_timeout", "test_total_timeout_connect")
        for timeout in ("timeout0", "timeout1")
    },
}


def _sdist(requests_version: str, into: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"requests=={requests_version}",
            "-d",
            str(into),
        ],
        check=True,
    )
    (archive,) = into.glob("requests-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / f"requests-{requests_version}"


def _run(source: Path, label: str, extra: list[str]) -> dict[str, str]:
    report = source / f"junit-{label}.xml"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "NETGUARD_DESELECT": "\n".join(DESELECTED),
    }
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "REQUESTS_FASTSSL_DISABLE"):
        env.pop(name, None)  # requests' tests expect the default trust
    command = [
        sys.executable,
        "-m",
        "pytest",
        "tests",
        "-p",
        "netguard",
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "addopts=--doctest-modules",
        f"--junitxml={report}",
        *extra,
    ]
    proc = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    tail = [line for line in proc.stdout.splitlines() if line.strip()][-3:]
    print(f"--- {label}: {' '.join(command[3:])}\n" + "\n".join(tail), flush=True)
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = child.tag
            elif child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        outcomes[name] = outcome
    return outcomes


def main() -> int:
    requests_version = version("requests")
    with tempfile.TemporaryDirectory(prefix="requests-peer-") as tmp:
        source = _sdist(requests_version, Path(tmp))
        stock = _run(source, "stock", [])
        shim = _run(source, "shim", ["--fastssl"])
    print(f"requests {requests_version}: {len(DESELECTED)} deselected (need the internet)")
    print("stock:", dict(sorted(Counter(stock.values()).items())))
    print("shim: ", dict(sorted(Counter(shim.values()).items())))
    differ = sorted(n for n in stock.keys() | shim.keys() if stock.get(n) != shim.get(n))
    for name in differ:
        print(f"DIFFERENT {name}: stock={stock.get(name)} shim={shim.get(name)}")
    broken = sorted(n for n, o in stock.items() if o in ("failure", "error"))
    for name in broken:
        print(f"STOCK FAILS {name}")
    return 1 if differ or broken else 0


if __name__ == "__main__":
    sys.exit(main())
