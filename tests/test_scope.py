"""One scope (issue 27): the shim follows urllib3, not requests. Every activation mode shares
contexts in a program that never imports requests; botocore's clients, plain PoolManagers and
requests-toolbelt's ``SSLAdapter(PROTOCOL_TLS_CLIENT)`` load a bundle once per contents, with
stock's outcomes (status or exception type and message, and the client certificate the server
saw), compared in one run."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import PKI, ServerFactory, clean_env, run_python, session_with, stock_and_shim

import requests_fastssl
from _requests_fastssl.cli.loads import counting_loads

pytestmark = pytest.mark.urllib3_2
CLOSE = {"Connection": "close"}

# A program that never imports requests: five PoolManagers, one connection each. It first
# shows what its activation line imported (nothing of urllib3, ssl, wrapt or requests).
PROGRAM = """
import json, sys
early = sorted(m for m in ("urllib3", "ssl", "wrapt", "requests") if m in sys.modules)
{activation}
before = sorted(m for m in ("urllib3", "ssl", "wrapt", "requests") if m in sys.modules)
import urllib3
from _requests_fastssl import _install
from _requests_fastssl.cli.loads import counting_loads
with counting_loads() as loads:
    for _ in range(5):
        with urllib3.PoolManager(ca_certs=sys.argv[2]) as pool:
            assert pool.request("GET", sys.argv[1]).status == 200
print("RESULT", json.dumps({{
    "early": early, "before": before, "state": _install.status().state.value,
    "loads": loads.verify_locations, "requests": "requests" in sys.modules,
}}))
"""


def _result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout
    result: dict[str, Any] = json.loads(lines[0][7:])
    return result


def _python(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = clean_env("PYTHONPATH")
    full.update(env)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=120
    )


@pytest.mark.subprocess
@pytest.mark.parametrize("mode", ["import", "install", "sitecustomize", "run", "pytest"])
def test_every_activation_mode_shares_for_urllib3_without_requests(
    mode: str, tmp_path: Path, make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    activation = {
        "import": "import requests_fastssl",
        "install": "from _requests_fastssl._install import install; install()",
    }.get(mode, "")
    program = PROGRAM.format(activation=activation)
    script = tmp_path / "program.py"
    script.write_text(program)
    env: dict[str, str] = {}
    args = [str(script), server.url, pki.bundle]
    if mode == "sitecustomize":
        site = tmp_path / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text("import requests_fastssl\n")
        env["PYTHONPATH"] = str(site)
    elif mode == "run":
        args = ["-m", "requests_fastssl", "run", "--", sys.executable, *args]
    elif mode == "pytest":
        test = tmp_path / "test_program.py"
        test.write_text(
            "import subprocess, sys\n"
            f"ARGV = ['program', {server.url!r}, {pki.bundle!r}]\n"
            "def test_program():\n"
            f"    sys.argv = ARGV\n    exec(compile({program!r}, 'program', 'exec'), {{}})\n"
        )
        # Our plugin alone: another installed one (requests-mock's) imports requests.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugin = ["-p", "_requests_fastssl.pytest_plugin", "-p", "no:cacheprovider"]
        args = ["-m", "pytest", "-q", "-s", *plugin, "--fastssl", str(test)]
    result = _result(_python(args, tmp_path, env))
    assert result["state"] == "active"
    assert result["loads"] == 1  # stock: 5
    assert result["requests"] is False  # nothing imported requests
    if mode in ("import", "install", "sitecustomize", "run"):
        assert result["early"] == []
        assert result["before"] == []  # nothing of urllib3 changes before it is imported


@pytest.mark.subprocess
def test_an_activation_before_urllib3_changes_nothing_until_it_is_imported(
    tmp_path: Path,
) -> None:
    """Until urllib3 is imported: no module but our small ones, urllib3 untouched; then one
    import of urllib3 (not of requests) patches it."""
    code = (
        "import sys; import requests_fastssl\n"
        "from _requests_fastssl import _install\n"
        "print(_install.status())\n"
        "import urllib3.connection as c\n"
        "print(_install.status(), type(c._ssl_wrap_socket_and_match_hostname).__name__,\n"
        "      'requests' in sys.modules)\n"
    )
    proc = _python(["-c", code], tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "pending: waiting for urllib3 to be imported",
        "active FunctionWrapper False",
    ]


# --- Callers with their own context: botocore ---------------------------------------------

boto3 = pytest.importorskip("boto3")  # (in the test group: never skipped in CI)


def _s3(
    url: str, verify: Any, client_cert: Any = None, retries: int = 0
) -> Callable[[], list[Any]]:
    """One boto3 S3 client (made inside the call, so stock and shim each get their own),
    three ListObjectsV2 calls, each on a new connection (the server closes them)."""
    from botocore.config import Config

    def calls() -> list[Any]:
        client = boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            verify=verify,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": retries + 1, "mode": "standard"},
                client_cert=client_cert,
            ),
        )
        out: list[Any] = []
        for _ in range(3):
            try:
                keys = client.list_objects_v2(Bucket="bucket")["Contents"]
                out.append(("ok", keys[0]["Key"]))
            except Exception as exc:
                out.append((type(exc).__name__, str(exc)))
        client.close()
        return out

    return calls


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """botocore reads its trust and credentials from the environment (our machines export
    AWS_CA_BUNDLE): cleared, so that each test names what it trusts."""
    for name in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize(
    "case", ["ok", "wrong-ca", "hostname-mismatch", "verify-false", "client-cert"]
)
def test_botocore_gives_stock_outcomes_and_loads_once(
    case: str, make_server: ServerFactory, pki: PKI
) -> None:
    if case == "hostname-mismatch":
        server = make_server(names=("other.test",))
    elif case == "client-cert":
        server = make_server(client_certs="optional")
    else:
        server = make_server()
    verify: Any = {"wrong-ca": pki.rogue_bundle, "verify-false": False}.get(case, pki.bundle)
    cert = pki.client_a.pair if case == "client-cert" else None
    calls = _s3(server.url, verify, cert)
    with counting_loads() as loads:
        stock, shim = stock_and_shim(calls)
    assert shim == stock
    if case in ("ok", "verify-false", "client-cert"):
        cn = "client-a" if case == "client-cert" else "-"
        assert [status for status, _ in stock] == ["ok"] * 3
        assert all(key.startswith(f"client_cn={cn};") for _, key in stock)
    else:
        assert all(status == "SSLError" for status, _ in stock), stock
    if case in ("ok", "client-cert"):
        assert loads.verify_locations == 3 + 1  # stock's three, then the shim's one
    if case == "verify-false":
        assert loads.verify_locations == loads.default_certs == 0  # none either way


@pytest.mark.usefixtures("aws_env")
def test_botocore_reloads_a_bundle_rewritten_between_calls(
    make_server: ServerFactory, pki: PKI, tmp_path: Path
) -> None:
    """Once per contents: a bundle rewritten in place under a client's context is loaded
    again (trust can only grow in a context, as in stock, which adds the new contents)."""
    server = make_server()
    bundle = tmp_path / "bundle.pem"

    def calls() -> list[Any]:
        bundle.write_bytes(Path(pki.rogue_bundle).read_bytes())
        out = _s3(server.url, str(bundle))()[:1]
        bundle.write_bytes(Path(pki.bundle).read_bytes())
        return out + _s3(server.url, str(bundle))()

    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[0][0] == "SSLError"
    assert [s for s, _ in stock[1:]] == ["ok"] * 3


# --- Plain urllib3 and requests-toolbelt ----------------------------------------------------


def _pool_calls(url: str, bundle: str, per_thread: bool) -> Callable[[], list[Any]]:
    import urllib3

    def calls() -> list[Any]:
        out: list[Any] = []
        shared = urllib3.PoolManager(ca_certs=bundle, headers={"Connection": "close"})

        def one() -> None:
            pool = urllib3.PoolManager(ca_certs=bundle) if per_thread else shared
            try:
                response = pool.request("GET", url, headers={"Connection": "close"}, retries=0)
                out.append((response.status, json.loads(response.data)["client_cn"]))
            except Exception as exc:
                out.append((type(exc).__name__, str(exc)))

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sorted(out, key=repr)

    return calls


@pytest.mark.parametrize("per_thread", [False, True], ids=["shared", "one-per-thread"])
def test_plain_pool_managers_load_once(
    per_thread: bool, make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    before = requests_fastssl.stats()
    with counting_loads() as loads:
        stock, shim = stock_and_shim(_pool_calls(server.url, pki.bundle, per_thread))
    assert shim == stock == [(200, None)] * 6
    assert requests_fastssl.stats().since(before).connections == 6
    assert loads.verify_locations == 6 + 1  # (threads started in the block are counted)


@pytest.mark.parametrize(
    "version",
    [ssl.PROTOCOL_TLS_CLIENT, ssl.PROTOCOL_TLS, "PROTOCOL_TLS_CLIENT"],
    ids=["PROTOCOL_TLS_CLIENT", "PROTOCOL_TLS", "by-name"],
)
def test_toolbelt_ssl_adapter_with_the_default_protocol_is_shared(
    version: Any, make_server: ServerFactory, pki: PKI
) -> None:
    """requests-toolbelt's ``SSLAdapter(ssl.PROTOCOL_TLS_CLIENT)``: urllib3 2 treats that
    ssl_version as none (no warning, the same context), so the shim shares it again."""
    import warnings

    import requests
    from requests_toolbelt.adapters.ssl import SSLAdapter

    wrong = make_server(ca=pki.rogue_ca)
    server = make_server(client_certs="optional")

    def calls() -> list[Any]:
        out: list[Any] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = session_with(SSLAdapter(version))
            targets = [(server.url, None), (server.url, pki.client_a.pair), (wrong.url, None)]
            for url, cert in targets:
                try:
                    r = session.get(url, verify=pki.bundle, cert=cert, headers=CLOSE)
                    out.append((r.status_code, r.json()["client_cn"]))
                except requests.RequestException as exc:
                    out.append((type(exc).__name__, str(exc)))
        out.append(sorted(str(w.message) for w in caught))
        return out

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    assert shim == stock
    assert stock[0] == (200, None)
    assert stock[1][0] == 200  # (with or without the certificate: requests < 2.32 keys pools
    assert stock[2][0] == "SSLError"  # by host alone, so the pool's first settings stay)
    assert stock[3] == []  # no warning either way
    since = requests_fastssl.stats().since(before)
    assert since.connections == 3
    assert "ssl-version" not in since.step_aside_reasons


@pytest.mark.filterwarnings("ignore:ssl.PROTOCOL_TLSv1_2 is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:'ssl_version' option is deprecated:FutureWarning")
@pytest.mark.filterwarnings("ignore:'ssl_version' option is deprecated:DeprecationWarning")
def test_a_fixed_protocol_version_still_goes_to_stock(make_server: ServerFactory, pki: PKI) -> None:
    """Where urllib3 does something per connection for ssl_version (a pinned version: it
    warns, every time), stock does the work."""
    from requests_toolbelt.adapters.ssl import SSLAdapter

    server = make_server()

    def calls() -> Any:
        session = session_with(SSLAdapter(ssl.PROTOCOL_TLSv1_2))
        return [
            session.get(server.url, verify=pki.bundle, headers=CLOSE).json()["tls"] for _ in "ab"
        ]

    before = requests_fastssl.stats()
    stock, shim = stock_and_shim(calls)
    assert shim == stock == ["TLSv1.2"] * 2
    assert requests_fastssl.stats().since(before).step_aside_reasons == {"ssl-version": 2}


# --- requests 2.32.0-2.32.4: their own preloaded context --------------------------------------

PRELOADED = """
import json, sys, requests, requests_fastssl
from _requests_fastssl.cli.loads import counting_loads
url, bundle, cert, key = sys.argv[1:5]
CASES = {
    "verify=True (its preloaded certifi context)": dict(verify=True),
    "verify=True, a client certificate": dict(verify=True, cert=(cert, key)),
    "verify=bundle": dict(verify=bundle),
    "verify=bundle, a client certificate": dict(verify=bundle, cert=(cert, key)),
    "verify=False": dict(verify=False),
}
def run():
    out, loads = {}, {}
    for name, kwargs in CASES.items():
        got = []
        with counting_loads() as count:
            for _ in range(3):
                try:
                    r = requests.get(url, headers={"Connection": "close"}, **kwargs)
                    got.append([r.status_code, r.json()["client_cn"]])
                except requests.RequestException as exc:
                    got.append([type(exc).__name__, str(exc)])
        out[name], loads[name] = got, count.verify_locations + count.default_certs
    return out, loads
requests_fastssl.uninstall()
stock = run()
requests_fastssl.install()
shim = run()
print("RESULT", json.dumps({"version": requests.__version__, "stock": stock, "shim": shim,
                            "state": requests_fastssl.status().state.value}))
"""


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.index
def test_requests_2_32_2_with_its_preloaded_context(
    tmp_path: Path, make_server: ServerFactory, pki: PKI
) -> None:
    """requests 2.32.0-2.32.4 hand urllib3 their own context for verify=True (preloaded with
    certifi's bundle): the shim meets it as any caller's context and leaves it theirs, with
    stock's outcomes; a verify path is shared as in every other requests."""
    from support import ROOT

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "requests==2.32.2", "urllib3==2.8.0", "wrapt>=2.4"], check=True)
    subprocess.run([*pip, "--no-deps", str(ROOT)], check=True)
    server = make_server(client_certs="optional")
    args = [server.url, pki.bundle, pki.client_a.cert, pki.client_a.key]
    proc = subprocess.run(
        [python, "-c", PRELOADED, *args],
        capture_output=True, text=True, env=clean_env("PYTHONPATH"), cwd=tmp_path, timeout=300,
    )  # fmt: skip
    result = _result(proc)
    assert result["version"] == "2.32.2"
    assert result["state"] == "active"
    (stock, stock_loads), (shim, shim_loads) = result["stock"], result["shim"]
    assert shim == stock
    assert stock["verify=True (its preloaded certifi context)"][0][0] == "SSLError"
    assert stock["verify=bundle"] == [[200, None]] * 3
    assert stock["verify=bundle, a client certificate"] == [[200, "client-a"]] * 3
    assert stock["verify=False"] == [[200, None]] * 3
    assert stock_loads["verify=bundle"] == 3
    assert shim_loads["verify=bundle"] == 1
    assert shim_loads["verify=False"] == 1  # (stock: the system store at each connection)
    assert shim_loads["verify=True (its preloaded certifi context)"] == 0  # preloaded: none


# --- Activation beside other import machinery (a helper's attack on the urllib3 hook) ------

# A finder placed before anything else that holds urllib3.connection's execution in a worker
# thread until the main thread says go (or fails it): an import in flight that the shim's hook
# never saw. Events, not sleeps.
HELD_IMPORT = """
import importlib.abc, importlib.util, sys, threading
started, go = threading.Event(), threading.Event()
class Held(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "urllib3.connection":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        real = spec.loader
        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return real.create_module(spec)
            def exec_module(self, module):
                started.set()
                go.wait(60)
                if FAIL:
                    raise ImportError("broken install")
                real.exec_module(module)
        spec.loader = Loader()
        return spec
sys.meta_path.insert(0, Held())
errors = []
def worker():
    try:
        import urllib3
    except ImportError as exc:
        errors.append(str(exc))
thread = threading.Thread(target=worker)
thread.start()
started.wait(60)
import requests_fastssl  # while the worker is inside urllib3.connection: no wait, no error
print(requests_fastssl.status())
go.set()
thread.join(60)
print(errors)
if not FAIL:
    print(requests_fastssl.install())
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("fail", [False, True], ids=["completes", "fails"])
def test_an_import_of_urllib3_in_flight_elsewhere_is_never_waited_for(fail: bool) -> None:
    out = run_python(f"FAIL = {fail}\n" + HELD_IMPORT).splitlines()
    assert out[0] == (
        "pending: urllib3 was being imported when install() ran; call install() again once it "
        "is imported"
    )
    assert out[1] == ("['broken install']" if fail else "[]")  # the worker's own error only
    if not fail:
        assert out[2] == "active"


@pytest.mark.subprocess
def test_another_finder_that_asks_every_finder_does_not_loop_with_ours() -> None:
    out = run_python(
        """
        import sys, requests_fastssl
        class Delegating:
            def find_spec(self, fullname, path=None, target=None):
                if not fullname.startswith("urllib3"):
                    return None
                for finder in sys.meta_path:
                    if finder is self or not hasattr(finder, "find_spec"):
                        continue
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        return spec
        sys.meta_path.insert(0, Delegating())
        import urllib3
        print(requests_fastssl.status())
        """
    )
    assert out.strip() == "active"


@pytest.mark.subprocess
def test_install_from_inside_urllib3s_own_import() -> None:
    """Another library's post-import hook on a module urllib3 imports early calls install():
    urllib3 is half-imported in this very thread; the shim switches on when its set-up
    module has run, and the program's import is untouched."""
    out = run_python(
        """
        import importlib.abc, importlib.util, sys
        class After(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name != "urllib3.exceptions":
                    return None
                sys.meta_path.remove(self)
                spec = importlib.util.find_spec(name)
                real = spec.loader
                class Loader(importlib.abc.Loader):
                    def create_module(self, spec):
                        return real.create_module(spec)
                    def exec_module(self, module):
                        real.exec_module(module)
                        import requests_fastssl
                        requests_fastssl.install()
                spec.loader = Loader()
                return spec
        sys.meta_path.insert(0, After())
        import logging; logging.basicConfig(level=logging.WARNING)
        import urllib3
        import requests_fastssl
        print(urllib3.__version__ != "", requests_fastssl.status())
        """,
        stderr=True,
    )
    assert out.strip() == "True active"  # (and no warning on stderr)


@pytest.mark.subprocess
def test_a_lazy_import_of_urllib3_stays_lazy() -> None:
    code = """
        import importlib.util, sys
        {activation}
        spec = importlib.util.find_spec("urllib3")
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules["urllib3"] = module
        spec.loader.exec_module(module)
        print(sorted(m for m in ("urllib3.connection", "ssl") if m in sys.modules))
        """
    stock = run_python(code.format(activation=""))
    shim = run_python(code.format(activation="import requests_fastssl"))
    assert shim == stock == "[]\n"


@pytest.mark.subprocess
def test_a_factory_that_is_not_a_function_goes_to_stock_without_an_error(
    make_server: ServerFactory, pki: PKI
) -> None:
    server = make_server()
    out = run_python(
        f"""
        import functools, ssl, sys, urllib3, urllib3.util.ssl_ as s
        s.create_urllib3_context = functools.partial(s.create_urllib3_context)
        import requests_fastssl
        print(requests_fastssl.status())
        pool = urllib3.PoolManager(ca_certs={pki.bundle!r}, ssl_version=ssl.PROTOCOL_TLS_CLIENT)
        print(pool.request("GET", {server.url!r}).status)
        print(dict(requests_fastssl.stats().step_aside_reasons))
        """,
        stderr=True,
    )
    assert out.splitlines() == ["active", "200", "{'urllib3-replaced': 1}"]  # nothing logged


@pytest.mark.subprocess
def test_urllib3_imported_again_after_deletion_is_noticed() -> None:
    out = run_python(
        """
        import sys, requests_fastssl, urllib3
        for name in [n for n in sys.modules if n == "urllib3" or n.startswith("urllib3.")]:
            del sys.modules[name]
        import urllib3.connection as c
        print(requests_fastssl.status().state.value)
        print(requests_fastssl.install(), type(c._ssl_wrap_socket_and_match_hostname).__name__)
        """
    )
    assert out.splitlines() == ["not-installed", "active FunctionWrapper"]
