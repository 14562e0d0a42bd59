"""How ``bench`` prints its results: a table of mean ± σ per variant, then one verdict per
scenario, read the way hyperfine's summary reads."""

from __future__ import annotations

import math
import statistics
from typing import Any

__all__ = ["faster", "overall", "print_table", "verdicts"]

LEGEND = """\
stock: requests as installed; shim: with requests_fastssl; floor: the least any cache can do
(stock's context built once per run, in the timed window, handed to urllib3 by an adapter).
N thr: N threads, one GET each; N seq: N GETs in a row. wall: mean ± σ of the timed runs (one
run: "(n=1)", no σ); the summary: ratios of means ± their standard error. CA loads: counted in
the warm-up run. RSS: the client's peak, mean ± σ. srv CPU: server CPU / wall. failed: over all
runs (then no ratio)."""


def print_table(
    summaries: list[dict[str, Any]],
    server: str,
    repeat: int,
    *,
    partial: str | None = None,
    failure: str | None = None,
) -> list[str]:
    """Prints the results; returns the verdict line and the summary lines (for the JSON).
    ``partial``: why the run stopped early; ``failure``: what was not timed, and why."""
    rows = verdicts(summaries)
    line = overall(rows, ran=bool(summaries))  # (the one line to read first)
    if partial is not None:
        line = line.replace("verdict:", f"verdict (PARTIAL: {partial}; of the runs that finished):")
    print(line)
    # Under the verdict, whatever it does not cover: it must not read as the whole run.
    failed = sum(s["failed"] for s in summaries)
    notes = [failure] if failure is not None else []
    if failed:
        notes.append(
            f"{failed} request(s) FAILED (the failed column): those comparisons have no ratio "
            "and the exit status is 1"
        )
    for note in notes:
        print(f"  {note}")
    print(f"server: {server}; {repeat} timed run(s) per variant after a warm-up")
    header = (
        f"{'variant':<15} {'scenario':>8} {'wall s (mean ± σ)':>19} {'min…max s':>13} "
        f"{'ms/req':>7} {'CA loads':>9} {'RSS MB':>12} {'srv CPU':>8} {'failed':>7}"
    )
    print(header)
    print("-" * len(header))
    for s in summaries:
        loads = s["ca_loads"] + s["default_loads"]
        # One run has no spread: "± 0.000" would claim a perfectly steady one.
        one = len(s["runs"]) < 2
        wall = f"{s['mean_s']:.3f} " + ("(n=1)" if one else f"± {s['stdev_s']:.3f}")
        spread = f"{s['min_s']:.3f}…{s['max_s']:.3f}"
        rss = f"{s['rss_mean_mb']:.1f} " + ("(n=1)" if one else f"± {s['rss_stdev_mb']:.1f}")
        print(
            f"{s['variant']:<15} {s['scenario']:>8} {wall:>19} {spread:>13} "
            f"{s['per_request_ms']:>7.2f} {loads:>9g} {rss:>12} "
            f"{s['server_cpu_share']:>7.0%} {s['failed']:>7}"
        )
    print(LEGEND)
    summary = [line, *notes]
    if rows:
        print()
        print("summary")
        summary += [row["line"] for row in rows]
        noisy = [row for row in rows if row.get("noise", 0) > 5]
        if noisy:
            worst = max(row["noise"] for row in noisy)
            summary.append(
                f"warning: a busy machine: ±{worst:.0f}% of noise in {len(noisy)} of "
                f"{len(rows)} comparisons hides differences of a few per cent; rerun with more "
                "--repeat on a quieter machine"
            )
        for text in summary[1 + len(notes) :]:
            print(f"  {text}")
    return summary


def faster(ratio: float, digits: int = 2) -> str:
    """A speed ratio as it reads: "5.10x faster", or "1.20x slower", never "0.84 times
    faster"."""
    return f"{ratio:.{digits}f}x faster" if ratio >= 1 else f"{1 / ratio:.{digits}f}x slower"


def overall(rows: list[dict[str, Any]], *, ran: bool = True) -> str:
    """The verdict at a glance, from the comparisons with a ratio; ``ran``: whether any run
    finished (a run stopped early may have none, and that is no failure)."""
    rated = [row for row in rows if "speed" in row]
    if not rated:
        if any(row.get("failed") for row in rows):
            why = "requests failed"
        elif not ran:
            why = "no run finished"
        else:
            why = "no scenario has runs of all of stock, shim and floor"
        return f"verdict: no comparison ({why})"
    speeds = sorted(row["speed"] for row in rated)
    # (one request per process is the cold start, reported on its own line, not a floor figure)
    offs = sorted(row["off"] for row in rated if not row.get("cold")) or sorted(
        row["off"] for row in rated
    )
    low, high = speeds[0], speeds[-1]
    # (one decimal: the verdict is the glance; the summary lines below carry two)
    if low < 1 <= high:
        span = f"{faster(low, 1)} to {faster(high, 1)}"
    elif f"{low:.1f}" == f"{high:.1f}":
        span = faster(high, 1)
    elif low >= 1:
        span = f"{low:.1f}-{faster(high, 1)}"
    else:
        span = f"{1 / high:.1f}-{faster(low, 1)}"
    median = statistics.median(offs)
    return (
        f"verdict: shim {span} than stock; {_percent(median)} against the floor (median of "
        f"{len(offs)} comparisons, {_percent(offs[0])} to {_percent(offs[-1])})"
    )


def _percent(value: float) -> str:
    text = f"{value:+.0f}%"
    return "+0%" if text == "-0%" else text  # (-0.3 rounds to "-0", which reads as a sign)


def _ratio(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float]:
    """a's mean over b's, and the standard error of that ratio, propagated from the standard
    errors of both means (σ/√n): what says whether two means differ, where σ alone says how
    much single runs do."""
    r = a["mean_s"] / b["mean_s"]
    rel = math.hypot(
        a["stdev_s"] / a["mean_s"] / math.sqrt(len(a["runs"])),
        b["stdev_s"] / b["mean_s"] / math.sqrt(len(b["runs"])),
    )
    return r, r * rel


def _per_repetition(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The median over repetitions of a's time over b's in the same repetition, as % above 1:
    the runs are interleaved, so a repetition's two runs met the same machine."""
    ratios = [x["wall"] / y["wall"] for x, y in zip(a["runs"], b["runs"], strict=False)]
    return float(statistics.median(ratios) - 1) * 100


def verdicts(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per scenario and verify setting where shim, stock and floor all ran: its line,
    and the ratios (``speed``: stock's time over the shim's; ``off``: % against the floor, the
    median of the per-repetition ratios; ``noise``: the standard error of the ratio of the
    means; ``memory``: the shim's peak memory against the floor's, in %; ``cold``: one
    request per process, the first)."""
    by_key = {(s["variant"], s["scenario"]): s for s in summaries}
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for s in summaries:
        verify = s["variant"].split("-", 1)[1]
        key = (s["scenario"], verify)
        if key in seen:
            continue
        seen.add(key)
        shim = by_key.get((f"shim-{verify}", s["scenario"]))
        stock = by_key.get((f"stock-{verify}", s["scenario"]))
        floor = by_key.get((f"floor-{verify}", s["scenario"]))
        if shim is None or stock is None or floor is None:
            continue
        label = f"{s['scenario']}, {verify}:"
        if shim["failed"] or stock["failed"] or floor["failed"]:
            out.append({"line": f"{label} requests failed; no comparison", "failed": True})
            continue
        speed, speed_se = _ratio(stock, shim)
        _slow, slow_se = _ratio(shim, floor)
        rss = [x.get("rss_mean_mb") or float("nan") for x in (shim, floor)]  # (older results)
        memory = (rss[0] / rss[1] - 1) * 100
        row: dict[str, Any] = {"speed": speed, "off": _per_repetition(shim, floor)}
        row.update(memory=memory, cold=s["scenario"] == "1 thr")
        if min(len(shim["runs"]), len(stock["runs"]), len(floor["runs"])) < 2:
            row["line"] = (
                f"{label} shim {faster(speed)} than stock; {row['off']:+.1f}% against the "
                "floor (one run: no noise estimate, use --repeat 2 or more)"
            )
        else:
            row["noise"] = noise = slow_se * 100
            row["line"] = (
                f"{label} shim {faster(speed)} (± {speed_se:.2f}) than stock; "
                f"{row['off']:+.1f}% ± {noise:.1f}% against the floor (median of "
                f"{len(shim['runs'])} per-repetition ratios), peak memory {memory:+.0f}%"
            )
            if row["cold"]:
                row["line"] += " (one request per process: the cold start)"
            if row["off"] < -2 * noise:
                row["line"] += " (beat the floor by more than twice the noise: rerun)"
        out.append(row)
    return out
