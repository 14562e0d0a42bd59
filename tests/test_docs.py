"""The docs as a reader follows them: every relative link in README.md and docs/ leads to a
file that exists, and every #anchor to a heading in it (as a code host renders them)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


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


def _measured(version: str) -> dict[str, str]:
    text = (ROOT / "benchmarks" / f"openssl-{version}" / "results.txt").read_text()
    load = re.search(r"^one CA load: (\d+\.\d) ms", text, re.M)
    startup = re.search(r"^start-up cost of .*?: ([+-]\d+\.\d) ms", text, re.M)
    assert load is not None, version
    assert startup is not None, version
    return {"load": load.group(1), "startup": startup.group(1)}


def test_the_readmes_figures_are_the_committed_runs() -> None:
    """Figures the README quotes come from the committed results files, so they cannot drift
    from what was measured (issue 28): the price of one load, in the first paragraph and the
    table, and the start-up cost, on both OpenSSL lines."""
    readme = (ROOT / "README.md").read_text()
    old, new = _measured("3.0"), _measured("3.6")
    first = readme.split("\n\n")[1]
    assert f"**every new connection**: {old['load']} ms for certifi's bundle" in first
    assert (
        f"| one CA load, what stock pays per new connection | {old['load']} ms | {new['load']} ms |"
        in readme
    )
    assert (
        f"| start-up cost of the activation line | {old['startup']} ms | {new['startup']} ms |"
        in readme
    )
    assert f"certifi's bundle {old['load']} ms" in readme


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


def _reach(version: str) -> dict[tuple[str, str], float]:
    data = json.loads((ROOT / "benchmarks" / f"reach-openssl-{version}.json").read_text())
    return {(r["config"], r["variant"]): r["median_s"] for r in data["rows"]}


def _span(values: list[float], fmt: str = ".1f", sep: str = "-") -> str:
    low, high = format(min(values), fmt), format(max(values), fmt)
    return low if low == high else f"{low}{sep}{high}"


LOADED = ("20 seq", "30 thr", "100 thr", "300 thr")  # the scenarios with new connections


def test_every_benchmark_figure_the_docs_quote_is_a_committed_runs() -> None:
    """Each figure of the README's "What it buys" and docs/benchmarks.md's runs is computed
    here from the committed JSON of the command the page names (issue 28: the docs had
    drifted from the measurements), and the reach outputs the page shows are the files."""
    readme = (ROOT / "README.md").read_text()
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    runs = {v: _run(v) for v in ("3.0", "3.6")}

    def cell(version: str, scenario: str) -> str:
        by = runs[version]["by"]
        stock, shim, floor = (by[(f"{k}-verify", scenario)] for k in ("stock", "shim", "floor"))
        ms = " / ".join(f"{s['per_request_ms']:.1f}" for s in (stock, shim, floor))
        return f"{ms} (**{stock['mean_s'] / shim['mean_s']:.1f}x"

    labels = {
        "20 seq": "20 requests in a row, one thread: stock / shim / floor",
        "30 thr": "30 threads, one request each",
        "100 thr": "100 threads",
        "300 thr": "300 threads",
    }
    for scenario, label in labels.items():
        assert f"| {label} | {cell('3.0', scenario)}" in readme, scenario
        assert f"{cell('3.6', scenario)}" in readme.split(f"| {label} |", 1)[1].split("\n")[0]
    noverify = [
        runs[v]["by"][("stock-noverify", "30 thr")]["mean_s"]
        / runs[v]["by"][("shim-noverify", "30 thr")]["mean_s"]
        for v in ("3.0", "3.6")
    ]
    cells = f"| **{noverify[0]:.1f}x** | **{noverify[1]:.1f}x** |"
    assert f"(stock loads the system store) {cells}" in readme
    memory = [
        " / ".join(
            f"{runs[v]['by'][(f'{k}-verify', '300 thr')]['peak_rss_mb']:.0f}"
            for k in ("stock", "shim", "floor")
        )
        for v in ("3.0", "3.6")
    ]
    assert f"stock / shim / floor | {memory[0]} MB | {memory[1]} MB |" in readme
    assert f"{memory[0]} MB on 3.0, {memory[1]} MB on 3.6" in page.replace("\n", " ")
    keep = [runs[v]["keep_alive_us"] for v in ("3.0", "3.6")]
    assert (
        f"calls into the shim / added time | {keep[0]['shim_calls_per_request']:g} / "
        f"{keep[0]['overhead']:.1f} µs"
    ) in readme

    offs = {v: [runs[v]["rows"][(s, "verify")]["off"] for s in LOADED] for v in runs}
    noise = [runs[v]["rows"][(s, "verify")]["noise"] for v in runs for s in LOADED]
    flat = " ".join(readme.split())
    assert (
        f"the shim is {_span(offs['3.0'], '+.0f', '% to ')}% at 20-300 new connections on "
        f"OpenSSL 3.0 and {_span(offs['3.6'], '+.0f', '% to ')}% on 3.6 (± "
        f"{_span(noise, '.0f')}% of noise)"
    ) in flat
    from _requests_fastssl.cli.table import faster

    cold = [faster(runs[v]["rows"][("1 thr", "verify")]["speed"]) for v in runs]
    assert f"the shim's first request is {cold[0]} than stock's on 3.0 and {cold[1]} on 3.6" in flat
    held = [runs[v]["rows"][("300 thr", "verify")]["memory"] for v in runs]
    assert (
        f"peak memory at 300 threads is {held[0]:+.0f}% and {held[1]:+.0f}% against a floor that "
        "has imported wrapt too"
    ) in flat

    # docs/benchmarks.md's reading of the same runs
    from _requests_fastssl.cli.table import overall

    verdict = overall(list(runs["3.0"]["rows"].values()))
    assert f"`{verdict}`" in " ".join(page.split())
    speeds = {
        (v, verify): [runs[v]["rows"][(s, verify)]["speed"] for s in LOADED]
        for v in runs
        for verify in ("verify", "noverify")
    }
    reading = " ".join(page.split())
    assert (
        f"{_span(speeds[('3.0', 'verify')])} times faster than stock on 3.0 and "
        f"{_span(speeds[('3.6', 'verify')])} on 3.6 for verifying requests"
    ) in reading
    assert (
        f"{_span(speeds[('3.0', 'noverify')])} and {_span(speeds[('3.6', 'noverify')])} for "
        "`verify=False`"
    ) in reading
    ones = [runs[v]["rows"][("1 thr", "verify")]["speed"] for v in runs]
    assert f"{ones[0]:.2f}x and {ones[1]:.2f}x of stock" in reading
    assert (
        f"{_span(offs['3.0'], '+.0f', '% to ')}% with verification at 20-300 connections on "
        f"OpenSSL 3.0 and {_span(offs['3.6'], '+.0f', '% to ')}% on 3.6"
    ) in reading
    means = "; ".join(
        f"{runs[v]['rows'][('300 thr', 'verify')]['memory']:+.0f}% / "
        f"{runs[v]['rows'][('300 thr', 'noverify')]['memory']:+.0f}% on {v}"
        for v in runs
    )
    assert f"the shim's mean against the floor's, verify / noverify: {means}" in reading
    assert f"({keep[0]['overhead']:.1f} µs, noise, and {keep[1]['overhead']:.1f} µs)" in reading
    startup = [runs[v]["startup_ms"]["added"] for v in runs]
    assert f"{startup[0]:+.1f} and {startup[1]:+.1f} ms for the activation line" in reading
    every = [r["noise"] for v in runs for r in runs[v]["rows"].values()]
    assert f"gives {_span(every, '.0f')}% standard error" in reading

    for v in runs:  # the summary table of docs/benchmarks.md
        for scenario in ("20 seq", "1 thr", *LOADED[1:]):
            for verify in ("verify", "noverify"):
                row = runs[v]["rows"][(scenario, verify)]
                text = f"{row['speed']:.2f}x; {row['off']:+.1f}% ± {row['noise']:.1f}%"
                line = next(x for x in page.splitlines() if x.startswith(f"| {scenario} |"))
                assert text in line, (v, scenario, verify)

    reach = {v: _reach(v) for v in ("3.0", "3.6")}
    configs = sorted({c for c, _ in reach["3.0"]} - {"first-request"})
    speed = {v: [r[(c, "stock")] / r[(c, "shim")] for c in configs] for v, r in reach.items()}
    off = [r[(c, "shim")] / r[(c, "floor")] for r in reach.values() for c in configs]
    pairs = {v: zip(configs, speed[v], strict=True) for v in speed}
    direct = {v: [s for c, s in pairs[v] if c != "https-proxy"] for v in speed}
    proxy = [speed[v][configs.index("https-proxy")] for v in speed]
    assert (
        f"{_span(direct['3.0'])} times faster than stock on OpenSSL 3.0 and "
        f"{_span(direct['3.6'])} on 3.6 (through the proxy {proxy[0]:.1f} and {proxy[1]:.1f}), "
        f"at {_span(off, '.2f')} times the floor's time"
    ) in flat
    for v in reach:  # the outputs shown are the committed files, verbatim
        text = (ROOT / "benchmarks" / f"reach-openssl-{v}.txt").read_text().strip()
        assert f"```\n{text}\n```" in page, v


def test_the_scope_figures_are_the_committed_run() -> None:
    """benchmarks.md's scope section shows the committed output verbatim, and its prose's
    figures are that run's (issue 27)."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    text = (ROOT / "benchmarks" / "scope-openssl-3.0.txt").read_text().strip()
    assert f"```\n{text}\n```" in page
    data = json.loads((ROOT / "benchmarks" / "scope-openssl-3.0.json").read_text())
    assert data["command"] == (
        "python benchmarks/scope.py --calls 20 --repeat 21 --json benchmarks/scope-openssl-3.0.json"
    )
    by = {(r["config"], r["variant"]): r for r in data["rows"]}
    one_client = ["boto3", "poolmanager", "poolmanager-per-thread", "toolbelt-tls-client"]
    assert all(by[(c, "shim")]["ca_loads"] == 1 for c in one_client)
    offs = [by[(c, "shim")]["vs_floor"] for c in one_client]
    flat = " ".join(page.split())
    assert f"Against the floor the shim is {_span(offs, '.2f')} here" in flat
    per_call = by[("boto3-client-per-call", "stock")]["vs_shim"]
    assert f"as in stock ({per_call:.2f}x)" in flat
    readme = " ".join((ROOT / "README.md").read_text().split())
    boto = by[("boto3", "stock")]["vs_shim"]
    assert f"boto3 with one S3 client, 20 calls on new connections: {boto:.1f}x faster" in readme


def test_the_threads_figures_are_the_committed_runs() -> None:
    """benchmarks.md's table of ``benchmarks/threads.py`` is the committed runs' medians of the
    per-repetition ratios to the floor, on both OpenSSL lines, and each run's text output
    shows the same medians."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    names = {
        "floor-lazy": "`floor-lazy`",
        "shim": "`shim`",
        "shim=/tmp/before40": "`shim` before issue 40 (2d62242)",
        "stock": "stock",
    }
    cells: dict[str, list[str]] = {label: [] for label in names.values()}
    for line in ("3.0", "3.6"):
        data = json.loads((ROOT / "benchmarks" / f"threads-openssl-{line}.json").read_text())
        text = (ROOT / "benchmarks" / f"threads-openssl-{line}.txt").read_text()
        assert data["openssl"].startswith(f"OpenSSL {line}.")
        for n, runs in data["runs"].items():
            served = [
                not any(r[i]["failed"] for r in runs.values()) for i, _ in enumerate(runs["floor"])
            ]
            runs = {
                v: [r for r, ok in zip(mine, served, strict=True) if ok] for v, mine in runs.items()
            }
            for variant, label in names.items():
                pairs = zip(runs[variant], runs["floor"], strict=True)
                ratios = [a["wall"] / b["wall"] for a, b in pairs]
                median = f"{statistics.median(ratios):.3f}"
                cells[label].append(median)
                row = next(x for x in text.splitlines() if x.split()[:2] == [n, variant])
                assert row.split()[4] == median, (line, n, variant)
    for label, values in cells.items():
        assert f"| {label} | {' | '.join(values)} |" in page, label
    readme = " ".join((ROOT / "README.md").read_text().split())
    shim = [float(x) for i, x in enumerate(cells["`shim`"]) if i % 3 < 2]  # (30 and 100)
    lazy = [float(x) for x in cells["`floor-lazy`"]]
    assert (
        f"the shim took {_span(shim, '.2f')} times the floor's time at 30 and 100 threads on "
        f"the two lines, and the floor built by the first thread, instead of before the threads "
        f"start, {_span(lazy, '.2f')}"
    ) in readme
