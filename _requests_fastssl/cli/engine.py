"""The benchmark engine behind ``python -m requests_fastssl bench``: the plan, the runs in
fresh children (``child.py``), and the micro-benchmarks.

Two scenarios. The seed's: N threads each call ``requests.get(url, verify=...)`` once, so
every call makes a new Session, a new pool and a new TLS connection. And a script's loop: one
thread calling ``requests.get`` N times in a row (a fresh Session, so a fresh connection, each
time). Each variant runs in a
fresh interpreter per repetition (``python -m _requests_fastssl.cli.child run ...``), so
caches and import state never leak between variants, and the variants are interleaved
(A B C D E, A B C D E, ...) after one untimed warm-up round. CA loads are counted in the
warm-up child through the profiler (``loads.py``), from outside the shim, so the shim cannot
flatter itself; timed children count nothing (the profiler would slow them).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .eta import Remaining

__all__ = [
    "VARIANTS",
    "ChildFailed",
    "Interrupted",
    "Plan",
    "Result",
    "Scenario",
    "ca_load_ms",
    "micro",
    "run_plan",
    "startup_cost",
]

# A child's bound: its requests time out in seconds (child.TIMEOUT), so only a wedged one
# reaches it.
CHILD_TIMEOUT = 600
# name -> (uses the shim, verify setting); "floor" is the context stock builds, built once
# and given to urllib3.
VARIANTS: dict[str, tuple[str, bool]] = {
    "stock-verify": ("stock", True),
    "stock-noverify": ("stock", False),
    "shim-verify": ("shim", True),
    "shim-noverify": ("shim", False),
    "floor-verify": ("floor", True),
    "floor-noverify": ("floor", False),
}


@dataclass(frozen=True)
class Scenario:
    threads: int
    calls: int  # requests.get calls per thread, one after the other

    @property
    def requests(self) -> int:
        return self.threads * self.calls

    @property
    def label(self) -> str:
        return f"{self.threads} thr" if self.calls == 1 else f"{self.calls} seq"


@dataclass
class Plan:
    url: str
    bundle: str | None  # the CA bundle for verify=<bundle>; None: requests' own default
    scenarios: list[Scenario]
    repeat: int
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))


class ChildFailed(Exception):
    """A benchmark child failed or did not end; ``results`` holds the runs before it."""

    def __init__(self, message: str, results: list[Result] | None = None) -> None:
        super().__init__(message)
        self.results = results or []


class Interrupted(Exception):  # not an ...Error: the user asked to stop
    """Ctrl-C during a run; ``results`` holds every run that finished before it."""

    def __init__(self, results: list[Result]) -> None:
        super().__init__("interrupted")
        self.results = results


@dataclass
class Run:
    wall: float
    ok: int
    failed: int
    ca_loads: int | None  # counted in the warm-up run only (None in timed runs)
    default_loads: int | None
    peak_rss_mb: float
    server_cpu: float = 0.0
    errors: list[str] = field(default_factory=list)


@dataclass
class Result:
    variant: str
    scenario: Scenario
    runs: list[Run]
    warm_up: Run | None = None  # the untimed run that counted the loads

    def summary(self) -> dict[str, Any]:
        walls = [r.wall for r in self.runs]
        return {
            "variant": self.variant,
            "scenario": self.scenario.label,
            "threads": self.scenario.threads,
            "calls_per_thread": self.scenario.calls,
            "requests": self.scenario.requests,
            "mean_s": statistics.fmean(walls),
            "stdev_s": statistics.stdev(walls) if len(walls) > 1 else 0.0,
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "max_s": max(walls),
            "per_request_ms": statistics.fmean(walls) / self.scenario.requests * 1000,
            "ca_loads": self.warm_up.ca_loads if self.warm_up else None,
            "default_loads": self.warm_up.default_loads if self.warm_up else None,
            "peak_rss_mb": max(r.peak_rss_mb for r in self.runs),
            # (a child's peak memory moves with thread scheduling: its spread says how much)
            "rss_mean_mb": statistics.fmean(r.peak_rss_mb for r in self.runs),
            "rss_stdev_mb": (
                statistics.stdev(r.peak_rss_mb for r in self.runs) if len(self.runs) > 1 else 0.0
            ),
            "server_cpu_share": statistics.median(
                r.server_cpu / r.wall if r.wall else 0.0 for r in self.runs
            ),
            "failed": sum(r.failed for r in self.runs),
            "runs": [asdict(r) for r in self.runs],
        }


def run_plan(
    plan: Plan, *, server_cpu: Callable[[], float], progress: Callable[[str], None]
) -> list[Result]:
    """Run every variant in every scenario, interleaved, each run in a fresh child.

    Ctrl-C raises ``Interrupted`` with the runs that finished (the running child is killed).
    """
    results = {(v, s): Result(v, s, []) for s in plan.scenarios for v in plan.variants}
    total = len(results) * plan.repeat
    queue = [
        (variant, scenario, counted)
        for scenario in plan.scenarios
        for counted, rounds in ((True, 1), (False, plan.repeat))
        for _ in range(rounds)
        for variant in plan.variants
    ]
    eta = Remaining()

    def child(variant: str, scenario: Scenario, count: bool = False) -> Run:
        started = time.monotonic()
        run = _child(plan, variant, scenario, count)
        eta.record(variant, scenario, count, time.monotonic() - started)
        del queue[0]
        return run

    def left() -> str:
        seconds = eta.left(queue)
        if seconds is None:
            return ""
        if seconds >= 90:
            return f", about {seconds / 60:.0f} min left"
        return f", about {seconds:.0f} s left"

    done = 0
    try:
        for scenario in plan.scenarios:
            for variant in plan.variants:  # warm-up: file caches, server threads, imports
                progress(f"warm-up {variant} {scenario.label}{left()}")
                results[(variant, scenario)].warm_up = child(variant, scenario, count=True)
            for rep in range(plan.repeat):
                for variant in plan.variants:
                    done += 1
                    progress(
                        f"[{done}/{total}] {variant} {scenario.label} "
                        f"(repetition {rep + 1}){left()}"
                    )
                    before = server_cpu()
                    run = child(variant, scenario)
                    run.server_cpu = server_cpu() - before
                    results[(variant, scenario)].runs.append(run)
    except KeyboardInterrupt:
        raise Interrupted([r for r in results.values() if r.runs]) from None
    except ChildFailed as failed:
        raise ChildFailed(str(failed), [r for r in results.values() if r.runs]) from None
    return list(results.values())


def ca_load_ms(bundle: str | None, rounds: int = 5) -> float:
    """Milliseconds for one load of ``bundle`` (a file or a directory; None: the system store,
    as stock loads it for verify=False) into a fresh urllib3 context, median of ``rounds``:
    what stock pays per new connection. Raises ``OSError`` / ``ssl.SSLError`` as the load does."""
    from urllib3.util.ssl_ import create_urllib3_context

    timings = []
    for _ in range(rounds):
        ctx = create_urllib3_context()
        started = time.perf_counter()
        if bundle is None:
            ctx.load_default_certs()
        elif os.path.isdir(bundle):
            ctx.load_verify_locations(capath=bundle)
        else:
            ctx.load_verify_locations(bundle)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def _child(plan: Plan, variant: str, scenario: Scenario, count: bool) -> Run:
    args = {
        "count": count,
        "variant": variant,
        "url": plan.url,
        "bundle": plan.bundle,
        "n": scenario.threads,
        "calls": scenario.calls,
    }
    proc = _spawn("run", args, f"{variant} {scenario.label}")
    return Run(**json.loads(proc.stdout.strip().splitlines()[-1]))


def _spawn(kind: str, args: dict[str, Any], what: str) -> subprocess.CompletedProcess[str]:
    """One child; ``ChildFailed``, with the last line of its error, if it fails or hangs."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "_requests_fastssl.cli.child", kind, json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"the {what} run did not end within {CHILD_TIMEOUT} s") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"]
        raise ChildFailed(f"the {what} run failed: {lines[-1][:300]}")
    return proc


def micro(
    url: str, bundle: str | None, calls: int = 5000, rounds: int = 3
) -> dict[str, float | None]:
    """The shim's own cost per keep-alive request, stock vs shim, with a warm pool.

    Two figures per side. The time of what ``HTTPAdapter.send`` does before it reuses a pooled
    connection (``get_connection_with_tls_context`` and ``cert_verify``: no traffic, best of
    5 x ``calls``), where the shim used to sit. And the number of Python-level calls into the
    shim's modules during 200 real keep-alive GETs on one Session (a profile hook counts
    them), the direct measure: a warm pool never reaches the shim's hook. None where the
    request fails (the table reports the failure).

    Stock and shim alternate in fresh interpreters and each keeps its best time, so a
    noisy neighbour slows a round down without deciding the result.
    """
    best = {"stock": float("inf"), "shim": float("inf")}
    shim_calls: float | None = 0.0
    for _ in range(rounds):
        for kind in best:
            args = {"kind": kind, "url": url, "bundle": bundle, "calls": calls}
            proc = _spawn("micro", args, f"keep-alive {kind}")
            seconds, counted = json.loads(proc.stdout.strip().splitlines()[-1])
            best[kind] = min(best[kind], seconds)
            if kind == "shim":
                shim_calls = (
                    None if counted is None or shim_calls is None else max(shim_calls, counted)
                )
    return {**best, "overhead": best["shim"] - best["stock"], "shim_calls_per_request": shim_calls}


def startup_cost(rounds: int = 20) -> dict[str, float]:
    """Milliseconds to start an interpreter bare and with the start-up line (best of N,
    alternating), in a program that never imports requests."""
    commands = {"bare": "pass", "activated": "import requests_fastssl"}
    best = dict.fromkeys(commands, float("inf"))
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-pyc-") as cache:
        # Bytecode as an installed package has it, even where PYTHONDONTWRITEBYTECODE is
        # set (as on our machines), kept in a private cache: the install is not touched.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for code in commands.values():  # writes the cache
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
        for _ in range(rounds):
            for name, code in commands.items():
                started = time.perf_counter()
                subprocess.run([sys.executable, "-c", code], check=True, env=env)
                best[name] = min(best[name], (time.perf_counter() - started) * 1000)
    return {**best, "added": best["activated"] - best["bare"]}
