"""pytest plugin ``requests_fastssl``: the ``fastssl`` fixture and marker, ``--fastssl`` /
``--no-fastssl`` and the ini option ``fastssl``, in the precedence docs/usage.md tabulates
(off is final). Loading it installs nothing, imports neither requests, nor ssl, nor wrapt, adds
no fixture to tests that do not ask, and leaves a name the project defines itself to the project.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from . import _install, _observe

if TYPE_CHECKING:
    from ._status import Stats, Status

__all__ = ["FastSSL"]

_SESSION = pytest.StashKey["_Session"]()
VETO = "off for this pytest session (--no-fastssl or fastssl = false)"


@dataclass
class _Session:
    installed_here: bool  # the session switched the shim on (and so switches it off)
    baseline: Stats
    vetoed: bool = False  # the session switched it off for good (and lifts that at the end)
    was_wanted: bool = False  # installed before the session turned it off
    outer_veto: str | None = None  # an enclosing session's (pytester in-process): kept


class FastSSL:
    """What the ``fastssl`` fixture yields: this test's view of the shim."""

    def __init__(self) -> None:
        self._baseline = _install.stats()

    def stats(self) -> Stats:
        """Counters accumulated since the test started (``entries``: contexts held now)."""
        return _install.stats().since(self._baseline)

    def clear(self) -> None:
        """Drop every cached context, as ``requests_fastssl.clear()`` does."""
        _install.clear()

    def status(self) -> Status:
        return _install.status()


# Per pytest run (its Parser): the project's own names ours would have collided with.
_COLLISIONS: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()
_OWN_MARKER = pytest.StashKey[bool]()
_SAID = pytest.StashKey[int]()
_ITEM = pytest.StashKey[contextlib.ExitStack]()
_BAD_INI = pytest.StashKey[str]()  # an ini value that is no switch: said, and off
_MARKER = "fastssl: the requests-fastssl shim on for this test"
_OPTIONS = {
    "--fastssl": ("store_true", "share SSLContexts between connections for the whole session"),
    "--no-fastssl": ("store_false", "urllib3 connections stay stock for the whole session (final)"),
}


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    # Added once the project's initial conftests have added theirs (below), so that a project
    # with its own --fastssl keeps it; a plugin registered by a conftest comes after them.
    if getattr(pluginmanager, "_conftest_plugins", None):
        _add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(parser: pytest.Parser) -> Iterator[None]:
    try:
        return (yield)
    finally:
        _add_options(parser)


def _add_options(parser: pytest.Parser) -> None:
    if parser in _COLLISIONS:
        return
    collisions = _COLLISIONS[parser] = []
    groups = [*getattr(parser, "_groups", []), getattr(parser, "_anonymous", None)]
    taken = {name for g in groups for o in getattr(g, "options", []) for name in o.names()}
    group = parser.getgroup("requests_fastssl", "requests-fastssl")
    for name, (action, text) in _OPTIONS.items():
        if name in taken:
            collisions.append(f"option {name}")
        else:  # (a dest of our own: a project's --fastssl keeps "fastssl")
            group.addoption(name, action=action, dest="requests_fastssl", default=None, help=text)
    if "fastssl" in getattr(parser, "_inidict", {}):
        collisions.append("ini option fastssl")
    else:  # (a string read here: a value that is no switch may be a deeper conftest's key)
        parser.addini("fastssl", "requests-fastssl on, or off (final)", type="string", default=None)


@pytest.hookimpl(trylast=True)  # (after the project's own pytest_configure hooks)
def pytest_configure(config: pytest.Config) -> None:
    collisions = _COLLISIONS.setdefault(config._parser, [])
    declared = [line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")]
    config.stash[_OWN_MARKER] = own_marker = "fastssl" not in declared
    if own_marker:
        config.addinivalue_line("markers", _MARKER)
    else:
        collisions.append("marker fastssl")
    choice = config.getoption("requests_fastssl", None)
    if choice is None and "ini option fastssl" not in collisions:
        raw = str(config.getini("fastssl") or "").strip()
        ini, on, off = raw.lower(), _observe.ON_WORDS, _observe.OFF_WORDS[1:]  # (the switches')
        choice = True if ini in on else False if ini in off else None
        if choice is None and ini:  # a typo, unless a conftest below the root defines the key
            config.stash[_BAD_INI] = raw
    if choice is None:
        return  # nothing asked: not even the registry (it imports ssl) is loaded
    was_wanted, baseline = _install.STATE.wanted, _install.stats()
    if choice is False:
        if was_wanted:
            _install.uninstall()  # (activated at start-up, before pytest)
        outer, _install.STATE.veto = _install.STATE.veto, VETO
        _install.STATE.phase, _install.STATE.reason = "disabled", VETO
        config.stash[_SESSION] = _Session(False, baseline, True, was_wanted, outer)
    elif choice:
        _install.activate()
        config.stash[_SESSION] = _Session(_install.STATE.wanted and not was_wanted, baseline)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Conftests below the root have registered their markers by now: a ``fastssl`` marker of
    the project's own takes the name back from the plugin (said in the summary)."""
    config = session.config
    lines = [line.strip() for line in config.getini("markers")]
    names = [line.split(":")[0].split("(")[0].strip() for line in lines if line != _MARKER]
    if config.stash.get(_OWN_MARKER, False) and "fastssl" in names:
        config.stash[_OWN_MARKER] = False
        _COLLISIONS.setdefault(config._parser, []).append("marker fastssl")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The one notice of a name the project uses itself: the project's stays in charge."""
    return _notice(config)


def _notice(config: pytest.Config) -> list[str]:
    collisions = _COLLISIONS.get(config._parser, [])
    said, config.stash[_SAID] = ", ".join(collisions[config.stash.get(_SAID, 0) :]), len(collisions)
    lines = [
        f"requests-fastssl warning: this project defines its own {said}; the plugin leaves it "
        "to the project (the fastssl fixture still works)"
    ][: bool(said)]
    raw = config.stash.get(_BAD_INI, None)
    if raw is not None:  # (a header line, not a warning: filterwarnings=error would stop pytest)
        del config.stash[_BAD_INI]
        on, off = "/".join(_observe.ON_WORDS[::-1]), "/".join(_observe.OFF_WORDS[:0:-1])
        lines.append(
            f"requests-fastssl warning: ini option fastssl = {raw!r} is not a switch ({on} or "
            f"{off}); the plugin stays off (unless a conftest declares its own fastssl key)"
        )
    return lines


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None and session.installed_here:
        _install.uninstall()  # restore only what we changed
    if session is not None and session.vetoed:
        _install.STATE.veto = session.outer_veto
        if session.outer_veto is not None:
            return
        _install.uninstall()
        if session.was_wanted:
            _install.activate()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _notice(terminalreporter.config):  # (found after the header: a marker)
        terminalreporter.write_line(line)
    session = terminalreporter.config.stash.get(_SESSION, None)
    if session is None or session.vetoed:
        return
    status = _install.status()
    if status.state.value != "active":
        terminalreporter.write_line(f"requests-fastssl: not active ({status})")
        return
    stats = _install.stats().since(session.baseline)
    saved = f"~{stats.seconds_saved:.2f} s CPU saved"
    if stats.loads_avoided and not stats.seconds_saved:  # (never a figure no load measured)
        saved = "time saved not measured"
    elif stats.owned_loads_avoided:  # (those in contexts callers brought are not timed)
        saved += f" by the {stats.loads_avoided - stats.owned_loads_avoided} in shared contexts"
    terminalreporter.write_line(
        f"requests-fastssl: {stats.contexts_built} contexts built, {stats.reuses} reuses, "
        f"{stats.loads_avoided} CA loads avoided ({saved})"
    )


@contextlib.contextmanager
def _on_for_one_test() -> Iterator[FastSSL]:
    was_wanted = _install.STATE.wanted
    _install.activate()
    installed_here = _install.STATE.wanted and not was_wanted  # not under a switch or veto
    # A test asking for the shim makes HTTPS connections through urllib3: patched now, not
    # at first use (without urllib3 installed the state stays "pending").
    with contextlib.suppress(ImportError):
        import urllib3  # noqa: F401
    _install.clear()
    try:
        yield FastSSL()
    finally:
        if installed_here:  # undo only what this test's request did
            _install.uninstall()


@pytest.fixture
def fastssl() -> Iterator[FastSSL]:
    """The shim on for this test, with an empty cache; the previous state is restored after.
    Under REQUESTS_FASTSSL_DISABLE or the session's off switch it stays off (``status()``)."""
    with _on_for_one_test() as view:
        yield view


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """The ``fastssl`` marker: what the fixture does, for a marked test, class or module; a
    hook, not an autouse fixture, so that unmarked tests see nothing of the plugin."""
    if item.config.stash.get(_OWN_MARKER, False) and item.get_closest_marker("fastssl"):
        stack = contextlib.ExitStack()
        item.stash[_ITEM] = stack  # (closed at teardown, however setup ends)
        stack.enter_context(_on_for_one_test())
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    finally:
        stack = item.stash.get(_ITEM, None)
        if stack is not None:
            del item.stash[_ITEM]
            stack.close()
