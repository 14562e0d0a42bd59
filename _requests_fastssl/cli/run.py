"""``run -- CMD``: the command, and every Python process it starts, with the shim active
through a start-up hook on PYTHONPATH; exec errors reported as a shell reports them."""

from __future__ import annotations

import errno
import os

from .output import error, program

__all__ = ["bootstrap_dir", "run"]


def bootstrap_dir() -> str:
    """The directory whose sitecustomize.py activates the shim at interpreter start-up."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # _requests_fastssl/
    return os.path.join(package, "bootstrap")


def _resolve(name: str) -> tuple[str | None, int, str]:
    """The file to exec for ``name``, or why not with a shell's exit status: 127 when there
    is nothing of that name, 126 when there is but it cannot be run."""
    if os.sep in name or (os.altsep and os.altsep in name):
        candidates = [name]
    else:
        folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
        candidates = [os.path.join(folder or ".", name) for folder in folders]
    found_unrunnable: tuple[int, str] | None = None
    for path in candidates:
        if not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            found_unrunnable = found_unrunnable or (126, f"{name}: Is a directory")
            continue
        if not os.access(path, os.X_OK):
            found_unrunnable = found_unrunnable or (126, f"{name}: Permission denied")
            continue
        return path, 0, ""
    if found_unrunnable is not None:
        return None, *found_unrunnable
    if os.sep in name:
        return None, 127, f"{name}: No such file or directory"
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
    env = os.environ.copy()
    here = bootstrap_dir()
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    env["PYTHONPATH"] = os.pathsep.join([here, *entries])  # once, however deeply nested
    if report:
        env["REQUESTS_FASTSSL_REPORT"] = "1"
    try:
        os.execve(executable, command, env)
    except OSError as exc:  # a file the kernel will not run (no interpreter line, ...)
        error(f"{command[0]}: {exc.strerror}")
        return 127 if exc.errno == errno.ENOENT else 126
    return 0  # not reached
