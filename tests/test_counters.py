"""Counters that tell the truth (issue 41): loads left out of a context a caller brings
(botocore's, a PoolManager's ``ssl_context``) are savings in ``Stats``, the at-exit report and
the log, not set-ups "left to stock"; the time saved is a measured estimate or says it is not
measured; ``since()`` keeps the process's measured load time."""

from __future__ import annotations

import ssl
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
from support import PKI, ROOT, SERVER_CONFTEST, ServerFactory, clean_env, session_with

import requests_fastssl
from _requests_fastssl._status import Stats

# The fields as they were before issue 41: public API, each keeps its name and its place.
_EARLIER_FIELDS = (
    "contexts_built", "reuses", "ca_loads", "build_seconds", "entries", "evictions",
    "step_asides", "build_failures", "connections", "discards", "failures_skipped",
    "owned_loads_avoided", "step_aside_reasons",
)  # fmt: skip


def _pool_calls(url: str, n: int, **pool: Any) -> list[int]:
    """``n`` requests through one PoolManager, each on a new connection (botocore's shape when
    ``pool`` holds an ``ssl_context`` and the bundle as ``ca_certs``)."""
    with urllib3.PoolManager(retries=False, **pool) as manager:
        return [
            manager.request("GET", url, headers={"Connection": "close"}).status for _ in range(n)
        ]


def test_stats_keep_every_earlier_field_in_its_place() -> None:
    assert Stats._fields[: len(_EARLIER_FIELDS)] == _EARLIER_FIELDS
    assert {"owned_connections", "mean_load_seconds"} <= set(Stats._fields)


@pytest.mark.urllib3_2
def test_a_callers_own_context_is_served_not_left_to_stock(
    pki: PKI, make_server: ServerFactory
) -> None:
    server = make_server()
    requests_fastssl.install()
    before = requests_fastssl.stats()
    ctx = ssl.create_default_context()  # (holds the system store; the bundle is loaded on top)
    statuses = _pool_calls(server.url, 5, ssl_context=ctx, ca_certs=pki.bundle)
    delta = requests_fastssl.stats().since(before)
    assert statuses == [200] * 5
    assert (delta.owned_connections, delta.owned_loads_avoided, delta.connections) == (5, 4, 0)
    # The public field keeps its meaning: every own-context set-up is counted there.
    assert (delta.step_asides, dict(delta.step_aside_reasons)) == (5, {"own-context": 5})
    said = str(delta)
    assert "5 TLS connections on contexts their callers brought made 1 CA load instead of 5" in said
    # Stock's one load into the caller's context is not timed: no figure is made up.
    assert "4 loads avoided, time saved not measured" in said
    assert said.endswith("none left to stock"), said
    assert delta.seconds_saved == 0.0


@pytest.mark.urllib3_2
def test_a_context_the_shim_cannot_serve_is_still_left_to_stock(
    pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    """A subclass's load might do more than load: stock makes every one (own-context, not
    served); a CA directory is a plain step-aside. Both are said to be left to stock."""
    server = make_server()
    requests_fastssl.install()
    before = requests_fastssl.stats()

    class Own(ssl.SSLContext):
        pass

    subclass = Own(ssl.PROTOCOL_TLS_CLIENT)
    assert _pool_calls(server.url, 2, ssl_context=subclass, ca_certs=pki.bundle) == [200] * 2
    with pytest.raises(urllib3.exceptions.SSLError):  # (an empty directory trusts nobody)
        _pool_calls(server.url, 1, ca_cert_dir=str(tmp_path))
    delta = requests_fastssl.stats().since(before)
    assert (delta.owned_connections, delta.owned_loads_avoided) == (0, 0)
    assert dict(delta.step_aside_reasons) == {"ca-directory": 1, "own-context": 2}
    assert str(delta).endswith("; 3 set-ups left to stock (ca-directory 1, own-context 2)")


@pytest.mark.urllib3_2
def test_shared_and_own_contexts_in_one_process_say_which_saving_is_measured(
    pki: PKI, make_server: ServerFactory
) -> None:
    from adapters import ContextAdapter
    from urllib3.util.ssl_ import create_urllib3_context

    server = make_server()
    requests_fastssl.install()
    requests_fastssl.clear()
    before = requests_fastssl.stats()
    for _ in range(3):  # a new Session each: a new connection on the one shared context
        assert requests.get(server.url, verify=pki.bundle).status_code == 200
    adapter = ContextAdapter(create_urllib3_context())
    for _ in range(3):
        with session_with(adapter) as session:
            response = session.get(server.url, verify=pki.bundle, headers={"Connection": "close"})
            assert response.status_code == 200
    delta = requests_fastssl.stats().since(before)
    assert (delta.contexts_built, delta.connections, delta.owned_connections) == (1, 3, 3)
    assert (delta.loads_avoided, delta.owned_loads_avoided) == (4, 2)
    assert delta.mean_load_seconds > 0  # (one build, timed)
    assert delta.seconds_saved == pytest.approx(2 * delta.mean_load_seconds)  # the shared two
    assert (
        f"4 loads avoided, about {delta.seconds_saved:.2f} s saved by the 2 in shared contexts"
        in str(delta)
    )
    assert "none left to stock" in str(delta)


@pytest.mark.urllib3_2
def test_since_after_warm_uses_the_measured_load(pki: PKI, make_server: ServerFactory) -> None:
    """The build happens in warm(), before the window: the window's loads avoided are priced
    at the process's measured mean, not at the window's (absent) builds."""
    server = make_server()
    requests_fastssl.install()
    requests_fastssl.clear()
    assert requests_fastssl.warm(verify=pki.bundle)
    whole = requests_fastssl.stats()
    assert whole.mean_load_seconds == pytest.approx(whole.build_seconds / whole.contexts_built)
    assert whole.mean_load_seconds > 0
    for _ in range(3):
        assert requests.get(server.url, verify=pki.bundle).status_code == 200
    delta = requests_fastssl.stats().since(whole)
    assert (delta.contexts_built, delta.build_seconds, delta.connections) == (0, 0.0, 3)
    assert delta.mean_load_seconds == whole.mean_load_seconds  # kept, not a difference
    assert delta.loads_avoided == 3
    assert delta.seconds_saved == pytest.approx(3 * whole.mean_load_seconds)
    assert f"3 loads avoided, about {delta.seconds_saved:.2f} s saved;" in str(delta)


def test_stats_words_for_a_callers_context_alone() -> None:
    """The issue's process (boto3, 20 calls): its line, word for word."""
    stats = Stats(
        step_asides=20,
        owned_loads_avoided=19,
        step_aside_reasons={"own-context": 20},
        owned_connections=20,
    )
    assert str(stats) == (  # (no shared context at all: the line does not open with one)
        "20 TLS connections on contexts their callers brought made 1 CA load "
        "instead of 20; 19 loads avoided, time saved not measured; none left to stock"
    )


def test_stats_words_when_no_load_was_timed() -> None:
    """A clock a test mocked at import times nothing: loads avoided, and no figure."""
    stats = Stats(contexts_built=1, ca_loads=1, reuses=9, connections=10, entries=1)
    assert "; 9 loads avoided, time saved not measured; " in str(stats)
    assert "about 0.00 s saved" in str(Stats())  # nothing avoided: nothing to measure


def test_since_keeps_the_process_mean_and_differences_the_counters() -> None:
    earlier = Stats(contexts_built=1, ca_loads=1, build_seconds=0.02, connections=1, entries=1,
                    step_asides=2, step_aside_reasons={"own-context": 2}, owned_connections=2,
                    owned_loads_avoided=1, mean_load_seconds=0.02)  # fmt: skip
    now = earlier._replace(
        connections=4, reuses=3, step_asides=5, step_aside_reasons={"own-context": 5},
        owned_connections=5, owned_loads_avoided=4, entries=2,
    )  # fmt: skip
    delta = now.since(earlier)
    assert delta == Stats(
        connections=3, reuses=3, step_asides=3, step_aside_reasons={"own-context": 3},
        owned_connections=3, owned_loads_avoided=3, entries=2, mean_load_seconds=0.02,
    )  # fmt: skip
    assert delta.seconds_saved == pytest.approx(0.06)  # the three shared loads, not the owned


# --- What the operator sees: the log and run --report, in a program without requests ------

_BOTOCORE_LIKE = """
import ssl, sys, urllib3
from urllib3.util.ssl_ import create_urllib3_context
with urllib3.PoolManager(ssl_context=create_urllib3_context(), ca_certs={bundle!r},
                         retries=False) as manager:
    print([manager.request("GET", {url!r}, headers={{"Connection": "close"}}).status
           for _ in range(5)])
class Own(ssl.SSLContext):
    pass
with urllib3.PoolManager(ssl_context=Own(ssl.PROTOCOL_TLS_CLIENT), ca_certs={bundle!r},
                         retries=False) as manager:
    print(manager.request("GET", {url!r}).status)
print("requests" in sys.modules)
"""


@pytest.mark.urllib3_2
@pytest.mark.subprocess
def test_run_report_and_log_call_a_served_context_a_saving(
    pki: PKI, make_server: ServerFactory
) -> None:
    server = make_server()
    code = textwrap.dedent(_BOTOCORE_LIKE.format(bundle=pki.bundle, url=server.url))
    env = {**clean_env(), "REQUESTS_FASTSSL_LOG": "info"}
    runner = [sys.executable, "-m", "requests_fastssl", "run", "--report", "--"]
    proc = subprocess.run(
        [*runner, sys.executable, "-c", code],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == ["[200, 200, 200, 200, 200]", "200", "False", ""]
    lines = proc.stderr.splitlines()
    served = [line for line in lines if "(own-context)" in line]
    assert len(served) == 2, lines  # once served, once not: each said once
    assert served[0].startswith(
        "INFO requests_fastssl: a connection was given its caller's own SSLContext "
        "(own-context): never shared; the CA loads it holds already are left out"
    ), served
    assert "stats().owned_connections counts them" in served[0]
    # The subclass's loads are stock's, every one: that is left to stock (urllib3: no requests).
    assert served[1].startswith(
        "INFO requests_fastssl: a connection was left to stock urllib3 (own-context): never "
        "shared; stock makes every load into it"
    ), served
    report = [line for line in lines if line.startswith("requests_fastssl report (pid ")]
    assert len(report) == 1, lines
    assert report[0].endswith(
        "): 5 TLS connections on contexts their callers brought made 1 CA load "
        "instead of 5; 4 loads avoided, time saved not measured; 1 set-up left to stock "
        "(own-context 1)"
    ), report


# --- The pytest plugin's summary, and botocore itself ------------------------------------


@pytest.mark.urllib3_2
@pytest.mark.subprocess
def test_the_plugin_summary_says_an_untimed_saving_is_not_measured(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(SERVER_CONFTEST)
    pytester.makepyfile(
        test_inner="""
        import urllib3
        from urllib3.util.ssl_ import create_urllib3_context

        def test_own_context(server):
            url, bundle = server
            ctx = create_urllib3_context()
            with urllib3.PoolManager(ssl_context=ctx, ca_certs=bundle) as manager:
                for _ in range(5):
                    response = manager.request("GET", url, headers={"Connection": "close"})
                    assert response.status == 200
        """
    )
    result = pytester.runpytest_subprocess("--fastssl")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["requests-fastssl: 0 contexts built, 0 reuses, 4 CA loads avoided (time saved not "
         "measured)"]
    )  # fmt: skip


@pytest.mark.urllib3_2
def test_botocore_calls_are_counted_as_served(
    pki: PKI, make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The issue's program: boto3 brings its own context and the bundle's path."""
    boto3 = pytest.importorskip("boto3")  # (in the test group: never skipped in CI)
    from botocore.config import Config

    for name in ("AWS_CA_BUNDLE", "AWS_PROFILE"):  # (our machines export AWS_CA_BUNDLE)
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    server = make_server()
    requests_fastssl.install()
    client = boto3.client(
        "s3", endpoint_url=server.url, region_name="us-east-1", verify=pki.bundle,
        aws_access_key_id="test", aws_secret_access_key="test",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )  # fmt: skip
    before = requests_fastssl.stats()
    for _ in range(4):  # (the server closes each connection: four set-ups)
        assert client.list_objects_v2(Bucket="bucket")["Contents"]
    client.close()
    delta = requests_fastssl.stats().since(before)
    assert (delta.owned_connections, delta.owned_loads_avoided) == (4, 3)
    said = str(delta)
    assert "4 TLS connections on contexts their callers brought made 1 CA load instead of 4" in said
    assert "3 loads avoided, time saved not measured; none left to stock" in said
