"""``python -m requests_fastssl bench | doctor``, run as a user would run them."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import PKI, PRELOADED, ROOT, ServerFactory, clean_env, private_startup, run_python

pytestmark = pytest.mark.subprocess  # every test here runs the CLI in a fresh interpreter

VARIANTS = [
    "stock-verify",
    "stock-noverify",
    "shim-verify",
    "shim-noverify",
    "floor-verify",
    "floor-noverify",
]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:

    full_env = clean_env()
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "requests_fastssl", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=600,
    )


@pytest.fixture(scope="module")
def shim_on(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of programs that get the shim at start-up (a sitecustomize.py of
    their own importing it): doctor's healthy case."""
    return private_startup(tmp_path_factory.mktemp("on"), "import requests_fastssl\n")


@pytest.mark.slow
@pytest.mark.urllib3_2
def test_bench_runs_every_variant_against_its_own_server(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = cli(
        "bench", "--repeat", "1", "--concurrency", "2", "--sequential", "3", "--json", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    # What everything else is made of comes first: the OpenSSL and its price of one load.
    assert lines[0].startswith("Python ")
    assert "OpenSSL" in lines[0]
    assert lines[1].startswith("one CA load: ")
    assert " ms (" in lines[1]
    data = json.loads(out.read_text())
    assert data["machine"]["ca_load_ms"] > 0
    at_import = 1 if PRELOADED else 0  # requests 2.32.3/2.32.4 load certifi at import (R7)
    loads = {
        (r["variant"], r["scenario"]): r["ca_loads"] + r["default_loads"] for r in data["results"]
    }
    per_connection = {"3 seq": 3, "2 thr": 2}
    for scenario, connections in per_connection.items():
        assert {v: loads[(v, scenario)] for v in VARIANTS} == {
            "stock-verify": connections + at_import,  # one per connection
            "stock-noverify": connections + at_import,
            "shim-verify": 1 + at_import,  # one per trust source
            "shim-noverify": 1 + at_import,  # the system store, once, as stock has it
            "floor-verify": 1 + at_import,
            "floor-noverify": 1 + at_import,  # stock's context, once
        }, scenario
    assert [(r["variant"], r["scenario"]) for r in data["results"]][:6] == [
        (v, "3 seq") for v in VARIANTS
    ]
    assert all(r["failed"] == 0 for r in data["results"])
    assert {r["requests"] for r in data["results"]} == {3, 2}
    table = {tuple(line.split()[:3]) for line in lines}
    assert ("shim-verify", "3", "seq") in table
    assert ("shim-verify", "2", "thr") in table
    assert "(n=1)" in proc.stdout  # one run: no spread shown
    assert "± 0.000" not in proc.stdout
    assert "floor: the least any cache can do" in proc.stdout  # the word is defined
    summary = lines[lines.index("summary") + 1 :]
    verdicts = [line for line in summary if not line.strip().startswith("warning")]
    assert [line.split(":")[0].strip() for line in verdicts[:4]] == [
        "3 seq, verify", "3 seq, noverify", "2 thr, verify", "2 thr, noverify",
    ]  # fmt: skip
    assert all(re.search(r"shim \d+\.\d\dx (faster|slower) than stock", v) for v in verdicts[:4])
    assert lines[2].startswith("verdict: shim ")  # (the one line to read first)
    # With one repetition there is no spread to judge, and the line says so.
    assert "warning" not in "\n".join(summary)
    assert all("one run: no noise estimate" in line for line in verdicts[:4])
    assert "keep-alive: calls into the shim per request on a warm pool: 0 (" in proc.stdout
    assert "[12/12] floor-noverify 2 thr (repetition 1), about" in proc.stderr  # progress, ETA
    assert data["interrupted"] is False
    assert set(data["keep_alive_us"]) == {"stock", "shim", "overhead", "shim_calls_per_request"}
    assert data["keep_alive_us"]["shim_calls_per_request"] == 0
    row = data["results"][0]
    assert row["stdev_s"] == 0.0
    assert row["mean_s"] == row["min_s"] == row["max_s"]


@pytest.mark.urllib3_2
def test_bench_no_micro_skips_the_fixed_length_measurements(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = cli(
        "bench", "--no-micro", "--repeat", "1", "--concurrency", "1", "--sequential", "0",
        "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "micro-benchmark" not in proc.stderr  # (the progress lines of the two)
    assert "start-up cost of" not in proc.stderr + proc.stdout
    assert "keep-alive:" not in proc.stdout
    # Said, not silently absent:
    assert "keep-alive and start-up costs: not measured (--no-micro)" in proc.stdout.splitlines()
    data = json.loads(out.read_text())
    assert data["keep_alive_us"] is None
    assert data["startup_ms"] is None
    assert data["verdict"].startswith("verdict: shim ")  # the runs themselves still ran
    assert all(r["failed"] == 0 for r in data["results"])
    assert len(data["results"]) == len(VARIANTS)
    assert "--no-micro" in cli("bench", "--help").stdout


def test_bench_reports_failed_verification_as_a_failure_not_a_time(
    pki: PKI, make_server: object, tmp_path: Path
) -> None:
    # A server whose certificate nobody trusts: verification fails, so the verify rows would
    # time failed handshakes (issue 28): they are not run; the unverified ones still are.
    server = make_server(ca=pki.rogue_ca)  # type: ignore[operator]
    out = tmp_path / "bench.json"
    proc = cli(
        "bench", "--repeat", "1", "--concurrency", "1", "--sequential", "0", "--url", server.url,
        "--ca", pki.bundle, "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    failure = f"verify={pki.bundle}: FAILED against {server.url} (SSLError: "
    assert f"python -m requests_fastssl: error: {failure}" in proc.stderr
    lines = proc.stdout.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    assert lines[verdict + 1].startswith(f"  {failure}")  # right under the verdict
    rows = {line.split()[0] for line in lines if line.strip()}
    assert {"stock-noverify", "shim-noverify", "floor-noverify"} <= rows
    assert not rows & {"stock-verify", "shim-verify", "floor-verify"}  # not timed
    assert "1 thr, noverify: shim " in proc.stdout
    data = json.loads(out.read_text())
    assert data["verify_failure"].startswith(failure)
    assert {r["variant"] for r in data["results"]} == {
        "stock-noverify", "shim-noverify", "floor-noverify"
    }  # fmt: skip


def test_bench_time_left_follows_each_variants_pace() -> None:
    """The estimate of the time left (issue 28: it overshot): each child to come at the last
    duration of its kind, else its variant's pace so far; a fixed price per request would
    price the shim's runs at stock's."""
    from _requests_fastssl.cli.engine import Scenario
    from _requests_fastssl.cli.eta import Remaining

    small, big = Scenario(1, 20), Scenario(300, 1)
    eta = Remaining()
    assert eta.left([("stock-verify", small, True)]) is None  # nothing ran yet
    eta.record("stock-verify", small, True, 3.0)  # 30 units: 0.1 s each
    eta.record("shim-verify", small, True, 0.6)  # 0.02 s each
    eta.record("stock-verify", small, False, 2.0)
    queue = [
        ("stock-verify", small, False),  # its own last time: 2.0
        ("shim-verify", small, False),  # no timed run yet: its warm-up's, 0.6
        ("shim-verify", big, True),  # the shim's pace: 310 units x (0.6 / 30)
        ("floor-verify", big, False),  # never ran: everyone's pace, 5.6 s / 90 units
    ]
    expected = 2.0 + 0.6 + 310 * 0.6 / 30 + 310 * 5.6 / 90
    assert eta.left(queue) == pytest.approx(expected)
    eta.record("stock-verify", small, False, 4.0)  # the last one counts, not the first
    assert eta.left(queue[:1]) == pytest.approx(4.0)


def test_bench_uses_the_ca_given_for_an_external_server(
    pki: PKI, make_server: object, tmp_path: Path
) -> None:
    server = make_server()  # type: ignore[operator]
    out = tmp_path / "bench.json"
    proc = cli(
        "bench", "--repeat", "1", "--concurrency", "1", "--sequential", "0",
        "--url", server.url, "--ca", pki.bundle, "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert all(r["failed"] == 0 for r in data["results"])
    assert f"(1 certificate: {pki.bundle}" in proc.stdout  # the --ca file, measured


def _interrupted_bench(tmp_path: Path, after: str) -> tuple[int, str, str, dict[str, Any]]:
    """bench --json, sent a real SIGINT once stderr shows a line starting with ``after``."""
    import os
    import signal

    out = tmp_path / "bench.json"
    env = clean_env()
    # As at a terminal, whatever this test runs under: a shell's background job starts with
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'requests_fastssl'; "
        "runpy.run_module('requests_fastssl', run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", start, "bench", "--repeat", "3", "--json", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,  # a process group of its own, as a terminal's job is
    )
    assert proc.stderr is not None
    progress = []
    for line in proc.stderr:  # wait until the first timed run has finished
        progress.append(line)
        if line.startswith(after):
            break
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: to the whole group
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, "".join(progress) + stderr, json.loads(out.read_text())


def test_bench_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    # (after the first timed run has finished)
    returncode, stdout, stderr, data = _interrupted_bench(tmp_path, "[2/")
    assert returncode == 130, stderr
    assert "interrupted: the table shows the runs that finished" in stderr
    assert "Traceback" not in stderr
    assert any(line.split()[:3] == ["stock-verify", "20", "seq"] for line in stdout.splitlines())
    assert stdout.splitlines()[2] == (
        "verdict (PARTIAL: interrupted; of the runs that finished): no comparison (no scenario "
        "has runs of all of stock, shim and floor)"
    )
    assert "requests failed" not in stdout
    assert "FAILED" not in stdout
    assert data["interrupted"] is True
    assert [r["variant"] for r in data["results"]] == ["stock-verify"]
    assert data["keep_alive_us"]["shim_calls_per_request"] == 0  # (measured before the runs)


def test_bench_stops_cleanly_on_ctrl_c_before_any_run(tmp_path: Path) -> None:
    returncode, stdout, stderr, data = _interrupted_bench(tmp_path, "micro-benchmark")
    assert returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted: the table shows the runs that finished" in stderr
    assert (
        "verdict (PARTIAL: interrupted; of the runs that finished): no comparison (no run finished)"
    ) in stdout.splitlines()
    assert "requests failed" not in stdout  # (none did: the run was stopped)
    assert data["interrupted"] is True
    assert data["results"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--concurrency", "0"], "need integers from 1 to 2000"),
        (["bench", "--concurrency", "100000"], "need integers from 1 to 2000"),
        (["bench", "--concurrency", "3,x"], "not a comma-separated list"),
        (["bench", "--concurrency", "1,,30"], "not a comma-separated list"),
        (["bench", "--repeat", "-1"], "need an integer from 1 to 100"),
        (["bench", "--url", "http://127.0.0.1:9/"], "--url: need an https:// URL"),
        (["bench", "--url", "https://"], "--url: need an https:// URL with a host"),
        (["bench", "--json", "/missing/dir/x.json"], "--json: cannot write to"),
        (["bench", "--sequential", "-1"], "need an integer from 0 to 10000"),
        (["bench", "--ca", "/etc/hostname"], "--ca: only with --url"),
        (["bench", "--url", "https://127.0.0.1:9/", "--ca", "/missing.pem"], "no such file"),
        (["bench", "--url", "https://127.0.0.1:9/", "--ca", "/etc/hostname"], "cannot load"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_refused_clearly(args: list[str], message: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stderr.startswith("usage: ") or proc.stderr.startswith(
        "python -m requests_fastssl: error: "
    )


@pytest.mark.urllib3_2
def test_doctor_reports_versions_status_bundle_cost_and_self_test(
    pki: PKI, shim_on: dict[str, str]
) -> None:
    proc = cli("doctor", env={"REQUESTS_CA_BUNDLE": pki.bundle, **shim_on})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("requests-fastssl ")
    assert any(line.startswith("OpenSSL ") for line in lines)
    assert any("requests 2." in line and "urllib3 " in line for line in lines)
    assert "  shim in this process: active" in lines
    assert f"trust source for verify=True: {pki.bundle} (from REQUESTS_CA_BUNDLE)" in lines
    # The trust source asked about, measured: one certificate costs little to load.
    assert any(line.startswith("one CA load: ") and "(1 certificate," in line for line in lines)
    assert any(line.startswith("verdict: little to gain") for line in lines), lines
    # The self-test's real requests moved the counters: one build, three connections.
    assert any(line.endswith(": 200, 200, 200") for line in lines), lines
    assert (
        "  self-test: 3 connection(s) used shared contexts; 1 context(s) built with 1 CA "
        "load(s); stock requests would have made 3" in lines
    )


def test_doctor_names_the_activation_modes_in_effect(tmp_path: Path) -> None:
    startup = tmp_path / "startup"
    startup.mkdir()
    (startup / "sitecustomize.py").write_text("import requests_fastssl\n")
    plain = cli("doctor", "--no-self-test")
    assert "  `python -m requests_fastssl run`: no (this process was not started by it)" in (
        plain.stdout
    )
    assert "pytest plugin: registered" in plain.stdout
    assert "self-test" not in plain.stdout
    env = {"PYTHONPATH": str(startup), "REQUESTS_FASTSSL_DISABLE": "1"}
    with_line = cli("doctor", "--no-self-test", env=env)
    assert (
        f"  start-up file importing requests_fastssl: yes ({startup / 'sitecustomize.py'})"
        in with_line.stdout
    )
    assert "  REQUESTS_FASTSSL_DISABLE=1: the shim stays off" in with_line.stdout
    assert with_line.returncode == 1  # off
    doctor = [sys.executable, "-m", "requests_fastssl", "doctor", "--no-self-test"]
    under_run = cli("run", "--", *doctor)
    assert "  `python -m requests_fastssl run`: yes (its start-up hook is on PYTHONPATH)" in (
        under_run.stdout
    )
    assert under_run.returncode == 0, under_run.stderr


def test_doctor_fails_when_the_trust_source_cannot_be_loaded(tmp_path: Path) -> None:
    proc = cli("doctor", env={"REQUESTS_CA_BUNDLE": str(tmp_path / "missing.pem")})
    assert proc.returncode == 1  # every verify=True request would fail
    assert "one CA load: failed" in proc.stdout


def test_doctor_says_why_the_shim_is_off() -> None:
    proc = cli("doctor", env={"REQUESTS_FASTSSL_DISABLE": "1"})
    assert proc.returncode == 1
    assert "shim in this process: disabled: REQUESTS_FASTSSL_DISABLE=1" in proc.stdout
    assert "requests' default (certifi)" in proc.stdout


def test_console_script_is_declared() -> None:
    out = run_python(
        """
        from importlib.metadata import entry_points
        (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "requests-fastssl"]
        print(ep.value)
        """
    )
    assert out.strip() == "_requests_fastssl.cli:main"


@pytest.mark.urllib3_2
def test_doctor_url_says_whether_the_request_shared_and_why_not(
    pki: PKI, make_server: ServerFactory, tmp_path: Path, shim_on: dict[str, str]
) -> None:
    server = make_server(client_certs="optional")
    shared = cli(
        "doctor", "--url", server.url, "--verify", pki.bundle, "--cert", pki.client_a.combined,
        env=shim_on,
    )  # fmt: skip
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert "self-test" not in shared.stdout  # --url replaces it
    assert "HTTP 200" in shared.stdout
    assert (
        "shared: yes, 1 TLS connection(s) used a shared context (built now, with 1 CA load(s))"
        in (shared.stdout)
    )

    directory = tmp_path / "cas"
    directory.mkdir()
    aside = cli("doctor", "--url", server.url, "--verify", str(directory))
    assert aside.returncode == 1  # the request raised (an empty CA directory trusts nothing)
    assert "SSLError" in aside.stdout
    assert "shared: no, left to stock requests (ca-directory)" in aside.stdout

    not_a_cert = cli("doctor", "--url", server.url, "--verify", pki.bundle, "--cert", pki.bundle)
    assert not_a_cert.returncode == 1
    assert "shared: no, building its context raised stock's own error" in not_a_cert.stdout

    off = cli(
        "doctor", "--url", server.url, "--verify", pki.bundle, env={"REQUESTS_FASTSSL_DISABLE": "1"}
    )
    assert off.returncode == 1
    assert "HTTP 200" in off.stdout
    assert "shared: no, the shim is off in this process" in off.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cert", "c.pem"], "--cert: only with --url"),
        (["--url", "http://127.0.0.1/"], "--url: need an https:// URL with a host"),
        (["--url", "https://127.0.0.1/", "--verify", "nowhere"], "--verify: need true, false or"),
        (["--url", "https://127.0.0.1/", "--key", "k.pem"], "--key: only with --cert"),
        (["--url", "https://127.0.0.1/", "--cert", "nowhere.pem"], "--cert: no such file"),
    ],
)
def test_doctor_url_arguments_are_checked_first(args: list[str], message: str) -> None:
    proc = cli("doctor", *args)
    assert proc.returncode == 2
    assert f"error: {message}" in proc.stderr
    assert proc.stdout == ""  # nothing ran


def test_doctor_url_reports_any_error_the_request_raises(tmp_path: Path) -> None:
    """requests raises more than RequestException (an OSError for a CA bundle that does not
    exist): doctor reports it as the request's outcome, not as a traceback."""
    missing = str(tmp_path / "missing.pem")
    proc = cli("doctor", "--url", "https://127.0.0.1:1/", env={"REQUESTS_CA_BUNDLE": missing})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "request: GET https://127.0.0.1:1/ (verify=True, cert=None): OSError: " in proc.stdout


def test_doctor_measures_the_trust_source_it_is_asked_about(
    tmp_path: Path, shim_on: dict[str, str]
) -> None:
    import certifi

    big = cli("doctor", "--no-self-test", "--verify", certifi.where(), env=shim_on)
    assert f"trust source for verify={certifi.where()!r}: {certifi.where()} (--verify)" in (
        big.stdout
    )
    assert "verdict: the shim saves about" in big.stdout  # certifi costs milliseconds
    directory = cli("doctor", "--no-self-test", "--verify", str(tmp_path), env=shim_on)
    assert "a CA directory is read lazily" in directory.stdout
    assert "verdict: little to gain here" in directory.stdout
    unverified = cli("doctor", "--no-self-test", "--verify", "false", env=shim_on)
    assert "trust source for verify=False: none checked, but stock loads the system store" in (
        unverified.stdout
    )
    assert all(p.returncode == 0 for p in (big, directory, unverified)), big.stderr


@pytest.mark.parametrize(
    ("setup", "command", "status", "message"),
    [
        (None, "no-such-command-anywhere", 127, "no-such-command-anywhere: command not found"),
        (None, "./missing-script", 127, "./missing-script: No such file or directory"),
        ("plain", "./script", 126, "./script: Permission denied"),
        ("dir", "./folder", 126, "./folder: Is a directory"),
        ("no-shebang", "./noshebang", 126, "./noshebang: Exec format error"),
    ],
)
def test_run_reports_exec_errors_as_a_shell_does(
    tmp_path: Path, setup: str | None, command: str, status: int, message: str
) -> None:

    if setup == "plain":
        (tmp_path / "script").write_text("#!/bin/sh\necho hi\n")
    elif setup == "dir":
        (tmp_path / "folder").mkdir()
    elif setup == "no-shebang":
        script = tmp_path / "noshebang"
        script.write_bytes(b"\x00\x01 not a program")
        script.chmod(0o755)
    proc = subprocess.run(
        [sys.executable, "-m", "requests_fastssl", "run", "--", command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**clean_env(), "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == status, proc.stderr
    assert proc.stderr.strip() == f"python -m requests_fastssl: error: {message}"
    assert "Traceback" not in proc.stderr


@pytest.mark.urllib3_2
def test_run_report_prints_the_counters_at_exit(pki: PKI, make_server: ServerFactory) -> None:
    server = make_server()
    script = (
        f"import requests\nfor _ in range(3): requests.get({server.url!r}, verify={pki.bundle!r})\n"
    )
    proc = cli("run", "--report", "--", sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("requests_fastssl report")]
    assert "3 TLS connections used shared contexts (1 context built with 1 CA load" in line
    assert "none left to stock" in line
    quiet = cli("run", "--", sys.executable, "-c", script)
    assert "requests_fastssl report" not in quiet.stderr  # only when asked
    no_requests = cli("run", "--report", "--", sys.executable, "-c", "pass")
    assert "requests_fastssl report" not in no_requests.stderr  # nothing to say


@pytest.mark.parametrize("target", ["directory", "dangling", "/dev/full"])
def test_bench_json_target_is_checked_before_any_work(tmp_path: Path, target: str) -> None:
    if target == "directory":
        path = str(tmp_path)
    elif target == "dangling":
        path = str(tmp_path / "link.json")
        Path(path).symlink_to(tmp_path / "missing" / "x.json")
    else:
        path = target
    proc = cli("bench", "--json", path)
    assert proc.returncode == 2
    assert "error: --json: " in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""  # no run started


def test_bench_url_is_probed_with_one_request_first() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        proc = cli("bench", "--url", f"https://127.0.0.1:{port}/", "--repeat", "1")
    assert proc.returncode == 1  # (a finding about the server, not a bad argument)
    assert f"error: --url: https://127.0.0.1:{port}/ cannot be reached (ConnectionError" in (
        proc.stderr
    )
    assert "warm-up" not in proc.stderr  # no run started


@pytest.mark.parametrize(
    ("layout", "command", "status", "message"),
    [
        ("dir-in-path", "tool", 127, "tool: command not found"),  # bash skips directories
        ("dangling-in-path", "tool", 127, "tool: command not found"),
        ("noexec-in-path", "tool", 126, "tool: Permission denied"),
        (None, "", 127, ": command not found"),
        ("dangling-path", "./tool", 127, "./tool: No such file or directory"),
    ],
)
def test_run_searches_path_as_bash_does(
    tmp_path: Path, layout: str | None, command: str, status: int, message: str
) -> None:
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if layout == "dir-in-path":
        (bin_dir / "tool").mkdir()
    elif layout == "dangling-in-path":
        (bin_dir / "tool").symlink_to(tmp_path / "nowhere")
    elif layout == "noexec-in-path":
        (bin_dir / "tool").write_text("#!/bin/sh\n")
    elif layout == "dangling-path":
        (tmp_path / "tool").symlink_to(tmp_path / "nowhere")
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = subprocess.run(
        [sys.executable, "-m", "requests_fastssl", "run", "--", command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**clean_env(), "PATH": path, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == status, proc.stderr
    assert proc.stderr.strip() == f"python -m requests_fastssl: error: {message}"


def test_run_keeps_empty_pythonpath_entries(tmp_path: Path) -> None:
    """An empty PYTHONPATH entry means the current directory: run must not drop it."""
    import os

    (tmp_path / "localmod.py").write_text("WHERE = 'here'\n")
    script = "import localmod, sys; print(localmod.WHERE)"
    env = {**clean_env(), "PYTHONPATH": f"{ROOT}{os.pathsep}"}
    argv = [sys.executable, "-m", "requests_fastssl", "run", "--", sys.executable, "-c", script]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "here"


def test_bench_json_check_neither_opens_a_fifo_nor_creates_files(tmp_path: Path) -> None:
    import argparse
    import os
    import threading

    from _requests_fastssl.cli.checks import check_json_target

    parser = argparse.ArgumentParser()
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    # No reader: opening it for writing would block for ever, and with a reader it would
    # hand that reader an end of file before the results.
    checked = threading.Thread(target=check_json_target, args=(parser, str(fifo)), daemon=True)
    checked.start()
    checked.join(timeout=10)
    assert not checked.is_alive()
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "target.json")  # dangling, its folder exists: fine, later
    check_json_target(parser, str(link))
    assert not (tmp_path / "target.json").exists()  # nothing created by the check
    kept = tmp_path / "kept.json"
    kept.write_text("the user's data")
    check_json_target(parser, str(kept))
    assert kept.read_text() == "the user's data"


# --- doctor on a bad day (issue 28) -------------------------------------------------------------


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts TCP connections and never answers the TLS handshake (a stuck load
    balancer): the kernel completes the connection from the listen backlog, nobody reads."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        listener.close()


def test_doctor_gives_up_on_a_silent_server_after_its_timeout(
    silent_server: str, pki: PKI, shim_on: dict[str, str]
) -> None:
    proc = cli(
        "doctor", "--url", silent_server, "--verify", pki.bundle, "--timeout", "1", env=shim_on
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("  request: ")]
    assert "ReadTimeout" in line
    assert "no answer within 1 s" in line
    assert proc.stdout.splitlines()[-1].startswith("result: ")
    assert "the request failed (ReadTimeout)" in proc.stdout.splitlines()[-1]


def test_doctor_stops_on_a_real_sigint_with_one_line(silent_server: str, pki: PKI) -> None:
    import signal

    # As at a terminal, whatever this test runs under (a background job ignores SIGINT).
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'requests_fastssl'; "
        "runpy.run_module('requests_fastssl', run_name='__main__')"
    )
    command = [sys.executable, "-c", start, "doctor", "--url", silent_server]
    command += ["--verify", pki.bundle, "--timeout", "60"]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
        cwd=ROOT, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:  # (doctor flushes each line; the request comes after the verdict)
        if line.startswith("verdict: "):
            break
    os.killpg(proc.pid, signal.SIGINT)  # (waiting for the silent server now, or about to)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert len(err.splitlines()) == 1
    assert err.endswith(": error: interrupted\n")


def test_doctor_json_is_one_document_and_its_status_is_the_exit_status(
    shim_on: dict[str, str],
) -> None:
    import certifi

    healthy = cli("doctor", "--json", "--no-self-test", "--verify", certifi.where(), env=shim_on)
    found = json.loads(healthy.stdout)
    assert healthy.returncode == found["exit_status"] == 0, healthy.stdout
    assert found["findings"] == []
    assert found["shim"]["state"] == "active"
    assert found["programs"]["active"] is found["under_run"]["active"] is True
    assert found["programs"]["via"] == [f"sitecustomize {shim_on['PYTHONPATH']}/sitecustomize.py"]
    assert found["trust_source"]["ca_load_ms"] > 0
    assert found["trust_source"]["verdict"].startswith("the shim saves about")
    off = cli(
        "doctor", "--json", "--no-self-test", env={"REQUESTS_FASTSSL_DISABLE": "1", **shim_on}
    )
    found = json.loads(off.stdout)
    assert off.returncode == found["exit_status"] == 1
    assert found["programs"]["active"] is False
    assert found["programs"]["state"] == "disabled"
    assert found["findings"] == [
        "your programs would not get the shim (disabled: REQUESTS_FASTSSL_DISABLE=1)",
        "the shim is not active here (disabled: REQUESTS_FASTSSL_DISABLE=1)",
    ]


def test_doctors_verdict_matches_its_exit_status(shim_on: dict[str, str]) -> None:
    """Disabled: the verdict may not say the shim saves time, and the last line says why 1."""
    import certifi

    proc = cli("doctor", "--no-self-test", "--verify", certifi.where(),
               env={"REQUESTS_FASTSSL_DISABLE": "1", **shim_on})  # fmt: skip
    assert proc.returncode == 1
    verdicts = [line for line in proc.stdout.splitlines() if line.startswith("verdict: ")]
    assert verdicts[0].startswith("verdict: the shim would save about")
    assert "but your programs do not get it" in verdicts[0]
    assert proc.stdout.splitlines()[-1].startswith(
        "result: 2 finding(s): your programs would not get the shim (disabled"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "https://127.0.0.1:99999/"], "--url: need a port from 1 to 65535"),
        (["--url", "https://127.0.0.1:0/"], "--url: need a port from 1 to 65535"),
        (["--url", "https://127.0.0.1/", "--cert", "."], "--cert: '.' is a directory"),
        (["--timeout", "0"], "need seconds from more than 0 to 600"),
        (["--url", "https://[::1/"], "--url: not a URL: 'https://[::1/'"),
        (["--url", "https://exa mple.com/"], "--url: requests refuses 'https://exa mple.com/'"),
        (["--url", "https://127.0.0.1/", "--cert", "/dev/null"], "is not a regular file"),
        (["--verify", "FIFO"], "--verify: 'FIFO' is neither a regular file nor a directory"),
    ],
)
def test_doctor_checks_its_arguments_first_with_its_own_usage(
    args: list[str], message: str, tmp_path: Path
) -> None:
    if "FIFO" in args:  # (a FIFO opened for the load would block doctor for ever)
        fifo = tmp_path / "FIFO"
        os.mkfifo(fifo)
        args = [str(fifo) if a == "FIFO" else a for a in args]
        message = message.replace("'FIFO'", repr(str(fifo)))
    proc = cli("doctor", *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stderr.startswith("usage: python -m requests_fastssl doctor ")
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def _committed_results() -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (ROOT / "benchmarks").glob("openssl-*/results.*")}


@pytest.mark.parametrize("interpreter", ["bare", "failing-bench"])
def test_benchmarks_run_sh_leaves_the_committed_results_alone_when_it_fails(
    tmp_path: Path, interpreter: str
) -> None:
    """run.sh uses the interpreter it is given; one without the package stops it before any
    work, and a bench that fails half-way leaves the committed files as they were (tee used
    to empty them)."""
    wrapper = tmp_path / interpreter
    if interpreter == "bare":  # (no site-packages: neither the package nor trustme)
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    else:  # (the checks pass; the bench prints half a table and fails)
        wrapper.write_text(
            f'#!/bin/sh\nif [ "$1" = -m ]; then echo "half a table"; exit 1; fi\n'
            f'exec {sys.executable} "$@"\n'
        )
    wrapper.chmod(0o755)
    before = _committed_results()
    assert before  # (the files the README quotes)
    proc = subprocess.run(
        ["bash", "benchmarks/run.sh", str(wrapper)],
        capture_output=True, text=True, cwd=ROOT, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == (2 if interpreter == "bare" else 1), proc.stderr
    if interpreter == "bare":
        assert "cannot import requests_fastssl and trustme" in proc.stderr
    assert _committed_results() == before


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_threads_benchmark_runs_the_tree_it_is_given(tmp_path: Path) -> None:
    """``benchmarks/threads.py``'s ``shim=DIR`` is the package in DIR that its children import,
    not the installed one: a copy runs, and a copy whose package cannot be imported fails the
    run; a variant it does not know is refused before any run."""
    import shutil

    good, broken = tmp_path / "good", tmp_path / "broken"
    for tree in (good, broken):
        for package in ("requests_fastssl", "_requests_fastssl"):
            shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("*.pyc"))
    (broken / "requests_fastssl" / "__init__.py").write_text("raise ImportError('the copy')\n")

    def threads(*variants: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "benchmarks/threads.py", "--threads", "2", "--repeat", "1"]
        return subprocess.run(
            [*command, *variants],
            capture_output=True, text=True, cwd=ROOT, env=clean_env(), timeout=300,
        )  # fmt: skip

    ran = threads("floor", f"shim={good}", "floor-lazy")
    assert ran.returncode == 0, ran.stderr
    rows = [line.split() for line in ran.stdout.splitlines() if line.lstrip().startswith("2 ")]
    assert [row[1] for row in rows] == ["floor", f"shim={good}", "floor-lazy"]
    assert rows[0][3:6] == ["1.000", "1.000", "1.000"]  # (each ratio is to the first variant)
    failed = threads("floor", f"shim={broken}")
    assert failed.returncode != 0
    assert "ImportError: the copy" in failed.stderr
    spec = importlib.util.spec_from_file_location("threads", ROOT / "benchmarks" / "threads.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = {"wall": 1.0, "failed": 0}
    bad = {"wall": 0.5, "failed": 1}
    runs = {"floor": [run, run, bad], "shim": [bad, run, run]}
    assert module._served(runs) == {"floor": [run], "shim": [run]}  # (whole repetitions)
    refused = threads("floor", "shim=")
    assert refused.returncode == 2
    assert "shim=DIR" in refused.stderr
    assert "threads:" not in refused.stderr  # (refused before any run)


def _row(
    variant: str, scenario: str, runs: list[float], failed: int = 0, rss: float = 50.0
) -> dict[str, Any]:
    mean = sum(runs) / len(runs)
    sd = (sum((r - mean) ** 2 for r in runs) / (len(runs) - 1)) ** 0.5 if len(runs) > 1 else 0.0
    return {"variant": variant, "scenario": scenario, "runs": [{"wall": r} for r in runs],
            "mean_s": mean, "stdev_s": sd, "failed": failed, "rss_mean_mb": rss}  # fmt: skip


def test_bench_summary_reads_at_a_glance() -> None:
    """One verdict first; a slower shim reads 'slower', never '0.84 times faster'; one noise
    warning for the run, not one per line."""
    from _requests_fastssl.cli.table import faster, overall, verdicts

    assert faster(5.1) == "5.10x faster"
    assert faster(1 / 1.2) == "1.20x slower"
    quiet = [
        _row("stock-verify", "10 thr", [1.0, 1.0, 1.0]),
        _row("shim-verify", "10 thr", [0.2, 0.2, 0.2], rss=55.0),
        _row("floor-verify", "10 thr", [0.2, 0.2, 0.2]),
        _row("stock-verify", "30 thr", [3.0, 3.0, 3.0]),
        _row("shim-verify", "30 thr", [0.624, 0.624, 0.624]),
        _row("floor-verify", "30 thr", [0.6, 0.6, 0.6]),
        _row("stock-verify", "1 thr", [0.10, 0.10, 0.10]),
        _row("shim-verify", "1 thr", [0.12, 0.12, 0.12]),
        _row("floor-verify", "1 thr", [0.10, 0.10, 0.10]),
    ]
    rows = verdicts(quiet)
    assert [r["line"].split(";")[0] for r in rows] == [
        "10 thr, verify: shim 5.00x faster (± 0.00) than stock",
        "30 thr, verify: shim 4.81x faster (± 0.00) than stock",
        "1 thr, verify: shim 1.20x slower (± 0.00) than stock",
    ]
    assert (
        "+0.0% ± 0.0% against the floor (median of 3 per-repetition ratios), peak memory +10%"
        in (rows[0]["line"])
    )
    assert rows[2]["line"].endswith("(one request per process: the cold start)")
    # The cold start is not a floor figure: the verdict's floor median leaves it out.
    assert overall(rows) == (
        "verdict: shim 1.2x slower to 5.0x faster than stock; +2% against the floor "
        "(median of 2 comparisons, +0% to +4%)"
    )
    # Only cold rows (`--concurrency 1 --sequential 0`): their floor figures, as a range.
    colds = [{"speed": 0.9, "off": 7.0, "cold": True}, {"speed": 1.0, "off": 5.0, "cold": True}]
    assert overall(colds).endswith("(median of 2 comparisons, +5% to +7%)")
    # Per repetition: one slow repetition of the floor moves the median of ratios, not by
    # its weight in a mean.
    skewed = verdicts([
        _row("stock-verify", "10 thr", [1.0, 1.0, 1.0]),
        _row("shim-verify", "10 thr", [0.21, 0.22, 0.21]),
        _row("floor-verify", "10 thr", [0.2, 0.2, 0.6]),
    ])  # fmt: skip
    assert f"{skewed[0]['off']:+.1f}" == "+5.0"
    both = [{"speed": 4.2, "off": 3.0}, {"speed": 5.12, "off": -2.0}]
    assert overall(both).startswith("verdict: shim 4.2-5.1x faster than stock; ")
    slow = [{"speed": 1 / 1.26, "off": 3.0}, {"speed": 1 / 1.04, "off": 1.0}]
    assert overall(slow).startswith("verdict: shim 1.0-1.3x slower than stock; ")
    noisy = [_row(r["variant"], r["scenario"], [r["mean_s"] * f for f in (0.7, 1.0, 1.3)])
             for r in quiet]  # fmt: skip
    assert all(r["noise"] > 5 for r in verdicts(noisy))
    # No ratio: the verdict names the cause, and claims no failure that did not happen.
    failed = [{"line": "x: requests failed; no comparison", "failed": True}]
    assert overall(failed) == "verdict: no comparison (requests failed)"
    assert overall([], ran=False) == "verdict: no comparison (no run finished)"
    assert overall([]) == (
        "verdict: no comparison (no scenario has runs of all of stock, shim and floor)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--json", ""], "--json: an empty file name"),
        (["--json", "new.json/"], "--json: 'new.json/' is a directory"),
        (["--url", "https://[::1/"], "--url: not a URL"),
        (["--url", "https://127.0.0.1:9/", "--ca", "/dev/null"], "is not a regular file"),
    ],
)
def test_bench_refuses_what_would_fail_later(args: list[str], message: str) -> None:
    proc = cli("bench", *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stderr.startswith("usage: python -m requests_fastssl bench ")
    assert "Traceback" not in proc.stderr


@pytest.fixture
def trickling_server(pki: PKI) -> Iterator[str]:
    """A TLS server that completes the handshake, then sends its headers one byte at a time,
    each within any read timeout, and never ends them (a server that trickles)."""
    import socket
    import threading

    from _requests_fastssl.cli.server import server_context

    ctx = server_context(pki.ca, ("127.0.0.1",))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(65536)
                    while not stop.wait(0.2):  # (a pace, not a synchronisation)
                        tls.sendall(b"H")
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_doctor_bounds_the_whole_request_not_only_each_read(
    trickling_server: str, pki: PKI, shim_on: dict[str, str]
) -> None:
    proc = cli(
        "doctor", "--url", trickling_server, "--verify", pki.bundle, "--timeout", "1", env=shim_on
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("  request: ")]
    assert "no complete answer within 3 s" in line
    assert proc.stdout.splitlines()[-1].endswith("the request did not end in time")


def test_doctor_reports_a_trust_source_that_is_not_a_file(
    tmp_path: Path, shim_on: dict[str, str]
) -> None:
    fifo = tmp_path / "bundle"
    os.mkfifo(fifo)
    env = {"REQUESTS_CA_BUNDLE": str(fifo), **shim_on}
    proc = cli("doctor", "--no-self-test", "--json", env=env)
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["trust_source"]["error"] == "neither a regular file nor a directory"
    assert doc["result"].startswith("1 finding(s): the trust source is not a file")  # no prefix


@pytest.mark.parametrize("value", ["0", "off"])
def test_doctor_reads_the_kill_switch_as_the_shim_does(value: str, shim_on: dict[str, str]) -> None:
    proc = cli("doctor", "--no-self-test", env={"REQUESTS_FASTSSL_DISABLE": value, **shim_on})
    assert proc.returncode == 0, proc.stdout
    assert "REQUESTS_FASTSSL_DISABLE" not in proc.stdout  # "0" and "off" do not disable
    assert "shim in this process: active" in proc.stdout


def test_a_closed_output_pipe_ends_the_command_quietly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "requests_fastssl", "doctor", "--no-self-test"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(), cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()  # (the reader is gone before the first line: `| head -0`)
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141  # (a shell's status for SIGPIPE; 1 is a finding)
    assert "Traceback" not in stderr
    assert "BrokenPipeError" not in stderr


def test_doctor_advice_names_what_to_try_for_each_failure() -> None:
    import requests

    from _requests_fastssl.cli.report import advice

    cases = {
        requests.exceptions.ProxyError("x"): "the proxy failed",
        requests.exceptions.SSLError("[SSL: WRONG_VERSION_NUMBER] wrong version number"): (
            "does not speak TLS on that port"
        ),
        requests.exceptions.SSLError("EOF occurred in violation of protocol"): (
            "closed the connection during the TLS handshake"
        ),
        requests.exceptions.SSLError("certificate verify failed"): "check --verify",
        requests.exceptions.ConnectionError("RemoteDisconnected('Remote end closed')"): (
            "the server's answer was not HTTP"
        ),
        requests.exceptions.ConnectionError("Connection refused"): "could not connect",
        requests.exceptions.ChunkedEncodingError("x"): "cut short or garbled",
        requests.exceptions.InvalidURL("x"): "the request itself failed",
        FileNotFoundError("x"): "check the files named by --verify",
    }
    for exc, expected in cases.items():
        assert expected in advice(exc, 5), exc


def test_bench_names_failed_requests_under_its_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    from _requests_fastssl.cli.table import print_table

    def summary(variant: str, scenario: str, failed: int) -> dict[str, Any]:
        row = _row(variant, scenario, [0.1, 0.1], failed)
        return {**row, "min_s": 0.1, "max_s": 0.1, "per_request_ms": 1.0, "ca_loads": 1,
                "default_loads": 0, "rss_mean_mb": 30.0, "rss_stdev_mb": 0.0,
                "server_cpu_share": 0.1}  # fmt: skip

    rows = [summary(f"{k}-verify", s, 61 if (k, s) == ("shim", "80 thr") else 0)
            for s in ("5 thr", "80 thr") for k in ("stock", "shim", "floor")]  # fmt: skip
    lines = print_table(rows, "test", 2)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("verdict: shim ")
    assert out[1] == (
        "  61 request(s) FAILED (the failed column): those comparisons have no ratio and the "
        "exit status is 1"
    )
    assert lines[:2] == [out[0], out[1].strip()]
    assert "80 thr, verify: requests failed; no comparison" in lines


def test_bench_shows_no_spread_for_a_single_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`--repeat 1` (or an interrupted run) has no σ to show: "± 0.000" would read as a
    perfectly steady measurement."""
    from _requests_fastssl.cli.table import print_table

    def summary(variant: str, runs: list[float]) -> dict[str, Any]:
        row = _row(variant, "5 thr", runs)
        return {**row, "min_s": min(runs), "max_s": max(runs), "per_request_ms": 1.0,
                "ca_loads": 1, "default_loads": 0, "rss_mean_mb": 30.0, "rss_stdev_mb": 0.0,
                "server_cpu_share": 0.1}  # fmt: skip

    print_table([summary("stock-verify", [0.5]), summary("shim-verify", [0.1, 0.12])], "test", 1)
    out = capsys.readouterr().out
    (one,) = [line.split() for line in out.splitlines() if line.startswith("stock-verify")]
    assert one[3:5] == ["0.500", "(n=1)"]  # the wall column
    assert one[8:10] == ["30.0", "(n=1)"]  # the RSS column
    (two,) = [line.split() for line in out.splitlines() if line.startswith("shim-verify")]
    assert two[3:6] == ["0.110", "±", "0.014"]
    assert two[9:12] == ["30.0", "±", "0.0"]  # (two runs of equal peaks: a real 0)
    assert "± 0.000" not in out


def test_a_child_that_fails_is_one_line_not_a_traceback() -> None:
    from _requests_fastssl.cli.engine import ChildFailed, _spawn

    with pytest.raises(ChildFailed, match=r"^the probe run failed: KeyError: 'nonexistent'$"):
        _spawn("nonexistent", {}, "probe")


def test_run_sh_takes_a_relative_interpreter_from_where_it_was_called(tmp_path: Path) -> None:
    bare = tmp_path / "py"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "run.sh"), "./py"],
        capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert f"{bare} cannot import requests_fastssl" in proc.stderr  # (its own, found)
