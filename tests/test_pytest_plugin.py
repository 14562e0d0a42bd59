"""The pytest plugin: loading it changes nothing; fixture, flag and ini option in their order.

Each case runs pytest in a subprocess (pytester), so the shim's process-wide state and the
plugin's import side effects are those of a real pytest run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

INNER = """
import requests  # as any test module that uses requests does
from _requests_fastssl import _install

def state():
    return _install.status().state.value

def test_a_plain_test():
    print(f"\\nPLAIN={state()}")

def test_with_fixture(fastssl):
    print(f"\\nFIXTURE={state()}")
    assert fastssl.stats().contexts_built == 0

def test_after_the_fixture():
    print(f"\\nAFTER={state()}")
"""

pytestmark = pytest.mark.subprocess  # every test here starts a fresh interpreter


def states(result: pytest.RunResult) -> dict[str, str]:
    out = {}
    for line in result.outlines:
        for key in ("PLAIN", "FIXTURE", "AFTER"):
            if line.startswith(f"{key}="):
                out[key] = line.split("=", 1)[1]
    return out


@pytest.mark.parametrize(
    ("ini", "args", "env", "expected"),
    [
        # nothing asked: pytest runs as without the plugin; the fixture still works
        (None, [], {}, {"PLAIN": "not-installed", "FIXTURE": "active", "AFTER": "not-installed"}),
        ("true", [], {}, {"PLAIN": "active", "FIXTURE": "active", "AFTER": "active"}),
        ("false", ["--fastssl"], {}, {"PLAIN": "active", "FIXTURE": "active", "AFTER": "active"}),
        (None, ["--fastssl"], {}, {"PLAIN": "active", "FIXTURE": "active", "AFTER": "active"}),
        # --no-fastssl wins over the ini option; the fixture wins over both, for its test
        (
            "true",
            ["--no-fastssl"],
            {},
            {"PLAIN": "not-installed", "FIXTURE": "active", "AFTER": "not-installed"},
        ),
        # the kill switch wins over everything
        (
            "true",
            ["--fastssl"],
            {"REQUESTS_FASTSSL_DISABLE": "1"},
            {"PLAIN": "disabled", "FIXTURE": "disabled", "AFTER": "disabled"},
        ),
    ],
    ids=["default", "ini", "flag-over-ini-false", "flag", "no-flag-over-ini", "kill-switch"],
)
def test_precedence(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ini: str | None,
    args: list[str],
    env: dict[str, str],
    expected: dict[str, str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if ini is not None:
        pytester.makeini(f"[pytest]\nfastssl = {ini}\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly", *args)
    result.assert_outcomes(passed=3)
    assert states(result) == expected


def test_loading_the_plugin_imports_nothing_heavy(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_inner="""
        import sys
        def test_modules():
            print("\\nLOADED=" + ",".join(
                m for m in ("requests", "ssl", "wrapt", "urllib3") if m in sys.modules))
        """
    )
    # Other plugins of the environment may import requests themselves (requests-mock's
    # does): load ours alone, then nothing.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    loaded = {}
    for label, extra in (("with", ["-p", "_requests_fastssl.pytest_plugin"]), ("without", [])):
        result = pytester.runpytest_subprocess("-s", *extra)
        result.assert_outcomes(passed=1)
        (line,) = [x for x in result.outlines if x.startswith("LOADED=")]
        loaded[label] = line
    assert loaded["with"] == loaded["without"]  # the plugin adds none of them
    # (pytest itself may import ssl, as newer releases do: so the plugin module is also
    # imported alone, in an isolated interpreter.)
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; import _requests_fastssl.pytest_plugin; "
            "print(sorted(m for m in ('requests', 'ssl', 'wrapt', 'urllib3') if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert proc.stdout.strip() == "[]"


SERVER_CONFTEST = """
import ssl
import pytest, trustme
from _requests_fastssl.cli.server import HTTPSServer

@pytest.fixture
def server(tmp_path):
    # (url, bundle) of a loopback HTTPS server with a throwaway CA
    ca = trustme.CA()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    with HTTPSServer(ctx) as running:
        yield running.url, str(bundle)
"""


@pytest.mark.urllib3_2
def test_session_summary_counts_what_was_avoided(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SERVER_CONFTEST)
    pytester.makepyfile(
        test_inner="""
        import requests

        def test_requests(server):
            url, bundle = server
            for _ in range(5):
                assert requests.get(url, verify=bundle).status_code == 200
        """
    )
    result = pytester.runpytest_subprocess("--fastssl")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["requests-fastssl: 1 contexts built, 4 reuses, 4 CA loads avoided (~* s CPU saved)"]
    )
    result = pytester.runpytest_subprocess()
    assert "requests-fastssl:" not in result.stdout.str()


@pytest.mark.urllib3_2
def test_fixture_gives_per_test_counters_and_a_fresh_cache(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SERVER_CONFTEST)
    pytester.makepyfile(
        test_inner="""
        import requests

        def test_one(fastssl, server):
            url, bundle = server
            for _ in range(3):
                requests.get(url, verify=bundle)
            stats = fastssl.stats()
            assert (stats.contexts_built, stats.reuses, stats.ca_loads) == (1, 2, 1)
            assert stats.entries == 1
            fastssl.clear()
            assert fastssl.stats().entries == 0

        def test_two(fastssl):
            assert fastssl.stats().contexts_built == 0
            assert fastssl.stats().entries == 0
            assert fastssl.status().state.value == "active"
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=2)


def test_disabling_the_plugin_removes_the_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="def test_x(fastssl):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:requests_fastssl")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'fastssl' not found*"])
