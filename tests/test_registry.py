"""The registry on its own: single flight, failures never cached, LRU bound."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from _requests_fastssl._registry import Registry


def test_one_build_for_many_concurrent_callers() -> None:
    registry = Registry()
    release = threading.Event()
    builds: list[str] = []

    def build(key: str) -> object:
        builds.append(key)
        release.wait()  # hold the flight open while the others pile up behind it
        return object()

    with ThreadPoolExecutor(32) as pool:
        futures = [pool.submit(registry.get, "k", build) for _ in range(32)]
        while not registry._flights:  # the leader is building
            pass
        release.set()
        results = {id(f.result()) for f in futures}
    assert builds == ["k"]
    assert len(results) == 1
    stats = registry.stats()
    assert (stats.contexts_built, stats.reuses, stats.entries) == (1, 31, 1)


def test_a_failed_build_is_shared_with_waiters_and_never_cached() -> None:
    registry = Registry()
    release = threading.Event()
    attempts: list[int] = []

    def failing(key: str) -> Any:
        attempts.append(1)
        release.wait()
        raise OSError("no such file")

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(registry.get, "k", failing) for _ in range(8)]
        while not registry._flights:
            pass
        release.set()
        assert [f.result() for f in futures] == [None] * 8
    assert len(attempts) == 1
    assert registry.get("k", lambda key: None) is None  # a declined build: not cached either
    fixed = object()
    assert registry.get("k", lambda key: fixed) is fixed  # healed on the next request
    stats = registry.stats()
    assert (stats.build_failures, stats.contexts_built, stats.entries) == (2, 1, 1)


def test_least_recently_used_entries_go_first() -> None:
    registry = Registry(max_contexts=2)
    a, b, c = object(), object(), object()
    registry.get("a", lambda key: a)
    registry.get("b", lambda key: b)
    assert registry.get("a", lambda key: pytest.fail("a is cached")) is a  # a is now recent
    registry.get("c", lambda key: c)  # evicts b
    assert set(registry._entries) == {"a", "c"}
    registry.resize(1)
    assert set(registry._entries) == {"c"}
    assert registry.stats().evictions == 2
    registry.clear()
    assert registry.stats().entries == 0
