"""The command line's parser and dispatch: every argument is checked here, before any work
(a benchmark can take minutes), then the subcommand's module runs."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import __version__
from .checks import check_file, check_json_target, check_url
from .output import program

__all__ = ["main"]

# Beyond these, a run would take hours or exhaust the machine's threads and sockets.
MAX_CONCURRENCY = 2000
MAX_REPEAT = 100
MAX_SEQUENTIAL = 10_000
_SUBPARSERS: dict[str, argparse.ArgumentParser] = {}


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


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"need seconds from more than 0 to 600, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=program(),
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
        help="run against this HTTPS URL instead (sends real traffic to it; one request "
        "checks it first); the verify rows trust --ca, else what requests would use for "
        "verify=True (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, else certifi)",
    )
    bench.add_argument(
        "--ca",
        metavar="FILE",
        help="with --url: the CA bundle (PEM file) the verify rows trust, e.g. a private CA",
    )
    bench.add_argument(
        "--no-micro",
        action="store_true",
        help="skip the fixed-length measurements made before the runs (about 50 interpreter "
        "starts): the keep-alive path's cost and the start-up cost of `import "
        "requests_fastssl`; the table and the verdict do not use them",
    )
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    doctor = commands.add_parser(
        "doctor",
        help="whether your programs get the shim (asked of a fresh interpreter of this "
        "environment), versions, the trust source and its cost, and a self-test",
        description="Whether the shim will be active in your programs is asked of a fresh "
        "interpreter of this executable and environment, apart from doctor's own process, "
        "which activates the shim itself for its self-test. Exit status: 0 healthy; 1 a "
        "finding (your programs would not get the shim, it is not active in doctor's own "
        "process, the trust source cannot be loaded, the self-test fails, or the --url request "
        "raises), named by the last line; 2 bad arguments; 130 interrupted (Ctrl-C); 141 the "
        "reader of the output went away (`| head`), as for a command ended by SIGPIPE.",
    )
    doctor.add_argument(
        "--timeout",
        type=_seconds,
        default=5.0,
        metavar="SECONDS",
        help="how long each network step may wait: connecting, and each answer (default 5)",
    )
    doctor.add_argument(
        "--json",
        action="store_true",
        help="print everything doctor found as one JSON document instead of lines",
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
        help="requests' verify (default true; a CA bundle file or directory): the trust "
        "source whose load is measured, and with --url the request's",
    )
    doctor.add_argument(
        "--cert", metavar="FILE", help="with --url: a client certificate (PEM, maybe with its key)"
    )
    doctor.add_argument("--key", metavar="FILE", help="with --url and --cert: its private key")
    run = commands.add_parser(
        "run",
        help="run a command with the shim active in it and in the Python processes it starts",
        usage=f"{program()} run [--report] -- CMD [ARGS...]",
    )
    run.add_argument(
        "--report",
        action="store_true",
        help="each Python process using requests prints the shim's counters to stderr when "
        "it exits (REQUESTS_FASTSSL_REPORT=1 in its environment)",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="the command, after --")
    _SUBPARSERS.update(bench=bench, doctor=doctor, run=run)
    return parser


def _doctor_request(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> dict[str, Any] | None:
    """doctor's --url request as requests.get() keyword arguments, or None; checked first."""
    verify: Any = True
    if args.verify is not None:
        lowered = args.verify.lower()
        if lowered in ("true", "false"):
            verify = lowered == "true"
        elif os.path.isfile(args.verify) or os.path.isdir(args.verify):
            verify = args.verify
        elif os.path.exists(args.verify):  # (a FIFO would block the load)
            parser.error(f"--verify: {args.verify!r} is neither a regular file nor a directory")
        else:
            parser.error(f"--verify: need true, false or an existing path, got {args.verify!r}")
    args.verify_value = verify
    if args.url is None:
        for name in ("cert", "key"):
            if getattr(args, name) is not None:
                parser.error(f"--{name}: only with --url")
        return None
    check_url(parser, "--url", args.url)
    cert: Any = None
    if args.key is not None and args.cert is None:
        parser.error("--key: only with --cert")
    for name in ("cert", "key"):
        path = getattr(args, name)
        if path is not None:
            check_file(parser, f"--{name}", path)
    if args.cert is not None:
        cert = args.cert if args.key is None else (args.cert, args.key)
    return {"url": args.url, "verify": verify, "cert": cert}


def main(argv: list[str] | None = None) -> int:
    """The command line: the subcommand's exit status; 2 for bad arguments (argparse's, with
    the subcommand's usage); 130, after one line, for Ctrl-C; 141 when the reader of the
    output went away."""
    from .output import error

    try:
        return _main(argv)
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head -2`, a tee killed by the same Ctrl-C): nothing more can
        # be shown, and nothing was found wrong. As Python's docs advise, the stream is pointed
        # at /dev/null so that the exit's flush does not fail again; the status is a shell's
        # for a command ended by SIGPIPE (128 + 13), as `yes | head` gives: never 1, a finding.
        gone = _closed_pipes()
        if not gone:
            raise  # (another pipe broke: a failure, not the reader leaving)
        for fd in gone:
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
        return 141


def _closed_pipes() -> list[int]:
    """Which of stdout and stderr are pipes whose reader is gone (poll says POLLERR)."""
    import select
    import sys

    gone = []
    for stream in (sys.stdout, sys.stderr):
        try:
            poller = select.poll()
            poller.register(stream.fileno(), select.POLLOUT)
            if any(events & select.POLLERR for _, events in poller.poll(0)):
                gone.append(stream.fileno())
        except (OSError, ValueError, AttributeError):  # (closed, or no descriptor)
            continue
    return gone


def _main(argv: list[str] | None) -> int:
    top = _parser()
    args = top.parse_args(argv)
    parser = _SUBPARSERS.get(args.command, top)  # (errors with the subcommand's own usage)
    if args.command == "bench":
        if args.json is not None:  # ("" too: refused, not taken as no file)
            check_json_target(parser, args.json)
        if args.url:
            check_url(parser, "--url", args.url)
        if args.ca is not None:
            if not args.url:
                parser.error("--ca: only with --url (the embedded server brings its own CA)")
            check_file(parser, "--ca", args.ca)
        from .bench import bench

        return bench(args)
    if args.command == "run":
        from .run import run

        return run(args.argv, report=args.report)
    request = _doctor_request(parser, args)
    from .doctor import doctor

    return doctor(
        verify=args.verify_value,
        self_test=not args.no_self_test and request is None,
        request=request,
        timeout=args.timeout,
        as_json=args.json,
    )
