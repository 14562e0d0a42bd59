"""A build under way that other threads may wait for: with a bound, never
on their own stack's, and released however the worker's frame ends."""

from __future__ import annotations

import _thread
import os
import time
import weakref
from typing import Any

__all__ = ["Flight", "Token"]

_forks = [0]  # a flight from before a fork has no worker in the child
# The clock as it was at import: a test's mock or freezegun stopping time.monotonic must
# neither stop a bound nor see calls stock does not make (a list: not a module attribute).
_clock = [time.monotonic]


def _forked() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class Token:
    """Owned by the worker's frame alone: it dies when that frame ends, however it ends."""

    __slots__ = ("__weakref__",)


class Flight:
    """Its lock is held until the worker's token dies: the release is the lock's C ``__exit__``
    as the token's weakref callback, no Python code an exception can skip."""

    __slots__ = ("alive", "bound", "fork", "lock", "owner", "result", "started")

    def __init__(self, token: Token, bound: float, result: Any = None) -> None:
        self.lock = _thread.allocate_lock()
        self.lock.acquire()
        self.alive = weakref.ref(token, self.lock.__exit__)  # type: ignore[arg-type]
        self.owner = _thread.get_ident()
        self.started = _clock[0]()
        self.bound, self.fork, self.result = bound, _forks[0], result

    def stale(self) -> bool:
        return (
            self.alive() is None
            or self.fork != _forks[0]
            or _clock[0]() - self.started > self.bound
        )

    def mine(self) -> bool:
        return self.owner == _thread.get_ident()

    def wait(self) -> bool:
        """Wait for the worker (not this thread's own stack): False if the bound passed first."""
        deadline = self.started + self.bound
        while self.alive() is not None:
            left = deadline - _clock[0]()
            if left <= 0:
                return False
            # In slices: another waiter interrupted between its acquire and release would
            # keep the lock; the worker's token says whether the work is still going.
            if self.lock.acquire(True, min(left, 0.05)):
                self.lock.release()
                break
        return True
