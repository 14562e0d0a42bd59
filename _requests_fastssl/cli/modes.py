"""doctor's list of the activation modes that apply to processes started like this one."""

from __future__ import annotations

import os
import sys

from .output import program
from .run import bootstrap_dir

__all__ = ["activation_modes"]


def activation_modes() -> list[str]:
    """Which of the documented ways of switching the shim on apply to Python processes
    started like this one (same environment, same interpreter)."""
    from importlib.metadata import entry_points

    from _requests_fastssl._install import disabled_by_env

    lines = []
    disable = disabled_by_env()  # (the one switch reader: "0" and "off" do not disable)
    if disable is not None:
        lines.append(
            f"REQUESTS_FASTSSL_DISABLE={disable}: the shim stays off, whatever else is set up"
        )
    hook = os.path.join(bootstrap_dir(), "")
    on_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if any(os.path.join(os.path.abspath(p), "") == hook for p in on_path):
        lines.append(f"`{program()} run`: yes (its start-up hook is on PYTHONPATH)")
    else:
        lines.append(f"`{program()} run`: no (this process was not started by it)")
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
