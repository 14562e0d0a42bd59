"""The docs as a reader follows them: every relative link in README.md and docs/ leads to a
file that exists, and every #anchor to a heading in it (as a code host renders them)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The pages users read (operators, people choosing it); design.md, testing.md and
# regressions.md are for contributors.
USERS = ("usage", "limits", "benchmarks", "platforms")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: no heading for #{anchor}"


def test_the_design_docs_reason_table_is_the_policys() -> None:
    """docs/design.md's step-aside table lists exactly the Reason codes, with their text."""
    from _requests_fastssl._policy import Reason

    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## Step-aside rules", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9.\-]+)` \| (.+) \|$", section, re.M)
    assert rows == [(reason.code, reason.text) for reason in Reason]


def readme_table() -> list[str]:
    """The README's "What it buys" rows as the committed runs give them: bench's (run.sh)
    per-request milliseconds, stock / shim, and scope.py's boto3 row, on both OpenSSL lines."""
    runs = {v: _run(v) for v in ("3.0", "3.6")}
    scope = {
        v: json.loads((ROOT / "benchmarks" / f"scope-openssl-{v}.json").read_text()) for v in runs
    }

    def bench(version: str, scenario: str) -> str:
        by = runs[version]["by"]
        stock, shim = (by[(f"{k}-verify", scenario)] for k in ("stock", "shim"))
        ms = f"{stock['per_request_ms']:.1f} / {shim['per_request_ms']:.1f}"
        if scenario == "1 thr":  # (the one load either way: a ratio would read as a gain)
            return ms
        return f"{ms} ({stock['mean_s'] / shim['mean_s']:.1f}x)"

    def boto(version: str) -> str:
        data = scope[version]
        by = {(r["config"], r["variant"]): r for r in data["rows"]}
        stock, shim = (
            by[("boto3", k)]["median_s"] * 1000 / data["calls"] for k in ("stock", "shim")
        )
        return f"{stock:.1f} / {shim:.1f} ({stock / shim:.1f}x)"

    load = [f"{runs[v]['machine']['ca_load_ms']:.1f} ms" for v in runs]
    rows = [
        ("one CA load: what stock pays per new connection", *load),
        ("20 requests in a row", *(bench(v, "20 seq") for v in runs)),
        ("100 threads, one request each", *(bench(v, "100 thr") for v in runs)),
        ("boto3, one client, 20 calls (`benchmarks/scope.py`)", *(boto(v) for v in runs)),
        ("one request per process", *(bench(v, "1 thr") for v in runs)),
    ]
    return [f"| {' | '.join(row)} |" for row in rows]


def test_the_readmes_figures_are_the_committed_runs() -> None:
    """The README's table and first paragraph quote the committed results files, so they
    cannot drift from what was measured; the versions its header names are theirs."""
    readme = (ROOT / "README.md").read_text()
    for row in readme_table():
        assert row in readme, row
    runs = {v: _run(v) for v in ("3.0", "3.6")}
    load = [f"{runs[v]['machine']['ca_load_ms']:.1f}" for v in runs]
    first = " ".join(readme.split("\n\n")[1].split())
    assert f"{load[0]} ms with OpenSSL 3.0 and {load[1]} ms with 3.6" in first
    lines = [
        f"OpenSSL {v} (CPython {runs[v]['machine']['python'].rsplit('.', 1)[0]})" for v in runs
    ]
    assert f"| | {lines[0]} | {lines[1]} |" in readme
    for v in runs:  # (the README says 21 runs per figure)
        assert " --repeat 21 " in runs[v]["command"], v


def _run(version: str) -> dict[str, Any]:
    """One committed ``benchmarks/run.sh`` run: its summaries by (variant, scenario), the
    summary rows by (scenario, verify), and the rest of its JSON."""
    from _requests_fastssl.cli.table import verdicts

    data = json.loads((ROOT / "benchmarks" / f"openssl-{version}" / "results.json").read_text())
    by = {(s["variant"], s["scenario"]): s for s in data["results"]}
    rows = {}
    for row in verdicts(data["results"]):
        scenario, verify = row["line"].split(":", 1)[0].split(", ")
        rows[(scenario, verify)] = row
    return {**data, "by": by, "rows": rows}


def test_the_benchmarks_page_shows_the_committed_outputs() -> None:
    """docs/benchmarks.md shows every committed run's output verbatim, as the command printed
    it, so that its reading can be checked against the run, and the run against its JSON."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    outputs = sorted((ROOT / "benchmarks").rglob("*.txt"))
    assert len(outputs) == 12
    for path in outputs:
        text = path.read_text().strip()
        assert f"```\n{text}\n```" in page, path.relative_to(ROOT)


USER_DOCS = [ROOT / "README.md", *(ROOT / "docs" / f"{n}.md" for n in USERS)]


def test_the_readme_reads_in_two_minutes() -> None:
    """At most 150 lines and 900 words; the first screen (40 lines) holds the two commands a
    new user runs: the benchmark and the tests, each with its set-up."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert len(text.split()) <= 900
    screen = "\n".join(text.splitlines()[:40])
    assert "&& .venv/bin/python -m requests_fastssl bench\n" in screen
    assert (
        "pip install -q -e . --group dev -c tools/constraints.txt && .venv/bin/python -m pytest\n"
    ) in screen
    assert screen.count("pip install") == 4  # one install line, and the two commands' set-ups


def test_user_docs_speak_to_users() -> None:
    """No issue numbers, and no test counts anywhere in the docs: counts go stale at the next
    test, and the runs that state them are CI's."""
    for page in USER_DOCS:
        assert not re.search(r"\bissues? \d+", page.read_text(), re.I), page.name
    for page in PAGES:
        found = re.findall(r"\b\d[\d,]* (?:passed|failed|skipped|tests)\b", page.read_text())
        assert not found, (page.name, found)


def _recorded() -> str:
    """The text of every committed run: benchmark results and platform runs."""
    files = [
        *sorted((ROOT / "benchmarks").rglob("*.json")),
        *sorted((ROOT / "benchmarks").rglob("*.txt")),
        ROOT / "tools" / "platform-runs.json",
    ]
    return "\n".join(path.read_text() for path in files if path.is_file())


def test_every_version_the_docs_state_is_one_a_committed_run_recorded() -> None:
    """An OpenSSL or CPython version in the docs is the one a committed run (its own file)
    recorded, so that a page cannot describe a run nobody can find."""
    recorded = _recorded()
    openssl = set(re.findall(r"OpenSSL (\d+\.\d+\.\d+)", recorded))
    python = set(re.findall(r"(?:Python |\"python\": \")(\d+\.\d+\.\d+)", recorded))
    for page in PAGES:
        text = page.read_text()
        for version in re.findall(r"OpenSSL (\d+\.\d+\.\d+)", text):
            assert version in openssl, (page.name, f"OpenSSL {version}")
        for version in re.findall(r"\bC?Python (\d+\.\d+\.\d+)", text):
            assert version in python, (page.name, f"Python {version}")
