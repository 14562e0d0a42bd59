"""How ``bench`` prints its results: a table of mean ± σ per variant, then one verdict per
scenario, read the way hyperfine's summary reads."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["print_table", "verdicts"]

LEGEND = (
    "stock: requests as installed. shim: the same with requests_fastssl installed. floor: the "
    "least any cache can do, the context stock builds for each connection, built and "
    "loaded once per run and handed to urllib3 by an adapter (its build is inside the timed "
    "window, before the threads start; the shim builds on first use). "
    "scenario: N thr = N threads, one requests.get each; N seq = one thread, N requests.get "
    "in a row. wall: mean ± standard deviation of the timed runs; the summary's figures are "
    "ratios of means ± their standard error. CA loads: "
    "load_verify_locations + load_default_certs calls per run, counted in the warm-up run "
    "from outside the shim. srv CPU: server CPU time / wall time (1 core = 100%). failed: "
    "failed requests over all runs (no comparison for a variant with failures)."
)


def print_table(summaries: list[dict[str, Any]], server: str, repeat: int) -> None:
    print(f"server: {server}; {repeat} timed run(s) per variant after a warm-up")
    header = (
        f"{'variant':<15} {'scenario':>8} {'wall s (mean ± σ)':>19} {'min…max s':>13} "
        f"{'ms/req':>7} {'CA loads':>9} {'RSS MB':>7} {'srv CPU':>8} {'failed':>7}"
    )
    print(header)
    print("-" * len(header))
    for s in summaries:
        loads = s["ca_loads"] + s["default_loads"]
        wall = f"{s['mean_s']:.3f} ± {s['stdev_s']:.3f}"
        spread = f"{s['min_s']:.3f}…{s['max_s']:.3f}"
        print(
            f"{s['variant']:<15} {s['scenario']:>8} {wall:>19} {spread:>13} "
            f"{s['per_request_ms']:>7.2f} {loads:>9g} {s['peak_rss_mb']:>7.1f} "
            f"{s['server_cpu_share']:>7.0%} {s['failed']:>7}"
        )
    print(LEGEND)
    lines = verdicts(summaries)
    if lines:
        print()
        print("summary")
        for line in lines:
            print(f"  {line}")


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


def verdicts(summaries: list[dict[str, Any]]) -> list[str]:
    """One line per scenario and verify setting where shim, stock and floor all ran cleanly,
    with a warning where the noise makes the comparison with the floor meaningless."""
    by_key = {(s["variant"], s["scenario"]): s for s in summaries}
    out: list[str] = []
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
            out.append(f"{label} requests failed; no comparison")
            continue
        speed, speed_se = _ratio(stock, shim)
        slow, slow_se = _ratio(shim, floor)
        off, noise = (slow - 1) * 100, slow_se * 100
        if min(len(shim["runs"]), len(stock["runs"]), len(floor["runs"])) < 2:
            out.append(
                f"{label} shim {speed:.2f} times faster than stock; {off:+.1f}% against the "
                "floor (one run: no noise estimate, use --repeat 2 or more)"
            )
            continue
        out.append(
            f"{label} shim {speed:.2f} ± {speed_se:.2f} times faster than stock; "
            f"{off:+.1f}% ± {noise:.1f}% against the floor"
        )
        if off < -2 * noise:
            out.append(
                "  warning: the shim beat the floor by more than twice the noise; something "
                "disturbed the runs (another load on the machine?): rerun"
            )
        elif noise > 5:
            out.append(
                f"  warning: ±{noise:.0f}% of noise is too much to tell a few per cent apart; "
                "rerun with more --repeat on a quieter machine"
            )
    return out
