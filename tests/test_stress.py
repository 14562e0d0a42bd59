"""The differential stress run (tests/stress.py) at CI size, in fresh interpreters under
``-X faulthandler``: a crash or a hang there is a non-zero exit status, not a lost test
run. The soak run is the same command with ``--duration`` (docs/testing.md, "Hardening")."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from support import ROOT, clean_env

STRESS = ROOT / "tests" / "stress.py"


def stress(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    """Run tests/stress.py; returns its exit status, its JSON reports (one per load phase)
    and its stderr."""
    env = clean_env()
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(STRESS), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(ROOT),
        timeout=600,
    )
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc.returncode, reports, proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--requests", "2000", "--seed", "1"), id="default-bundle-path"),
        pytest.param(("--requests", "600", "--seed", "2", "--env-bundle"), id="env-bundle"),
    ],
)
@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.urllib3_2
def test_differential_stress_matches_stock(args: tuple[str, ...]) -> None:
    rc, reports, stderr = stress("--threads", "16", "--chaos-every", "50", *args)
    assert rc == 0, stderr[-4000:]
    (report,) = reports
    assert report["mismatches"] == report["bypasses"] == report["crashes"] == 0
    assert report["stock_bypasses"] == 0
    assert report["contexts_intact"] is True
    assert report["requests"] >= int(args[1])
    # Not a vacuous run: requests succeeded and failed, the shim shared contexts under
    # load, and the chaos thread emptied and resized the registry while it did...
    assert report["outcomes"]["200"] > 100
    assert report["outcomes"]["SSLError"] > 100
    stats = report["shim_stats"]
    assert stats["reuses"] > 100
    assert stats["connections"] > 100
    # ... and uninstalled and reinstalled it, replaced the bundles, forked children and
    # interrupted requests at random lines (each interrupted thread's retry checked).
    assert set(report["chaos"]) == {
        "clear", "flip", "rewrite", "shrink", "fork", "grow", "interrupt",
    }  # fmt: skip
    assert sum(report["interrupts"].values()) == report["chaos"]["interrupt"]
    # Children that hung inside OpenSSL after a fork are stock's hazard too (tools/
    # fork_hazard.py); they are reported, and most forks must still have been checked.
    assert report["openssl_fork_hangs"] < report["chaos"]["fork"] / 2


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.urllib3_2
def test_stress_run_notices_a_broken_shim() -> None:
    """The same run with the shim sabotaged (client A on every shared context; other CAs
    trusted too), one load phase each on one oracle, must fail: proof that zero mismatches
    above means something."""
    rc, reports, stderr = stress(
        "--threads", "16", "--requests", "800", "--sabotage", "leak", "--sabotage", "bypass"
    )
    assert rc == 1, stderr[-4000:]
    assert [report["sabotage"] for report in reports] == ["leak", "bypass"]
    for report in reports:
        assert report["mismatches"] > 0
        assert report["bypasses"] > 0
    assert "MISMATCH" in stderr


@pytest.mark.subprocess
def test_stress_rejects_bad_sizes() -> None:
    rc, reports, stderr = stress("--threads", "0")
    assert reports == []
    assert rc == 2
    assert "--threads must be at least 1" in stderr
