"""The command line: ``python -m requests_fastssl bench | doctor`` (also ``requests-fastssl``).

The only module that prints: results go to stdout, progress lines to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

from .. import __version__

__all__ = ["main"]


# Beyond these, a run would take hours or exhaust the machine's threads and sockets.
MAX_CONCURRENCY = 2000
MAX_REPEAT = 100


def _positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if any(not 1 <= v <= MAX_CONCURRENCY for v in values):
        raise argparse.ArgumentTypeError(f"need integers from 1 to {MAX_CONCURRENCY}, got {text!r}")
    return values


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= MAX_REPEAT:
        raise argparse.ArgumentTypeError(f"need an integer from 1 to {MAX_REPEAT}, got {text!r}")
    return value


def _program() -> str:
    """How the user invoked us, for usage lines: the script, or python -m."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m requests_fastssl" if name in ("", "__main__.py", "-c") else name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_program(),
        description="requests without a CA bundle load per connection: measure it, check it.",
    )
    parser.add_argument("--version", action="version", version=f"requests-fastssl {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser(
        "bench",
        help="N threads x requests.get(), stock vs shim vs floor, on an embedded HTTPS server",
    )
    bench.add_argument(
        "--concurrency",
        type=_positive_ints,
        default=[30],
        metavar="N[,N...]",
        help="threads per run, one or a list such as 1,30,100,300 (default 30)",
    )
    bench.add_argument(
        "--repeat",
        type=_positive_int,
        default=5,
        metavar="R",
        help="timed repetitions per variant, after one warm-up (default 5)",
    )
    bench.add_argument(
        "--url", help="run against this HTTPS URL instead (sends real traffic to it)"
    )
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    commands.add_parser("doctor", help="versions, shim status, CA bundle in use and its cost")
    run = commands.add_parser(
        "run",
        help="run a command with the shim active in it and in the Python processes it starts",
        usage=f"{_program()} run -- CMD [ARGS...]",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="the command, after --")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "bench":
        # Checked before any work: a run can take minutes.
        if args.json:
            folder = os.path.dirname(os.path.abspath(args.json))
            if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
                parser.error(f"--json: cannot write to {args.json!r} (no such writable folder)")
        if args.url:
            from urllib.parse import urlsplit

            parts = urlsplit(args.url)
            if parts.scheme != "https" or not parts.hostname:
                parser.error(f"--url: need an https:// URL with a host, got {args.url!r}")
        return _bench(args)
    if args.command == "run":
        return _run(args.argv)
    return _doctor()


# --- bench ---------------------------------------------------------------------------------------


def _machine() -> dict[str, Any]:
    import ssl

    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "openssl": ssl.OPENSSL_VERSION,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "versions": _versions(),
    }


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("requests", "urllib3", "certifi", "wrapt", "requests-fastssl"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _bench(args: argparse.Namespace) -> int:
    from contextlib import nullcontext

    from .bench import Plan, embedded_server, micro, run_plan, startup_cost

    tty = sys.stderr.isatty()

    def progress(line: str) -> None:
        if tty:  # one line, rewritten in place
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    if args.url:  # (checked in main())
        print(f"warning: sending real traffic to {args.url}", file=sys.stderr)
        target: Any = nullcontext((args.url, _bundle_in_use()[0]))
        server_name = f"external: {args.url}"
    else:
        target = embedded_server()
        server_name = "embedded Python ThreadingHTTPServer on 127.0.0.1, in this process"
    with target as (url, bundle):
        plan = Plan(url=url, bundle=bundle, concurrency=args.concurrency, repeat=args.repeat)
        started = time.time()
        results = run_plan(plan, server_cpu=time.process_time, progress=progress)
        progress("micro-benchmark of the wrapped hook")
        overhead = micro(url, bundle)
        progress("start-up cost of the activation line")
        startup = startup_cost()
    if tty:
        print("\r\033[K", end="", file=sys.stderr)
    machine = _machine()
    summaries = [r.summary() for r in results]
    _print_table(summaries, machine, server_name, args)
    print(
        f"wrapper overhead: {overhead['overhead']:.1f} us per request (pool lookup and cert_verify "
        f"with a warm cache: shim {overhead['shim']:.1f} us, stock {overhead['stock']:.1f} us; "
        "best of 3 x 5 x 5000 calls per side, no traffic)"
    )
    print(
        f"start-up cost of `import requests_fastssl` in a program that never uses requests: "
        f"{startup['added']:+.1f} ms ({startup['activated']:.1f} ms vs {startup['bare']:.1f} ms "
        "for `python -c pass`, best of 20 alternating)"
    )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "command": " ".join(["python -m requests_fastssl", *sys.argv[1:]]),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                    "server": server_name,
                    "machine": machine,
                    "results": summaries,
                    "wrapper_overhead_us": overhead,
                    "startup_ms": startup,
                },
                out,
                indent=2,
            )
    failed = sum(s["failed"] for s in summaries)
    if failed:
        errors = {e for r in results for run in r.runs for e in run.errors}
        print(f"\n{failed} request(s) failed, e.g.: {sorted(errors)[:3]}", file=sys.stderr)
        return 1
    return 0


def _print_table(
    summaries: list[dict[str, Any]],
    machine: dict[str, Any],
    server: str,
    args: argparse.Namespace,
) -> None:
    by_key = {(s["variant"], s["concurrency"]): s for s in summaries}
    print(
        f"Python {machine['python']}, {machine['openssl']}, {machine['cpus']} CPUs; "
        f"requests {machine['versions']['requests']}, urllib3 {machine['versions']['urllib3']}"
    )
    print(f"server: {server}; {args.repeat} timed run(s) per variant after a warm-up")
    header = (
        f"{'variant':<15} {'N':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'ms/req':>7} "
        f"{'vs stock':>9} {'vs floor':>9} {'CA loads':>9} {'RSS MB':>7} {'srv CPU':>8}"
    )
    print(header)
    print("-" * len(header))
    for s in summaries:
        _kind, verify = s["variant"].split("-")
        stock = by_key.get((f"stock-{verify}", s["concurrency"]))
        floor = by_key.get((f"floor-{verify}", s["concurrency"]))
        speedup = f"{stock['median_s'] / s['median_s']:.2f}x" if stock else "-"
        to_floor = f"{s['median_s'] / floor['median_s']:.2f}" if floor else "-"
        loads = s["ca_loads"] + s["default_loads"]
        print(
            f"{s['variant']:<15} {s['concurrency']:>4} {s['median_s']:>9.3f} "
            f"{s['min_s']:>7.3f} {s['max_s']:>7.3f} {s['per_request_ms']:>7.2f} "
            f"{speedup:>9} {to_floor:>9} {loads:>9g} {s['peak_rss_mb']:>7.1f} "
            f"{s['server_cpu_share']:>7.0%}"
        )
    print(
        "CA loads: load_verify_locations + load_default_certs calls per run, counted in the "
        "child outside the shim. srv CPU: server CPU time / wall time (1 core = 100%)."
    )


# --- run -----------------------------------------------------------------------------------------


def bootstrap_dir() -> str:
    """The directory whose sitecustomize.py activates the shim at interpreter start-up."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # _requests_fastssl/
    return os.path.join(package, "bootstrap")


def _run(command: list[str]) -> int:
    import shutil

    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print(
            "error: nothing to run; usage: python -m requests_fastssl run -- CMD [ARGS...]",
            file=sys.stderr,
        )
        return 2
    executable = shutil.which(command[0])
    if executable is None:
        print(f"error: command not found: {command[0]}", file=sys.stderr)
        return 127
    env = os.environ.copy()
    here = bootstrap_dir()
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    env["PYTHONPATH"] = os.pathsep.join([here, *entries])  # once, however deeply nested
    os.execve(executable, command, env)
    return 0  # not reached


# --- doctor --------------------------------------------------------------------------------------


def _bundle_in_use() -> tuple[str, str]:
    """The CA bundle requests would use for verify=True right now, and where it came from."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        value = os.environ.get(name)
        if value:
            return value, f"from {name}"
    import requests.adapters

    default: str = getattr(requests.adapters, "DEFAULT_CA_BUNDLE_PATH")  # noqa: B009 (not exported)
    return default, "requests' default (certifi)"


def _doctor() -> int:
    import ssl

    import requests  # noqa: F401  (imported so that the shim patches, or says why not)
    from urllib3.util.ssl_ import create_urllib3_context

    import requests_fastssl

    print(f"requests-fastssl {__version__}")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    print(ssl.OPENSSL_VERSION)
    print(", ".join(f"{name} {v}" for name, v in _versions().items() if name != "requests-fastssl"))
    status = requests_fastssl.status()
    print(f"shim in this process: {status}")
    bundle, origin = _bundle_in_use()
    print(f"CA bundle for verify=True: {bundle} ({origin})")
    timings = []
    try:
        for _ in range(5):
            ctx = create_urllib3_context()
            started = time.perf_counter()
            if os.path.isdir(bundle):
                ctx.load_verify_locations(capath=bundle)
            else:
                ctx.load_verify_locations(bundle)
            timings.append(time.perf_counter() - started)
    except OSError as exc:
        # Every verify=True request would fail the same way.
        print(f"one CA load: failed ({exc})")
        print(f"registry: {requests_fastssl.stats()}")
        return 1
    else:
        print(
            f"one CA load: {statistics.median(timings) * 1000:.1f} ms (median of 5); stock "
            "requests pays this on every new connection"
        )
    print(f"registry: {requests_fastssl.stats()}")
    return 0 if status.state.value == "active" else 1
