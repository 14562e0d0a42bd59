"""The command line: ``python -m requests_fastssl bench | doctor`` (also ``requests-fastssl``).

The only module that prints: results go to stdout, progress lines to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

from .. import __version__

__all__ = ["main"]


# Beyond these, a run would take hours or exhaust the machine's threads and sockets.
MAX_CONCURRENCY = 2000
MAX_REPEAT = 100
MAX_SEQUENTIAL = 10_000


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


def _int_between(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"need an integer from {low} to {high}, got {text!r}")
        return value

    return parse


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
        help="requests.get() from N threads and N times in a row, stock vs shim vs floor, "
        "on an embedded HTTPS server",
        description="Each variant runs in fresh interpreters, interleaved, after a warm-up. "
        "Results go to stdout, progress to stderr; exit 1 if any request failed, 130 on Ctrl-C "
        "(with the table of what finished).",
    )
    bench.add_argument(
        "--concurrency",
        type=_positive_ints,
        default=[30],
        metavar="N[,N...]",
        help="threads per run, one or a list such as 1,30,100,300 (default 30)",
    )
    bench.add_argument(
        "--sequential",
        type=_int_between(0, MAX_SEQUENTIAL),
        default=20,
        metavar="N",
        help="also one thread making N requests in a row, a fresh Session each, as a "
        "script's loop does (default 20; 0: not run)",
    )
    bench.add_argument(
        "--repeat",
        type=_int_between(1, MAX_REPEAT),
        default=5,
        metavar="R",
        help="timed repetitions per variant, after one warm-up (default 5)",
    )
    bench.add_argument(
        "--url",
        help="run against this HTTPS URL instead (sends real traffic to it); the verify rows "
        "trust --ca, else what requests would use for verify=True (REQUESTS_CA_BUNDLE, "
        "CURL_CA_BUNDLE, else certifi)",
    )
    bench.add_argument(
        "--ca",
        metavar="FILE",
        help="with --url: the CA bundle (PEM file) the verify rows trust, e.g. a private CA",
    )
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    doctor = commands.add_parser(
        "doctor",
        help="versions, activation modes, the CA bundle in use and its cost, and a self-test",
        description="Exit 1 when the shim is not active, the CA bundle verify=True would use "
        "cannot be loaded, the self-test fails, or the --url request raises.",
    )
    doctor.add_argument(
        "--no-self-test",
        action="store_true",
        help="skip the real requests against an embedded HTTPS server on 127.0.0.1",
    )
    doctor.add_argument(
        "--url",
        metavar="URL",
        help="instead of the self-test, make one GET to this https:// URL (a new connection; "
        "proxies from the environment apply, as in requests) and say whether it used a "
        "shared context, and if not, why",
    )
    doctor.add_argument(
        "--verify",
        metavar="true|false|PATH",
        help="with --url: requests' verify (default true; a CA bundle file or directory)",
    )
    doctor.add_argument(
        "--cert", metavar="FILE", help="with --url: a client certificate (PEM, maybe with its key)"
    )
    doctor.add_argument("--key", metavar="FILE", help="with --url and --cert: its private key")
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
        if args.ca is not None:
            if not args.url:
                parser.error("--ca: only with --url (the embedded server brings its own CA)")
            if not os.path.isfile(args.ca):
                parser.error(f"--ca: no such file: {args.ca!r}")
        return _bench(args)
    if args.command == "run":
        return _run(args.argv)
    request = _doctor_request(parser, args)
    return _doctor(self_test=not args.no_self_test and request is None, request=request)


def _doctor_request(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> dict[str, Any] | None:
    """doctor's --url request as requests.get() keyword arguments, or None; checked first."""
    if args.url is None:
        for name in ("verify", "cert", "key"):
            if getattr(args, name) is not None:
                parser.error(f"--{name}: only with --url")
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(args.url)
    if parts.scheme != "https" or not parts.hostname:
        parser.error(f"--url: need an https:// URL with a host, got {args.url!r}")
    verify: Any = True
    if args.verify is not None:
        lowered = args.verify.lower()
        if lowered in ("true", "false"):
            verify = lowered == "true"
        elif os.path.exists(args.verify):
            verify = args.verify
        else:
            parser.error(f"--verify: need true, false or an existing path, got {args.verify!r}")
    cert: Any = None
    if args.key is not None and args.cert is None:
        parser.error("--key: only with --cert")
    for name in ("cert", "key"):
        path = getattr(args, name)
        if path is not None and not os.path.isfile(path):
            parser.error(f"--{name}: no such file: {path!r}")
    if args.cert is not None:
        cert = args.cert if args.key is None else (args.cert, args.key)
    return {"url": args.url, "verify": verify, "cert": cert}


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
    import ssl
    from contextlib import nullcontext

    from .bench import Interrupted, Plan, Scenario, embedded_server, micro, run_plan, startup_cost
    from .table import print_table

    tty = sys.stderr.isatty()

    def progress(line: str) -> None:
        if tty:  # one line, rewritten in place
            print(f"\r\033[K{line}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    if args.url:  # (checked in main())
        bundle = args.ca or _bundle_in_use()[0]
        try:
            from .bench import ca_load_ms

            ca_load_ms(bundle, rounds=1)
        except (OSError, ssl.SSLError) as exc:
            _error(f"cannot load the CA bundle {bundle!r}: {exc}")
            return 2
        print(f"warning: sending real traffic to {args.url}", file=sys.stderr)
        target: Any = nullcontext((args.url, bundle))
        server_name = f"external: {args.url}"
    else:
        target = embedded_server()
        server_name = "embedded Python ThreadingHTTPServer on 127.0.0.1, in this process"
    scenarios = [Scenario(n, 1) for n in args.concurrency]
    if args.sequential:
        scenarios.insert(0, Scenario(1, args.sequential))
    machine = _machine()
    started = time.time()
    overhead: dict[str, Any] | None = None
    startup: dict[str, float] | None = None
    interrupted = False
    with target as (url, bundle):
        # First what everything below is made of: this OpenSSL's price of one CA load.
        from .bench import ca_load_ms

        machine["ca_load_ms"] = ca_load_ms(bundle)
        print(
            f"Python {machine['python']}, {machine['openssl']}, {machine['cpus']} CPUs; "
            f"requests {machine['versions']['requests']}, urllib3 {machine['versions']['urllib3']}"
        )
        source = bundle if args.url else "certifi's bundle plus the server's CA"
        print(
            f"one CA load: {machine['ca_load_ms']:.1f} ms ({_certificates(bundle)}: {source}, "
            "median of 5); stock requests pays it on every new connection",
            flush=True,
        )
        plan = Plan(url=url, bundle=bundle, scenarios=scenarios, repeat=args.repeat)
        try:
            results = run_plan(plan, server_cpu=time.process_time, progress=progress)
            progress("micro-benchmark of the keep-alive path")
            overhead = micro(url, bundle)
            progress("start-up cost of the activation line")
            startup = startup_cost()
        except Interrupted as stop:
            results, interrupted = stop.results, True
        except KeyboardInterrupt:  # during the micro-benchmark or the start-up timing
            interrupted = True
    if tty:
        print("\r\033[K", end="", file=sys.stderr)
    if interrupted:
        print("interrupted: the table shows the runs that finished", file=sys.stderr)
    summaries = [r.summary() for r in results]
    print_table(summaries, server_name, args.repeat)
    if overhead:
        calls = overhead["shim_calls_per_request"]
        counted = "not counted (the request failed)" if calls is None else f"{calls:g}"
        print(
            f"keep-alive: calls into the shim per request on a warm pool: {counted} (200 GETs "
            "on one Session, counted by a profile hook); what send() "
            f"does before it reuses a connection: shim {overhead['shim']:.1f} us, stock "
            f"{overhead['stock']:.1f} us ({overhead['overhead']:+.1f} us; best of 3 x 5 x "
            "5000 calls per side, no traffic)"
        )
    if startup:
        print(
            f"start-up cost of `import requests_fastssl` in a program that never uses requests: "
            f"{startup['added']:+.1f} ms ({startup['activated']:.1f} ms vs {startup['bare']:.1f} "
            "ms for `python -c pass`, best of 20 alternating)"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "command": " ".join(["python -m requests_fastssl", *sys.argv[1:]]),
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                    "interrupted": interrupted,
                    "server": server_name,
                    "machine": machine,
                    "results": summaries,
                    "keep_alive_us": overhead,
                    "startup_ms": startup,
                },
                out,
                indent=2,
            )
    if interrupted:
        return 130
    failed = sum(s["failed"] for s in summaries)
    if failed:
        errors = {e for r in results for run in r.runs for e in run.errors}
        _error(f"{failed} request(s) failed, e.g.: {sorted(errors)[:3]}")
        return 1
    return 0


def _certificates(bundle: str) -> str:
    if os.path.isdir(bundle):
        return f"{len(os.listdir(bundle))} entries"
    with open(bundle, "rb") as f:
        return f"{f.read().count(b'-----BEGIN CERTIFICATE-----')} certificates"


def _error(message: str) -> None:
    """The one shape of an error line, as argparse writes its own: `prog: error: ...`."""
    print(f"{_program()}: error: {message}", file=sys.stderr)


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
        _error(f"nothing to run; usage: {_program()} run -- CMD [ARGS...]")
        return 2
    executable = shutil.which(command[0])
    if executable is None:
        _error(f"command not found: {command[0]}")
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


def _doctor(self_test: bool = True, request: dict[str, Any] | None = None) -> int:
    import ssl

    import requests  # noqa: F401  (imported so that the shim patches, or says why not)

    import requests_fastssl

    from .bench import ca_load_ms

    print(f"requests-fastssl {__version__}")
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    print(ssl.OPENSSL_VERSION)
    print(", ".join(f"{name} {v}" for name, v in _versions().items() if name != "requests-fastssl"))
    print("activation modes in effect:")
    for line in _activation_modes():
        print(f"  {line}")
    status = requests_fastssl.status()
    # This process imported requests_fastssl to run doctor, as a start-up line would.
    print(f"shim in this process: {status}")
    healthy = status.state.value == "active"
    bundle, origin = _bundle_in_use()
    print(f"CA bundle for verify=True: {bundle} ({origin})")
    try:
        cost = ca_load_ms(bundle)
    except (OSError, ssl.SSLError) as exc:
        # Every verify=True request would fail the same way.
        print(f"one CA load: failed ({exc}); every verify=True request would fail")
        healthy = False
    else:
        print(
            f"one CA load: {cost:.1f} ms (median of 5); stock requests pays this on every new "
            "connection"
        )
    if self_test:
        healthy = _self_test(status.state.value == "active") and healthy
    if request is not None:
        healthy = _one_request(request, status.state.value == "active") and healthy
    return 0 if healthy else 1


# What each step-aside reason means for the user (docs/design.md has the full table).
def _one_request(request: dict[str, Any], active: bool) -> bool:
    """doctor --url: one GET on a new connection, and what the shim did for it."""
    import requests

    import requests_fastssl

    url = request["url"]
    shown = ", ".join(f"{k}={v!r}" for k, v in request.items() if k != "url")
    before = requests_fastssl.stats()
    try:
        with requests.Session() as session:
            response = session.get(url, verify=request["verify"], cert=request["cert"])
    except Exception as exc:  # (requests raises more than RequestException: OSError, ...)
        print(f"request: GET {url} ({shown}): {type(exc).__name__}: {exc}")
        ok = False
    else:
        print(f"request: GET {url} ({shown}): HTTP {response.status_code}")
        ok = True
    delta = requests_fastssl.stats().since(before)
    if not active:
        print("shared: no, the shim is off in this process (see above); stock requests ran")
        return False
    reasons = dict(delta.step_aside_reasons)
    if reasons:
        from _requests_fastssl._policy import Reason

        texts = {reason.code: reason.text for reason in Reason}
        for code in reasons:
            why = texts.get(code, "see docs/design.md, step-aside rules")
            print(f"shared: no, left to stock requests ({code}): {why}")
    elif delta.connections:
        built = (
            f"built now, with {delta.ca_loads} CA load(s)"
            if delta.contexts_built
            else "one built earlier in this process"
        )
        print(f"shared: yes, {delta.connections} TLS connection(s) used a shared context ({built})")
    else:
        print("shared: no TLS connection was made (the request failed before, or was not HTTPS)")
    return ok


def _activation_modes() -> list[str]:
    """Which of the documented ways of switching the shim on apply to Python processes
    started like this one (same environment, same interpreter)."""
    from importlib.metadata import entry_points

    lines = []
    disable = os.environ.get("REQUESTS_FASTSSL_DISABLE")
    if disable:
        lines.append(
            f"REQUESTS_FASTSSL_DISABLE={disable}: the shim stays off, whatever else is set up"
        )
    hook = os.path.join(bootstrap_dir(), "")
    on_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if any(os.path.join(os.path.abspath(p), "") == hook for p in on_path):
        lines.append(f"`{_program()} run`: yes (its start-up hook is on PYTHONPATH)")
    else:
        lines.append(f"`{_program()} run`: no (this process was not started by it)")
    starters: list[str] = []
    for name in ("sitecustomize", "usercustomize"):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path and os.path.join(os.path.dirname(os.path.abspath(path)), "") == hook:
            continue  # run's own hook, reported above
        if not path:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                if "requests_fastssl" in f.read():
                    starters.append(path)
        except OSError:
            pass
    if starters:
        lines.append(f"start-up file importing requests_fastssl: yes ({', '.join(starters)})")
    else:
        lines.append("start-up file (sitecustomize/usercustomize) importing requests_fastssl: no")
    plugin = [e for e in entry_points(group="pytest11") if e.name == "requests_fastssl"]
    if plugin:
        lines.append(
            "pytest plugin: registered; on for a pytest run with --fastssl or `fastssl = true` "
            "in the ini file, and for tests using the fastssl fixture"
        )
    else:
        lines.append("pytest plugin: not registered (the package metadata is missing)")
    return lines


def _self_test(active: bool) -> bool:
    """Real requests to an embedded HTTPS server on 127.0.0.1; shows the counters move."""
    import tempfile

    import certifi
    import requests

    import requests_fastssl

    try:
        import trustme
    except ImportError:
        print("self-test: not run, it needs trustme: pip install 'requests-fastssl[bench]'")
        return True
    from .server import HTTPSServer, server_context

    calls = 3
    ca = trustme.CA()
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-doctor-") as tmp:
        bundle = os.path.join(tmp, "bundle.pem")
        with open(certifi.where(), "rb") as src, open(bundle, "wb") as dst:
            dst.write(src.read() + b"\n" + ca.cert_pem.bytes())
        with HTTPSServer(server_context(ca, ("127.0.0.1",))) as server:
            before = requests_fastssl.stats()
            statuses = []
            for _ in range(calls):  # each a new Session, so a new connection
                try:
                    statuses.append(str(requests.get(server.url, verify=bundle).status_code))
                except requests.RequestException as exc:
                    statuses.append(type(exc).__name__)
            delta = requests_fastssl.stats().since(before)
    print(
        f"self-test: {calls} x requests.get() to an embedded HTTPS server on 127.0.0.1, each a "
        f"new connection, verify=<certifi + a test CA>: {', '.join(statuses)}"
    )
    if statuses != ["200"] * calls:
        print("self-test: FAILED, the requests did not succeed")
        return False
    if not active:
        print(f"self-test: the shim is off here, so stock requests loaded the bundle {calls} times")
        return True
    print(
        f"self-test: {delta.connections} connection(s) used shared contexts; "
        f"{delta.contexts_built} context(s) built with {delta.ca_loads} CA load(s); stock "
        f"requests would have made {calls}"
    )
    if delta.connections != calls or delta.ca_loads != 1:
        reasons = dict(delta.step_aside_reasons) or "none recorded"
        print(f"self-test: FAILED, the shim did not share as expected (step-asides: {reasons})")
        return False
    return True
