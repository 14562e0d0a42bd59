"""``benchmarks/green.py`` (issue 42) runs, tiny, under gevent and eventlet: every variant's row,
its CA loads counted from outside the shim, each run's worst ticker gap, and the shim's own
counters. No time is asserted, only the shape and the counts."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, clean_env

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.urllib3_2]


def green(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "benchmarks/green.py", "--greenlets", "3", "--repeat", "1", *args],
        capture_output=True, text=True, cwd=ROOT, env=clean_env(), timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("library", ["gevent", "eventlet"])
def test_the_green_benchmark_reports_loads_and_gaps(tmp_path: Path, library: str) -> None:
    pytest.importorskip(library)
    out = tmp_path / "green.json"
    variants = ["floor", "stock", "shim", f"shim={ROOT}"]
    flags = ["--eventlet"] if library == "eventlet" else []
    ran = green(*flags, "--json", str(out), *variants)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    patched = "monkey.patch_all()" if library == "gevent" else "eventlet.monkey_patch()"
    assert f"; {library} " in lines[0]
    assert f"{patched} first" in lines[0]
    table = lines[lines.index("-" * len(lines[1])) + 1 :]  # (below the header's rule)
    rows = [line.split() for line in itertools.takewhile(lambda x: x.startswith(" "), table)]
    assert [row[1] for row in rows] == variants
    assert all(len(row) == 12 for row in rows)  # n, variant, loads, wall, 3 ratios, gap, 3, CPU
    assert rows[0][4:7] == rows[0][8:11] == ["1.000", "1.000", "1.000"]  # (ratios to floor)

    data = json.loads(out.read_text())
    assert data["library"]["name"] == library
    loads = {v: data["loads"]["3"][v]["ca_loads"] for v in variants}
    assert loads["floor"] == 1  # built once, in the timed window
    assert loads["stock"] == 3  # one per new connection
    for shim in ("shim", f"shim={ROOT}"):
        own = data["loads"]["3"][shim]["shim"]
        # Shared (one build) or left to stock (one load per connection), as the shim says:
        assert loads[shim] == (3 if own["step_asides"] == 3 else 1), own
        assert f"{shim}, 3 greenlets, its stats() in the timed runs: " in ran.stdout
    assert [row[2] for row in rows] == [str(loads[v]) for v in variants]  # (the table's)
    for variant in variants:
        (run,) = data["runs"]["3"][variant]
        assert run["failed"] == 0, run["errors"]
        assert 0 < run["gap"] <= run["wall"]  # (a stretch of the timed window)
    # The floor's context is urllib3's own under the patching: the library's class.
    expected = {"gevent": "gevent.ssl.SSLContext", "eventlet": "eventlet.green.ssl."}[library]
    assert data["runs"]["3"]["floor"][0]["context_class"].startswith(expected)
    assert "targets against the floor" in ran.stdout


def test_the_green_benchmark_refuses_an_unknown_variant() -> None:
    refused = green("floor", "shim=")
    assert refused.returncode == 2
    assert "shim=DIR" in refused.stderr
    assert "greenlets:" not in refused.stderr  # (refused before any run)
