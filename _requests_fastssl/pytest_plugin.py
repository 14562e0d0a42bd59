"""pytest plugin ``requests_fastssl``: the ``fastssl`` fixture, ``--fastssl`` / ``--no-fastssl``
and the ini option ``fastssl``.

pytest loads this module in every run of an environment that has the package, so loading it
does nothing: it installs nothing and imports neither requests, nor ssl, nor wrapt.

Precedence, highest first (REQUESTS_FASTSSL_DISABLE=1 beats all of them):
  1. the ``fastssl`` fixture: the shim is on for that test, whatever the session says;
  2. ``--fastssl`` / ``--no-fastssl`` on the command line: on / off for the session;
  3. ``fastssl = true`` in the ini file: on for the session;
  4. otherwise off, and pytest runs exactly as without the plugin.
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


@dataclass
class _Session:
    installed_here: bool  # the session switched the shim on (and so switches it off)
    baseline: Stats


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
        dest="fastssl",
        default=None,
        help="share SSLContexts between connections for the whole session (requests-fastssl)",
    )
    group.addoption(
        "--no-fastssl",
        action="store_false",
        dest="fastssl",
        help="leave requests stock for the session, whatever the ini file says",
    )
    parser.addini(
        "fastssl", type="bool", default=False, help="requests-fastssl on for the whole session"
    )


def _wanted() -> bool:
    return _install.STATE.wanted


def pytest_configure(config: pytest.Config) -> None:
    choice = config.getoption("fastssl")
    if choice is None:
        choice = config.getini("fastssl")
    if choice:
        was_wanted, baseline = _wanted(), _install.stats()
        _install.activate()
        config.stash[_SESSION] = _Session(
            installed_here=_wanted() and not was_wanted, baseline=baseline
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_SESSION, None)
    if session is not None and session.installed_here:
        _install.uninstall()  # restore only what we changed


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    session = terminalreporter.config.stash.get(_SESSION, None)
    if session is None:
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


@pytest.fixture
def fastssl() -> Iterator[FastSSL]:
    """The shim on for this test, with an empty cache; the previous state is restored after.

    With REQUESTS_FASTSSL_DISABLE set the shim stays off (``status()`` says so).
    """
    was_wanted = _wanted()
    _install.activate()
    installed_here = _wanted() and not was_wanted  # False under the kill switch
    # A test asking for the shim uses requests: have it patched now, not at first use.
    # Without requests installed the state stays "pending".
    with contextlib.suppress(ImportError):
        import requests.adapters  # noqa: F401
    _install.clear()
    try:
        yield FastSSL()
    finally:
        if installed_here:  # undo only what this fixture did
            _install.uninstall()
