"""The install state every other module reads, and the lock that serialises changes to it. It
imports nothing, so every module can depend on it without depending on the others."""

from __future__ import annotations

import _thread
import os

# Not typing.TYPE_CHECKING: importing typing alone costs more than our start-up budget.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._policy import Settings

__all__ = ["FORKS", "LOCK", "STATE"]

# Forks so far: a build in flight before a fork has no builder in the child. Counted from
# activation (start-up, usually), so that a fork handler registered later already sees it.
FORKS = [0]


def _forked() -> None:
    FORKS[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class _State:
    __slots__ = ("active", "handles", "hook", "max_contexts", "phase", "reason", "settings",
                 "strict", "veto", "wanted", "warned")  # fmt: skip

    def __init__(self) -> None:
        self.wanted = False  # install() was called more recently than uninstall()
        self.active = False  # read by the wrapper on every call
        self.phase = "not-installed"  # a State value; see _status.State
        self.reason = ""
        self.handles: list[tuple[Any, str, Any]] = []  # (owner, attribute, wrapt handle)
        self.hook: Any = None  # the sys.meta_path entry, once inserted (inert awaiting nothing)
        self.max_contexts: int | None = None
        self.settings: Settings | None = None  # urllib3's modules, read at each set-up
        self.strict = self.warned = False
        # Who turned the shim off for good (pytest's --no-fastssl): install() and imports do
        # nothing while it is set, as under the kill switch.
        self.veto: str | None = None


STATE = _State()
LOCK = _thread.RLock()
# A thread of the parent may hold the lock when another thread forks: in the child that
# thread does not exist and would never release it. (The method threading uses itself.)
if hasattr(os, "register_at_fork") and hasattr(LOCK, "_at_fork_reinit"):
    os.register_at_fork(after_in_child=LOCK._at_fork_reinit)
