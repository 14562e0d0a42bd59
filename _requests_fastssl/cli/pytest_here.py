"""doctor's answer for pytest: whether a pytest run started here, with no arguments, would have
the shim on, from the plugin's entry point, the switches and the ini file pytest itself finds."""

from __future__ import annotations

import shlex
from typing import Any

__all__ = ["pytest_answer"]

_HOW = "--fastssl, `fastssl = true` in the ini file, or the fastssl fixture or marker for a test"


def pytest_answer(env: dict[str, str], programs_active: bool) -> tuple[str, str]:
    """(``on``, ``off``, ``opt-in``, ``unknown`` or ``no pytest``; the sentence that says why)."""
    from importlib.metadata import PackageNotFoundError, entry_points, version

    try:
        version("pytest")
    except PackageNotFoundError:
        return "no pytest", "pytest is not installed in this environment"
    from .._install import disabled_by_env

    switch = disabled_by_env()
    if switch is not None:
        return "off", f"off: REQUESTS_FASTSSL_DISABLE={switch} keeps the plugin off too"
    started = "on, as in your programs" if programs_active else "off, as in your programs"
    if not any(e.name == "requests_fastssl" for e in entry_points(group="pytest11")):
        return (
            "on" if programs_active else "off",
            f"{started}: the plugin is not registered (the package's metadata is missing)",
        )
    ini_path, ini, addopts, problem = _ini()
    try:
        args = _options(addopts, f"addopts in {ini_path}")
        args += _options(env.get("PYTEST_ADDOPTS", ""), "PYTEST_ADDOPTS")
    except ValueError as exc:  # (an unclosed quote: pytest stops on it too)
        return "unknown", f"could not read pytest's options ({exc}); pytest would stop on them too"
    plugins = [p for a, p in zip(["", *args], args, strict=False) if a == "-p"] + [
        a[2:] for a in args if a.startswith("-p") and len(a) > 2
    ]
    if "no:requests_fastssl" in plugins or (
        env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") and "requests_fastssl" not in plugins
    ):
        return (
            "on" if programs_active else "off",
            f"{started}: the plugin is not loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD or "
            "-p no:requests_fastssl; `-p requests_fastssl` loads it)",
        )
    flags = [a for a in args if a in ("--fastssl", "--no-fastssl")]
    from .._observe import OFF_WORDS, ON_WORDS

    unless = ""
    if flags:  # (the command line first, as the plugin reads it; the last flag wins)
        choice: bool | None = flags[-1] == "--fastssl"
        source = f"{flags[-1]} in the ini file's addopts or PYTEST_ADDOPTS"
    else:
        raw = str(ini if ini is not None else "").strip()
        word = raw.lower()
        choice = True if word in ON_WORDS else False if word in OFF_WORDS[1:] else None
        source = f"fastssl = {ini} in {ini_path}"
        # (a conftest's own key is the project's, and the plugin leaves it: doctor loads none)
        unless = ", unless a conftest declares its own fastssl key"
        if raw and choice is None:  # (the plugin warns, and does not act on it)
            said = f"fastssl = {raw!r} in {ini_path} is not a switch; the plugin warns and"
            if programs_active:
                return "on", f"on, as in your programs: {said} leaves the shim to start-up"
            return "off", f"off: {said} stays off unless asked: {_HOW}"
    if choice is True:
        return "on", f"on for the whole session ({source}){unless}"
    if choice is False:
        return "off", f"off for the whole session, whatever start-up does ({source}){unless}"
    if programs_active:
        return "on", (
            "on: pytest starts as your programs do; --no-fastssl or `fastssl = false` in the "
            "ini file turn it off"
        )
    where = (
        f" ({problem})" if problem
        else f" ({ini_path} does not set it)" if ini_path
        else " (no ini file found here)"
    )  # fmt: skip
    return "opt-in", f"off unless asked{where}: {_HOW}"


def _options(value: str | list[str], where: str) -> list[str]:
    """Options as pytest splits them, or a ValueError that says where they could not be."""
    try:
        return shlex.split(value) if isinstance(value, str) else [str(a) for a in value]
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _ini() -> tuple[str | None, Any, str | list[str], str]:
    """The ini file pytest finds from here, its ``fastssl`` and ``addopts``, as pytest itself
    reads them (its own finder: the file names and tables change between releases), or why
    they could not be read."""
    from pathlib import Path

    try:
        import pytest
        from _pytest.config.findpaths import locate_config
    except ImportError as exc:
        return None, None, [], f"pytest's ini file not read: {exc}"
    try:
        try:
            _, path, values, *_ = locate_config(Path.cwd(), [])
        except TypeError:  # (pytest before 8.1: the directory searched is the one argument)
            _, path, values, *_ = locate_config([Path.cwd()])  # type: ignore[call-arg,arg-type]
    except (Exception, pytest.fail.Exception) as exc:  # (an older pytest, a file it refuses)
        return None, None, [], f"pytest's ini file not read: {type(exc).__name__}: {exc}"

    def value(name: str) -> Any:
        found = values.get(name)
        return getattr(found, "value", found)  # (pytest 9 wraps each value)

    return (str(path) if path else None), value("fastssl"), value("addopts") or [], ""
