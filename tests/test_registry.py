"""The registry on its own: single flight with bounded waits, no wait on one's own build,
failures never cached, LRU bound."""

from __future__ import annotations

import _thread
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from support import interrupted_at

from _requests_fastssl import _registry
from _requests_fastssl._policy import Reason
from _requests_fastssl._registry import Registry


def test_one_build_for_many_concurrent_callers() -> None:
    registry = Registry()
    release = threading.Event()
    builds: list[int] = []

    def build(checks: Any) -> object:
        builds.append(1)
        release.wait(10)  # hold the flight open while the others pile up behind it
        return object()

    with ThreadPoolExecutor(32) as pool:
        futures = [pool.submit(registry.get, "k", (), build) for _ in range(32)]
        deadline = time.monotonic() + 10
        while not registry._flights and time.monotonic() < deadline:
            time.sleep(0.001)  # (polling for a state, not a sleep standing in for one)
        release.set()
        results = {id(f.result()) for f in futures}
    assert builds == [1]
    assert len(results) == 1
    stats = registry.stats()
    assert (stats.contexts_built, stats.reuses, stats.entries) == (1, 31, 1)


@pytest.mark.urllib3_2
def test_a_failed_build_is_shared_with_waiters_and_never_cached() -> None:
    registry = Registry()
    release = threading.Event()
    attempts: list[int] = []

    def failing(checks: Any) -> Any:
        attempts.append(1)
        release.wait(10)
        raise OSError("no such file")

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(registry.get, "k", (), failing) for _ in range(8)]
        deadline = time.monotonic() + 10
        while not registry._flights and time.monotonic() < deadline:
            time.sleep(0.001)
        release.set()
        assert [f.result() for f in futures] == [Reason.BUILD_FAILED] * 8
    assert len(attempts) == 1
    fixed = object()
    assert registry.get("k", (), lambda checks: fixed) is fixed  # healed on the next request
    stats = registry.stats()
    assert (stats.build_failures, stats.contexts_built, stats.entries) == (1, 1, 1)


def test_memory_errors_propagate_as_stocks_would() -> None:
    registry = Registry()

    def build(checks: Any) -> Any:
        raise MemoryError

    with pytest.raises(MemoryError):
        registry.get("k", (), build)
    assert not registry._flights
    assert registry.get("k", (), lambda checks: 1) == 1


def test_a_thread_never_waits_on_its_own_build() -> None:
    registry = Registry()
    inner: list[Any] = []

    def build(checks: Any) -> object:
        inner.append(registry.get("k", (), lambda c: pytest.fail("built twice")))
        return object()

    assert registry.get("k", (), build) is not None
    assert inner == [Reason.REENTRANT]


def test_waits_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "WAIT_SECONDS", 0.2)
    registry = Registry()
    release = threading.Event()

    def stuck(checks: Any) -> object:
        release.wait(10)  # a builder that does not come back in time
        return object()

    with ThreadPoolExecutor(2) as pool:
        leader = pool.submit(registry.get, "k", (), stuck)
        deadline = time.monotonic() + 10
        while not registry._flights and time.monotonic() < deadline:
            time.sleep(0.001)
        assert registry.get("k", (), lambda c: pytest.fail("the flight is fresh")) is (
            Reason.WAIT_TIMEOUT
        )
        release.set()
        assert leader.result() is not None


def test_the_end_of_a_build_releases_every_waiter_at_once() -> None:
    """Each waiter waits on a lock of its own; the token's callback releases them all, in C,
    as the token dies. (One shared lock, taken and given back by each waiter in turn, woke 300
    waiters one by one, each only after it had the GIL back: the last up to 1 s late.)"""
    token = _registry.Token()
    flight = _registry.Flight(token, 10.0)
    held = [_thread.allocate_lock() for _ in range(3)]
    for lock in held:  # (as three waiters have registered theirs)
        lock.acquire()
        flight.waiters.append(lock.release)
    del token
    assert [lock.locked() for lock in held] == [False] * 3
    assert flight.wait()  # (arriving after the end: returns at once)
    assert flight.stale()


def test_a_waiter_interrupted_anywhere_holds_up_no_other() -> None:
    """KeyboardInterrupt at each point of a wait in turn (a trace hook raises it, as a signal
    handler would): the waiters after it still wake when the build ends, not at the bound."""
    token = _registry.Token()
    flight = _registry.Flight(token, 0.01)  # (the uninterrupted count's wait: over at once)
    flight.owner = (-1, None)  # (another thread's build: this thread's own is never waited on)
    code = {_registry.Flight.wait.__code__}
    points = interrupted_at(10**9, code, flight.wait)
    assert points > 3
    for n in range(1, points + 1):
        interrupted_at(n, code, flight.wait)
    flight.bound, flight.expired = 600.0, False
    registered = len(flight.waiters)
    with ThreadPoolExecutor(2) as pool:
        waits = [pool.submit(flight.wait) for _ in range(2)]
        deadline = time.monotonic() + 10
        while len(flight.waiters) < registered + 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        del token
        assert [w.result(timeout=60) for w in waits] == [True, True]


def test_a_flight_left_behind_is_replaced() -> None:
    registry = Registry()
    token = _registry.Token()
    registry._flights["k"] = _registry.Flight(token, _registry.WAIT_SECONDS)
    del token  # its builder is gone, and the flight was never deregistered
    fresh = object()
    assert registry.get("k", (), lambda checks: fresh) is fresh


def test_least_recently_used_entries_go_first() -> None:
    registry = Registry(max_contexts=2)
    a, b, c = object(), object(), object()
    registry.get("a", (), lambda checks: a)
    registry.get("b", (), lambda checks: b)
    assert registry.get("a", (), lambda checks: pytest.fail("a is cached")) is a
    registry.get("c", (), lambda checks: c)  # evicts b
    assert set(registry._entries) == {"a", "c"}
    registry.resize(1)
    assert set(registry._entries) == {"c"}
    assert registry.stats().evictions == 2
    registry.clear()
    assert registry.stats().entries == 0
