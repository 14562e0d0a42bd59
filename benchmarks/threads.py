"""Threads: N threads, one ``requests.get`` each, on new connections, between variants and
between source trees, to tell a change's effect on the threaded rows from this machine's noise.

    python benchmarks/threads.py [--threads 30,100] [--repeat 15] [--json FILE] VARIANT...

VARIANT is one of:
- ``stock``: requests as installed.
- ``floor``: ``bench``'s floor: one context, built in the timed window before the threads are
  let go, handed to urllib3 by an adapter that leaves it nothing to load.
- ``floor-lazy``: the same adapter, but the context is built by the first thread that needs
  one (the others wait on a lock), from the bundle's bytes (``cadata``), as the shim's build
  did before issue 40 (it now loads the file, through a descriptor): what a cache that learns
  its key from the first connection can reach. The loads of ``cadata`` keep the interpreter
  lock: no other thread runs meanwhile.
- ``floor-lazy-file``: the same, loading the file by OpenSSL's own loader, which lets the
  interpreter lock go (as the shim's build does): threads arriving meanwhile reach the wait.
- ``shim``: ``requests_fastssl.install()`` from this tree.
- ``shim-warm``: the same, with ``requests_fastssl.warm(verify=bundle)`` called in the timed
  window before the threads are let go, as the floor builds: no thread waits for a build.
- ``shim=DIR``: the same from the source tree DIR (another commit, or a change under test:
  ``git worktree add DIR && git -C DIR apply change.diff``); checked to be the one imported.

Each run is a fresh interpreter; variants alternate within each repetition, each repetition
starting one variant later, and the ratios are those of each to the first one named within a
repetition (their median and quartiles: on a 2-core VM one run of 30 threads differs from the
next by 10-20%). A repetition in which any request failed is left out whole, and named under
the table (the embedded server once answered one handshake of 300 with a decode_error alert,
in the floor's run). The server runs in this process, which only waits meanwhile. Also
reported: the client's CPU time (user and system), its voluntary context switches, which a
lock or a system call that lets the interpreter lock go under contention adds to, and its peak
resident memory (the median of the repetitions' peaks).

Needs the test dependencies (trustme): pip install -e . --group test
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = ("stock", "floor", "floor-lazy", "floor-lazy-file", "shim", "shim-warm")


def _child(variant: str, url: str, bundle: str, n: int) -> dict[str, Any]:
    kind, _, tree = variant.partition("=")
    if kind in ("shim", "shim-warm"):
        source = str(Path(tree).resolve()) if tree else str(ROOT)
        sys.path.insert(0, source)
        import requests_fastssl

        if not requests_fastssl.__file__.startswith(source + os.sep):
            raise RuntimeError(f"requests_fastssl came from {requests_fastssl.__file__}")
        requests_fastssl.install()
    import requests
    import wrapt  # noqa: F401 (the product needs it: every variant's memory holds it)
    from urllib3.util.ssl_ import create_urllib3_context

    holder: list[Any] = []
    lock = threading.Lock()

    def build() -> None:
        ctx = create_urllib3_context(cert_reqs=2)  # CERT_REQUIRED
        if kind in ("floor", "floor-lazy-file"):
            ctx.load_verify_locations(bundle)
        else:
            with open(bundle, "rb") as file:
                ctx.load_verify_locations(cadata=file.read().decode("ascii"))
        holder.append(ctx)

    class Floor(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            if not holder:
                with lock:
                    if not holder:
                        build()
            super().init_poolmanager(*args, ssl_context=holder[0], **kwargs)

        def build_connection_pool_key_attributes(
            self, request: Any, verify: Any, cert: Any = None
        ) -> Any:
            host_params, pool_kwargs = super().build_connection_pool_key_attributes(
                request, verify, cert
            )
            pool_kwargs.pop("ca_certs", None)  # in the context already
            return host_params, pool_kwargs

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED"

    def call() -> int:
        if kind.startswith("floor"):
            with requests.Session() as session:
                session.mount("https://", Floor())
                return session.get(url, verify=bundle, timeout=30).status_code
        return requests.get(url, verify=bundle, timeout=30).status_code

    statuses: list[Any] = []
    gate = threading.Barrier(n + 1)

    def worker() -> None:
        gate.wait()
        try:
            statuses.append(call())
        except Exception as exc:
            statuses.append(f"{type(exc).__name__}: {exc}"[:200])

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for thread in threads:
        thread.start()
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    if kind == "floor":
        build()
    elif kind == "shim-warm" and not requests_fastssl.warm(verify=bundle):
        raise RuntimeError(f"warm() built nothing: {requests_fastssl.stats()}")
    gate.wait()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if len(statuses) != n:
        raise RuntimeError(f"{n - len(statuses)} of {n} threads ended without an outcome")
    failed = [str(s) for s in statuses if s != 200]
    return {
        "wall": wall,
        "cpu": cpu,
        "switches": after.ru_nvcsw - before.ru_nvcsw,
        "peak_kb": _peak_kb(),
        "failed": len(failed),
        "errors": failed[:3],
    }


def _peak_kb() -> int:
    """This process's peak resident memory in KiB: VmHWM, its own memory's high-water mark
    (ru_maxrss carries the forking parent's across exec on Linux: the driver's, not ours)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _run(variant: str, url: str, bundle: str, n: int) -> dict[str, Any]:
    # The trust is the bundle named, whatever this machine exports.
    drop = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", variant, url, bundle, str(n)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the {variant} run ({n} threads) failed:\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _served(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The runs of the repetitions in which every request of every variant was served: a
    failed request takes another time than a served one, and the ratios are within a
    repetition, so such a repetition is left out whole."""
    every = list(runs.values())
    keep = [i for i in range(len(every[0])) if not any(r[i]["failed"] for r in every)]
    return {variant: [mine[i] for i in keep] for variant, mine in runs.items()}


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4)
    return q1, median, q3


def _variant(text: str) -> str:
    kind, eq, tree = text.partition("=")
    if kind not in BASE or (eq and (kind != "shim" or not tree)):
        raise argparse.ArgumentTypeError(f"{text!r}: one of {', '.join(BASE)}, or shim=DIR")
    if tree and not (Path(tree) / "requests_fastssl" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{tree!r} holds no requests_fastssl package")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/threads.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("variants", nargs="+", type=_variant, metavar="VARIANT")
    parser.add_argument("--threads", default="30,100", help="thread counts (default 30,100)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument(
        "--against", metavar="VARIANT", help="also each shim variant's ratios to this one"
    )
    args = parser.parse_args()
    try:
        counts = [int(n) for n in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads: {args.threads!r} is not a list of numbers")
    if not all(1 <= n <= 1000 for n in counts) or not 1 <= args.repeat <= 200:
        parser.error("--threads 1-1000 each, --repeat 1-200")
    if len(set(args.variants)) != len(args.variants):
        parser.error("a variant is named twice")
    if args.against is not None and args.against not in args.variants:
        parser.error(f"--against {args.against}: not one of the variants run")
    import ssl

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
    from reach import serve

    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    with contextlib.ExitStack() as stack:
        url, pki = serve(stack, "rfs-threads-")
        bundle = str(pki / "bundle.pem")
        for n in counts:
            runs = results[n] = {v: [] for v in args.variants}
            for rep in range(args.repeat + 1):  # the first round warms the caches, untimed
                # Each round starts one variant later, so that none always follows the same
                # one: that one's after-effects (its server threads ending) would be counted
                # as the follower's.
                turn = rep % len(args.variants)
                for variant in args.variants[turn:] + args.variants[:turn]:
                    print(f"{n} threads: {variant} ({rep}/{args.repeat})", file=sys.stderr)
                    run = _run(variant, url, bundle, n)
                    if rep:
                        runs[variant].append(run)
    kept = {n: _served(runs) for n, runs in results.items()}
    print(
        f"Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}; {os.cpu_count()} CPUs; "
        f"{args.repeat} repetitions; ratios to {args.variants[0]} within each repetition"
    )
    header = (
        f"{'threads':>7}  {'variant':<28} {'wall ms':>8} {'ratio (q1 median q3)':>22} "
        f"{'CPU ms':>7} {'switches':>8} {'peak MB (q1 median q3)':>22}"
    )
    print(header)
    print("-" * len(header))
    base = args.variants[0]
    median: Callable[[list[float]], float] = statistics.median
    for n, runs in kept.items():
        if not runs[base]:
            print(f"{n:>7}  every repetition had a failed request: no figures")
            continue
        for variant, mine in runs.items():
            ratios = [a["wall"] / b["wall"] for a, b in zip(mine, runs[base], strict=True)]
            q1, mid, q3 = _quartiles(ratios)
            peaks = " ".join(f"{q / 1024:.1f}" for q in _quartiles([r["peak_kb"] for r in mine]))
            print(
                f"{n:>7}  {variant:<28} {median([r['wall'] for r in mine]) * 1000:>8.1f} "
                f"{f'{q1:.3f} {mid:.3f} {q3:.3f}':>22} "
                f"{median([r['cpu'] for r in mine]) * 1000:>7.1f} "
                f"{median([r['switches'] for r in mine]):>8.0f} "
                f"{peaks:>22}"
            )
    if args.against is not None:
        print(f"ratios to {args.against} within each repetition (q1 median q3):")
        for n, runs in kept.items():
            for variant, mine in runs.items():
                if variant.startswith("shim") and variant != args.against and mine:
                    q1, mid, q3 = _quartiles(
                        [
                            a["wall"] / b["wall"]
                            for a, b in zip(mine, runs[args.against], strict=True)
                        ]
                    )
                    print(f"{n:>7}  {variant:<28} {q1:.3f} {mid:.3f} {q3:.3f}")
    for n, runs in results.items():  # (what was left out, and why)
        for variant, mine in runs.items():
            for i, run in enumerate(mine):
                if run["failed"]:
                    print(
                        f"left out: {n} threads, repetition {i + 1} ({variant}: {run['failed']}"
                        f" failed, {run['errors'][0][:150]})"
                    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "command": " ".join(["python benchmarks/threads.py", *sys.argv[1:]]),
                    "python": sys.version,
                    "openssl": ssl.OPENSSL_VERSION,
                    "runs": {str(n): runs for n, runs in results.items()},
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        variant, url, bundle, n = sys.argv[2:6]
        print(json.dumps(_child(variant, url, bundle, int(n))))
    else:
        sys.exit(main())
