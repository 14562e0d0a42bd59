"""What the shim tells an operator: the log switch, the first step-aside per reason, the
at-exit report, and ``Stats`` as a readable line. Each case runs in a fresh interpreter:
the switch is read at activation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import PKI, ROOT, ServerFactory, clean_env, run_python

import requests_fastssl
from _requests_fastssl._status import Stats

pytestmark = pytest.mark.subprocess

# Three new connections trusting a CA directory (left to stock), then three trusting a file.
_REQUESTS = """
import requests{activation}
for verify in ({directory!r},) * 3 + ({bundle!r},) * 3:
    try:
        requests.get({url!r}, verify=verify)
    except requests.RequestException:
        pass
"""


def _requests(
    pki: PKI, server: object, directory: Path, activation: str = "\nimport requests_fastssl"
) -> str:
    """The program above, for this server, CA bundle and (empty) CA directory."""
    url: str = server.url  # type: ignore[attr-defined]
    return _REQUESTS.format(
        activation=activation, directory=str(directory), bundle=pki.bundle, url=url
    )


def _run(code: str, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:

    full = clean_env()
    full.update(env)
    return subprocess.run(
        [*argv, sys.executable, "-c", code] if argv else [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.urllib3_2
@pytest.mark.parametrize("mode", ["import", "install", "run"])
@pytest.mark.parametrize("level", ["info", "debug", "INFO"])
def test_log_switch_shows_activation_and_each_reason_once(
    pki: PKI, make_server: ServerFactory, tmp_path: Path, mode: str, level: str
) -> None:
    server = make_server()
    activation = {
        "import": "\nimport requests_fastssl",
        "install": "\nimport requests_fastssl as f; f.uninstall(); f.install()",
        "run": "",
    }[mode]
    code = _requests(pki, server, tmp_path, activation)
    runner = (sys.executable, "-m", "requests_fastssl", "run", "--") if mode == "run" else ()
    proc = _run(code, {"REQUESTS_FASTSSL_LOG": level}, *runner)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    active = [line for line in lines if "requests_fastssl: active in pid" in line]
    # Once per activation: "install" activates at the import, then again after uninstall().
    assert len(active) == (2 if mode == "install" else 1), lines
    assert active[0].startswith("INFO requests_fastssl: active in pid ")
    assert "wrapped urllib3.connection._ssl_wrap_socket_and_match_hostname" in active[0]
    aside = [line for line in lines if "left to stock requests (ca-directory)" in line]
    assert len(aside) == 1, lines  # three connections, one line
    assert "a CA directory costs stock little per connection" in aside[0]  # what to do
    assert not [line for line in lines if line.startswith("DEBUG")] or level == "debug"


@pytest.mark.urllib3_2
@pytest.mark.parametrize("env", [{}, {"REQUESTS_FASTSSL_LOG": "warning"}], ids=["off", "warning"])
def test_without_the_switch_or_at_warning_the_shim_says_nothing(
    pki: PKI, make_server: ServerFactory, tmp_path: Path, env: dict[str, str]
) -> None:
    proc = _run(_requests(pki, make_server(), tmp_path), env)
    assert proc.returncode == 0
    assert proc.stderr == ""  # nothing went wrong, so nothing at WARNING


def test_a_log_switch_value_not_understood_is_said_not_ignored() -> None:
    proc = _run("import requests_fastssl", {"REQUESTS_FASTSSL_LOG": "loud"})
    assert proc.returncode == 0
    assert proc.stderr == (
        "requests_fastssl: REQUESTS_FASTSSL_LOG='loud' is not understood; taken as off (debug, "
        "info, warning, or 0/false/no/off)\n"
    )


# Every switch, one reader (issue 28): what each value class does, and what it says.
_SWITCH_CODE = (
    "import atexit, requests, requests_fastssl; "
    "print(requests_fastssl.status().state.value, "
    "requests_fastssl.stats().contexts_built)"
)


@pytest.mark.parametrize(
    ("name", "value", "state", "built", "said"),
    [
        ("REQUESTS_FASTSSL_DISABLE", "1", "disabled", 0, ""),
        ("REQUESTS_FASTSSL_DISABLE", " Yes ", "disabled", 0, ""),
        ("REQUESTS_FASTSSL_DISABLE", "off", "active", 0, ""),
        ("REQUESTS_FASTSSL_DISABLE", "", "active", 0, ""),
        ("REQUESTS_FASTSSL_DISABLE", "maybe", "disabled", 0, "taken as on"),  # (the safe side)
        ("REQUESTS_FASTSSL_REPORT", "true", "active", 0, "requests_fastssl report ("),
        ("REQUESTS_FASTSSL_REPORT", "No", "active", 0, ""),
        ("REQUESTS_FASTSSL_REPORT", "maybe", "active", 0, "taken as off"),
        ("REQUESTS_FASTSSL_WARM", "on", "active", 1, ""),
        ("REQUESTS_FASTSSL_WARM", "0", "active", 0, ""),
        ("REQUESTS_FASTSSL_WARM", "maybe", "active", 0, "taken as off"),
        ("REQUESTS_FASTSSL_LOG", "off", "active", 0, ""),
        ("REQUESTS_FASTSSL_LOG", "INFO", "active", 0, "INFO requests_fastssl: active in pid"),
        ("REQUESTS_FASTSSL_LOG", "maybe", "active", 0, "taken as off"),
    ],
)
def test_every_switch_reads_its_values_alike(
    name: str, value: str, state: str, built: int, said: str, pki: PKI
) -> None:
    proc = _run(_SWITCH_CODE, {name: value, "REQUESTS_CA_BUNDLE": pki.bundle})
    assert proc.returncode == 0, proc.stderr
    if __import__("urllib3").__version__.startswith("1.") and built:
        built, said = 0, "is left to stock requests here (urllib3-1.26"  # (nothing to warm)
    assert proc.stdout.split() == [state, str(built)]
    if said:
        assert said in proc.stderr
        assert len(proc.stderr.splitlines()) == 1  # one line, once
        if "taken as" in said:
            assert proc.stderr.startswith(f"requests_fastssl: {name}={value!r} is not understood")
    else:
        assert proc.stderr == ""


@pytest.mark.urllib3_2
def test_report_switch_prints_the_counters_at_exit(pki: PKI, make_server: ServerFactory) -> None:
    server = make_server()
    code = f"import requests_fastssl, requests\nrequests.get({server.url!r}, verify={pki.bundle!r})"
    on = _run(code, {"REQUESTS_FASTSSL_REPORT": "1"})
    assert on.returncode == 0, on.stderr
    assert "requests_fastssl report (pid " in on.stderr
    assert "1 TLS connection used shared contexts" in on.stderr
    off = _run(code, {"REQUESTS_FASTSSL_REPORT": "0"})
    assert "requests_fastssl report" not in off.stderr
    # A program on urllib3 alone (boto3's way) is reported too: the shim serves it (issue 27).
    alone = (
        f"import requests_fastssl, sys, urllib3\n"
        f"urllib3.PoolManager(ca_certs={pki.bundle!r}).request('GET', {server.url!r})\n"
        f"assert 'requests' not in sys.modules"
    )
    proc = _run(alone, {"REQUESTS_FASTSSL_REPORT": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "1 TLS connection used shared contexts" in proc.stderr


def test_the_report_of_a_process_without_argv() -> None:
    """An embedding application may run without ``sys.argv``: the report names the
    interpreter instead of failing in its at-exit callback."""
    code = "import requests_fastssl, sys, urllib3\ndel sys.argv"
    proc = _run(code, {"REQUESTS_FASTSSL_REPORT": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "requests_fastssl report (pid " in proc.stderr
    assert "Exception ignored" not in proc.stderr, proc.stderr


def test_stats_print_as_one_readable_line() -> None:
    stats = Stats(
        contexts_built=1,
        reuses=29,
        ca_loads=1,
        build_seconds=0.0201,
        entries=1,
        connections=30,
        step_asides=3,
        evictions=2,
        step_aside_reasons={"ca-directory": 3},
    )
    assert str(stats) == (
        "30 TLS connections used shared contexts (1 context built with 1 CA load in 20.1 ms, "
        "1 held now); 29 loads avoided, about 0.58 s saved; 3 set-ups left to stock "
        "(ca-directory 3); evictions 2"
    )
    assert repr(stats).startswith("Stats(contexts_built=1, ")  # every field, as before
    assert str(Stats()).startswith("0 TLS connections used shared contexts")
    assert "none left to stock" in str(Stats())


def test_stats_since_refuses_what_is_not_stats() -> None:
    with pytest.raises(TypeError, match="since\\(\\) takes an earlier Stats, not int"):
        requests_fastssl.stats().since(3)  # type: ignore[arg-type]


def test_activation_without_switches_imports_no_logging() -> None:
    # As a difference: a system sitecustomize may have imported logging before us.
    out = run_python(
        """
        import sys
        before = set(sys.modules)
        import requests_fastssl
        print(sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "logging"))
        """
    )
    assert out.strip() == "[]"  # the start-up budget: no logging unless asked


@pytest.mark.urllib3_2
@pytest.mark.parametrize("switch", ["", "loud"], ids=["no-switch", "unknown-value"])
def test_a_raising_log_filter_never_reaches_a_request(
    pki: PKI, make_server: ServerFactory, tmp_path: Path, switch: str
) -> None:
    """The shim's log lines are its own doing: an application filter that raises on them
    must not turn a request's stock outcome into an error, nor keep the shim from activating
    (nor its warning about a log switch it does not know)."""
    server = make_server()
    code = f"""
import logging, requests
class Refuse(logging.Filter):
    def filter(self, record):
        raise RuntimeError("refused")
logger = logging.getLogger("requests_fastssl")
logger.addFilter(Refuse())
logger.setLevel(logging.INFO)
import requests_fastssl
for verify in ({str(tmp_path)!r}, {pki.bundle!r}):
    try:
        print(requests.get({server.url!r}, verify=verify).status_code)
    except Exception as exc:
        print(type(exc).__name__)
print(requests_fastssl.status().state.value)
"""
    shim = _run(code, {"REQUESTS_FASTSSL_LOG": switch})
    stock = _run(code, {"REQUESTS_FASTSSL_LOG": switch, "REQUESTS_FASTSSL_DISABLE": "1"})
    assert shim.returncode == stock.returncode == 0, shim.stderr + stock.stderr
    assert shim.stdout.splitlines()[:2] == stock.stdout.splitlines()[:2] == ["SSLError", "200"]
    assert shim.stdout.splitlines()[2] == "active"


@pytest.mark.urllib3_2
def test_activation_reads_no_package_metadata(pki: PKI, make_server: ServerFactory) -> None:
    """A frozen or vendored application has no package metadata, and an audit hook may refuse
    opening it: the activation line takes versions from the modules, so neither matters."""
    server = make_server()
    code = f"""
import sys
def refuse(event, args):
    if event == "open" and ".dist-info" in str(args[0]):
        raise PermissionError("no metadata here")
sys.addaudithook(refuse)
import requests
import requests_fastssl
print(requests.get({server.url!r}, verify={pki.bundle!r}).status_code)
print(requests_fastssl.status().state.value, requests_fastssl.stats().connections)
"""
    proc = _run(code, {"REQUESTS_FASTSSL_LOG": "info"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["200", "active", "1"]
    assert "INFO requests_fastssl: active in pid" in proc.stderr
    assert "(requests 2." in proc.stderr


@pytest.mark.urllib3_2
def test_an_application_logging_at_info_sees_nothing_of_ours_unasked(
    pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    server = make_server()
    code = "import logging; logging.basicConfig(level=logging.INFO)\n" + _requests(
        pki, server, tmp_path
    )
    shim = _run(code, {})
    assert shim.returncode == 0
    assert "requests_fastssl" not in shim.stderr  # our lines are DEBUG unless switched on


@pytest.mark.parametrize(
    ("code", "said"),
    [
        # The README's order: the shim first, so activation comes inside requests' import.
        ("import requests_fastssl, requests", "requests being imported"),
        ("import requests_fastssl, urllib3", "requests not imported yet"),  # (boto3's case)
        ("import requests, requests_fastssl", "requests {requests}"),
    ],
    ids=["shim-first", "urllib3-only", "requests-first"],
)
def test_the_activation_line_says_what_is_known_of_each_version(code: str, said: str) -> None:
    import os

    import requests
    import urllib3

    # -S: no sitecustomize (a machine's may import requests first); this process's path
    # instead, so the same packages are found.
    env = {**clean_env(), "REQUESTS_FASTSSL_LOG": "info"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if " active in pid " in line]
    versions = line.split(" (", 1)[1]
    expected = said.format(requests=requests.__version__)  # type: ignore[attr-defined]
    urllib3_version = urllib3.__version__  # type: ignore[attr-defined]
    assert versions.startswith(f"{expected}, urllib3 {urllib3_version}, "), line
    assert "?" not in versions, line  # a module not imported yet is no unknown version
