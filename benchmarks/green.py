"""Green: N gevent greenlets, one ``requests.get`` each, on new connections, with a ticker
greenlet beside them that tells how long the hub was blocked.

    python benchmarks/green.py [--greenlets 30,300] [--repeat 21] [--eventlet] [--json FILE]
        [VARIANT...]

VARIANT is one of (default: ``floor stock shim``; ratios are to the first one named):
- ``stock``: requests as installed.
- ``floor``: one context, built in the timed window before the greenlets are let go by
  urllib3's ``create_urllib3_context`` (so under gevent of gevent's ``SSLContext`` class),
  loading the bundle file once, handed to urllib3 by an adapter that leaves it nothing to
  load: what no cache can beat.
- ``shim``: ``requests_fastssl.install()`` from this tree.
- ``shim=DIR``: the same from the source tree DIR (another commit, or a change under test);
  checked to be the one imported.
- ``shim-warm``: the shim, with ``requests_fastssl.warm(verify=bundle)`` called in the timed
  window before the greenlets are let go, where the floor builds: no greenlet meets a build
  after its TCP connect (the cold ``shim`` row's only difference from the floor).

Each run is a fresh interpreter whose first statement is ``monkey.patch_all()`` (with
``--eventlet``: ``eventlet.monkey_patch()``), before requests or urllib3 is imported; then the
shim is installed (shim variants). N greenlets wait on an event, then each calls
``requests.get(url, verify=bundle)`` (a new Session, so a new connection); the bundle is
certifi's plus the server's throwaway CA. Beside them a ticker greenlet sleeps 1 ms
(``--tick-ms``) in a loop: a run's *worst gap* is the longest stretch of the timed window in
which it did not wake, the longest the hub was blocked (a CA load holds it for the whole
load). The server runs in this process, on 127.0.0.1, in real threads (this process is not
patched), and only waits meanwhile.

Variants alternate within each repetition, each repetition starting one variant later, after
a warm-up round that is not timed. *CA loads* are counted in that warm-up run, by the
profiler (``_requests_fastssl/cli/loads.py``, as ``bench`` and ``reach.py`` count them): the
calls of ``load_verify_locations`` and ``load_default_certs`` on client-side contexts of any
class (gevent's and eventlet's are subclasses of the standard library's), from outside the
shim, which steps aside from a context class whose load methods were replaced. The ratios of
wall time and of worst gap are taken within each repetition (their median and quartiles); a
repetition in which any request failed is left out whole, and named. For shim variants the
shim's own counters (``requests_fastssl.stats()``) in the timed runs are shown too: whether it
shared contexts or stepped aside, and why.

Needs the test dependencies (trustme) and gevent (or eventlet): pip install -e . --group test
gevent
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = ("stock", "floor", "shim", "shim-warm")
TARGETS = {"loads": 1, "wall": 1.05, "gap": 1.10, "repetitions": 21}  # (the green targets)


def _patch(library: str) -> Any:
    """Monkey-patch first, as a green program does; the library's module. (By name: neither
    library ships type hints, and the benchmark's checks must not need them installed.)"""
    if library == "gevent":
        importlib.import_module("gevent.monkey").patch_all()
        return importlib.import_module("gevent")
    eventlet = importlib.import_module("eventlet")
    eventlet.monkey_patch()
    return eventlet


def _counter() -> Any:
    """The project's load counter (the profiler, started now), from this tree's file under a
    name of its own: importing it as ``_requests_fastssl.cli.loads`` would make a ``shim=DIR``
    child import this tree's ``_requests_fastssl`` instead of DIR's."""
    import _ssl
    import ssl
    import types

    spec = importlib.util.spec_from_file_location(
        "green_loads", ROOT / "_requests_fastssl" / "cli" / "loads.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclass looks its module up)
    spec.loader.exec_module(module)
    # It asks isinstance(owner, ssl.SSLContext) when it counts: patched, that is gevent's
    # (eventlet's) class, which a context made of the standard library's is not. The C base
    # class every context is an instance of, whatever class made it:
    module.ssl = types.SimpleNamespace(  # type: ignore[attr-defined]
        SSLContext=_ssl._SSLContext, PROTOCOL_TLS_SERVER=ssl.PROTOCOL_TLS_SERVER
    )
    stack = contextlib.ExitStack()  # (held until the child ends)
    return stack, stack.enter_context(module.counting_loads())


def _child(
    library: str, variant: str, url: str, bundle: str, n: int, tick: float, count: bool
) -> dict[str, Any]:
    green = _patch(library)  # before anything else imports socket, ssl or threading
    kind, _, tree = variant.partition("=")
    counting = _counter() if count else None
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

    class Floor(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
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
        if kind == "floor":
            with requests.Session() as session:
                session.mount("https://", Floor())
                return session.get(url, verify=bundle, timeout=30).status_code
        return requests.get(url, verify=bundle, timeout=30).status_code

    if library == "gevent":
        gate = importlib.import_module("gevent.event").Event()
        release = gate.set

        def join(greenlet: Any) -> None:
            greenlet.join()
    else:
        gate = importlib.import_module("eventlet.event").Event()

        def release() -> None:
            gate.send(True)

        def join(greenlet: Any) -> None:
            greenlet.wait()

    statuses: list[Any] = []
    wakes: list[float] = []
    done = False

    def worker() -> None:
        gate.wait()
        try:
            statuses.append(call())
        except Exception as exc:
            statuses.append(f"{type(exc).__name__}: {exc}"[:200])

    def ticker() -> None:
        while not done:
            green.sleep(tick)
            wakes.append(time.perf_counter())

    beside = green.spawn(ticker)
    workers = [green.spawn(worker) for _ in range(n)]
    green.sleep(0)  # every greenlet to its wait: the ticker in its sleep, the workers at the gate
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    if kind == "floor":
        ctx = create_urllib3_context(cert_reqs=2)  # CERT_REQUIRED; the patched class (gevent's)
        ctx.load_verify_locations(bundle)
        holder.append(ctx)
    elif kind == "shim-warm":
        sys.modules["requests_fastssl"].warm(verify=bundle)
    release()
    for one in workers:
        join(one)
    ended = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_SELF)
    done = True
    join(beside)
    # The longest stretch of [started, ended] without a wake-up of the ticker.
    marks = [started, *(w for w in wakes if started < w < ended), ended]
    gap = max(b - a for a, b in itertools.pairwise(marks))
    if len(statuses) != n:
        raise RuntimeError(f"{n - len(statuses)} of {n} greenlets ended without an outcome")
    failed = [str(s) for s in statuses if s != 200]
    result: dict[str, Any] = {
        "wall": ended - started,
        "gap": gap,
        "ticks": len(marks) - 2,
        "cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
        "failed": len(failed),
        "errors": failed[:3],
        "context_class": f"{type(holder[0]).__module__}.{type(holder[0]).__qualname__}"
        if holder
        else None,
    }
    if counting is not None:
        stack, counter = counting
        stack.close()
        result["ca_loads"] = counter.verify_locations + counter.default_certs
        result["load_verify_locations"] = counter.verify_locations
        result["load_default_certs"] = counter.default_certs
    if kind in ("shim", "shim-warm"):
        stats = requests_fastssl.stats()
        result["shim"] = {
            "contexts_built": stats.contexts_built,
            "ca_loads": stats.ca_loads,
            "reuses": stats.reuses,
            "step_asides": stats.step_asides,
            "reasons": dict(stats.step_aside_reasons),
        }
    return result


def _run(
    library: str, variant: str, url: str, bundle: str, n: int, tick: float, count: bool
) -> dict[str, Any]:
    # The trust is the bundle named, whatever this machine exports; and no developer's
    # REQUESTS_FASTSSL_* switch (DISABLE would make every shim run a stock one).
    drop = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith("REQUESTS_FASTSSL_")
    }
    what = "count" if count else "time"
    child = [library, variant, url, bundle, str(n), str(tick), what]
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *child],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the {variant} run ({n} greenlets) failed:\n{proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _variant(text: str) -> str:
    kind, eq, tree = text.partition("=")
    if kind not in BASE or (eq and (kind != "shim" or not tree)):
        raise argparse.ArgumentTypeError(f"{text!r}: one of {', '.join(BASE)}, or shim=DIR")
    if tree and not (Path(tree) / "requests_fastssl" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{tree!r} holds no requests_fastssl package")
    return text


def _shim_stats(runs: list[dict[str, Any]]) -> str:
    """What the shim's own counters said in the timed runs, each distinct outcome once."""
    seen: dict[str, int] = {}
    for run in runs:
        s = run["shim"]
        reasons = ", ".join(f"{k}: {v}" for k, v in s["reasons"].items())
        said = (
            f"{s['contexts_built']} built, {s['ca_loads']} CA loads, {s['reuses']} reuses, "
            f"{s['step_asides']} left to stock" + (f" ({reasons})" if reasons else "")
        )
        seen[said] = seen.get(said, 0) + 1
    return "; ".join(f"{said} [{k} run(s)]" for said, k in seen.items())


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/green.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("variants", nargs="*", type=_variant, metavar="VARIANT")
    parser.add_argument("--greenlets", default="30,300", help="greenlet counts (default 30,300)")
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--tick-ms", type=float, default=1.0, help="the ticker's sleep (1 ms)")
    parser.add_argument(
        "--eventlet", action="store_true", help="eventlet.monkey_patch() instead of gevent"
    )
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    variants: list[str] = args.variants or ["floor", "stock", "shim"]
    try:
        counts = [int(n) for n in args.greenlets.split(",")]
    except ValueError:
        parser.error(f"--greenlets: {args.greenlets!r} is not a list of numbers")
    if not all(1 <= n <= 1000 for n in counts) or not 1 <= args.repeat <= 200:
        parser.error("--greenlets 1-1000 each, --repeat 1-200")
    if not 0.1 <= args.tick_ms <= 100:
        parser.error("--tick-ms 0.1-100")
    if len(set(variants)) != len(variants):
        parser.error("a variant is named twice")
    library = "eventlet" if args.eventlet else "gevent"
    if importlib.util.find_spec(library) is None:
        parser.error(f"{library} is not installed: pip install {library}")
    import ssl
    from importlib.metadata import version

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
    from reach import serve
    from threads import _quartiles, _served

    tick = args.tick_ms / 1000
    loads: dict[int, dict[str, dict[str, Any]]] = {}
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    with contextlib.ExitStack() as stack:
        url, pki = serve(stack, "rfs-green-")
        bundle = str(pki / "bundle.pem")
        for n in counts:
            runs = results[n] = {v: [] for v in variants}
            counted = loads[n] = {}
            for rep in range(args.repeat + 1):  # the first round counts loads, untimed
                # Each round starts one variant later, so that none always follows the same
                # one: that one's after-effects (its server threads ending) would be counted
                # as the follower's.
                turn = rep % len(variants)
                for variant in variants[turn:] + variants[:turn]:
                    print(f"{n} greenlets: {variant} ({rep}/{args.repeat})", file=sys.stderr)
                    run = _run(library, variant, url, bundle, n, tick, count=not rep)
                    if rep:
                        runs[variant].append(run)
                    else:
                        counted[variant] = run
    kept = {n: _served(runs) for n, runs in results.items()}
    base = variants[0]
    print(
        f"Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}; {library} "
        f"{version(library)}, "
        + ("monkey.patch_all()" if library == "gevent" else "eventlet.monkey_patch()")
        + f" first; {os.cpu_count()} CPUs; {args.repeat} repetitions; a {args.tick_ms:g} ms "
        f"ticker; ratios to {base} within each repetition"
    )
    header = (
        f"{'greenlets':>9}  {'variant':<24} {'CA loads':>8} {'wall ms':>8} "
        f"{'wall ratio (q1 med q3)':>23} {'worst gap ms':>12} {'gap ratio (q1 med q3)':>23} "
        f"{'CPU ms':>7}"
    )
    print(header)
    print("-" * len(header))
    median = statistics.median
    verdicts: list[str] = []
    for n, runs in kept.items():
        if not runs[base]:
            print(f"{n:>9}  every repetition had a failed request: no figures")
            continue
        for variant, mine in runs.items():
            walls = _quartiles(
                [a["wall"] / b["wall"] for a, b in zip(mine, runs[base], strict=True)]
            )
            gaps = _quartiles([a["gap"] / b["gap"] for a, b in zip(mine, runs[base], strict=True)])
            ca = loads[n][variant]["ca_loads"]
            print(
                f"{n:>9}  {variant:<24} {ca:>8} {median([r['wall'] for r in mine]) * 1000:>8.1f} "
                f"{' '.join(f'{q:.3f}' for q in walls):>23} "
                f"{median([r['gap'] for r in mine]) * 1000:>12.1f} "
                f"{' '.join(f'{q:.3f}' for q in gaps):>23} "
                f"{median([r['cpu'] for r in mine]) * 1000:>7.1f}"
            )
            if variant.startswith("shim") and base == "floor":
                met = (
                    ca <= TARGETS["loads"]
                    and walls[1] <= TARGETS["wall"]
                    and gaps[1] <= TARGETS["gap"]
                    and len(mine) >= TARGETS["repetitions"]
                )
                verdicts.append(
                    f"  {n} greenlets, {variant}: {ca} CA load(s) (want {TARGETS['loads']}), "
                    f"wall {walls[1]:.3f} (want <= {TARGETS['wall']}), worst gap {gaps[1]:.3f} "
                    f"(want <= {TARGETS['gap']}), {len(mine)} repetitions (want >= "
                    f"{TARGETS['repetitions']}): {'met' if met else 'not met'}"
                )
    print(
        "CA loads: load_verify_locations + load_default_certs on client contexts, counted by "
        "the profiler in the warm-up run; worst gap: the longest the ticker did not wake in "
        "the timed window"
    )
    for n, runs in kept.items():
        for variant, mine in runs.items():
            if variant.startswith("shim") and mine:
                print(
                    f"{variant}, {n} greenlets, its stats() in the timed runs: {_shim_stats(mine)}"
                )
    if verdicts:
        print("targets against the floor (medians of the per-repetition ratios):")
        print("\n".join(verdicts))
    for n, counted in loads.items():  # (a count of loads from a run that failed requests)
        for variant, run in counted.items():
            if run["failed"]:
                print(
                    f"warm-up: {n} greenlets, {variant}: {run['failed']} failed, its CA loads "
                    f"counted all the same ({run['errors'][0][:150]})"
                )
    for n, runs in results.items():  # (what was left out, and why)
        for variant, mine in runs.items():
            for i, run in enumerate(mine):
                if run["failed"]:
                    print(
                        f"left out: {n} greenlets, repetition {i + 1} ({variant}: "
                        f"{run['failed']} failed, {run['errors'][0][:150]})"
                    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "command": " ".join(["python benchmarks/green.py", *sys.argv[1:]]),
                    "python": sys.version,
                    "openssl": ssl.OPENSSL_VERSION,
                    "library": {"name": library, "version": version(library)},
                    "tick_ms": args.tick_ms,
                    "loads": {str(n): counted for n, counted in loads.items()},
                    "runs": {str(n): runs for n, runs in results.items()},
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        library, variant, url, bundle, n, tick, what = sys.argv[2:9]
        result = _child(library, variant, url, bundle, int(n), float(tick), what == "count")
        print(json.dumps(result))
    else:
        sys.exit(main())
