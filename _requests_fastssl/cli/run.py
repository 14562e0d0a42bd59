"""``run -- CMD``: the command, and every Python process it starts, with the shim active
through a start-up hook on PYTHONPATH; exec errors reported as a shell reports them."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping

from .output import error, program

__all__ = ["bootstrap_dir", "run", "run_env"]


def bootstrap_dir() -> str:
    """The directory whose sitecustomize.py activates the shim at interpreter start-up."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # _requests_fastssl/
    return os.path.join(package, "bootstrap")


def run_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as ``run`` hands it to the command: its start-up hook first on PYTHONPATH
    (doctor asks a fresh interpreter started so)."""
    env = dict(environ)
    here = bootstrap_dir()
    # Empty entries stay: they mean the current directory. Ours goes first, once.
    given = env.get("PYTHONPATH", "")
    entries = [p for p in given.split(os.pathsep) if p != here] if given else []
    env["PYTHONPATH"] = os.pathsep.join([here, *entries])
    return env


def _resolve(name: str) -> tuple[str | None, int, str]:
    """The file to exec for ``name``, or why not with the exit status bash gives: 127 when
    there is nothing to run by that name, 126 when there is a file that cannot be run."""
    if not name:
        return None, 127, ": command not found"
    if os.sep in name:  # a path: only that file
        if not os.path.exists(name):  # (a dangling link too)
            return None, 127, f"{name}: No such file or directory"
        if os.path.isdir(name):
            return None, 126, f"{name}: Is a directory"
        if not os.access(name, os.X_OK):
            return None, 126, f"{name}: Permission denied"
        return name, 0, ""
    # The PATH search skips directories and links to nowhere; a file found but not
    # executable is remembered, as bash does, for "Permission denied" if nothing better.
    unrunnable = None
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if not os.path.isfile(path):
            continue
        if os.access(path, os.X_OK):
            return path, 0, ""
        unrunnable = unrunnable or path
    if unrunnable is not None:
        return None, 126, f"{name}: Permission denied"
    return None, 127, f"{name}: command not found"


def run(command: list[str], *, report: bool = False) -> int:
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        error(f"nothing to run; usage: {program()} run [--report] -- CMD [ARGS...]")
        return 2
    executable, status, why = _resolve(command[0])
    if executable is None:
        error(why)
        return status
    env = run_env(os.environ)
    if report:
        env["REQUESTS_FASTSSL_REPORT"] = "1"
    try:
        os.execve(executable, command, env)
    except OSError as exc:  # a file the kernel will not run (no interpreter line, ...)
        error(f"{command[0]}: {exc.strerror}")
        return 127 if exc.errno == errno.ENOENT else 126
    return 0  # not reached
