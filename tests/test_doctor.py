"""``doctor`` answers the user's question (issue 41): whether the shim will be active in their
programs, asked of a fresh interpreter of the same executable and environment, kept apart
from doctor's own self-test in its process; the verdict and exit status follow that answer.
Also: a closed output pipe is no finding, and ``--verify false`` prints no urllib3 warning."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import PKI, ROOT, ServerFactory, clean_env, private_startup, run_python

pytestmark = pytest.mark.subprocess

BOOTSTRAP = ROOT / "_requests_fastssl" / "bootstrap"  # (what `run` puts on PYTHONPATH)
# pytest's own switches, cleared unless a test sets them (a developer may export them).
NO_PYTEST_SWITCHES = {"PYTEST_ADDOPTS": "", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": ""}
PLAIN_ADVICE = (
    "  not active: nothing in this environment turns it on at start-up, so only programs that "
    "`import requests_fastssl` themselves get it; to turn it on for every program: start it "
    "with `python -m requests_fastssl run -- CMD`, or add the line `import requests_fastssl` "
    "to a sitecustomize.py on its path (README, Activation modes)"
)


def doctor(
    *args: str, env: dict[str, str], cwd: Path = ROOT, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """doctor as a user runs it, in an environment of the test's making (``flags``: the
    interpreter's own, for doctor's process alone: its fresh interpreters start plainly)."""
    return subprocess.run(
        [sys.executable, *flags, "-m", "requests_fastssl", "doctor", *args],
        capture_output=True, text=True, env={**clean_env(), **NO_PYTEST_SWITCHES, **env},
        cwd=cwd, timeout=600,
    )  # fmt: skip


def programs_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stdout.splitlines()
    heading = next(i for i, line in enumerate(lines) if line.startswith("your programs ("))
    return lines[heading + 1]


@pytest.mark.urllib3_2
def test_a_plain_environment_is_a_finding_though_the_self_test_passes(tmp_path: Path) -> None:
    proc = doctor(env=private_startup(tmp_path / "startup"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == (
        "result: 1 finding(s): your programs would not get the shim (nothing turns it on at "
        "start-up)"
    )
    assert programs_line(proc) == PLAIN_ADVICE
    assert "  under `python -m requests_fastssl run -- CMD`: active (its start-up hook)" in lines
    assert any(line.startswith("  under pytest here: off unless asked") for line in lines)
    assert any(line.endswith("but your programs do not get it (see above)") for line in lines)
    # The self-test is doctor's own, in a part of its own, and it passed: doctor imported the
    # shim itself, which says nothing of the programs.
    part = lines.index(
        "self-test in this process (doctor activated the shim itself, to test it: not what your "
        "programs get, said above):"
    )
    assert part > lines.index(PLAIN_ADVICE)
    assert lines[part + 1] == "  shim in this process: active"
    assert (
        "  self-test: 3 connection(s) used shared contexts; 1 context(s) built with 1 CA "
        "load(s); stock requests would have made 3"
    ) in lines[part:]


def test_a_start_up_file_on_pythonpath_gives_programs_the_shim(tmp_path: Path) -> None:
    startup = tmp_path / "startup"
    proc = doctor("--no-self-test", env=private_startup(startup, "import requests_fastssl\n"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert programs_line(proc) == f"  active, via sitecustomize {startup / 'sitecustomize.py'}"
    assert "  under pytest here: on: pytest starts as your programs do; " in proc.stdout
    assert proc.stdout.splitlines()[-1] == (
        "result: healthy: your programs get the shim and every check passed"
    )


def test_runs_switch_in_the_environment_gives_programs_the_shim(tmp_path: Path) -> None:
    """PYTHONPATH naming run's start-up hook (what `run` sets for the command) is the switch
    the environment carries; doctor sees it in the fresh interpreter, not in its own."""
    env = private_startup(tmp_path / "startup")
    env["PYTHONPATH"] = f"{BOOTSTRAP}:{env['PYTHONPATH']}"
    proc = doctor("--no-self-test", "--json", env=env)
    found = json.loads(proc.stdout)
    assert proc.returncode == found["exit_status"] == 0, proc.stdout
    assert found["programs"]["active"] is True
    assert found["programs"]["via"] == [f"run's start-up hook ({BOOTSTRAP} on PYTHONPATH)"]
    assert found["under_run"]["active"] is True
    assert found["pytest"]["session"] == "on"


def test_the_kill_switch_is_named_as_why_programs_do_not_get_it(tmp_path: Path) -> None:
    env = private_startup(tmp_path / "startup", "import requests_fastssl\n")
    proc = doctor("--no-self-test", env={**env, "REQUESTS_FASTSSL_DISABLE": "1"})
    assert proc.returncode == 1
    assert programs_line(proc).startswith("  not active: disabled: REQUESTS_FASTSSL_DISABLE=1; ")
    assert "  under `python -m requests_fastssl run -- CMD`: not active (disabled: " in proc.stdout
    assert "  under pytest here: off: REQUESTS_FASTSSL_DISABLE=1 keeps the plugin off" in (
        proc.stdout
    )
    plain = doctor("--no-self-test", env={**private_startup(tmp_path / "plain"),
                                          "REQUESTS_FASTSSL_DISABLE": "1"})  # fmt: skip
    assert "REQUESTS_FASTSSL_DISABLE=1 would keep any mode off: unset it first" in (
        programs_line(plain)
    )
    assert "start it with" not in programs_line(plain)  # (run would not help either)


def test_a_fresh_interpreter_that_fails_is_a_finding_not_a_guess(tmp_path: Path) -> None:
    """A start-up file that ends the interpreter: doctor cannot tell, and says so (doctor's own
    process starts isolated, past that file)."""
    env = private_startup(tmp_path / "startup", "import os\nos._exit(3)\n")
    proc = doctor("--no-self-test", "--json", env=env, flags=("-I",))
    found = json.loads(proc.stdout)
    assert proc.returncode == found["exit_status"] == 1
    assert found["programs"] == {
        "error": "it failed: exit status 3", "active": False, "executable": sys.executable,
    }  # fmt: skip
    assert found["findings"][0] == (
        "could not tell whether your programs get the shim (it failed: exit status 3)"
    )


def _pytest_sees(where: Path, env: dict[str, str]) -> str:
    """What a pytest run started in ``where`` finds in a test: the shim's state."""
    (where / "test_probe.py").write_text(
        "import sys\n"
        "import requests\n"
        "def test_state():\n"
        "    shim = sys.modules.get('_requests_fastssl._install')\n"
        "    print('STATE', shim.status().state.value if shim else 'not-loaded')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_probe.py"],
        capture_output=True, text=True, env={**clean_env(), **NO_PYTEST_SWITCHES, **env},
        cwd=where, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if "STATE " in line]
    return line.split("STATE ")[1].split()[0]


def test_what_doctor_says_of_pytest_is_what_pytest_does(tmp_path: Path) -> None:
    env = private_startup(tmp_path / "startup")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nfastssl = true\n")
    proc = doctor("--no-self-test", env=env, cwd=project)
    assert (
        f"  under pytest here: on for the whole session (fastssl = true in {project / 'pytest.ini'}"
        "), unless a conftest declares its own fastssl key"
    ) in proc.stdout.splitlines()
    assert _pytest_sees(project, env) == "active"

    (project / "pytest.ini").write_text("[pytest]\n")
    proc = doctor("--no-self-test", env=env, cwd=project)
    assert "  under pytest here: off unless asked (" in proc.stdout
    assert _pytest_sees(project, env) == "not-installed"  # (the plugin loaded, and waits)

    addopts = {**env, "PYTEST_ADDOPTS": "--fastssl"}
    proc = doctor("--no-self-test", env=addopts, cwd=project)
    assert "  under pytest here: on for the whole session (--fastssl in " in proc.stdout
    assert _pytest_sees(project, addopts) == "active"

    no_autoload = {**env, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = doctor("--no-self-test", env=no_autoload, cwd=project)
    assert "  under pytest here: off, as in your programs: the plugin is not loaded" in (
        proc.stdout
    )


def test_a_reader_that_leaves_early_is_no_finding(tmp_path: Path) -> None:
    """`doctor | head -2`: the reader takes two lines and goes; doctor ends quietly with a
    shell's status for SIGPIPE, never 1 (a finding). The fresh interpreters wait on a lock the
    test holds, so that doctor writes again only after the reader has gone."""
    gate = tmp_path / "gate"
    gate.touch()
    env = private_startup(
        tmp_path / "startup",
        "import fcntl, os\n"
        "with open(os.environ['DOCTOR_TEST_GATE']) as f:\n"
        "    fcntl.flock(f, fcntl.LOCK_SH)\n",
    )
    env["DOCTOR_TEST_GATE"] = str(gate)
    with open(gate) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "requests_fastssl", "doctor", "--no-self-test"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**clean_env(), **NO_PYTEST_SWITCHES, **env}, cwd=ROOT,
        )  # fmt: skip
        assert proc.stdout is not None
        first = [proc.stdout.readline(), proc.stdout.readline()]
        proc.stdout.close()
    _, stderr = proc.communicate(timeout=300)
    assert first[0].startswith("requests-fastssl ")
    assert first[1].startswith("Python ")
    assert proc.returncode == 141
    assert stderr == ""


def test_another_broken_pipe_is_not_taken_for_the_reader_leaving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a closed stdout or stderr ends quietly: a broken pipe elsewhere is an error."""
    import importlib

    cli_main = importlib.import_module("_requests_fastssl.cli.main")  # (the module, not main)

    def broken(argv: list[str] | None) -> int:
        raise BrokenPipeError("a pipe of the command's own")

    monkeypatch.setattr(cli_main, "_main", broken)
    with pytest.raises(BrokenPipeError, match="a pipe of the command's own"):
        cli_main.main(["doctor"])


@pytest.mark.urllib3_2
def test_verify_false_prints_no_insecure_request_warning(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    server = make_server()
    stock = run_python(f"import requests; requests.get({server.url!r}, verify=False)", stderr=True)
    assert "InsecureRequestWarning" in stock  # (what doctor's request would print)
    env = private_startup(tmp_path / "startup", "import requests_fastssl\n")
    proc = doctor("--url", server.url, "--verify", "false", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "InsecureRequestWarning" not in proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert (
        "  verification: off (--verify false): the server's certificate and host name are not "
        "checked, so anyone on the path could answer this request"
    ) in proc.stdout.splitlines()
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("  request: GET ")]
    assert line.endswith(": HTTP 200")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process that runs (not a zombie, whose parent has yet to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


# A start-up file that leaves a long-lived child running, as an agent's launcher does (in
# the fresh interpreters only: doctor starts with -m, they with -c), and says which.
LAUNCHER = (
    "import os, subprocess, sys\n"
    "if sys.argv[:1] == ['-c']:\n"
    "    child = subprocess.Popen(['sleep', '30'])\n"
    "    with open(os.environ['DOCTOR_TEST_PIDS'], 'a') as f:\n"
    "        f.write(f'{child.pid}\\n')\n"
)


def test_a_child_a_start_up_file_leaves_running_does_not_hold_doctor(tmp_path: Path) -> None:
    """The child inherits the fresh interpreter's output: doctor waits for the interpreter,
    not for that output to close, and takes its answer at once (it would otherwise wait out
    the child, or say that the interpreter did not finish)."""
    pids = tmp_path / "pids"
    env = private_startup(tmp_path / "startup", LAUNCHER + "import requests_fastssl\n")
    env["DOCTOR_TEST_PIDS"] = str(pids)
    try:
        proc = doctor("--no-self-test", env=env)
        started = [int(pid) for pid in pids.read_text().split()]
        assert started
        assert [pid for pid in started if _running(pid)] == started  # (doctor left first)
    finally:
        for pid in [int(pid) for pid in pids.read_text().split()] if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        programs_line(proc) == f"  active, via sitecustomize {env['PYTHONPATH']}/sitecustomize.py"
    )


def test_an_interrupted_doctor_leaves_no_fresh_interpreter_or_its_children(
    tmp_path: Path,
) -> None:
    """Ctrl-C while the fresh interpreters wait (here on a lock the test holds, after their
    start-up file has started a child): doctor ends them with their children (their own
    process group), as it does at its time bound, and exits 130."""
    pids, gate = tmp_path / "pids", tmp_path / "gate"
    os.mkfifo(pids)
    gate.touch()
    env = private_startup(
        tmp_path / "startup",
        LAUNCHER + "    import fcntl\n"
        "    with open(os.environ['DOCTOR_TEST_GATE']) as f:\n"
        "        fcntl.flock(f, fcntl.LOCK_SH)\n",
    )
    env.update(DOCTOR_TEST_PIDS=str(pids), DOCTOR_TEST_GATE=str(gate))
    with open(gate) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [sys.executable, "-m", "requests_fastssl", "doctor", "--no-self-test"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**clean_env(), **NO_PYTEST_SWITCHES, **env}, cwd=ROOT,
        )  # fmt: skip
        with open(pids) as reader:  # (open throughout: no interpreter blocks writing to it)
            try:
                children = [int(reader.readline())]  # (an interpreter has started its child)
                assert _running(children[0])
                proc.send_signal(signal.SIGINT)
                stdout, stderr = proc.communicate(timeout=300)
            finally:
                proc.kill()
                proc.wait()
            children += [int(line) for line in reader]  # (every writer has gone: doctor ended)
    assert proc.returncode == 130, stdout + stderr
    assert not [pid for pid in children if _running(pid)]


def test_output_a_start_up_file_leaves_unfinished_is_not_taken_for_a_failure(
    tmp_path: Path,
) -> None:
    """A banner written without its newline: the fresh interpreter's answer follows it on
    the same line, and is found there."""
    env = private_startup(
        tmp_path / "startup",
        "import sys\n"
        "if sys.argv[:1] == ['-c']:\n"
        "    sys.stdout.write('[corp-env] ')\n"
        "import requests_fastssl\n",
    )
    proc = doctor("--no-self-test", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        programs_line(proc) == f"  active, via sitecustomize {env['PYTHONPATH']}/sitecustomize.py"
    )


def test_pytest_options_with_an_unclosed_quote_are_reported_not_raised(tmp_path: Path) -> None:
    env = private_startup(tmp_path / "startup")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text('[pytest]\naddopts = -k "foo\n')
    proc = doctor("--no-self-test", env=env, cwd=project)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # (the finding: programs, not this)
    assert proc.stderr == ""
    assert (
        f"  under pytest here: could not read pytest's options (addopts in {project / 'pytest.ini'}"
        ": No closing quotation); pytest would stop on them too"
    ) in proc.stdout.splitlines()

    (project / "pytest.ini").write_text("[pytest]\n")
    proc = doctor("--no-self-test", "--json", env={**env, "PYTEST_ADDOPTS": '-k "foo'}, cwd=project)
    assert proc.stderr == ""
    assert json.loads(proc.stdout)["pytest"] == {
        "session": "unknown",
        "text": "could not read pytest's options (PYTEST_ADDOPTS: No closing quotation); pytest "
        "would stop on them too",
    }


def test_an_ini_value_that_is_not_a_switch_is_named(tmp_path: Path) -> None:
    """The plugin warns of such a value and does not act on it: the session is what start-up
    makes it (here nothing, then the shim by a start-up file), not "does not set it"."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nfastssl = maybe\n")
    proc = doctor("--no-self-test", env=private_startup(tmp_path / "plain"), cwd=project)
    assert (
        f"  under pytest here: off: fastssl = 'maybe' in {project / 'pytest.ini'} is not a "
        "switch; the plugin warns and stays off unless asked: --fastssl, `fastssl = true` in "
        "the ini file, or the fastssl fixture or marker for a test"
    ) in proc.stdout.splitlines()

    (project / "pytest.ini").unlink()
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\nfastssl = 2\n")
    env = private_startup(tmp_path / "startup", "import requests_fastssl\n")
    proc = doctor("--no-self-test", "--json", env=env, cwd=project)
    assert json.loads(proc.stdout)["pytest"] == {
        "session": "on",
        "text": f"on, as in your programs: fastssl = '2' in {project / 'pyproject.toml'} is "
        "not a switch; the plugin warns and leaves the shim to start-up",
    }


def test_doctor_says_whether_httpx_shares(tmp_path: Path) -> None:
    proc = doctor("--no-self-test", env=private_startup(tmp_path / "startup"))
    line = next(x for x in proc.stdout.splitlines() if x.startswith("httpx "))
    assert line == "httpx 0.28.1: shared", line  # (the test group's release; anyio's reviewed)
