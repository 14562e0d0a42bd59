"""doctor's question: will the shim be active in the user's programs? Asked of fresh
interpreters of this executable and environment (as programs start, and as under ``run``),
never answered from doctor's own process, which imported the shim itself."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from .output import program
from .pytest_here import pytest_answer
from .report import Report
from .run import bootstrap_dir, run_env

__all__ = ["your_programs"]

# A fresh interpreter importing requests takes well under a second; a start-up file that
# waits for something (a network share, a lock) is not waited for beyond this.
PROBE_SECONDS = 60.0
_MARK = "requests-fastssl-probe: "
# Run as a program: imports requests (as programs do: urllib3 is where the shim hooks in),
# never requests_fastssl, and reports what start-up and that import did. Its one line is
# marked, since start-up files of the user's may print too.
_PROBE = """
import json, sys
at_start = "_requests_fastssl._install" in sys.modules
try:
    import requests
    failed = ""
except Exception as exc:
    failed = type(exc).__name__ + ": " + str(exc)
shim = sys.modules.get("_requests_fastssl._install")
status = shim.status() if shim is not None else None
import site
dirs = list(getattr(site, "getsitepackages", list)())
if getattr(site, "ENABLE_USER_SITE", False):
    dirs.append(site.getusersitepackages())
names = ("sitecustomize", "usercustomize")
files = {n: getattr(sys.modules.get(n), "__file__", None) for n in names}
state, reason = (status.state.value, status.reason) if status else ("not-loaded", "")
print(sys.argv[1] + json.dumps({
    "at_start": at_start, "requests": failed, "site_dirs": dirs, "files": files,
    "state": state, "reason": reason,
}), flush=True)
"""
# A start-up file names the package as a word: `import requests_fastssl`, not the editable
# install's `__editable___requests_fastssl_0_1_0_finder`.
_NAMES_US = re.compile(r"\b_?requests_fastssl\b")


def your_programs(out: Report) -> bool:
    """The report's first part: whether programs of this environment get the shim (a finding
    if not), under ``run``, and in pytest here. True if the programs get it."""
    plain_env = dict(os.environ)
    answers = _ask({"programs": plain_env, "under_run": run_env(plain_env)})
    mine, under_run = answers["programs"], answers["under_run"]
    if "error" in under_run:
        under_run["active"] = False
        run_text = f"unknown: {under_run['error']}"
    else:
        under_run["active"] = under_run["state"] == "active"
        run_text = "active (its start-up hook)" if under_run["active"] else "not active"
        run_text += "" if under_run["active"] else f" ({_short(under_run)})"
    exe = mine["executable"] = sys.executable or "python"
    out.say(
        f"your programs (asked of a fresh `{exe}` started plainly, without -I, -S or -E, in "
        "this environment, importing requests as a program does):"
    )
    out.indent = "  "
    if "error" in mine:
        mine["active"] = active = False
        out.say(f"unknown: {mine['error']}", "programs", mine)
        out.finding(f"could not tell whether your programs get the shim ({mine['error']})")
    else:
        mine["via"] = _via(mine, plain_env)
        active = mine["active"] = mine["state"] == "active"
        text = _programs_text(mine, under_run)
        out.say(text, "programs", {**mine, "text": text})
        if not active:
            out.finding(f"your programs would not get the shim ({_short(mine)})")
    under_run["text"] = run_text
    out.say(f"under `{program()} run -- CMD`: {run_text}", "under_run", under_run)
    session, why = pytest_answer(plain_env, active)
    out.say(f"under pytest here: {why}", "pytest", {"session": session, "text": why})
    out.indent = ""
    return active


def _ask(envs: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Run the probe in a fresh interpreter per environment, at once; its facts or an error.
    Its output goes to files, not pipes: a child that a start-up file leaves running holds
    what it inherited, and a pipe would stay open (and doctor waiting) for as long as it
    runs. Doctor waits for the probe itself, bounded; past the bound its whole process
    group (its own session) is killed."""
    if not sys.executable:
        return {name: {"error": "this Python does not know its executable"} for name in envs}
    answers: dict[str, dict[str, Any]] = {}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-doctor-") as folder:
        files = {name: (os.path.join(folder, f"{name}.out"), os.path.join(folder, f"{name}.err"))
                 for name in envs}  # fmt: skip
        try:
            for name, env in envs.items():
                with open(files[name][0], "wb") as out, open(files[name][1], "wb") as err:
                    procs[name] = subprocess.Popen(
                        [sys.executable, "-c", _PROBE, _MARK],
                        env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                        start_new_session=True,
                    )  # fmt: skip
            deadline = time.monotonic() + PROBE_SECONDS  # (one bound for all: they run at once)
            for name, proc in procs.items():
                try:
                    status: int | None = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _end(proc)
                    status = None
                answers[name] = _answer(*files[name], status)
        finally:
            for proc in procs.values():  # (interrupted: none is left running)
                _end(proc)
    return answers


def _answer(out: str, err: str, status: int | None) -> dict[str, Any]:
    """The probe's facts from its marked line, else why there are none (``status`` None: it
    was stopped at the bound; it may have answered before it hung). The mark may be anywhere
    in the line: a start-up file may have printed without a newline first."""
    import json

    with open(out, encoding="utf-8", errors="replace") as f:
        marked = [line.partition(_MARK)[2] for line in f if _MARK in line]
    if marked:
        try:
            facts: dict[str, Any] = json.loads(marked[-1])
            return facts
        except ValueError:  # (a start-up file's thread printing into the line)
            return {"error": "it failed: its answer was garbled by other output"}
    if status is None:
        return {
            "error": f"it did not finish within {PROBE_SECONDS:g} s (a start-up file that waits?)"
        }
    with open(err, encoding="utf-8", errors="replace") as f:
        last = (f.read().strip().splitlines() or [f"exit status {status}"])[-1]
    return {"error": f"it failed: {last}"}


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Kill a probe still running, with what it started (its process group), never waiting
    long: a process that does not die at SIGKILL is left behind rather than hang doctor."""
    if proc.poll() is not None:
        return  # (what it left running is the start-up file's, as in any program)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _via(facts: dict[str, Any], env: dict[str, str]) -> list[str]:
    """What switched the shim on (or tried to) in the probe: run's hook, the start-up files
    and .pth files that name the package; empty if nothing loaded it."""
    if facts["state"] == "not-loaded":
        return []
    if not facts["at_start"]:
        return ["importing requests (no start-up file: an import hook or a package of yours)"]
    hook = os.path.join(bootstrap_dir(), "")
    found = []
    if any(os.path.join(os.path.abspath(p), "") == hook for p in _entries(env)):
        found.append(f"run's start-up hook ({bootstrap_dir()} on PYTHONPATH)")
    for name, path in facts["files"].items():
        in_hook = path and os.path.join(os.path.dirname(os.path.abspath(path)), "") == hook
        if path and not in_hook and _names_us(path):
            found.append(f"{name} {path}")
    for folder in facts["site_dirs"]:
        try:
            pth = sorted(e for e in os.listdir(folder) if e.endswith(".pth"))
        except OSError:
            continue
        found += [f".pth file {os.path.join(folder, e)}" for e in pth if _names_us(folder, e)]
    return found or ["a start-up file doctor could not name"]


def _entries(env: dict[str, str]) -> list[str]:
    return [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


def _names_us(*path: str) -> bool:
    try:
        with open(os.path.join(*path), encoding="utf-8", errors="replace") as f:
            return bool(_NAMES_US.search(f.read()))
    except OSError:
        return False


def _short(facts: dict[str, Any]) -> str:
    if facts["state"] == "not-loaded":
        return "nothing turns it on at start-up"
    return f"{facts['state']}: {facts['reason']}" if facts["reason"] else facts["state"]


def _programs_text(facts: dict[str, Any], under_run: dict[str, Any]) -> str:
    """The answer for plain programs, with what to do when they do not get the shim."""
    failed = f" (importing requests failed: {facts['requests']})" if facts["requests"] else ""
    via = ", ".join(facts["via"])
    if facts["active"]:
        return f"active, via {via}{failed}"
    if facts["state"] == "disabled":
        return (
            f"not active: {_short(facts)}; it switches every activation mode off: unset it where "
            "your programs should get the shim"
        )
    if facts["state"] != "not-loaded":
        return f"not active: loaded via {via}, but {_short(facts)}{failed}"
    from .._install import disabled_by_env

    switch = disabled_by_env()
    if switch is not None:  # (and so nothing would turn it on: say that first)
        return (
            f"not active: nothing in this environment turns it on at start-up, and "
            f"REQUESTS_FASTSSL_DISABLE={switch} would keep any mode off: unset it first{failed}"
        )
    run = f"start it with `{program()} run -- CMD`, or " if under_run.get("active") else ""
    return (
        "not active: nothing in this environment turns it on at start-up, so only programs "
        "that `import requests_fastssl` themselves get it; to turn it on for every program: "
        f"{run}add the line `import requests_fastssl` to a sitecustomize.py on its path "
        f"(README, Activation modes){failed}"
    )
