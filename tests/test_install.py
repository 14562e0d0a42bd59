"""install() / uninstall() / status(): identity, stacking, kill switch, lazy patching.

Cases whose outcome depends on what is imported first run in a fresh interpreter.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
import requests.adapters
import urllib3
import wrapt
from support import PKI, PRELOADED, ROOT, ServerFactory, clean_env, run_python

import requests_fastssl
from _requests_fastssl import _compat
from requests_fastssl import State

ADAPTERS = requests.adapters
# The one function the shim wraps: urllib3's TLS set-up (docs/design.md).
OWNER, NAME, WRAPPER = _compat.hook()


def originals() -> tuple[Any]:
    return (OWNER.__dict__[NAME],)


def our_layers(obj: Any) -> int:
    return sum(
        1 for entry in wrapt.wrapper_chain(obj) if getattr(entry, "_self_wrapper", None) is WRAPPER
    )


def test_install_is_idempotent_and_uninstall_restores_identity() -> None:
    before = originals()
    assert requests_fastssl.status().state is State.NOT_INSTALLED
    for _ in range(3):
        assert requests_fastssl.install().state is State.ACTIVE
    current = originals()
    assert all(our_layers(obj) == 1 for obj in current)
    assert all(c.__wrapped__ is b for c, b in zip(current, before, strict=False))
    for _ in range(2):
        assert requests_fastssl.uninstall().state is State.NOT_INSTALLED
    assert all(a is b for a, b in zip(originals(), before, strict=False))


def test_uninstall_keeps_a_foreign_wrapt_layer_on_top(
    make_server: ServerFactory, default_bundle: str
) -> None:
    before = originals()
    requests_fastssl.install()
    calls: list[str] = []

    def foreign(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append(wrapped.__name__)
        return wrapped(*args, **kwargs)

    top = wrapt.wrap_function_wrapper(OWNER, NAME, foreign)
    try:
        requests_fastssl.uninstall()
        assert originals() == (top,)  # theirs stays on top...
        assert top.__wrapped__ is before[0]
        server = make_server()
        assert requests.get(server.url).status_code == 200
        assert calls == [NAME]
    finally:
        wrapt.unwrap_object(OWNER, NAME, top)
    assert all(a is b for a, b in zip(originals(), before, strict=False))


@pytest.mark.urllib3_2
def test_uninstall_under_a_non_wrapt_layer_leaves_ours_inactive(
    make_server: ServerFactory, default_bundle: str
) -> None:
    before = originals()
    requests_fastssl.install()
    captured = OWNER.__dict__[NAME]  # OpenTelemetry-style capture

    @functools.wraps(captured)
    def closure(*args: Any, **kwargs: Any) -> Any:
        return captured(*args, **kwargs)

    setattr(OWNER, NAME, closure)
    try:
        status = requests_fastssl.uninstall()
        assert status.state is State.NOT_INSTALLED
        assert "inactive" in status.reason
        server = make_server()
        built = requests_fastssl.stats().contexts_built
        assert requests.get(server.url).status_code == 200
        assert requests_fastssl.stats().contexts_built == built  # stock: nothing shared
        # Re-installing re-activates the kept layer instead of stacking a second one.
        assert requests_fastssl.install().state is State.ACTIVE
        assert our_layers(captured) == 1
        assert requests.get(server.url).status_code == 200
        assert requests_fastssl.stats().contexts_built == built + 1
    finally:
        setattr(OWNER, NAME, captured)
        requests_fastssl.uninstall()
    assert all(a is b for a, b in zip(originals(), before, strict=False))


def test_install_and_uninstall_race_to_a_consistent_state() -> None:
    before = originals()
    barrier = threading.Barrier(16)

    def flip(i: int) -> None:
        barrier.wait()
        for _ in range(50):
            requests_fastssl.install() if i % 2 else requests_fastssl.uninstall()

    threads = [threading.Thread(target=flip, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    requests_fastssl.install()
    assert all(our_layers(obj) == 1 for obj in originals())
    requests_fastssl.uninstall()
    assert all(a is b for a, b in zip(originals(), before, strict=False))


def test_kill_switch(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    before = originals()
    monkeypatch.setenv("REQUESTS_FASTSSL_DISABLE", "1")
    with caplog.at_level(logging.DEBUG, logger="requests_fastssl"):
        status = requests_fastssl.install()
    assert status.state is State.DISABLED
    assert status.reason == "REQUESTS_FASTSSL_DISABLE=1"
    assert originals() == before
    assert any("REQUESTS_FASTSSL_DISABLE" in r.getMessage() for r in caplog.records)
    for off in ("0", "false", "no", "off", ""):
        monkeypatch.setenv("REQUESTS_FASTSSL_DISABLE", off)
        assert requests_fastssl.install().state is State.ACTIVE
        requests_fastssl.uninstall()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_contexts": 0}, ValueError),
        ({"max_contexts": -3}, ValueError),
        ({"max_contexts": 2.5}, ValueError),
        ({"max_contexts": True}, ValueError),
        ({"strict": "yes"}, TypeError),
    ],
)
def test_install_rejects_bad_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        requests_fastssl.install(**kwargs)
    assert requests_fastssl.status().state is State.NOT_INSTALLED


@pytest.mark.urllib3_2
def test_max_contexts_bounds_the_registry(
    make_server: ServerFactory, pki: PKI, tmp_path: Any
) -> None:
    requests_fastssl.install(max_contexts=2)
    try:
        server = make_server()
        before = requests_fastssl.stats()
        for i in range(5):
            path = tmp_path / f"ca{i}.pem"
            path.write_bytes(pki.ca.cert_pem.bytes())
            assert requests.get(server.url, verify=str(path)).status_code == 200
        after = requests_fastssl.stats()
        assert after.entries == 2
        assert after.evictions - before.evictions == 3
    finally:
        requests_fastssl.install(max_contexts=64)


@pytest.mark.urllib3_2
def test_shared_contexts_refuse_changes(
    make_server: ServerFactory, default_bundle: str, pki: PKI, shim: None
) -> None:
    import ssl

    from _requests_fastssl._registry import REGISTRY

    server = make_server()
    assert requests.get(server.url).status_code == 200
    ((ctx, _checks),) = REGISTRY._entries.values()
    ctx.verify_mode = ssl.CERT_REQUIRED  # the value it has: a no-op
    ctx.check_hostname = ctx.check_hostname  # (True on urllib3 2.x, False on 1.26)
    ctx.set_alpn_protocols(["http/1.1"])
    refused: list[Callable[[], object]] = [
        lambda: ctx.load_verify_locations(pki.rogue_bundle),
        lambda: ctx.load_cert_chain(*pki.client_a.pair),
        lambda: ctx.load_default_certs(),
        lambda: ctx.set_ciphers("AES128-SHA"),
        lambda: ctx.set_alpn_protocols(["h2"]),
        lambda: setattr(ctx, "check_hostname", not ctx.check_hostname),
        lambda: setattr(ctx, "verify_mode", ssl.CERT_NONE),
        lambda: setattr(ctx, "minimum_version", ssl.TLSVersion.TLSv1_3),
        lambda: setattr(ctx, "__class__", ssl.SSLContext),
        lambda: delattr(ctx, "verify_mode"),
        lambda: setattr(ctx, "sslsocket_class", object),
    ]
    for attempt in refused:
        with pytest.raises(requests_fastssl.FrozenContextError, match="requests_fastssl"):
            attempt()
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert requests.get(server.url, headers={"Connection": "close"}).status_code == 200


# --- fresh interpreters: import order, laziness, failures --------------------------------------


def test_import_installs_lazily_without_tls_work() -> None:
    out = run_python(
        """
        import sys, requests_fastssl
        print(sorted(m for m in ("requests", "ssl", "wrapt", "urllib3") if m in sys.modules))
        print(requests_fastssl.status().state.value)
        import ssl
        loads = []
        original = ssl.SSLContext.load_verify_locations
        ssl.SSLContext.load_verify_locations = lambda *a, **k: loads.append(a) or original(*a, **k)
        import requests
        print(requests_fastssl.status().state.value, len(loads))
        """
    )
    # requests 2.32.3/2.32.4 load certifi themselves at import (R7); the shim adds nothing.
    assert out.split("\n")[:3] == ["[]", "pending", "active 1" if PRELOADED else "active 0"]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ("import requests; import requests_fastssl", "active 1"),
        ("import requests_fastssl; import requests", "active 1"),
        (
            "import requests_fastssl; requests_fastssl.uninstall(); import requests",
            "not-installed 0",
        ),
        (
            "import requests_fastssl; requests_fastssl.uninstall(); requests_fastssl.install(); "
            "import requests",
            "active 1",
        ),
        (
            "import requests; import requests_fastssl; requests_fastssl.uninstall()",
            "not-installed 0",
        ),
        (
            "import requests_fastssl; import requests; requests_fastssl.uninstall(); "
            "requests_fastssl.install(); requests_fastssl.install()",
            "active 1",
        ),
        (
            "import requests_fastssl; requests_fastssl.uninstall(); requests_fastssl.uninstall(); "
            "import requests; requests_fastssl.install()",
            "active 1",
        ),
    ],
)
@pytest.mark.parametrize("activation", ["plain", "sitecustomize", "run"])
def test_import_and_install_orders(
    steps: str, expected: str, activation: str, tmp_path: Path
) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        {steps}
        import requests.adapters as a, wrapt
        from _requests_fastssl import _compat
        owner, name, mine = _compat.hook()
        layers = sum(getattr(e, "_self_wrapper", None) is mine
                     for e in wrapt.wrapper_chain(getattr(owner, name)))
        print(sys.modules["requests_fastssl"].status().state.value, layers)
        """
    )
    env = clean_env("PYTHONPATH")
    argv = [sys.executable, "-c", code]
    if activation == "sitecustomize":
        (tmp_path / "sitecustomize.py").write_text("import requests_fastssl\n")
        env["PYTHONPATH"] = str(tmp_path)
    elif activation == "run":
        argv = [sys.executable, "-m", "requests_fastssl", "run", "--", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


@pytest.mark.urllib3_2
def test_a_failing_hook_never_breaks_import_requests() -> None:
    out = run_python(
        """
        import logging, requests_fastssl
        from _requests_fastssl import _compat
        def broken():
            raise RuntimeError("boom")
        _compat.hook = broken
        import requests, urllib3.connection
        s = requests_fastssl.status()
        print(s.state.value, "|", s.reason)
        print(type(urllib3.connection._ssl_wrap_socket_and_match_hostname).__name__)
        """
    )
    state, module = out.strip().split("\n")
    assert state == "unsupported | patching failed: RuntimeError('boom')"
    assert module == "function"  # stock, unwrapped


@pytest.mark.urllib3_2
def test_unsupported_signature_leaves_requests_stock() -> None:
    out = run_python(
        """
        import logging, sys
        logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(message)s")
        import urllib3, urllib3.connection as c
        original = c._ssl_wrap_socket_and_match_hostname
        def set_up(sock, *, extra=None, **kwargs):
            return original(sock, **kwargs)
        c._ssl_wrap_socket_and_match_hostname = set_up
        import requests_fastssl
        requests_fastssl.install()
        import requests
        print(requests_fastssl.status())
        print(c._ssl_wrap_socket_and_match_hostname is set_up)
        try:
            requests_fastssl.install(strict=True)
        except requests_fastssl.UnsupportedVersionError as exc:
            print("raised:", exc)
        """
    )
    lines = out.strip().split("\n")
    version = urllib3.__version__  # type: ignore[attr-defined]
    reason = f"urllib3 {version}'s TLS set-up takes inputs this shim does not know"
    assert lines[0] == f"WARNING requests_fastssl: leaving urllib3 (and requests) stock: {reason}"
    assert lines[1] == f"unsupported: {reason}"
    assert lines[2] == "True"
    assert lines[3].startswith("raised: requests_fastssl cannot patch:")
    assert len(lines) == 4  # one warning, not one per install()


def test_no_ssl_module() -> None:
    out = run_python(
        """
        import sys
        sys.modules["ssl"] = None
        import requests_fastssl, requests
        print(requests_fastssl.status())
        """
    )
    assert out.strip() == "unsupported: this Python has no ssl module"


def test_missing_bundle_at_import_is_a_request_time_error() -> None:
    if PRELOADED:  # requests 2.32.3/2.32.4 fail at import themselves (R7, psf/requests#6749)
        code = """
        import certifi
        certifi.where = lambda: "/nonexistent/cacert.pem"
        {first}
        import requests
        """
        stock = run_python(code.format(first=""), check=False)
        shim = run_python(code.format(first="import requests_fastssl"), check=False)
        assert "FileNotFoundError" in stock
        assert shim == stock
        return
    out = run_python(
        """
        import certifi
        certifi.where = lambda: "/nonexistent/cacert.pem"
        import requests_fastssl, requests
        print(requests_fastssl.status().state.value)
        try:
            requests.get("https://127.0.0.1:9/")
        except OSError as exc:
            print(type(exc).__name__, exc)
        """
    )
    assert out.strip().split("\n") == [
        "active",
        "OSError Could not find a suitable TLS CA certificate bundle, invalid path: "
        "/nonexistent/cacert.pem",
    ]


def test_context_creation_failing_as_on_fips_hosts(
    both_modes: Any, make_server: ServerFactory, default_bundle: str
) -> None:
    import ssl

    import urllib3.connection

    server = make_server()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ssl.SSLError("[CRYPTO] unknown error")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(urllib3.connection, "create_urllib3_context", refuse)
        stock, shim = both_modes(lambda: requests.get(server.url))
    assert shim == stock
    assert stock[0] == "SSLError"
    assert "[CRYPTO] unknown error" in stock[1]
    requests_fastssl.install()
    assert requests.get(server.url).status_code == 200  # no broken entry was kept


@pytest.mark.urllib3_2
def test_status_pending_then_active_reports_reasons() -> None:
    out = run_python(
        """
        import requests_fastssl
        print(requests_fastssl.status())
        import requests
        print(requests_fastssl.status())
        requests_fastssl.uninstall()
        print(requests_fastssl.status())
        """
    )
    assert out.strip().split("\n") == [
        "pending: waiting for urllib3 to be imported",
        "active",
        "not-installed",
    ]


def test_dir_shows_the_names_loaded_on_first_use() -> None:
    """State, Stats, Status and warm are loaded lazily (start-up cost): dir() lists them."""
    import json

    out = run_python("import json, requests_fastssl; print(json.dumps(dir(requests_fastssl)))")
    names = json.loads(out)
    assert set(requests_fastssl.__all__) <= set(names)


@pytest.mark.subprocess
def test_status_is_active_for_httpx_without_urllib3() -> None:
    out = run_python("""
        import sys, httpx, requests_fastssl
        print("urllib3" in sys.modules, requests_fastssl.status())
        requests_fastssl.uninstall()
        print(requests_fastssl.status().state)
    """).splitlines()
    assert out == [
        "False active: for httpx; urllib3: waiting for urllib3 to be imported",
        "not-installed",
    ], out
