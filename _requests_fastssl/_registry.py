"""The registry: spec -> published shared context, single flight, LRU-bounded, with counters.

It knows nothing about requests: callers hand it a key and a build function. N threads
asking for the same missing key cause one build; the others wait for that build and share
its result, including a failed one (they then all go to stock requests). A failure is
remembered only when the build says it will repeat for as long as a condition holds
(``Lasting``: a file that cannot be loaded, while it is unchanged), so such requests go
straight to stock instead of paying a CA load first; everything else is tried again on the
next request, and a fixed file heals on its own either way.

After ``os.fork()`` the child gets a fresh lock and no builds in flight (the threads running
them stayed in the parent), and keeps every context that was complete before the fork:
that is what makes prefork servers cheap.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from ._status import Stats

__all__ = ["REGISTRY", "Lasting", "Registry"]

DEFAULT_MAX_CONTEXTS = 64
_log = logging.getLogger("requests_fastssl")


class Lasting(Exception):  # (carries the real error as __cause__)
    """A build failure that will repeat while ``holds()`` is true (raised from the error)."""

    def __init__(self, holds: Callable[[], bool]) -> None:
        super().__init__("the same build would fail again")
        self.holds = holds


class _Flight:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any | None = None


class Registry:
    def __init__(self, max_contexts: int = DEFAULT_MAX_CONTEXTS) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._failures: OrderedDict[Hashable, Callable[[], bool]] = OrderedDict()
        self._flights: dict[Hashable, _Flight] = {}
        self._max = max_contexts
        self._counts: dict[str, int] = dict.fromkeys(_COUNTERS, 0)
        self._reasons: dict[str, int] = {}
        self._build_seconds = 0.0
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._flights = {}

    def get(self, key: Hashable, build: Callable[[Any], Any | None]) -> Any | None:
        """The context for ``key``, built by ``build(key)`` if missing; None if that failed."""
        with self._lock:
            found = self._hit(key)
            if found is not None:
                return found
            holds = self._failures.get(key)
        if holds is not None:
            if holds():  # (outside the lock: it looks at files)
                self.count("failures_skipped")
                return None
            with self._lock:
                if self._failures.get(key) is holds:
                    del self._failures[key]
        with self._lock:
            found = self._hit(key)  # (built by another thread meanwhile)
            if found is not None:
                return found
            flight = self._flights.get(key)
            leader = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not leader:
            flight.done.wait()
            if flight.result is not None:
                self.count("reuses")
            return flight.result
        result = None
        lasting: Lasting | None = None
        started = time.perf_counter()
        try:
            result = build(key)
        except Lasting as exc:
            lasting = exc
            _log.debug(
                "requests_fastssl: building a context failed (%r); stock handles it, "
                "and will until the files change",
                exc.__cause__,
            )
        except Exception as exc:
            # Expected for a missing, unreadable or malformed file: stock requests will
            # raise its own error for the same request, so ours is only worth a debug line.
            _log.debug("requests_fastssl: building a context failed (%r); stock handles it", exc)
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                del self._flights[key]
                flight.result = result
                if result is None:
                    self._counts["build_failures"] += 1
                    if lasting is not None:
                        self._failures[key] = lasting.holds
                        while len(self._failures) > self._max:
                            self._failures.popitem(last=False)
                else:
                    self._counts["contexts_built"] += 1
                    self._build_seconds += elapsed
                    self._entries[key] = result
                    self._evict()
            flight.done.set()
        return result

    def _hit(self, key: Hashable) -> Any | None:
        """The published context for ``key``, counted as a reuse (with the lock held)."""
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            self._counts["reuses"] += 1
        return found

    def discard(self, key: Hashable, value: Any) -> None:
        """Forget ``value`` as the context for ``key`` (if it still is): it is stale."""
        with self._lock:
            if self._entries.get(key) is value:
                del self._entries[key]
                self._counts["discards"] += 1

    def step_aside(self, reason: str) -> None:
        with self._lock:
            self._counts["step_asides"] += 1
            self._reasons[reason] = self._reasons.get(reason, 0) + 1

    def _evict(self) -> None:
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
            self._counts["evictions"] += 1

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def resize(self, max_contexts: int) -> None:
        with self._lock:
            self._max = max_contexts
            self._evict()

    def clear(self) -> None:
        """Drop every published context (pools holding one keep it until they go)."""
        with self._lock:
            self._entries.clear()
            self._failures.clear()

    def stats(self) -> Stats:
        with self._lock:
            counts = dict(self._counts)
            counts["entries"] = len(self._entries)
            seconds = self._build_seconds
            reasons = dict(sorted(self._reasons.items()))
        return Stats(**counts, build_seconds=seconds, step_aside_reasons=reasons)


_COUNTERS = tuple(
    name for name in Stats._fields if name not in ("build_seconds", "entries", "step_aside_reasons")
)


def _after_fork(ref: weakref.ref[Registry]) -> None:
    registry = ref()
    if registry is not None:
        registry._after_fork_in_child()


REGISTRY = Registry()
