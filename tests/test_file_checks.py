"""Threads arriving during a build wait without reading its files, and only if they can open
them themselves; the bookkeeping reads no clock a mock of stock's would see, forks leave no
flight to wait for, and an interrupt anywhere in a file check leaves no descriptor open."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import requests
from support import (
    PKI,
    URLLIB3_1,
    ServerFactory,
    interrupted_at,
    outcome,
    run_python,
    stock_and_shim,
)

import requests_fastssl
from _requests_fastssl import _files, _registry
from _requests_fastssl._policy import Reason
from _requests_fastssl._registry import Registry


class HeldBuild:
    """A build that holds its flight open until released; counts every read of the files."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.reads: list[str] = []
        self.waiting: list[int] = []
        real, real_wait = _files.read_checks, _registry.Flight.wait

        def wait(flight: _registry.Flight) -> bool | None:
            self.waiting.append(1)
            return real_wait(flight)

        monkeypatch.setattr(_registry.Flight, "wait", wait)

        def read_checks(paths: tuple[str, ...]) -> Any:
            self.reads.append(threading.current_thread().name)
            return real(paths)

        monkeypatch.setattr(_registry, "read_checks", read_checks)
        self.read_checks = read_checks

    def __call__(self, checks: Any) -> object:
        self.started.set()
        assert self.release.wait(30)
        return object()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldBuild]:
    build = HeldBuild(monkeypatch)
    yield build
    build.release.set()


def test_threads_arriving_during_a_build_do_not_read_its_files(
    held: HeldBuild, tmp_path: Path
) -> None:
    """300 threads arriving during the first build each held a copy of the bundle while they
    waited: the memory above the floor. Now only the builder reads them."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 100_000)
    registry, paths = Registry(), (str(bundle),)
    with ThreadPoolExecutor(16, thread_name_prefix="request") as pool:
        first = pool.submit(registry.get, "k", paths, held)
        assert held.started.wait(30)
        others = [pool.submit(registry.get, "k", paths, held) for _ in range(15)]
        deadline = time.monotonic() + 30
        while len(held.waiting) < 15:
            assert time.monotonic() < deadline  # (polling for a state: all of them waiting)
            time.sleep(0.001)
        held.release.set()
        results = {id(f.result()) for f in [first, *others]}
    assert len(results) == 1
    assert len(held.reads) == 1, held.reads
    assert registry.stats().contexts_built == 1


def test_threads_arriving_while_the_builder_reads_its_files_do_not_read_them(
    held: HeldBuild, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build claims its key before it reads the files: under 300 threads on OpenSSL 3.6,
    4 to 20 threads arrived during the builder's read and each read the bundle too, holding
    a copy while it waited (the peak memory above the floor)."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 100_000)
    registry, paths = Registry(), (str(bundle),)
    reading, go_on = threading.Event(), threading.Event()

    def slow_first_read(paths: tuple[str, ...]) -> Any:
        if not reading.is_set():
            reading.set()
            assert go_on.wait(30)
        return held.read_checks(paths)

    monkeypatch.setattr(_registry, "read_checks", slow_first_read)
    held.release.set()
    with ThreadPoolExecutor(16) as pool:
        first = pool.submit(registry.get, "k", paths, held)
        assert reading.wait(30)
        others = [pool.submit(registry.get, "k", paths, held) for _ in range(15)]
        deadline = time.monotonic() + 30
        while len(held.waiting) < 15:
            assert time.monotonic() < deadline  # (polling for a state: all of them waiting)
            time.sleep(0.001)
        go_on.set()
        results = {id(f.result()) for f in [first, *others]}
    assert len(results) == 1
    assert len(held.reads) == 1, held.reads
    assert registry.stats().reuses == 15


def test_a_flight_that_finds_its_context_published_gives_it_to_its_waiters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread claims a key just after another build published it, and finds it published; a
    thread that looked before the publication waits for that claim. It got BUILD_FAILED (the
    claim's initial result), so stock: measured under 300 threads, 1 or 2 stock loads a run."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 1000)
    registry, paths, built = Registry(), (str(bundle),), object()
    real_published, real_wait = registry._published, _registry.Flight.wait
    waiting, results, calls = threading.Event(), [], []

    def wait(flight: _registry.Flight) -> bool | None:
        waiting.set()
        return real_wait(flight)

    def late() -> None:  # (it looked before the publication: None)
        results.append(registry.get("k", paths, lambda c: pytest.fail("built twice")))

    def published(key: Any) -> Any:
        calls.append(key)
        n = len(calls)
        if n == 1:  # the claimer looks: nothing yet; then another build publishes
            assert registry.get("k", paths, lambda c: built) is built
            return None
        if n == 4:  # the claimer, after its claim: before it answers, one joins it
            thread = threading.Thread(target=late)
            thread.start()
            assert waiting.wait(30)
            threads.append(thread)
        if n == 5:
            return None
        return real_published(key)

    threads: list[threading.Thread] = []
    monkeypatch.setattr(registry, "_published", published)
    monkeypatch.setattr(_registry.Flight, "wait", wait)
    assert registry.get("k", paths, lambda c: pytest.fail("built twice")) is built
    threads[0].join(30)
    assert results == [built]
    assert registry.stats().contexts_built == 1


def test_a_thread_that_waited_for_a_build_checks_the_files_when_it_ends(
    held: HeldBuild, tmp_path: Path
) -> None:
    """A thread arriving during a build waits for it (it holds no copy of the files), then
    checks them as any thread finding a published context does (one stat each): one that
    finds them changed or gone goes to stock, and drops what was built from the old file."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 1000)
    registry, paths = Registry(), (str(bundle),)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(registry.get, "k", paths, held)
        assert held.started.wait(30)
        second = pool.submit(registry.get, "k", paths, lambda c: pytest.fail("built"))
        deadline = time.monotonic() + 30
        while not held.waiting:
            assert time.monotonic() < deadline  # (polling for a state: it waits)
            time.sleep(0.001)
        bundle.unlink()
        held.release.set()
        # (the builder's context: loaded from the bytes it read, as stock's load then was;
        # no stat after the build, which under 300 threads waited long for the GIL)
        assert not isinstance(first.result(), Reason)
        assert second.result() is Reason.FILE_CHANGED
    assert held.reads == ["ThreadPoolExecutor-0_0"] or len(held.reads) == 1
    assert registry.stats().entries == 0


@pytest.mark.urllib3_2
def test_the_shim_reads_no_clock_stock_does_not(make_server: ServerFactory, pki: PKI) -> None:
    """A test that mocks ``time.monotonic`` or ``time.perf_counter`` with stock's calls in
    mind (``side_effect=[...]``, freezegun) sees the same calls with the shim: a build and a
    shared connection read the clocks as captured at import."""
    server = make_server()

    def calls() -> Any:
        requests_fastssl.clear()
        with (
            mock.patch("time.monotonic", wraps=time.monotonic) as monotonic,
            mock.patch("time.perf_counter", wraps=time.perf_counter) as perf_counter,
        ):
            got = [
                outcome(lambda: requests.get(server.url, verify=pki.bundle, headers=CLOSE))
                for _ in range(2)
            ]
        return got, monotonic.call_count, perf_counter.call_count

    stock, shim = stock_and_shim(calls)
    assert stock[0] == [("200", None)] * 2
    assert shim == stock


CLOSE = {"Connection": "close"}


def _open_descriptors(path: Path) -> list[str]:
    """The open descriptors naming ``path`` (all of them where the system names none: the
    suite's other threads, a server's or a plugin's, open and close their own meanwhile)."""
    numbers, names = os.listdir("/dev/fd"), []  # (also on macOS and the BSDs: no /proc)
    for fd in numbers:
        try:
            names.append(os.readlink(f"/dev/fd/{fd}"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # (another thread closed it since: not ours)
        except OSError:
            return sorted(numbers)
    return [name for name in names if name == str(path)]


@pytest.mark.parametrize("step", ["_pieces", "_digest"])
def test_an_interrupt_anywhere_in_a_file_check_leaves_no_descriptor_open(
    tmp_path: Path, step: str
) -> None:
    """KeyboardInterrupt at each line and opcode of the check in turn (a trace hook raises it,
    as a signal handler would): stock's reads are OpenSSL's, in C, and cannot leak one."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 200_000)
    identity = _files._identity(str(bundle))
    assert identity is not None
    calls: dict[str, Callable[[], object]] = {
        "_pieces": lambda: list(_files._pieces(str(bundle), identity)),
        "_digest": lambda: _files._digest(_files._pieces(str(bundle), identity)),
    }
    codes = {getattr(_files, step).__code__, _files._pieces.__code__}
    before = _open_descriptors(bundle)
    with open(bundle, "rb"):  # (the count sees an open bundle)
        assert len(_open_descriptors(bundle)) == len(before) + 1
    points = interrupted_at(10**9, codes, calls[step])
    assert points > 3  # (the hook saw the function: 6 points on 3.14, more on 3.11)
    for n in range(1, points + 1):
        interrupted_at(n, codes, calls[step])
        assert _open_descriptors(bundle) == before, f"a descriptor left open at point {n}"


@pytest.mark.subprocess
def test_a_clock_mocked_while_requests_is_imported_is_not_kept(pki: PKI) -> None:
    """A library imports requests lazily, inside a test's ``mock.patch`` of the clocks: after
    the patch, requests must work as stock does (the shim's bounds and statistics keep no
    mock, and call none). urllib3 1.26 keeps the mock itself, stock and shimmed alike."""

    def run(mode: str) -> str:
        return run_python(
            f"""
            from unittest import mock
            import requests_fastssl
            if {mode == "stock"}:
                requests_fastssl.uninstall()
            with mock.patch("time.perf_counter", side_effect=[1.0]) as perf_counter, \\
                    mock.patch("time.monotonic", side_effect=[1.0]) as monotonic:
                import requests
            from _requests_fastssl.cli.server import HTTPSServer, server_context
            import trustme
            ca = trustme.CA()
            ca.cert_pem.write_to_path({str(pki.directory / "clock-ca.pem")!r})
            with HTTPSServer(server_context(ca)) as server:
                got = [requests.get(server.url, verify={str(pki.directory / "clock-ca.pem")!r},
                                    headers={{"Connection": "close"}}).status_code
                       for _ in range(2)]
            print(got, perf_counter.call_count, monotonic.call_count)
            """,
            check=False,
        ).strip()

    stock, shim = run("stock"), run("shim")
    assert shim == stock
    if not URLLIB3_1:
        assert stock == "[200, 200] 0 0"


@pytest.mark.subprocess
def test_a_build_in_flight_at_a_fork_is_stale_in_the_child_for_later_fork_handlers() -> None:
    """A fork handler registered after activation (most are: activation runs at start-up)
    that makes a request in the child sees no flight from the parent to wait for."""
    out = run_python(
        """
        import os, threading, warnings
        warnings.simplefilter("ignore")  # (fork with threads)
        import requests_fastssl  # (activation, before the handler; the core loads later)
        seen, flights = [], []
        os.register_at_fork(after_in_child=lambda: seen.append(flights[0].stale()))
        from _requests_fastssl._registry import Flight, Token
        held, release = threading.Event(), threading.Event()

        def builder():
            token = Token()
            flights.append(Flight(token, 600.0))
            held.set()
            release.wait(60)

        thread = threading.Thread(target=builder)
        thread.start()
        held.wait(60)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if seen == [True] else 3)
        _, status = os.waitpid(pid, 0)
        in_parent = flights[0].stale()
        release.set()
        thread.join()
        print(os.waitstatus_to_exitcode(status), in_parent)
        """
    )
    assert out.strip() == "0 False"
