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
from _requests_fastssl._registry import Registry, Unproven


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
        flight.waiters.append(lock)
    del token
    assert [lock.locked() for lock in held] == [False] * 3
    assert flight.wait()  # (arriving after the end: returns at once)
    assert flight.stale()


def test_a_waiter_interrupted_anywhere_holds_up_no_other() -> None:
    """KeyboardInterrupt at each point of a wait in turn (a trace hook raises it, as a signal
    handler would): the waiters after it still wake when the build ends, not at the bound."""
    token = _registry.Token()
    flight = _registry.Flight(token, 0.01)  # (the uninterrupted count's wait: over at once)
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


class Context:
    """A stand-in for an SSLContext here: the registry keeps proofs by weak reference."""


def test_an_unproven_context_is_proven_once_at_its_first_share() -> None:
    """A build's store comparison (its proof) runs when the context is first shared, not on
    the connection that built it: a process's first request pays only stock's load."""
    registry, built, proofs = Registry(), Context(), []

    def proof(ctx: Any) -> bool:
        proofs.append(ctx)
        return True

    assert registry.get("k", (), lambda checks: Unproven(built, proof)) is built
    assert proofs == []
    for _ in range(3):
        assert registry.get("k", (), lambda checks: pytest.fail("built twice")) is built
    assert proofs == [built]
    assert registry.stats().reuses == 3


@pytest.mark.parametrize("failure", ["False", "OSError"])
def test_a_context_whose_proof_fails_is_used_by_its_own_connection_alone(failure: str) -> None:
    """The store held what the path named while OpenSSL loaded it (what stock's own load of
    that moment holds), but not what the build read: its connection uses it, no other does,
    and the next connection builds afresh."""
    registry, bad, good = Registry(), Context(), Context()

    def proof(ctx: Any) -> bool:
        if failure == "OSError":
            raise OSError("unreadable")
        return False

    assert registry.get("k", (), lambda checks: Unproven(bad, proof)) is bad
    assert registry.get("k", (), lambda checks: good) is good
    assert registry.get("k", (), lambda checks: pytest.fail("built again")) is good
    stats = registry.stats()
    assert (stats.contexts_built, stats.discards, stats.reuses) == (2, 1, 1)


@pytest.mark.parametrize("verdict", [True, False])
def test_threads_that_waited_for_an_unproven_build_share_it_only_once_proven(
    verdict: bool,
) -> None:
    """Threads that waited for a build get its context after one proof; a failed proof sends
    them to stock, and the builder's own connection keeps what its load made."""
    registry, built, release, proofs = Registry(), Context(), threading.Event(), []

    def proof(ctx: Any) -> bool:
        proofs.append(ctx)
        return verdict

    def build(checks: Any) -> Unproven:
        release.wait(10)  # hold the flight open while the others pile up behind it
        return Unproven(built, proof)

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(registry.get, "k", (), build) for _ in range(16)]
        deadline = time.monotonic() + 10
        while len(registry._flights) == 0 and time.monotonic() < deadline:
            time.sleep(0.001)  # (polling for a state: the flight registered)
        release.set()
        results = [f.result() for f in futures]
    if verdict:
        assert results == [built] * 16
        assert set(proofs) == {built}  # (two first shares at once may both prove)
    else:
        assert results.count(built) == 1, results
        assert set(results) - {built} == {Reason.FILE_CHANGED}
