"""The facts file of the platform legs: tools/platforms.sh records each pytest run of a leg in
tools/platform-runs.json, so that docs/platforms.md quotes what a run recorded, not what
someone remembered.

    python tools/record_platform_run.py facts      run by the leg's own interpreter: prints its
                                                   version, OpenSSL and requests/urllib3 as JSON
    python3 tools/record_platform_run.py record --leg trixie --exit-status 0 --log FILE \\
        --facts JSON --started ... --commit ... --dirty 0 -- ARGS   run by the host: writes it

Only a leg's latest run is kept. The file is written whole (a temporary file renamed over it),
so an interrupted write leaves the previous one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import ssl
import sys
import tempfile
from importlib import metadata
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "platform-runs.json"
# pytest's last line, with or without its "=" rule: "3 failed, 5 passed, 1 skipped in 9.10s (...)"
SUMMARY = re.compile(
    r"^=*\s*(?P<line>(?:\d+ \w+|no tests ran)(?:, \d+ \w+)* in [\d.]+s(?: \([\d:]+\))?)\s*=*$"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MOST_FAILURES = 50  # lines kept from pytest's short summary; the rest counted


def facts() -> dict[str, str | None]:
    """What the running interpreter says about itself and the libraries the suite ran on."""
    found: dict[str, str | None] = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "openssl": ssl.OPENSSL_VERSION,
    }
    for name in ("requests", "urllib3"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # the installation failed before it
            found[name] = None
    return found


def summarize(log: str) -> tuple[str | None, list[str]]:
    """pytest's final summary line, and its short summary's FAILED and ERROR lines."""
    lines = [ANSI.sub("", line).rstrip() for line in log.splitlines()]
    summary = None
    for line in reversed(lines):
        match = SUMMARY.match(line)
        if match:
            summary = match.group("line")
            break
    failures = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    if len(failures) > MOST_FAILURES:
        left = len(failures) - MOST_FAILURES
        failures = [*failures[:MOST_FAILURES], f"... and {left} more"]
    return summary, failures


def record(args: argparse.Namespace) -> None:
    log = Path(args.log).read_text(errors="replace") if args.log else ""
    summary, failures = summarize(log)
    leg_facts = dict.fromkeys(("python", "openssl", "requests", "urllib3"))
    with contextlib.suppress(ValueError, TypeError):  # the interpreter could not report itself
        leg_facts.update(json.loads(args.facts))
    command = ["bash", "tools/platforms.sh", args.leg]
    if args.pytest_args:
        command += ["--", *args.pytest_args]
    run: dict[str, object] = {
        **leg_facts,
        "commit": args.commit,
        "dirty": args.dirty == "1",
        "date": args.started,
        "outcome": "passed" if args.exit_status == 0 else "failed",
        "exit_status": args.exit_status,
        "summary": summary,
        "failures": failures,
        "error": args.error,
        "command": shlex.join(command),
    }
    try:
        runs = json.loads(RUNS.read_text())
    except FileNotFoundError:
        runs = {"about": "the latest run of each leg, written by tools/platforms.sh", "legs": {}}
    runs["legs"][args.leg] = run
    runs["legs"] = dict(sorted(runs["legs"].items()))
    text = json.dumps(runs, indent=2, ensure_ascii=False) + "\n"
    fd, name = tempfile.mkstemp(dir=RUNS.parent, prefix=".platform-runs.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(name, 0o644)
        os.replace(name, RUNS)
    except BaseException:
        os.unlink(name)
        raise
    print(f"platforms.sh: {args.leg}: {run['outcome']}, recorded in {RUNS.name}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("facts", help="print this interpreter's facts as JSON")
    rec = sub.add_parser("record", help="record a leg's run in tools/platform-runs.json")
    rec.add_argument("--leg", required=True)
    rec.add_argument("--exit-status", type=int, required=True)
    rec.add_argument("--log", help="pytest's output (absent when the installation failed)")
    rec.add_argument("--facts", required=True, help="the JSON `facts` printed in the leg")
    rec.add_argument("--started", required=True, help="UTC, ISO 8601")
    rec.add_argument("--commit", required=True)
    rec.add_argument("--dirty", choices=("0", "1"), required=True)
    rec.add_argument("--error", help="what failed before pytest ran")
    rec.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    if args.action == "facts":
        print(json.dumps(facts()))
    else:
        record(args)


if __name__ == "__main__":
    main()
