"""The pytest plugin: loading it changes nothing; fixture, flag and ini option in their order.

Each case runs pytest in a subprocess (pytester), so the shim's process-wide state and the
plugin's import side effects are those of a real pytest run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import SERVER_CONFTEST

INNER = """
import pytest
import requests  # as any test module that uses requests does
from _requests_fastssl import _install

def state():
    return _install.status().state.value

def test_a_plain_test():
    print(f"\\nPLAIN={state()}")

def test_with_fixture(fastssl):
    print(f"\\nFIXTURE={state()}")
    assert fastssl.stats().contexts_built == 0

@pytest.mark.fastssl
def test_marked():
    print(f"\\nMARKED={state()}")

def test_after_the_fixture():
    print(f"\\nAFTER={state()}")
"""

# A test module that imports the package to look at status(): the import installs the shim,
# as it does anywhere, unless the session turned the shim off.
IMPORTER = """
import requests_fastssl

def test_status():
    print(f"\\nIMPORTED={requests_fastssl.status().state.value}")
"""

pytestmark = pytest.mark.subprocess  # every test here starts a fresh interpreter

KEYS = ("PLAIN", "FIXTURE", "MARKED", "AFTER", "IMPORTED")


def states(result: pytest.RunResult) -> dict[str, str]:
    out = {}
    for line in result.outlines:
        for key in KEYS:
            if line.startswith(f"{key}="):
                out[key] = line.split("=", 1)[1]
    return out


def row(
    plain: str, fixture: str, marked: str, after: str, imported: str | None = None
) -> dict[str, str]:
    got = {"PLAIN": plain, "FIXTURE": fixture, "MARKED": marked, "AFTER": after}
    if imported is not None:
        got["IMPORTED"] = imported
    return got


OFF, ON, NONE = "disabled", "active", "not-installed"


@pytest.mark.parametrize(
    ("ini", "args", "env", "importer", "expected"),
    [
        # nothing asked: pytest runs as without the plugin; the fixture and marker still work
        (None, [], {}, False, row(NONE, ON, ON, NONE)),
        ("true", [], {}, False, row(ON, ON, ON, ON)),
        ("false", ["--fastssl"], {}, False, row(ON, ON, ON, ON)),
        (None, ["--fastssl"], {}, False, row(ON, ON, ON, ON)),
        # off is final: over the ini option, the fixture, the marker and an import
        ("true", ["--no-fastssl"], {}, False, row(OFF, OFF, OFF, OFF)),
        ("false", [], {}, False, row(OFF, OFF, OFF, OFF)),
        (None, ["--no-fastssl"], {}, True, row(OFF, OFF, OFF, OFF, OFF)),
        ("false", [], {}, True, row(OFF, OFF, OFF, OFF, OFF)),
        # not asked: an imported package installs, as it does without pytest
        (None, [], {}, True, row(ON, ON, ON, ON, ON)),
        # the kill switch wins over everything
        ("true", ["--fastssl"], {"REQUESTS_FASTSSL_DISABLE": "1"}, True, row(*[OFF] * 5)),
    ],
    ids=[
        "default", "ini", "flag-over-ini-false", "flag", "no-flag-over-ini", "ini-false",
        "no-flag-over-import", "ini-false-over-import", "import-unasked", "kill-switch",
    ],
)  # fmt: skip
def test_precedence(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ini: str | None,
    args: list[str],
    env: dict[str, str],
    importer: bool,
    expected: dict[str, str],
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if ini is not None:
        pytester.makeini(f"[pytest]\nfastssl = {ini}\n")
    files = {"test_inner": INNER}
    if importer:
        files["test_importer"] = IMPORTER  # collected, so imported, before test_inner runs
    pytester.makepyfile(**files)
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly", *args)
    result.assert_outcomes(passed=5 if importer else 4)
    assert states(result) == expected


def test_an_inner_session_leaves_the_outer_sessions_switch_off_alone(
    pytester: pytest.Pytester,
) -> None:
    """A plugin's own tests run pytest in-process (pytester) inside a session started with
    --no-fastssl: the inner session's end must not lift the outer session's veto."""
    pytester.makepyfile(
        test_nested="""
        import requests_fastssl

        def test_inner_session(pytester):
            pytester.makepyfile(test_inner="def test_x():\\n    pass\\n")
            pytester.runpytest_inprocess("--no-fastssl", "-p", "no:randomly").assert_outcomes(
                passed=1
            )
            requests_fastssl.install()
            print("STATE", requests_fastssl.status().state.value)
        """
    )
    result = pytester.runpytest_subprocess(
        "-s", "-p", "pytester", "-p", "no:randomly", "--no-fastssl"
    )
    result.assert_outcomes(passed=1)
    assert "STATE disabled" in result.stdout.str()


def test_the_marker_on_a_module_turns_the_shim_on_for_its_tests_only(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_a_marked="""
        import pytest
        from _requests_fastssl import _install
        pytestmark = pytest.mark.fastssl

        def test_one():
            print(f"\\nMARKED={_install.status().state.value}")
        """,
        test_b_plain="""
        from _requests_fastssl import _install

        def test_two():
            print(f"\\nPLAIN={_install.status().state.value}")
        """,
    )
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly", "--strict-markers")
    result.assert_outcomes(passed=2)
    assert states(result) == {"MARKED": ON, "PLAIN": NONE}


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


# --- a project's own names: the project stays in charge (issue 26) -----------------------------

_PROJECT_OPTION = """
def pytest_addoption(parser):
    parser.addoption("--fastssl", action="store_true", help="the project's own switch")

def pytest_configure(config):
    config.project_fastssl = config.getoption("fastssl")
"""


def test_a_projects_own_fastssl_option_stays_the_projects(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(_PROJECT_OPTION)
    pytester.makepyfile(
        test_inner=INNER + "\ndef test_project_option(request):\n"
        "    print(f'\\nPROJECT={request.config.project_fastssl}')\n"
    )
    result = pytester.runpytest_subprocess("-s", "--fastssl")
    result.assert_outcomes(passed=5)
    assert "PROJECT=True" in result.outlines
    # the plugin's --fastssl is not added: the project's flag does not turn the shim on
    assert states(result) == row(NONE, ON, ON, NONE)
    header = [line for line in result.outlines if line.startswith("requests-fastssl warning")]
    assert len(header) == 1
    assert "option --fastssl" in header[0]
    # --no-fastssl did not collide: it is still the plugin's, and final
    off = pytester.runpytest_subprocess("-s", "--no-fastssl")
    assert states(off) == row(OFF, OFF, OFF, OFF)


def test_a_projects_own_fastssl_marker_does_not_turn_the_shim_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    fastssl: the project's own meaning\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-s", "--strict-markers")
    result.assert_outcomes(passed=4)
    assert states(result) == row(NONE, ON, NONE, NONE)
    assert sum("marker fastssl" in line for line in result.outlines) == 1


def test_a_projects_own_fastssl_ini_key_stays_the_projects(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "def pytest_addoption(parser):\n"
        "    parser.addini('fastssl', 'the project own setting', default='x')\n"
    )
    pytester.makeini("[pytest]\nfastssl = anything\n")
    pytester.makepyfile(
        test_inner=INNER + "\ndef test_ini(request):\n    assert "
        "request.config.getini('fastssl') == 'anything'\n"
    )
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=5)
    assert states(result) == row(NONE, ON, ON, NONE)


def test_a_run_that_does_not_ask_sees_no_fixture_of_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_inner="def test_names(request):\n"
        "    print('\\nNAMES=' + ','.join(request.fixturenames))\n"
    )
    with_plugin = pytester.runpytest_subprocess("-s")
    without = pytester.runpytest_subprocess("-s", "-p", "no:requests_fastssl")
    names = [
        [line for line in r.outlines if line.startswith("NAMES=")] for r in (with_plugin, without)
    ]
    assert names[0] == names[1] == ["NAMES=request"]


def test_a_marker_registered_by_a_conftest_below_the_root_stays_the_projects(
    pytester: pytest.Pytester,
) -> None:
    """That conftest is read during collection, after the plugin's pytest_configure: the
    plugin looks again once collection is done, and leaves the marker to the project."""
    pytester.makeini("[pytest]\n")
    sub = pytester.mkpydir("integration")
    (sub / "conftest.py").write_text(
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'fastssl: the project own meaning')\n"
    )
    (sub / "test_inner.py").write_text(INNER)
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=4)
    assert states(result) == row(NONE, ON, NONE, NONE)
    assert sum("defines its own marker fastssl" in line for line in result.outlines) == 1


def test_an_ini_key_of_a_conftest_below_the_root_is_not_read_as_a_switch(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nfastssl = certs/fast.pem\n")
    sub = pytester.mkpydir("integration")
    (sub / "conftest.py").write_text(
        "def pytest_addoption(parser):\n    parser.addini('fastssl', 'the project own bundle')\n"
    )
    (sub / "test_inner.py").write_text(INNER)
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=4)
    assert states(result) == row(NONE, ON, ON, NONE)
    notice = "ini option fastssl = 'certs/fast.pem' is not a switch"
    assert sum(notice in line for line in result.outlines) == 1


@pytest.mark.parametrize("value", ["of", "enabled", "Ture"])
def test_an_ini_value_that_is_no_switch_is_said_and_leaves_the_plugin_off(
    pytester: pytest.Pytester, value: str
) -> None:
    """A typo in the ini value is named in the header, with the accepted words, and the plugin
    stays off; not "this project defines its own ini option". Not an error: a conftest below
    the root, read only once collection reaches it, may declare the key (then the value is
    the project's), and a usage error raised then breaks pytest-xdist and makes the outcome
    depend on which tests are selected."""
    pytester.makeini(f"[pytest]\nfastssl = {value}\n")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    assert states(result) == row(NONE, ON, ON, NONE)
    said = [line for line in result.outlines if "requests-fastssl warning" in line]
    assert said == [
        f"requests-fastssl warning: ini option fastssl = {value!r} is not a switch "
        "(on/yes/true/1 or off/no/false/0); the plugin stays off (unless a conftest declares "
        "its own fastssl key)"
    ]
