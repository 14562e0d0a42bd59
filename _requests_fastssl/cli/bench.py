"""``bench``: the orchestration: the target (the embedded server, or ``--url`` after one
checking request), the plan run by ``engine``, the table by ``table``, the JSON."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .output import certificates, error, trust_for_verify_true
from .output import machine as output_machine

__all__ = ["bench", "embedded_server"]


@contextmanager
def embedded_server() -> Iterator[tuple[str, str]]:
    """An HTTPS server on 127.0.0.1 with a throw-away CA; yields (url, bundle), the bundle
    being certifi's plus that CA, so every load costs what a real one costs."""
    from .pki import certifi_plus, test_ca
    from .server import HTTPSServer, server_context

    ca = test_ca()
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-bench-") as tmp:
        bundle = certifi_plus(ca, tmp)
        with HTTPSServer(server_context(ca, ("127.0.0.1",))) as server:
            yield server.url, bundle


def _probe(url: str, bundle: str) -> tuple[bool, str | None]:
    """One request before the runs, unverified then verified: (reachable, why verification
    fails or None). A server that cannot be reached ends the benchmark now; one the bundle
    does not verify gets its verify rows reported as a failure, not timed (a failed handshake
    measures nothing any user pays for)."""
    import requests
    import urllib3

    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    try:
        requests.get(url, verify=False, timeout=10).close()
    except requests.RequestException as exc:
        error(f"--url: {url} cannot be reached ({type(exc).__name__}: {exc})")
        return False, None
    try:
        requests.get(url, verify=bundle, timeout=10).close()
    except requests.RequestException as exc:
        return True, f"{type(exc).__name__}: {exc}"
    return True, None


def bench(args: argparse.Namespace) -> int:
    import ssl
    from contextlib import nullcontext

    from .engine import (
        VARIANTS,
        ChildFailed,
        Interrupted,
        Plan,
        Scenario,
        ca_load_ms,
        micro,
        run_plan,
        startup_cost,
    )
    from .table import print_table

    tty = sys.stderr.isatty()

    def progress(line: str) -> None:
        if tty:  # one line, rewritten in place
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    unverified: str | None = None  # with --url: why verify=<bundle> fails against it
    if args.url:  # (its form checked in main())
        bundle, origin = (args.ca, "--ca") if args.ca else trust_for_verify_true()
        if not (os.path.isfile(bundle) or os.path.isdir(bundle)):  # (a FIFO would block)
            error(f"the CA bundle {bundle!r} ({origin}) is missing, or not a file or directory")
            return 2 if args.ca else 1
        try:
            ca_load_ms(bundle, rounds=1)
        except (OSError, ssl.SSLError) as exc:
            error(f"cannot load the CA bundle {bundle!r} ({origin}): {exc}")
            return 2 if args.ca else 1  # (a bad argument, or a finding about the machine)
        reachable, unverified = _probe(args.url, bundle)
        if not reachable:
            return 1
        print(f"warning: sending real traffic to {args.url}", file=sys.stderr)
        target: Any = nullcontext((args.url, bundle))
        server_name = f"external: {args.url}"
    else:
        target = embedded_server()
        server_name = "embedded Python ThreadingHTTPServer on 127.0.0.1, in this process"
    scenarios = [Scenario(n, 1) for n in args.concurrency]
    if args.sequential:
        scenarios.insert(0, Scenario(1, args.sequential))
    machine = output_machine()
    started = time.time()
    overhead: dict[str, Any] | None = None
    startup: dict[str, float] | None = None
    interrupted = False
    broken: str | None = None  # why a child failed: the table shows what finished before
    with target as (url, bundle):
        # First what everything below is made of: this OpenSSL's price of one CA load.
        machine["ca_load_ms"] = ca_load_ms(bundle)
        print(
            f"Python {machine['python']}, {machine['openssl']}, {machine['cpus']} CPUs; "
            f"requests {machine['versions']['requests']}, urllib3 {machine['versions']['urllib3']}"
        )
        source = bundle if args.url else "certifi's bundle plus the server's CA"
        print(
            f"one CA load: {machine['ca_load_ms']:.1f} ms ({certificates(bundle)}: {source}, "
            "median of 5); stock requests pays it on every new connection",
            flush=True,
        )
        plan = Plan(url=url, bundle=bundle, scenarios=scenarios, repeat=args.repeat)
        failure = None
        if unverified is not None:
            plan.variants = [v for v in plan.variants if not VARIANTS[v][1]]
            failure = f"verify={bundle}: FAILED against {url} ({unverified}); not timed"
            print(failure, flush=True)
        results = []
        try:
            # The fixed-length parts first, so that the time left shown during the runs,
            # estimated from the runs themselves, is the time left.
            if not args.no_micro:
                progress("micro-benchmark of the keep-alive path (about 6 interpreter runs)")
                overhead = micro(url, bundle)
                progress("start-up cost of the activation line (about 40 interpreter starts)")
                startup = startup_cost()
            results = run_plan(plan, server_cpu=time.process_time, progress=progress)
        except Interrupted as stop:
            results, interrupted = stop.results, True
        except ChildFailed as stopped:
            results, broken = stopped.results, str(stopped)
        except KeyboardInterrupt:  # during the micro-benchmark or the start-up timing
            interrupted = True
    if tty:
        print("\r\033[K", end="", file=sys.stderr)
    if interrupted:
        print("interrupted: the table shows the runs that finished", file=sys.stderr)
    if broken is not None:
        failure = "; ".join(filter(None, [failure, f"stopped: {broken}"]))
    summaries = [r.summary() for r in results]
    partial = "interrupted" if interrupted else None if broken is None else "a run failed"
    lines = print_table(summaries, server_name, args.repeat, partial=partial, failure=failure)
    if overhead:
        calls = overhead["shim_calls_per_request"]
        counted = "not counted (the request failed)" if calls is None else f"{calls:g}"
        print(
            f"keep-alive: calls into the shim per request on a warm pool: {counted} (200 GETs "
            "on one Session, counted by a profile hook); what send() "
            f"does before it reuses a connection: shim {overhead['shim']:.1f} µs, stock "
            f"{overhead['stock']:.1f} µs ({overhead['overhead']:+.1f} µs; best of 3 x 5 x "
            "5000 calls per side, no traffic)"
        )
    if startup:
        print(
            f"start-up cost of `import requests_fastssl` in a program that never uses requests: "
            f"{startup['added']:+.1f} ms ({startup['activated']:.1f} ms vs {startup['bare']:.1f} "
            "ms for `python -c pass`, best of 20 alternating)"
        )
    if args.no_micro:  # (said, so that their absence is not read as a failure)
        print("keep-alive and start-up costs: not measured (--no-micro)")
    if args.json:
        report = {
            "command": " ".join(["python -m requests_fastssl", *sys.argv[1:]]),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "interrupted": interrupted,
            "server": server_name,
            "machine": machine,
            "verdict": lines[0],
            "summary": lines[1:],
            "results": summaries,
            "verify_failure": failure,
            "keep_alive_us": overhead,
            "startup_ms": startup,
        }
        text = json.dumps(report, indent=2)
        try:
            with open(args.json, "w") as out:
                out.write(text)
        except OSError as exc:  # (checked before the run; the file changed since)
            error(f"--json: cannot write to {args.json!r}: {exc.strerror or exc}")
            print(text, file=sys.stderr)  # not lost: the results, on stderr
            return 1
    if interrupted:
        return 130
    if failure is not None:
        error(failure)
        return 1
    failed = sum(s["failed"] for s in summaries)
    if failed:
        errors = {e for r in results for run in r.runs for e in run.errors}
        error(f"{failed} request(s) failed, e.g.: {sorted(errors)[:3]}")
        return 1
    return 0
