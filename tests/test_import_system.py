"""The import system left as found (issue 39): the shim's ``sys.meta_path`` entry beside other
import hooks. Each case runs one program in fresh interpreters, stock (the shim never imported)
and shimmed, and compares what the program saw: a request's outcome against a local HTTPS
server, an import that worked or failed, the loaders left on ``urllib3.connection``.

- An old-style hook (wrapt 1.12's ``ImportHookFinder``: ``find_module``, a loader with only
  ``load_module``) still sees urllib3's import, in either order with the shim's entry.
- Activation inside another finder's lazy import leaves that import's iteration alone.
- Another hook's loader wrapping the shim's keeps its own on the module.
- ``missed()`` tells status() that urllib3 was imported past the shim's entry.
"""

from __future__ import annotations

import sys

import pytest
from support import PKI, ServerFactory, run_python

# (urllib3 1.26 is left stock altogether: nothing here applies to it)
pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.urllib3_2,
]  # every test here starts fresh interpreters

LEGACY = sys.version_info < (3, 12)  # (3.12 asks no finder without find_spec, stock or shim)

# wrapt 1.12's post-import hook machinery, reduced to one hook: a finder with find_module only
# that asks the import system again for the real loader, and a loader with load_module only that
# runs the hook once the module is loaded. The hook pins the server's certificate on urllib3's
# TLS set-up, to a fingerprint the server's does not have: every connection must fail.
LEGACY_PIN = """
import functools, importlib.util, re, sys, warnings  # (re: filterwarnings imports it later)

class ChainedLoader:
    def __init__(self, loader):
        self.loader = loader

    def load_module(self, fullname):
        module = self.loader.load_module(fullname)
        original = module._ssl_wrap_socket_and_match_hostname
        @functools.wraps(original)
        def pinned(sock, **kwargs):
            return original(sock, **{**kwargs, "assert_fingerprint": "00" * 32})
        module._ssl_wrap_socket_and_match_hostname = pinned
        return module

class ImportHookFinder:
    def __init__(self):
        self.in_progress = {}

    def find_module(self, fullname, path=None):
        if fullname != "urllib3.connection" or fullname in self.in_progress:
            return None
        self.in_progress[fullname] = True
        try:
            loader = importlib.util.find_spec(fullname).loader
            return ChainedLoader(loader) if loader else None
        finally:
            del self.in_progress[fullname]

if ORDER == "shim-first" and SHIM:
    import requests_fastssl
sys.meta_path.insert(0, ImportHookFinder())
if ORDER == "hook-first" and SHIM:
    import requests_fastssl
# From here, as -W error would: from the start it would raise in the set-up's imports above,
# which ask the old-style finder too.
with warnings.catch_warnings():
    if WARNINGS != "default":
        warnings.simplefilter("error")
    if WARNINGS == "error-but-find-module":
        warnings.filterwarnings("ignore", r".*find_spec\\(\\) not found", ImportWarning)
    try:
        import requests
        response = requests.get(URL, verify=BUNDLE)
        print(response.status_code)
    except Exception as exc:
        print(type(exc).__name__, exc)
if SHIM:
    print(requests_fastssl.status())
"""


def _both(program: str, env: dict[str, str] | None = None, **names: object) -> tuple[str, str]:
    """The program's output stock, then shimmed (``SHIM`` and ``names`` set in front). ``ORDER``
    names what is installed first: the other goes in front of it in sys.meta_path."""
    header = "".join(f"{name} = {value!r}\n" for name, value in names.items())
    stock = run_python(f"SHIM = False\n{header}{program}", env=env)
    shim = run_python(f"SHIM = True\n{header}{program}", env=env)
    return stock, shim


@pytest.mark.urllib3_2  # (urllib3 1.26 has no set-up function to pin on)
@pytest.mark.parametrize("order", ["hook-first", "shim-first"])
@pytest.mark.parametrize("warnings", ["default", "error", "error-but-find-module"])
def test_an_old_style_import_hook_still_sees_urllib3(
    order: str, warnings: str, make_server: ServerFactory, pki: PKI
) -> None:
    """On 3.11 CPython asks a finder without find_spec through find_module (with an
    ImportWarning; under ``-W error`` the warning is raised): so must the shim's entry, which
    asks the finders after it. Its loader (load_module only) then loads urllib3.connection, and
    the shim switches on after it, on top of the pin. ``-W error``, and ``-W error`` but for
    the find_module warning (the load_module one is raised then): the same warning either way."""
    server = make_server()
    stock, shim = _both(
        LEGACY_PIN, ORDER=order, WARNINGS=warnings, URL=server.url, BUNDLE=pki.bundle
    )
    *outcome, status = shim.splitlines()
    assert outcome == stock.splitlines()
    if not LEGACY:
        assert stock == "200\n"
        assert status == "active"
    elif warnings == "default":
        assert stock.startswith("SSLError ")
        assert "Fingerprints did not match" in stock
        assert status == "active"
    elif warnings == "error":  # (every import asks the finder: `import requests` raises)
        assert stock == (
            "ImportWarning ImportHookFinder.find_spec() not found; falling back to find_module()\n"
        )
    else:
        assert stock == (
            "ImportWarning ChainedLoader.exec_module() not found; falling back to load_module()\n"
        )


# A finder in front of the built-in importer that imports WHAT (urllib3, or requests) lazily,
# the first time it is asked for `gc`: the program's `import gc` runs urllib3's import inside
# CPython's iteration of sys.meta_path, and with it the shim's activation (and, with
# REQUESTS_FASTSSL_WARM, its wait for requests.adapters).
LAZY = """
import sys
from importlib.machinery import BuiltinImporter

class Lazy:
    def __init__(self):
        self.armed, self.busy, self.asked = False, False, []

    def find_spec(self, name, path=None, target=None):
        if not self.armed or self.busy:
            return None
        self.asked.append(name)
        if name == "gc":
            self.busy = True
            try:
                __import__(WHAT)
            finally:
                self.busy = False
        return None

lazy = Lazy()
if ORDER == "shim-first" and SHIM:
    import requests_fastssl
at = sys.meta_path.index(BuiltinImporter) if ORDER == "finder-first" else 0
sys.meta_path.insert(at, lazy)
if ORDER == "finder-first" and SHIM:
    import requests_fastssl
lazy.armed = True
try:
    import gc, pwd
    print("imported", gc.__name__, pwd.__name__)
except Exception as exc:
    print(type(exc).__name__, exc)
lazy.armed = False
print("asked", lazy.asked)
print(sorted(m for m in ("urllib3", "requests") if m in sys.modules))
if SHIM:
    print(requests_fastssl.status())
"""


@pytest.mark.parametrize(
    ("order", "what", "warm"),
    [
        ("finder-first", "urllib3", False),
        ("finder-first", "requests", False),
        ("finder-first", "requests", True),
        ("shim-first", "urllib3", True),
    ],
)
def test_activation_inside_another_finders_lazy_import_breaks_no_import(
    order: str, what: str, warm: bool
) -> None:
    """Taking the shim's entry out of sys.meta_path there shifts the list under CPython's loop:
    the finder after the lazy one is skipped (`import gc`: ModuleNotFoundError); putting a new
    one in front of it makes CPython ask the lazy finder twice. The entry stays where it was."""
    env = {"REQUESTS_FASTSSL_WARM": "1"} if warm else {}
    stock, shim = _both(LAZY, env, ORDER=order, WHAT=what)
    *seen, status = shim.splitlines()
    assert seen == stock.splitlines()
    # (the lazy finder asked for gc at least: pwd may be imported at start-up, as on 3.14)
    assert stock.splitlines()[0] == "imported gc pwd"
    assert stock.splitlines()[1].startswith("asked ['gc'")
    assert status == "active"


# Another hook (a tracer's) that asks every finder for urllib3.connection, as ddtrace's does,
# and wraps the loader found in its own, which it leaves on the module.
FOREIGN = """
import sys

class ForeignLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)

class Foreign:
    def __init__(self):
        self.finding = set()

    def find_spec(self, name, path=None, target=None):
        if name != "urllib3.connection" or name in self.finding:
            return None
        self.finding.add(name)
        try:
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        break
            else:
                return None
        finally:
            self.finding.discard(name)
        spec.loader = ForeignLoader(spec.loader)
        return spec

def ddtrace():
    from ddtrace.internal.module import ModuleWatchdog
    ModuleWatchdog.register_module_hook("urllib3.connection", lambda module: None)

def foreign():
    if HOOK == "foreign":
        sys.meta_path.insert(0, Foreign())
    elif HOOK == "ddtrace":
        ddtrace()

if ORDER == "shim-first" and SHIM:
    import requests_fastssl
foreign()
if ORDER == "hook-first" and SHIM:
    import requests_fastssl
import urllib3.connection as c
print(type(c.__loader__).__name__, type(c.__spec__.loader).__name__)
if SHIM:
    print(requests_fastssl.status())
"""


@pytest.mark.parametrize(
    ("hook", "order"),
    [
        ("none", "shim-first"),
        ("foreign", "hook-first"),
        ("foreign", "shim-first"),
        ("ddtrace", "hook-first"),
        pytest.param(
            "ddtrace",
            "shim-first",
            marks=pytest.mark.xfail(
                strict=True,
                reason="ddtrace's loader, wrapping ours, puts back the one it wrapped (ours) "
                "after ours ran; nothing of ours runs after it",
            ),
        ),
    ],
)
def test_another_hooks_loader_stays_on_the_module(hook: str, order: str) -> None:
    """The shim's loader puts the one it wrapped back on the module where its own is, and
    nowhere else: a loader wrapping the shim's keeps its own there, as in stock."""
    stock, shim = _both(FOREIGN, HOOK=hook, ORDER=order)
    loaders, status = shim.splitlines()
    assert loaders == stock.strip()
    assert status == "active"
    assert (
        stock.strip()
        == {
            "none": "SourceFileLoader SourceFileLoader",
            "foreign": "ForeignLoader ForeignLoader",
            "ddtrace": "SourceFileLoader _ImportHookChainedLoader",  # (it restores __loader__ only)
        }[hook]
    )


# missed(TARGET) read where it matters: urllib3.connection imported by a finder in front of the
# shim's entry that handles it itself (the shim's loader never runs), or by the shim's entry,
# read from inside the import through an old-style loader after the shim's (still running).
MISSED = """
import importlib.machinery, sys
from importlib.machinery import BuiltinImporter
import requests_fastssl
from _requests_fastssl import _import_hook

seen = [_import_hook.missed(_import_hook.TARGET)]

class Loader:
    def __init__(self, loader):
        self.loader = loader

    def load_module(self, fullname):
        module = self.loader.load_module(fullname)
        seen.append(_import_hook.missed(fullname))
        return module

class InFront:
    def find_spec(self, name, path=None, target=None):
        if name == "urllib3.connection":
            return importlib.machinery.PathFinder.find_spec(name, path, target)

class Behind:
    def find_module(self, name, path=None):
        if name == "urllib3.connection":
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            return Loader(spec.loader)

if HOW == "in-front":
    sys.meta_path.insert(0, InFront())
elif HOW == "behind":
    sys.meta_path.insert(sys.meta_path.index(BuiltinImporter), Behind())
import urllib3
seen.append(_import_hook.missed(_import_hook.TARGET))
print(seen, requests_fastssl.status())
print(requests_fastssl.install())
"""


@pytest.mark.parametrize("how", ["in-front", "ours", "behind"])
def test_missed_tells_an_import_past_the_shims_entry(how: str) -> None:
    """True once urllib3.connection is complete while the shim still waits for it; never while
    its import runs, nor when the kill switch left nothing waiting."""
    if how == "behind" and not LEGACY:
        pytest.skip("3.12 asks no finder without find_spec")
    program = f"HOW = {how!r}\n{MISSED}"
    stock = run_python(program, env={"REQUESTS_FASTSSL_DISABLE": "1"})
    shim = run_python(program)
    during = [False] if how == "behind" else []
    assert stock.splitlines() == [
        str([False, *during, False]) + " disabled: REQUESTS_FASTSSL_DISABLE=1",
        "disabled: REQUESTS_FASTSSL_DISABLE=1",
    ]
    missed = (
        " pending: urllib3 was imported through another finder in front of the shim's, which "
        "did not call back; install() activates it"
    )
    assert shim.splitlines() == [
        str([False, *during, how == "in-front"]) + (missed if how == "in-front" else " active"),
        "active",
    ]
