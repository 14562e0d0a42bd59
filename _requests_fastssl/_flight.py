"""A build under way that other threads may wait for: with a bound, never on their own
stack's, and released however the builder's frame ends."""

from __future__ import annotations

import _thread
import weakref
from typing import Any

from ._state import FORKS

__all__ = ["Flight", "Token"]

_SLICE = 0.05


class Token:
    """Owned by the worker's frame alone: it dies when that frame ends, however it ends."""

    __slots__ = ("__weakref__",)


class Flight:
    """Its lock is held until the worker's token dies: the release is the lock's C ``__exit__``
    as the token's weakref callback, no Python code an exception can skip. No Python clock:
    the bound is counted in the lock's own timed waits, so a test's mock of ``time`` or
    freezegun, active now or when this was imported, can neither stop it nor see a call."""

    __slots__ = ("alive", "bound", "expired", "fork", "lock", "owner", "result")

    def __init__(self, token: Token, bound: float, result: Any = None) -> None:
        self.lock = _thread.allocate_lock()
        self.lock.acquire()
        self.alive = weakref.ref(token, self.lock.__exit__)  # type: ignore[arg-type]
        self.owner = _thread.get_ident()
        self.bound, self.fork, self.result, self.expired = bound, FORKS[0], result, False

    def stale(self) -> bool:
        """Its worker is gone, in another process, or was waited for a whole bound."""
        return self.expired or self.alive() is None or self.fork != FORKS[0]

    def mine(self) -> bool:
        return self.owner == _thread.get_ident()

    def wait(self) -> bool:
        """Wait for the worker (not this thread's own stack): False if the bound passed first."""
        for _ in range(max(1, round(self.bound / _SLICE))):
            if self.alive() is None:
                return True
            # In slices: another waiter interrupted between its acquire and release would
            # keep the lock; the worker's token says whether the work is still going.
            if self.lock.acquire(True, _SLICE):
                self.lock.release()
                return True
        if self.alive() is None:
            return True
        self.expired = True  # (the next thread to come builds for itself)
        return False
