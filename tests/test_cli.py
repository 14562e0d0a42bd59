"""``python -m requests_fastssl bench | doctor``, run as a user would run them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import PKI, PRELOADED, ROOT, run_python

pytestmark = pytest.mark.subprocess  # every test here runs the CLI in a fresh interpreter

VARIANTS = [
    "stock-verify",
    "stock-noverify",
    "shim-verify",
    "shim-noverify",
    "floor-verify",
    "floor-noverify",
]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    from support import TRUST_ENV

    full_env = {k: v for k, v in os.environ.items() if k not in TRUST_ENV}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "requests_fastssl", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=600,
    )


@pytest.mark.slow
def test_bench_runs_every_variant_against_its_own_server(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = cli("bench", "--repeat", "1", "--concurrency", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.strip()}
    assert set(VARIANTS) <= set(rows)
    loads = {name: float(rows[name][8]) for name in VARIANTS}  # the "CA loads" column
    at_import = 1 if PRELOADED else 0  # requests 2.32.3/2.32.4 load certifi at import (R7)
    assert loads == {
        "stock-verify": 2 + at_import,  # one per connection
        "stock-noverify": 2 + at_import,
        "shim-verify": 1 + at_import,  # one per trust source
        "shim-noverify": at_import,  # none without one
        "floor-verify": 1 + at_import,
        "floor-noverify": at_import,
    }
    assert "wrapper overhead:" in proc.stdout
    assert "[6/6] floor-noverify x2" in proc.stderr  # progress
    data = json.loads(out.read_text())
    assert [r["variant"] for r in data["results"]] == VARIANTS
    by_variant = {r["variant"]: r for r in data["results"]}
    assert by_variant["shim-verify"]["ca_loads"] == 1 + at_import
    assert all(r["failed"] == 0 and r["concurrency"] == 2 for r in data["results"])
    assert data["machine"]["cpus"] >= 1
    assert "OpenSSL" in data["machine"]["openssl"]
    assert set(data["wrapper_overhead_us"]) == {"stock", "shim", "overhead"}


@pytest.mark.slow
def test_bench_exits_non_zero_when_requests_fail(pki: PKI, make_server: object) -> None:
    # A server whose certificate nobody trusts: every verifying request fails.
    server = make_server(ca=pki.rogue_ca)  # type: ignore[operator]
    proc = cli("bench", "--repeat", "1", "--concurrency", "1", "--url", server.url)
    assert proc.returncode == 1
    assert f"warning: sending real traffic to {server.url}" in proc.stderr
    assert "request(s) failed" in proc.stderr
    assert "SSLError" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--concurrency", "0"], "need integers from 1 to 2000"),
        (["bench", "--concurrency", "100000"], "need integers from 1 to 2000"),
        (["bench", "--concurrency", "3,x"], "not a comma-separated list"),
        (["bench", "--concurrency", "1,,30"], "not a comma-separated list"),
        (["bench", "--repeat", "-1"], "need an integer from 1 to 100"),
        (["bench", "--url", "http://127.0.0.1:9/"], "--url: need an https:// URL"),
        (["bench", "--url", "https://"], "--url: need an https:// URL with a host"),
        (["bench", "--json", "/missing/dir/x.json"], "--json: cannot write to"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_refused_clearly(args: list[str], message: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_doctor_reports_versions_status_bundle_and_cost(pki: PKI) -> None:
    proc = cli("doctor", env={"REQUESTS_CA_BUNDLE": pki.bundle})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("requests-fastssl ")
    assert any(line.startswith("OpenSSL ") for line in lines)
    assert any("requests 2." in line and "urllib3 " in line for line in lines)
    assert "shim in this process: active" in lines
    assert f"CA bundle for verify=True: {pki.bundle} (from REQUESTS_CA_BUNDLE)" in lines
    assert any(line.startswith("one CA load: ") and " ms " in line for line in lines)
    assert any(line.startswith("registry: Stats(") for line in lines)


def test_doctor_fails_when_the_trust_source_cannot_be_loaded(tmp_path: Path) -> None:
    proc = cli("doctor", env={"REQUESTS_CA_BUNDLE": str(tmp_path / "missing.pem")})
    assert proc.returncode == 1  # every verify=True request would fail
    assert "one CA load: failed" in proc.stdout


def test_doctor_says_why_the_shim_is_off() -> None:
    proc = cli("doctor", env={"REQUESTS_FASTSSL_DISABLE": "1"})
    assert proc.returncode == 1
    assert "shim in this process: disabled: REQUESTS_FASTSSL_DISABLE=1" in proc.stdout
    assert "requests' default (certifi)" in proc.stdout


def test_console_script_is_declared() -> None:
    out = run_python(
        """
        from importlib.metadata import entry_points
        (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "requests-fastssl"]
        print(ep.value)
        """
    )
    assert out.strip() == "_requests_fastssl.cli:main"
