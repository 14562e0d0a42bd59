"""pytest plugin ``requests_fastssl``: the ``fastssl`` fixture and marker, ``--fastssl`` /
``--no-fastssl`` and the ini option ``fastssl``. Loading it installs nothing and imports
neither requests, nor ssl, nor wrapt.

Precedence, highest first (docs/usage.md has the table, tests/test_pytest_plugin.py runs it):
REQUESTS_FASTSSL_DISABLE; ``--no-fastssl``, final (imports, ``install()``, the fixture and
the marker change nothing); ``--fastssl``; ``fastssl = false`` in the ini file, final too, or
``true``; the fixture or marker, on for one test; otherwise pytest runs as without the plugin.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from . import _install

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


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("requests_fastssl", "requests-fastssl")
    group.addoption(
        "--fastssl",
        action="store_true",
        default=None,
        help="share SSLContexts between connections for the whole session (requests-fastssl)",
    )
    group.addoption(
        "--no-fastssl",
        action="store_false",
        dest="fastssl",
        help="requests stays stock for the whole session, whatever else asks (final)",
    )
    parser.addini(
        "fastssl",
        type="bool",
        default=None,  # not set: neither on nor off
        help="requests-fastssl on (true) or off, finally (false), for the whole session",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fastssl: the requests-fastssl shim on for this test (or module, class)"
    )
    choice = config.getoption("fastssl")
    if choice is None and config.getini("fastssl") is not None:
        choice = bool(config.getini("fastssl"))
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
    session = terminalreporter.config.stash.get(_SESSION, None)
    if session is None or session.vetoed:
        return
    status = _install.status()
    if status.state.value != "active":
        terminalreporter.write_line(f"requests-fastssl: not active ({status})")
        return
    stats = _install.stats().since(session.baseline)
    terminalreporter.write_line(
        f"requests-fastssl: {stats.contexts_built} contexts built, {stats.reuses} reuses, "
        f"{stats.loads_avoided} CA loads avoided (~{stats.seconds_saved:.2f} s CPU saved)"
    )


@contextlib.contextmanager
def _on_for_one_test() -> Iterator[FastSSL]:
    was_wanted = _install.STATE.wanted
    _install.activate()
    installed_here = _install.STATE.wanted and not was_wanted  # not under a switch or veto
    # A test asking for the shim uses requests: patched now, not at first use (without
    # requests installed the state stays "pending").
    with contextlib.suppress(ImportError):
        import requests.adapters  # noqa: F401
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


@pytest.fixture(autouse=True)
def _fastssl_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    """The ``fastssl`` marker: what the fixture does, for a marked test, class or module."""
    marked = request.node.get_closest_marker("fastssl") is not None
    with _on_for_one_test() if marked else contextlib.nullcontext():
        yield
