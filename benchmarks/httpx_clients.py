"""httpx clients made per call or per task: stock, shim and floor, in one process, interleaved.

    nice -n 19 python benchmarks/httpx_clients.py [--repeat 21] [--json FILE]

- ``stock``: httpx as installed (every client builds a context and loads the bundle).
- ``shim``: ``requests_fastssl.install()`` (its first build made before the timed window).
- ``floor``: one context built once by httpx's own ``create_ssl_context()``, passed as
  ``verify=`` to every client: what no cache can beat.

Scenarios, each on the embedded HTTPS server (127.0.0.1) with certifi's bundle plus the test
CA, named by ``SSL_CERT_FILE`` (httpx reads it for ``verify=True``, ``trust_env``):
``create`` (``httpx.Client()`` alone, ms each), ``create-async`` (``httpx.AsyncClient()``),
``per-call`` (a client per request, sequential), ``get-threads`` (30 threads, one
``httpx.get`` each: wall per request), ``async-tasks`` (30 tasks, an ``AsyncClient`` each,
beside a 1 ms ticker task: wall per request and the worst gap between its ticks, the time the
event loop was blocked), ``shared`` (one client, keep-alive requests, us each). The ratios are
medians of per-repetition ratios to the floor, each mode first in turn, each run after a
``gc.collect()`` (else the run after stock's collected its contexts). Load counts come from
one untimed pass each.
Needs httpx (and trustme): pip install -e . --group test
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import ssl
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from reach import serve

import requests_fastssl
from _requests_fastssl.cli.loads import counting_loads

MODES = ("stock", "shim", "floor")
SCENARIOS = ("create", "create-async", "per-call", "get-threads", "async-tasks", "shared")


def _verify(mode: str, floor: ssl.SSLContext) -> Any:
    return floor if mode == "floor" else True


def create(url: str, verify: Any, n: int = 40) -> dict[str, float]:
    started = time.perf_counter()
    for _ in range(n):
        httpx.Client(verify=verify).close()
    return {"ms": (time.perf_counter() - started) / n * 1e3}


def create_async(url: str, verify: Any, n: int = 40) -> dict[str, float]:
    started = time.perf_counter()
    for _ in range(n):
        httpx.AsyncClient(verify=verify)
    return {"ms": (time.perf_counter() - started) / n * 1e3}


def per_call(url: str, verify: Any, n: int = 30) -> dict[str, float]:
    started = time.perf_counter()
    for _ in range(n):
        with httpx.Client(verify=verify) as client:
            client.get(url).raise_for_status()
    return {"ms": (time.perf_counter() - started) / n * 1e3}


def get_threads(url: str, verify: Any, n: int = 30) -> dict[str, float]:
    go, failures = threading.Barrier(n + 1), []

    def one() -> None:
        go.wait()
        try:
            httpx.get(url, verify=verify).raise_for_status()
        except Exception as exc:  # (counted: a run with failures is reported, not hidden)
            failures.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for thread in threads:
        thread.start()
    go.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return {"ms": (time.perf_counter() - started) / n * 1e3, "failures": len(failures)}


def async_tasks(url: str, verify: Any, n: int = 30) -> dict[str, float]:
    async def main() -> dict[str, float]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        async def one() -> None:
            async with httpx.AsyncClient(verify=verify) as client:
                (await client.get(url)).raise_for_status()

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.005)
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        wall = time.perf_counter() - started
        done.set()
        await tick
        return {"ms": wall / n * 1e3, "worst_gap_ms": max(gaps) * 1e3}

    return asyncio.run(main())


def shared(url: str, verify: Any, n: int = 200) -> dict[str, float]:
    with httpx.Client(verify=verify) as client:
        client.get(url)
        started = time.perf_counter()
        for _ in range(n):
            client.get(url)
        return {"us": (time.perf_counter() - started) / n * 1e6}


RUN: dict[str, Callable[..., dict[str, float]]] = {
    "create": create, "create-async": create_async, "per-call": per_call,
    "get-threads": get_threads, "async-tasks": async_tasks, "shared": shared,
}  # fmt: skip


@contextlib.contextmanager
def mode_on(mode: str) -> Any:
    if mode == "shim":
        requests_fastssl.install()
        httpx.Client().close()  # (its one build, outside the timed window, as the floor's)
    # The previous run's garbage (stock's 30 contexts, each with its store) is collected here,
    # not in this run's timed window: in one process, a run after stock's paid for it.
    gc.collect()
    try:
        yield
    finally:
        requests_fastssl.uninstall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--json")
    args = parser.parse_args()
    scenarios = args.scenarios.split(",")
    requests_fastssl.uninstall()
    with contextlib.ExitStack() as stack:
        url, pki = serve(stack, "httpx-bench-")
        for name in ("SSL_CERT_DIR", "SSLKEYLOGFILE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
            os.environ.pop(name, None)
        os.environ["SSL_CERT_FILE"] = str(pki / "bundle.pem")
        floor = httpx.create_ssl_context()  # (httpx's own function, once: the floor)
        loads: dict[str, dict[str, int]] = {}
        for scenario in scenarios:  # one untimed pass each, counted (warms the code paths too)
            for mode in MODES:
                with mode_on(mode), counting_loads() as counter:
                    RUN[scenario](url, _verify(mode, floor))
                loads[f"{scenario}/{mode}"] = vars(counter).copy()
        results: dict[str, dict[str, list[dict[str, float]]]] = {s: {} for s in scenarios}
        for rep in range(args.repeat):
            for scenario in scenarios:
                order = MODES[rep % 3 :] + MODES[: rep % 3]  # (each mode first in turn)
                for mode in order:
                    with mode_on(mode):
                        got = RUN[scenario](url, _verify(mode, floor))
                    results[scenario].setdefault(mode, []).append(got)
            print(f"repetition {rep + 1}/{args.repeat}", file=sys.stderr)
    print(
        f"httpx {httpx.__version__}, {ssl.OPENSSL_VERSION}, Python {sys.version.split()[0]}, "
        f"{args.repeat} repetitions; medians; ratio: median of per-repetition ratios to floor"
    )
    for scenario in scenarios:
        for metric in results[scenario]["floor"][0]:
            if metric == "failures":
                continue
            row = [f"{scenario:13} {metric:13}"]
            for mode in MODES:
                runs, floors = results[scenario][mode], results[scenario]["floor"]
                values = [r[metric] for r in runs]
                ratios = [r[metric] / f[metric] for r, f in zip(runs, floors, strict=True)]
                median, ratio = statistics.median(values), statistics.median(ratios)
                row.append(f"{mode} {median:8.3f} (x{ratio:.2f})")
            print("  ".join(row))
        counts = "  ".join(f"{m}: {loads[f'{scenario}/{m}']}" for m in MODES)
        print(f"{'':13} loads         {counts}")
    failed = sum(r.get("failures", 0) for s in results.values() for m in s.values() for r in m)
    if failed:
        print(f"{failed} requests failed")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "loads": loads}, indent=1))


if __name__ == "__main__":
    main()
