"""Activation without code changes: a sitecustomize line and ``python -m requests_fastssl run``.

Every case is a fresh interpreter against a local HTTPS server, showing both that the shim is
active (its counters move: one CA load for many requests) and that stock behaviour returns when
it is turned off.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import PKI, ROOT, ServerFactory, clean_env

CLIENT = """
import json, sys, requests
from _requests_fastssl import _install
for _ in range(5):
    assert requests.get(sys.argv[1], verify=sys.argv[2]).status_code == 200
s = _install.stats()
print("RESULT", json.dumps({"state": _install.status().state.value, "built": s.contexts_built,
                            "ca_loads": s.ca_loads, "reuses": s.reuses}))
"""

pytestmark = pytest.mark.subprocess  # every test here starts a fresh interpreter


def python(
    *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    full = clean_env("PYTHONPATH")
    full.update(env or {})
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=120
    )


def run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m requests_fastssl run -- COMMAND...``"""
    return python("-m", "requests_fastssl", "run", "--", *command, env=env)


def results(proc: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    import json

    assert proc.returncode == 0, proc.stderr
    return [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]


ACTIVE = {"state": "active", "built": 1, "ca_loads": 1, "reuses": 4}
STOCK_DISABLED = {"state": "disabled", "built": 0, "ca_loads": 0, "reuses": 0}


@pytest.fixture
def site_dir(tmp_path: Path) -> Path:
    """A directory holding a user's sitecustomize.py with the documented line in it."""
    directory = tmp_path / "site"
    directory.mkdir()
    (directory / "sitecustomize.py").write_text("import requests_fastssl\n")
    return directory


def test_sitecustomize_line_costs_no_heavy_import(site_dir: Path) -> None:
    proc = python(
        "-c",
        "import sys, requests_fastssl as r; print(r.status().state.value, "
        "[m for m in ('requests', 'ssl', 'wrapt', 'urllib3') if m in sys.modules])",
        env={"PYTHONPATH": str(site_dir)},
    )
    assert proc.stdout.strip() == "pending []"


def test_import_requests_fastssl_loads_only_its_own_small_modules() -> None:
    # The start-up cost, made deterministic: the modules `import requests_fastssl` adds. The
    # standard library's __future__ too, unless start-up loaded it (setuptools' editable
    # finder does): `from __future__ import annotations` imports it at run time.
    proc = python(
        "-c",
        "import sys; before = set(sys.modules); import requests_fastssl; "
        "print(sorted(set(sys.modules) - before - {'__future__'}))",
    )
    assert proc.stdout.strip() == str(
        [
            "_requests_fastssl",
            "_requests_fastssl._errors",
            "_requests_fastssl._httpx_watch",  # (64 lines: waits for httpx as for urllib3)
            "_requests_fastssl._import_hook",
            "_requests_fastssl._install",
            "_requests_fastssl._observe",
            "_requests_fastssl._state",
            "requests_fastssl",
        ]
    )


@pytest.mark.parametrize("disabled", [False, True], ids=["active", "kill-switch"])
@pytest.mark.urllib3_2
def test_sitecustomize_activation(
    disabled: bool, site_dir: Path, make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    env = {"PYTHONPATH": str(site_dir)}
    if disabled:
        env["REQUESTS_FASTSSL_DISABLE"] = "1"
    proc = python("-c", CLIENT, server.url, pki.bundle, env=env)
    assert results(proc) == [STOCK_DISABLED if disabled else ACTIVE]


RUN_SCRIPT = (
    CLIENT
    + """
import subprocess
subprocess.run([sys.executable, "-c", CLIENT, sys.argv[1], sys.argv[2]], check=True)
"""
)


@pytest.mark.parametrize("disabled", [False, True], ids=["active", "kill-switch"])
@pytest.mark.urllib3_2
def test_run_activates_the_command_and_its_python_children(
    disabled: bool, tmp_path: Path, make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    user_site = tmp_path / "user"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("print('USER SITECUSTOMIZE')\n")
    script = tmp_path / "script.py"
    script.write_text(f"CLIENT = {CLIENT!r}\n" + RUN_SCRIPT)
    env = {"PYTHONPATH": str(user_site)}
    if disabled:
        env["REQUESTS_FASTSSL_DISABLE"] = "1"
    proc = run(
        sys.executable,
        str(script),
        server.url,
        pki.bundle,
        env=env,
    )
    expected = STOCK_DISABLED if disabled else ACTIVE
    assert results(proc) == [expected, expected]  # the command, and the Python it started
    # the user's own sitecustomize still ran: in the launcher, the command and the child
    assert proc.stdout.count("USER SITECUSTOMIZE") == 3


def test_run_nested_puts_the_bootstrap_on_the_path_once(tmp_path: Path) -> None:
    proc = run(
        sys.executable,
        "-m",
        "requests_fastssl",
        "run",
        "--",
        sys.executable,
        "-c",
        "import os, sys; print(os.environ['PYTHONPATH']); "
        "print(sys.modules['_requests_fastssl._state'].STATE.phase)",
    )
    assert proc.returncode == 0, proc.stderr
    path, phase = proc.stdout.strip().splitlines()
    assert path == str(ROOT / "_requests_fastssl" / "bootstrap")
    # The bootstrap ran (whether or not the interpreter has a sitecustomize of its own,
    # as Debian's does, which the bootstrap then runs too).
    assert phase == "pending"


def test_run_without_our_package_in_the_target_interpreter(tmp_path: Path) -> None:
    # -I (isolated mode) ignores PYTHONPATH: the command runs, stock, and says nothing.
    proc = run(
        sys.executable,
        "-I",
        "-c",
        "import sys; print('_requests_fastssl' in sys.modules)",
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "nothing to run"),
        (["--"], 2, "nothing to run"),
        (["--", "no-such-command-anywhere"], 127, "no-such-command-anywhere: command not found"),
    ],
)
def test_run_refuses_bad_input(args: list[str], code: int, message: str) -> None:
    proc = python("-m", "requests_fastssl", "run", *args)
    assert proc.returncode == code
    assert message in proc.stderr


def test_run_passes_the_exit_status_through() -> None:
    proc = run(sys.executable, "-c", "raise SystemExit(7)")
    assert proc.returncode == 7


# --- switches final, children left alone (issue 26, item 6) ------------------------------------


@pytest.mark.parametrize("mode", ["import", "run"])
def test_the_kill_switch_turns_every_other_switch_off(
    mode: str, pki: PKI, make_server: ServerFactory
) -> None:
    """Under REQUESTS_FASTSSL_DISABLE the log, report and warm switches do nothing: no line on
    stderr, the logger as the application left it, nothing at exit."""
    server = make_server()
    env = {
        "REQUESTS_FASTSSL_DISABLE": "1",
        "REQUESTS_FASTSSL_LOG": "debug",
        "REQUESTS_FASTSSL_REPORT": "1",
        "REQUESTS_FASTSSL_WARM": "maybe",
        "REQUESTS_CA_BUNDLE": pki.bundle,
    }
    code = (
        "import logging, requests\n"
        + ("import requests_fastssl\n" if mode == "import" else "")
        + "logger = logging.getLogger('requests_fastssl')\n"
        + f"print(requests.get({server.url!r}).status_code, logger.propagate, logger.handlers,"
        " logger.level)\n"
    )
    proc = (
        run(sys.executable, "-c", code, env=env) if mode == "run" else python("-c", code, env=env)
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "200 True [] 0\n"
    assert proc.stderr == ""


PYPY = "/usr/bin/pypy3"


@pytest.mark.skipif(not Path(PYPY).exists(), reason="needs pypy3 (.ci/run installs it)")
def test_a_child_that_is_not_cpython_3_is_left_alone_without_messages(tmp_path: Path) -> None:
    user_site = tmp_path / "user"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("import os\nprint('USER', os.getpid())\n")
    code = "import sys; print(sys.implementation.name, 'sitecustomize' in sys.modules)"
    proc = run(PYPY, "-c", code, env={"PYTHONPATH": str(user_site)})
    assert proc.returncode == 0
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[-1] == "pypy True"
    # the user's own start-up file ran once in the PyPy process (and once in the launcher)
    users = [line for line in lines if line.startswith("USER ")]
    assert len(users) == 2


def test_the_bootstrap_reads_as_python_2() -> None:
    """Python 2 imports it too (PYTHONPATH reaches every interpreter): no syntax of Python 3
    only, or that interpreter prints an error at every start."""
    import ast

    tree = ast.parse((ROOT / "_requests_fastssl" / "bootstrap" / "sitecustomize.py").read_text())
    py3_only = [
        type(node).__name__
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr | ast.AnnAssign | ast.Nonlocal | ast.AsyncFunctionDef)
        or (isinstance(node, ast.FunctionDef) and (node.returns or node.args.kwonlyargs))
        or (isinstance(node, ast.arg) and node.annotation is not None)
        or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
    ]
    assert py3_only == []
