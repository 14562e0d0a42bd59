"""Key -> shared context: built once per key, LRU-bounded, counted; blind to requests/urllib3.
Waits for a build are bounded, never on the waiter's own stack. No lock: a table change is one
dict operation, whole under the interpreter (an exception at any bytecode leaves nothing half
done). A failed build is remembered while its files are unchanged. A forked child keeps its
contexts (not those a thread was in a handshake with) and no flights."""

from __future__ import annotations

import _queue
import contextlib
import functools
import logging
import operator
import os
import time
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from ._files import FileCheck, propagate, read_checks
from ._green import green_lock, whoami
from ._observe import first_step_aside
from ._policy import Aside, Reason, StockError
from ._state import FORKS
from ._status import Stats

__all__ = ["REGISTRY", "WAIT_SECONDS", "Flight", "Registry", "Token"]

DEFAULT_MAX_CONTEXTS = 64
WAIT_SECONDS = 5.0
_log = logging.getLogger("requests_fastssl")
# The clock for build_seconds as it is at import, unless a test's mock or freezegun is in its
# place then (it would be called for ever after): a statistic is not worth a foreign call.
_perf_counter = time.perf_counter  # (else float: 0.0, build_seconds stays 0)
_perf_counter = _perf_counter if type(_perf_counter) is types.BuiltinFunctionType else float
Build = Callable[[tuple[FileCheck, ...]], Any]
_NOT_COUNTED = ("build_seconds", "entries", "step_aside_reasons", "mean_load_seconds",
                "httpx_step_aside_reasons")  # fmt: skip
_COUNTERS = tuple(name for name in Stats._fields if name not in _NOT_COUNTED)


class Token:
    """Owned by the worker's frame alone: it dies when that frame ends, however it ends."""

    __slots__ = ("__weakref__",)


class Flight:
    """A build under way that others may wait for, bounded. Each waiter has a lock of its own,
    all released at once when the worker's token dies however its frame ends (docs/design.md,
    Threads); a greenlet's yields to its hub. No Python clock: the bound is the lock's own timed
    wait, which a test's mock of ``time`` or freezegun can neither stop nor see."""

    __slots__ = ("alive", "bound", "expired", "fork", "owner", "result", "waiters")

    def __init__(self, token: Token, bound: float, result: Any = None) -> None:
        # Each waiter's wake-up, called without arguments (the map reads the list as it drains:
        # later appends included).
        self.waiters: list[Callable[[], Any]] = []
        wake = functools.partial(dict.fromkeys, map(operator.call, self.waiters))
        self.alive = weakref.ref(token, wake)
        self.owner = whoami()
        self.bound, self.fork, self.result, self.expired = bound, FORKS[0], result, False

    def stale(self) -> bool:
        """Its worker is gone, in another process, or was waited for a whole bound."""
        return self.expired or self.alive() is None or self.fork != FORKS[0]

    def mine(self) -> bool:
        return self.owner == whoami()

    def wait(self) -> bool | None:
        """Wait for the worker (not this thread's own stack): False if the bound passed first,
        None if this greenlet cannot wait without stopping the builder (stock, at once)."""
        if self.alive() is None:
            return True  # (ended already)
        green = green_lock(self.owner[0])
        if green is False:
            return None
        if green is None:
            # A queue of the C module, which no monkey patching replaces (a patched lock of a
            # thread with no hub would wait on a hub that never runs: eventlet's).
            real: _queue.SimpleQueue[None] = _queue.SimpleQueue()
            self.waiters.append(functools.partial(real.put, None))
            # (the token dead before the append: the drain is over, nobody wakes this one)
            if self.alive() is None:
                return True
            try:
                real.get(True, self.bound)
                return True
            except _queue.Empty:
                if self.alive() is None:
                    return True
                self.expired = True  # (the next thread to come builds for itself)
                return False
        self.waiters.append(green.release)
        try:
            if self.alive() is None or green.acquire(True, self.bound) or self.alive() is None:
                return True
        except Exception as exc:  # thrown into this greenlet at the switch: its own, as its
            raise StockError(exc) from None  # timeout's in stock (a BaseException propagates)
        self.expired = True  # (the next thread to come builds for itself)
        return False


class Registry:
    def __init__(self, max_contexts: int = DEFAULT_MAX_CONTEXTS) -> None:
        self._entries: OrderedDict[Hashable, tuple[Any, tuple[FileCheck, ...]]] = OrderedDict()
        self._flights: dict[Hashable, Flight] = {}
        # Failed builds' files: while unchanged, the build would fail again (straight to stock).
        self._failed: OrderedDict[Hashable, tuple[FileCheck, ...]] = OrderedDict()
        self._busy: dict[int, int] = {}  # id(context) -> handshakes under way with it
        self._max = max_contexts
        self._counts: dict[str, int] = dict.fromkeys(_COUNTERS, 0)
        self._reasons: dict[str, int] = {}
        self._announced: dict[tuple[str, bool], object] = {}  # reasons logged once (_observe)
        self._build_seconds = 0.0
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref()))

    def get(self, key: Hashable, paths: tuple[str, ...], build: Build) -> Any:
        """The context for ``key`` (its files unchanged), built if missing, else a Reason."""
        found = self._published(key)
        if found is not None:
            return found
        failed = self._failed.get(key)
        if failed is not None:
            if all(check.unchanged() for check in failed):
                self.count("failures_skipped")
                return Reason.BUILD_FAILED
            self._failed.pop(key, None)
        flight = self._flights.get(key)
        if flight is not None and not flight.stale():
            return self._join(key, flight, paths, build)
        token, checks = Token(), None
        me = Flight(token, WAIT_SECONDS)  # (no result: it ended without one, interrupted)
        try:
            # Claimed before the files are read: threads arriving meanwhile wait (under 300
            # threads, up to 20 read the bundle each and held a copy while they waited).
            flight = self._flights.setdefault(key, me)
            if flight is not me and flight.stale():
                flight = self._flights[key] = me
            if flight is not me:
                return self._join(key, flight, paths, build)
            found = self._published(key)  # (published by a build that ended meanwhile)
            if found is not None:
                me.result = found  # (its waiters' result too)
                return found
            checks = read_checks(paths)
            me.result = Reason.NOT_A_FILE if checks is None else self._build(key, checks, build)
            return me.result
        finally:
            del token  # whoever waits wakes (and does if this line is never reached)
            if self._flights.get(key) is me:
                self._flights.pop(key, None)
            for check in checks or ():  # (the digest stays: no copy outlives its build)
                check.contents = b""

    def _published(self, key: Hashable) -> Any:
        entry = self._entries.get(key)
        if entry is None:
            return None
        ctx, checks = entry
        try:
            fit = all(check.unchanged() for check in checks)
        except BaseException as exc:
            fit = propagate(exc)
        if fit:
            self._recent(key)
            self.count("reuses")
            return ctx
        if self._entries.get(key) is entry:
            self._entries.pop(key, None)
            self.count("discards")
        return None

    def _recent(self, key: Hashable) -> None:
        with contextlib.suppress(KeyError):  # (dropped meanwhile by another thread)
            self._entries.move_to_end(key)

    def _evict(self) -> None:
        while len(self._entries) > self._max:
            try:
                self._entries.popitem(last=False)
            except KeyError:
                return
            self.count("evictions")

    def _join(self, key: Hashable, flight: Flight, paths: tuple[str, ...], build: Build) -> Any:
        """Another thread's build, waited for; then checked as any published context is. One
        that ended with no result (its greenlet killed, a timeout or a signal's exception in
        it, its stock error raised): this waiter asks again (its failure is remembered)."""
        if flight.mine():
            return Reason.REENTRANT  # our own stack is the builder: waiting would never end
        waited = flight.wait()
        if waited is None:
            return Reason.REENTRANT  # (this thread's hub, or no hub to yield to: see wait)
        if not waited:
            return Reason.WAIT_TIMEOUT
        if flight.result is None:
            return self.get(key, paths, build)
        if isinstance(flight.result, Reason):
            return flight.result
        return self._published(key) or Reason.FILE_CHANGED

    def _build(self, key: Hashable, checks: tuple[FileCheck, ...], build: Build) -> Any:
        started = _perf_counter()
        try:
            ctx = build(checks)
        except Aside as aside:
            self.count("build_failures")
            return aside.reason
        except StockError as failed:  # (raised by this connection, as stock; waiters to stock)
            self.count("build_failures")
            if not failed.transient:  # (a signal handler's: the next connection builds again)
                self._remember_failure(key, checks)
            raise
        except (OSError, ValueError, TypeError, RuntimeError) as exc:
            propagate(exc)
            # What a load raises (ssl.SSLError is an OSError; anything else propagates as from
            # stock's). Stock raises its own error for this connection: ours is a debug line.
            _log.debug("requests_fastssl: building a context failed (%r); stock handles it", exc)
            self.count("build_failures")
            self._remember_failure(key, checks)
            return Reason.BUILD_FAILED
        self.count("contexts_built")
        self.count("ca_loads")
        self._build_seconds += _perf_counter() - started
        self._entries[key] = (ctx, checks)
        self._recent(key)
        self._evict()
        return ctx

    def _remember_failure(self, key: Hashable, checks: tuple[FileCheck, ...]) -> None:
        if checks:  # (with no file to watch, a failure could never be found healed)
            self._failed[key] = checks
            while len(self._failed) > self._max:
                self._failed.popitem(last=False)

    # Counts: `d[k] += 1` on a str-keyed dict runs no Python code and never switches threads,
    # so no increment is lost to a race; one interrupted by an exception is simply not made.

    def enter(self, ctx: Any) -> None:
        """A handshake with ``ctx`` starts (see the fork rule)."""
        self._busy[id(ctx)] = self._busy.get(id(ctx), 0) + 1
        self._counts["connections"] += 1

    def leave(self, ctx: Any) -> None:
        left = self._busy.pop(id(ctx), 1) - 1
        if left > 0:
            self._busy[id(ctx)] = left

    def step_aside(self, reason: Reason, served: bool = False) -> None:
        self._counts["step_asides"] += 1
        self._reasons[reason.code] = self._reasons.get(reason.code, 0) + 1
        self._counts["owned_connections"] += served  # (after: never more than own-context)
        token = object()  # setdefault is atomic: exactly one thread sees its own token
        if self._announced.setdefault((reason.code, served), token) is token:
            first_step_aside(reason, served)

    def count(self, name: str, n: int = 1) -> None:
        self._counts[name] += n

    def resize(self, max_contexts: int) -> None:
        self._max = max_contexts
        self._evict()

    def clear(self) -> None:
        """Drop every published context (connections made with one keep it)."""
        self._entries.clear()
        self._failed.clear()

    def stats(self) -> Stats:
        counts: dict[str, Any] = self._counts.copy()
        counts["entries"] = len(self._entries)
        reasons = dict(sorted(self._reasons.copy().items()))
        spent = self._build_seconds  # (0.0 under a test's mocked clock: none measured)
        counts["mean_load_seconds"] = spent / counts["contexts_built"] if spent else 0.0
        return Stats(**counts, build_seconds=spent, step_aside_reasons=reasons)


def _after_fork(registry: Registry | None) -> None:
    if registry is not None:
        busy, registry._busy = registry._busy, {}
        for key, (ctx, _checks) in list(registry._entries.items()):
            if id(ctx) in busy:
                del registry._entries[key]


REGISTRY = Registry()
