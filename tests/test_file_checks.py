"""Shared file checks: one check answers for every connection that asked before it started and
for none that asked after; waits for one are bounded and never on one's own stack."""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from support import PKI, ServerFactory, outcome, run_python, same_size

import requests_fastssl
from _requests_fastssl import _files, _flight
from _requests_fastssl._files import FileCheck

_REAL_SAME = FileCheck._same


class Held:
    """Replaces ``FileCheck._same``: the first check reads the file for real, then holds (its
    answer not yet published) until released; every read is counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.read, self.release, self.waiting = (threading.Event() for _ in range(3))
        self.holder: int | None = None
        self.armed = True

    def release_once_waited(self) -> None:
        assert self.waiting.wait(30)
        self.release.set()

    def now(self, check: FileCheck) -> bool:
        self.calls += 1
        answer = _REAL_SAME(check)
        if self.armed and self.holder is None:
            self.holder = threading.get_ident()
            self.read.set()
            assert self.release.wait(30)
        return answer


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    held = Held()
    monkeypatch.setattr(FileCheck, "_same", lambda check: held.now(check))
    real_wait = _flight.Flight.wait

    def wait(flight: _flight.Flight) -> bool:
        held.waiting.set()
        return real_wait(flight)

    monkeypatch.setattr(_flight.Flight, "wait", wait)
    yield held
    held.release.set()


def _check(path: Path) -> FileCheck:
    checks = _files.read_checks((str(path),))
    assert checks is not None
    return checks[0]


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    return thread, out


def test_one_check_answers_for_everyone_who_asked_before_it_started(
    held: Held, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 100_000)
    check = _check(bundle)
    first, first_out = _in_thread(check.unchanged)
    assert held.read.wait(30)
    with ThreadPoolExecutor(16) as pool:
        answers = [pool.submit(check.unchanged) for _ in range(16)]
        assert held.waiting.wait(30)
        held.release.set()
        assert [a.result() for a in answers] == [True] * 16
    first.join(30)
    assert first_out == [True]
    # The held check started before the 16 asked: it cannot answer for them. The next one
    # does, for all that were waiting when it started (a late starter may need one more).
    assert 2 <= held.calls <= 4, held.calls


def test_a_check_that_started_before_the_question_never_answers_it(
    held: Held, tmp_path: Path
) -> None:
    """The held check read the old contents; the file changes in place (a shared mapping to
    pages already dirty: no timestamp moves) and only then is the question asked: the answer
    comes from a read made after it, so it sees the change."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"a" * 4096)
    with open(bundle, "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
        m[:] = b"a" * 4096  # (the page is dirty from here on)
        check = _check(bundle)
        first, first_out = _in_thread(check.unchanged)
        assert held.read.wait(30)
        m[:] = b"b" * 4096
        assert _files._identity(str(bundle)) == check.identity  # (stat cannot tell)
        releaser = threading.Thread(target=held.release_once_waited)
        releaser.start()
        assert check.unchanged() is False
        releaser.join(30)
        m[:] = b"a" * 4096
    first.join(30)
    assert first_out == [True]  # what it read, before the change
    assert held.calls == 2


def test_a_stuck_check_is_waited_for_only_so_long(
    held: Held, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_files, "CHECK_WAIT", 0.2)
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 1000)
    check = _check(bundle)
    first, _ = _in_thread(check.unchanged)
    assert held.read.wait(30)
    assert check.unchanged() is True  # its own read, once the bound passed
    assert held.calls == 2
    held.release.set()
    first.join(30)


def test_a_check_never_waits_on_its_own_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A signal handler or an audit hook asking again inside a check: answered at once."""
    monkeypatch.setattr(_files, "CHECK_WAIT", 30.0)
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(b"x" * 1000)
    check = _check(bundle)
    inner: list[bool] = []
    asked: list[int] = []

    def now(self: FileCheck) -> bool:
        if not asked:
            asked.append(1)
            inner.append(self.unchanged())
        return _REAL_SAME(self)

    monkeypatch.setattr(FileCheck, "_same", now)
    waits: list[int] = []

    def wait(flight: _flight.Flight) -> bool:
        waits.append(1)
        return True

    monkeypatch.setattr(_flight.Flight, "wait", wait)
    assert check.unchanged() is True
    assert inner == [True]
    assert waits == []


def test_a_thread_with_its_own_view_of_the_path_is_answered_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread with a private working directory (``unshare(CLONE_FS)``, unprivileged) names
    another file by the same relative path: a read by another thread, even one started after
    it asked, cannot answer for it."""
    import ctypes

    for name, fill in (("a", b"a"), ("b", b"b")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "bundle.pem").write_bytes(fill * 4096)
    monkeypatch.chdir(tmp_path / "a")
    check = _check(Path("bundle.pem"))
    progress, gate = threading.Event(), threading.Event()
    real = _files._tickets

    class Tickets:  # (the private thread is held once it has asked)
        def __next__(self) -> int:
            ticket = next(real)
            if threading.current_thread().name == "private" and not progress.is_set():
                progress.set()
                assert gate.wait(30)
            return ticket

    monkeypatch.setattr(_files, "_tickets", Tickets())
    answer: list[bool] = []

    def private() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.unshare(0x200) == 0, ctypes.get_errno()  # CLONE_FS: this thread only
        os.chdir(tmp_path / "b")
        answer.append(check.unchanged())
        progress.set()

    other = threading.Thread(target=private, name="private")
    other.start()
    assert progress.wait(30)
    assert check.unchanged() is True  # a's file, read after the private thread asked
    gate.set()
    other.join(30)
    assert answer == [False]
    assert Path.cwd() == tmp_path / "a"


def test_a_check_under_way_at_a_fork_is_not_waited_for_in_the_child(pki: PKI) -> None:
    out = run_python(
        f"""
        import os, threading, warnings
        warnings.simplefilter("ignore")  # (fork with threads)
        from _requests_fastssl import _files
        _files.CHECK_WAIT = 600.0
        check = _files.read_checks(({pki.bundle!r},))[0]
        real, read, release = _files.FileCheck._same, threading.Event(), threading.Event()

        def now(self):
            answer = real(self)
            if threading.current_thread() is not threading.main_thread():
                read.set()
                release.wait(60)
            return answer

        _files.FileCheck._same = now
        thread = threading.Thread(target=check.unchanged)
        thread.start()
        read.wait(60)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if check.unchanged() else 3)
        _, status = os.waitpid(pid, 0)
        release.set()
        thread.join()
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert out.strip() == "0"


@pytest.mark.urllib3_2
def test_requests_behind_a_held_check_get_stocks_answers(
    held: Held, make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """Stock and shim, the same requests: a thread's connection is inside its file check (the
    old contents read) when the bundle is rewritten in place to another CA and a request is
    made; then the bundle is put back and another request made."""
    server = make_server()
    bundle = tmp_path / "bundle.pem"
    trusted, rogue = same_size(Path(pki.bundle).read_bytes(), Path(pki.rogue_bundle).read_bytes())
    bundle.write_bytes(trusted)

    def get() -> Any:
        return outcome(lambda: requests.get(server.url, verify=str(bundle)))

    def run(shimmed: bool) -> list[Any]:
        if shimmed:
            requests_fastssl.install()
        else:
            requests_fastssl.uninstall()
        requests_fastssl.clear()
        held.__init__()  # type: ignore[misc]
        held.armed = False
        with open(bundle, "r+b") as f, mmap.mmap(f.fileno(), len(trusted)) as m:
            m[:] = trusted  # (the pages are dirty from here on: stat cannot see the rewrite)
            results = [get()]  # the build, and its own checks
            held.armed = True
            first, first_out = _in_thread(get)  # a new connection: its check is held
            if shimmed:
                assert held.read.wait(30)
            else:
                first.join(30)  # (stock: its load must come before the rewrite too)
            m[:] = rogue
            releaser = threading.Thread(target=held.release_once_waited)
            if shimmed:
                releaser.start()
            results.append(get())
            if shimmed:
                releaser.join(30)
            m[:] = trusted
            results.append(get())
        first.join(30)
        return [*results, *first_out]

    stock, shim = run(False), run(True)
    assert [o[0] for o in stock] == ["200", "SSLError", "200", "200"]
    assert shim == stock
