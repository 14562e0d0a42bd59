"""Known code only: the shim rewrites a connection's inputs only over urllib3 code whose
fingerprint the reviewed table holds. A locally patched urllib3, a release the table lacks and a
sourceless install are stock; zipimport and -OO installs of a tabled release share. Each case
runs the same requests stock and shimmed, each in a fresh interpreter."""

from __future__ import annotations

import compileall
import hashlib
import json
import py_compile
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import urllib3
from support import PKI, ServerFactory, run_python

from _requests_fastssl import _known
from _requests_fastssl._compat import version_tuple

urllib3_version: str = getattr(urllib3, "__version__", "")

# (urllib3 1.26 is left stock altogether: nothing here applies to it)
pytestmark = [pytest.mark.subprocess, pytest.mark.urllib3_2]

PROGRAM = """
import json, logging, os, sys
if os.environ.get("ZIP"):
    sys.path.insert(0, os.environ["ZIP"])
logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(message)s")
if os.environ["MODE"] == "shim":
    import requests_fastssl
    if os.environ.get("STRICT"):
        requests_fastssl.uninstall()
import requests, urllib3
where = os.environ.get("ZIP") or os.environ.get("WHERE")
assert where is None or urllib3.__file__.startswith(where), urllib3.__file__
if os.environ.get("STRICT"):
    try:
        requests_fastssl.install(strict=True)
        print(json.dumps(["strict", "installed"]))
    except requests_fastssl.UnsupportedVersionError as exc:
        print(json.dumps(["strict", str(exc)]))
out = []
for _ in range(2):
    try:
        r = requests.get(os.environ["URL"], verify=os.environ["CA"],
                         headers={"Connection": "close"})
        out.append([str(r.status_code)])
    except Exception as exc:
        out.append([type(exc).__qualname__, str(exc)])
print(json.dumps(out))
if os.environ["MODE"] == "shim":
    stats = requests_fastssl.stats()
    print(json.dumps([str(requests_fastssl.status()), stats.connections, stats.step_aside_reasons]))
"""


def _run(mode: str, url: str, pki: PKI, **env: str) -> list[Any]:
    """What the program printed (JSON lines), then the lines it logged."""
    out = run_python(
        PROGRAM, env={"MODE": mode, "URL": url, "CA": pki.bundle, **env}, stderr=True
    ).splitlines()
    printed = [json.loads(line) for line in out if line[:1] == "["]
    return printed + [line for line in out if line[:1] != "["]


def _copy_urllib3(where: Path) -> Path:
    """The installed urllib3's package, copied under ``where`` (an editable checkout's shape)."""
    shutil.copytree(Path(urllib3.__file__).parent, where / "urllib3")
    return where / "urllib3"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_a_locally_patched_set_up_is_stock(
    pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    # An editable checkout whose set-up pins the server's certificate whenever verify is a
    # file: with the shim's inputs (ca_certs=None) the pin used to be skipped, and a server stock
    # rejects by its pin was accepted.
    package = _copy_urllib3(tmp_path)
    connection = package / "connection.py"
    pin = hashlib.sha256(b"not the server's certificate").hexdigest()
    source = connection.read_text()
    anchor = "    default_ssl_context = False\n"
    assert anchor in source
    _edit(connection, anchor, f"    if ca_certs and not assert_fingerprint:\n"
          f"        assert_fingerprint = {pin!r}\n{anchor}")  # fmt: skip
    url = make_server().url
    env = {"PYTHONPATH": str(tmp_path), "WHERE": str(package)}
    stock, shim = _run("stock", url, pki, **env), _run("shim", url, pki, **env)
    assert stock[0][0][0] == "SSLError"
    assert "Fingerprints did not match" in stock[0][0][1]
    assert len(shim) == 3, shim
    requests_out, (status, connections, reasons), warning = shim
    assert requests_out == stock[0]
    assert connections == 0
    assert reasons == {"unknown-code": 2}
    assert status.startswith("unsupported: urllib3 ")
    assert "_ssl_wrap_socket_and_match_hostname" in status
    assert (
        warning == f"WARNING requests_fastssl: leaving urllib3 (and requests) stock: {status[13:]}"
    )


def _pin_in_set_up(package: Path) -> None:
    """The set-up pins a certificate the server does not have whenever verify is a file."""
    pin = hashlib.sha256(b"not the server's certificate").hexdigest()
    anchor = "    default_ssl_context = False\n"
    _edit(package / "connection.py", anchor, f"    if ca_certs and not assert_fingerprint:\n"
          f"        assert_fingerprint = {pin!r}\n{anchor}")  # fmt: skip


@pytest.mark.parametrize("how", ["unchecked-pyc", "rewriting-loader"])
def test_code_not_compiled_from_the_tabled_source_is_stock(
    how: str, pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    # The code that runs is patched, the source a loader returns is the release's: the
    # fingerprint is taken only of source that compiles to the code that runs.
    package = _copy_urllib3(tmp_path)
    released = (package / "connection.py").read_text()
    env = {"PYTHONPATH": str(tmp_path), "WHERE": str(package)}
    if how == "unchecked-pyc":  # (a .pyc trusted without looking at its source)
        _pin_in_set_up(package)
        py_compile.compile(
            str(package / "connection.py"),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        (package / "connection.py").write_text(released)
    else:  # (a start-up hook that instruments code as it loads it, as typeguard's does)
        hook = tmp_path / "sitecustomize.py"
        hook.write_text(REWRITING_LOADER)
    url = make_server().url
    stock, shim = _run("stock", url, pki, **env), _run("shim", url, pki, **env)
    assert stock[0][0][0] == "SSLError"
    assert "Fingerprints did not match" in stock[0][0][1]
    assert shim[0] == stock[0]
    assert shim[1][1:] == [0, {"unknown-code": 2}]


REWRITING_LOADER = """
import hashlib, importlib.machinery, sys

PIN = hashlib.sha256(b"not the server's certificate").hexdigest()
ANCHOR = "    default_ssl_context = False\\n"

class Loader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data, path, *, _optimize=-1):
        text = importlib.util.decode_source(data).replace(
            ANCHOR, f"    if ca_certs and not assert_fingerprint:\\n"
                    f"        assert_fingerprint = {PIN!r}\\n" + ANCHOR)
        return compile(text, path, "exec", dont_inherit=True)

    def get_code(self, fullname):
        source = self.get_data(self.get_filename(fullname))
        return self.source_to_code(source, self.get_filename(fullname))

class Finder:
    def find_spec(self, name, path=None, target=None):
        if name == "urllib3.connection":
            spec = importlib.machinery.PathFinder.find_spec(name, path, target)
            spec.loader = Loader(name, spec.origin)
            return spec

import importlib.util
sys.meta_path.insert(0, Finder())
"""


def test_a_release_the_table_lacks_is_stock_and_strict_refuses(
    pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    # A future release that keeps the set-up's signature but changes a body the build mirrors
    # or whose inputs it keys: here a statement added to create_urllib3_context.
    package = _copy_urllib3(tmp_path)
    ssl_ = package / "util" / "ssl_.py"
    line = "    context = SSLContext(PROTOCOL_TLS_CLIENT)\n"  # (in create_urllib3_context)
    _edit(ssl_, line, f"    _unreviewed = None\n{line}")
    url = make_server().url
    env = {"PYTHONPATH": str(tmp_path), "WHERE": str(package)}
    stock = _run("stock", url, pki, **env)
    shim = _run("shim", url, pki, **env)
    assert stock == [[["200"], ["200"]]]
    assert shim[0] == stock[0]
    assert shim[1][1:] == [0, {"unknown-code": 2}]
    assert (
        "urllib3.util.ssl_.create_urllib3_context is not code this shim has reviewed" in shim[1][0]
    )
    assert len(shim) == 3  # (one warning)
    # install(strict=True) where urllib3 is imported already: it raises, and names the function
    strict = _run("shim", url, pki, STRICT="1", **env)
    assert strict[0][0] == "strict"
    assert strict[1] == stock[0]
    assert "create_urllib3_context is not code this shim has reviewed" in strict[0][1]
    assert strict[0][1].startswith("requests_fastssl cannot patch: urllib3 ")


def test_a_sourceless_install_is_stock(
    pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    package = _copy_urllib3(tmp_path)
    assert compileall.compile_dir(str(package), quiet=1, legacy=True)
    for source in package.rglob("*.py"):
        source.unlink()
    url = make_server().url
    env = {"PYTHONPATH": str(tmp_path), "WHERE": str(package)}
    stock, shim = _run("stock", url, pki, **env), _run("shim", url, pki, **env)
    assert stock == [[["200"], ["200"]]]
    assert shim[0] == stock[0]
    status, connections, reasons = shim[1]
    assert connections == 0
    assert reasons == {"unknown-code": 2}
    assert "no source to read: a sourceless or frozen install" in status


def test_zipimport_and_optimized_installs_of_a_tabled_release_share(
    pki: PKI, make_server: ServerFactory, tmp_path: Path
) -> None:
    package = _copy_urllib3(tmp_path / "tree")
    archive = tmp_path / "urllib3.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in package.rglob("*.py"):
            z.write(path, path.relative_to(package.parent).as_posix())
    url = make_server().url
    for env in ({"ZIP": str(archive)}, {"PYTHONOPTIMIZE": "2"}):
        stock, shim = _run("stock", url, pki, **env), _run("shim", url, pki, **env)
        assert stock == [[["200"], ["200"]]], env
        assert shim[0] == stock[0], env
        assert shim[1:] == [["active", 2, {}]], env


def test_the_installed_urllib3_is_tabled_function_by_function() -> None:
    # What CI installs (the constraints file pins it) must be in the table, on every Python:
    # the fingerprint joins 3.12's f-string tokens into 3.11's one STRING token.

    if version_tuple(urllib3_version)[0] != 2:
        pytest.skip("urllib3 1.26 is left stock: no code of it is tabled")
    for module, name in _known.FUNCTIONS:
        func = getattr(sys.modules[module], name)
        func = getattr(func, "__wrapped__", func)
        source = _known.source_of(module)
        assert source is not None
        taken = _known.identify(source, func.__code__, func.__globals__)
        assert taken in _known.TABLE[f"{module}.{name}"], (module, name, urllib3_version)
        # Released text is looked up, not tokenized (ms on 3.11's tokenizer): the same answer.
        laid_out = _known._laid_out(source, func.__code__, func.__globals__)
        assert laid_out == _known._block(source, func.__code__.co_firstlineno, name)


def test_a_block_laid_out_anew_is_tokenized_to_the_same_fingerprint() -> None:
    # A comment added to a released block changes no code: its text is no released one, so its
    # tokens are taken, and they give the tabled fingerprint.

    if version_tuple(urllib3_version)[0] != 2:
        pytest.skip("urllib3 1.26 is left stock: no code of it is tabled")
    module, name = _known.FUNCTIONS[2]
    func = getattr(sys.modules[module], name)
    func = getattr(func, "__wrapped__", func)
    source = _known.source_of(module)
    assert source is not None
    code = func.__code__
    lines = source.splitlines(keepends=True)
    lines[code.co_firstlineno - 1] = lines[code.co_firstlineno - 1].rstrip("\n") + "  # local\n"
    edited = "".join(lines)
    assert _known._laid_out(source, code, func.__globals__) is not None
    assert _known._laid_out(edited, code, func.__globals__) is None
    assert _known.identify(edited, code, func.__globals__) == _known.identify(
        source, code, func.__globals__
    )
    # A changed statement is neither a released text nor a tabled fingerprint.
    changed = edited.replace("SSLContext(PROTOCOL_TLS_CLIENT)", "SSLContext(PROTOCOL_TLS_SERVER)")
    assert changed != edited
    assert (
        _known.fingerprint(changed, code.co_firstlineno, name)
        not in _known.TABLE[f"{module}.{name}"]
    )
    assert _known.identify(changed, code, func.__globals__) is None


def test_the_fingerprint_reads_tokens_not_layout() -> None:
    plain = 'def f(a):\n    """Doc."""\n    return g(a, f"{a!r} x")\n\nz = 1\n'
    spaced = "# comment\n\n"
    laid_out = (
        'def f(a):\n    """Doc."""\n\n    # why\n    return g(a,\n             f"{a!r} x")\nz = 1\n'
    )
    changed = 'def f(a):\n    """Doc."""\n    return g(a, f"{a!s} x")\n'
    taken = _known.fingerprint(plain, 1, "f")
    assert taken is not None
    assert _known.fingerprint(spaced + plain, 3, "f") == taken
    assert _known.fingerprint(laid_out, 1, "f") == taken
    assert _known.fingerprint(changed, 1, "f") != taken  # (inside an f-string, on 3.12+ too)
    assert _known.fingerprint(plain, 1, "g") is None  # (no def of that name starts there)
    assert _known.fingerprint(plain, 5, "f") is None
    # The block ends where its body does: what follows at its level is not part of it.
    assert _known.fingerprint(plain.replace("z = 1", "z = 2"), 1, "f") == taken


def test_the_module_the_set_up_reads_its_flags_through_is_urllib3s(
    pki: PKI, make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, both_modes: Any
) -> None:
    # The set-up reads IS_PYOPENSSL and HAS_NEVER_CHECK_COMMON_NAME through its own global
    # `ssl_`; the build reads urllib3.util.ssl_. Made to disagree, the shim steps aside.
    import types

    import requests
    import urllib3.connection
    import urllib3.util.ssl_

    view = types.SimpleNamespace(**vars(urllib3.util.ssl_))
    view.HAS_NEVER_CHECK_COMMON_NAME = True
    monkeypatch.setattr(urllib3.connection, "ssl_", view)
    monkeypatch.setattr(urllib3.util.ssl_, "HAS_NEVER_CHECK_COMMON_NAME", False)
    server = make_server(names=("other.test",))
    headers = {"Connection": "close"}
    stock, shim = both_modes(lambda: requests.get(server.url, verify=pki.bundle, headers=headers))
    assert stock[0] == "SSLError"
    assert shim == stock


BURST = """
import json, os, threading
from concurrent.futures import ThreadPoolExecutor
import requests_fastssl
from _requests_fastssl import _known

calls, original = [], _known.identify
def counted(*args, **kwargs):
    calls.append(args[1].co_name)
    return original(*args, **kwargs)
_known.identify = counted
import requests
at_import = sorted(calls)

def get(_):
    return requests.get(os.environ["URL"], verify=os.environ["CA"],
                        headers={"Connection": "close"}).status_code
with ThreadPoolExecutor(50) as pool:
    statuses = list(pool.map(get, range(50)))
stats = requests_fastssl.stats()
ok = statuses.count(200)
print(json.dumps([ok, at_import, sorted(calls), stats.connections, stats.ca_loads]))
"""


def test_the_code_is_identified_once_at_import_not_by_a_burst_of_first_connections(
    pki: PKI, make_server: ServerFactory
) -> None:
    # Activated inside urllib3's import, the code is identified there, once (not in a first
    # request, nor in each worker a server forks); 50 threads arriving at once add no check.
    out = run_python(BURST, env={"URL": make_server().url, "CA": pki.bundle})
    ok, at_import, calls, connections, loads = json.loads(out)
    assert ok == 50
    assert at_import == calls == sorted(name for _, name in _known.FUNCTIONS)
    assert (connections, loads) == (50, 1)
