"""Green libraries (issue 42): under gevent's and eventlet's monkey patching, stock's outcomes.

Patching is process-wide, so every case runs in fresh interpreters, one stock (the shim never
imported) and one with the shim, each patching first and then importing requests (or, for a
late patch, the other way round). The servers run here, in threads of the pytest process,
which patches nothing. What is compared, stock against shim: each request's status and the
client certificate the server answered with, or its exception type and message; the client
certificates the servers and the HTTPS proxy recorded; the warnings the patch gave; and the
SSLContext class urllib3 ended up with.

Three kinds of assertion, kept apart:

- ``test_stock_outcomes_under_green``: the shim gives stock's outcomes (and stock gives the
  outcome the case expects, so that two equal failures of the set-up pass for nothing).
- ``test_SHARING_the_shim_shares_under_green_patching``: not equivalence but the point of issue 42:
  N new connections with one bundle make one CA load and leave nothing to stock.
- ``test_late_patch_steps_aside``: gevent or eventlet patched after urllib3 was imported;
  stock raises RecursionError on every new connection, and the shim must step aside
  (``context-class``), even with a context it had cached before the patch.

A case is one line of ``CASES``: a name, the statements the child runs (``CHILD``
below has the helpers they use: ``get``, ``rotate``, ``rewrite``, ``patch``, ``note``; ``S``
names the servers and files) and the stock outcome expected.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from loopback_proxy import LoopbackProxy
from support import PKI, ROOT, URLLIB3_1, clean_env

from _requests_fastssl.cli.server import HTTPSServer, server_context

pytestmark = pytest.mark.subprocess
# (a leg whose Python has no gevent wheel installs the group without it: these skip, saying so)
pytest.importorskip("gevent", reason="gevent is not installed: no wheel for this Python")

# How each library patches, and the class urllib3's SSLContext is afterwards.
GREENS = {
    "gevent": ("from gevent import monkey; monkey.patch_all()", "gevent.ssl.SSLContext"),
    "eventlet": ("import eventlet; eventlet.monkey_patch()", "eventlet.green.ssl.GreenSSLContext"),
}


@dataclass(frozen=True)
class Case:
    name: str
    body: str  # statements run in the child (see CHILD)
    expect: tuple[str, ...]  # stock's outcome per request: a status or an exception type
    late: bool = False  # patch only when the body calls patch(), after requests is imported


N = 5  # new connections in the sharing test

CASES = [
    Case("success", "get(S.ok); get(S.ok); get(S.ok)", ("200", "200", "200")),
    Case("wrong-ca", "get(S.rogue); get(S.ok)", ("SSLError", "200")),
    Case("hostname-mismatch", "get(S.wrong_host); get(S.ok)", ("SSLError", "200")),
    Case("verify-false", "get(S.rogue, verify=False); get(S.ok, verify=False)", ("200", "200")),
    Case("client-cert", "get(S.ok, cert=S.client_a); get(S.ok)", ("200", "200")),
    Case("client-cert-one-file", "get(S.ok, cert=S.client_b_pem)", ("200",)),
    Case("wrong-ca-with-client-cert", "get(S.rogue, cert=S.client_a)", ("SSLError",)),
    Case(
        "bundle-replaced",
        "get(S.ok, verify=S.rotating); rotate(S.rogue_bundle); get(S.ok, verify=S.rotating); "
        "rotate(S.bundle); get(S.ok, verify=S.rotating)",
        ("200", "SSLError", "200"),
    ),
    Case(
        "bundle-rewritten-in-place",
        "get(S.ok, verify=S.rotating); rewrite(S.rogue_bundle); get(S.ok, verify=S.rotating); "
        "rewrite(S.bundle); get(S.ok, verify=S.rotating)",
        ("200", "SSLError", "200"),
    ),
    Case("https-proxy", "get(S.ok, proxies=S.proxy); get(S.ok, proxies=S.proxy)", ("200", "200")),
    Case("https-proxy-client-cert", "get(S.ok, proxies=S.proxy, cert=S.client_a)", ("200",)),
    Case("https-proxy-wrong-ca", "get(S.rogue, proxies=S.proxy)", ("SSLError",)),
    Case("keylog", "keylog(); get(S.ok); get(S.ok); note(keylog_lines())", ("200", "200")),
    Case("timeout", "get(S.silent, timeout=0.3); get(S.ok)", ("ReadTimeout", "200")),
    Case("late-patch", "patch(); get(S.ok); get(S.ok)", ("RecursionError",) * 2, late=True),
    Case(
        "late-patch-after-a-cached-context",
        "get(S.ok); patch(); get(S.ok); get(S.ok, cert=S.client_a); get(S.ok, verify=False)",
        ("200", "RecursionError", "RecursionError", "RecursionError"),
        late=True,
    ),
]
BY_NAME = {case.name: case for case in CASES}

# The child: argv[1] is a JSON object (patch, mode, late, order, body, world); it prints one
# JSON object. Stock children never import requests_fastssl (checked at the end).
CHILD = r"""
import json, os, re, shutil, sys, types, warnings

spec = json.loads(sys.argv[1])
S = types.SimpleNamespace(**spec["world"])
result = {"outcomes": [], "notes": [], "patch_warnings": None}


def patch():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(spec["patch"], {})
    result["patch_warnings"] = sorted(
        {w.category.__name__ for w in caught} - {"EventletDeprecationWarning"}
    )


if spec["mode"] == "shim" and spec["order"] == "install-then-patch":
    import requests_fastssl  # (installs; imports no ssl: as sitecustomize.py or `run` would)
if not spec["late"]:
    patch()
if spec["mode"] == "shim" and spec["order"] == "patch-then-install":
    import requests_fastssl
import requests
import urllib3.util.ssl_

cls = urllib3.util.ssl_.SSLContext
result["context_class"] = f"{cls.__module__}.{cls.__qualname__}"


def get(url, **kwargs):
    kwargs.setdefault("verify", S.bundle)
    kwargs.setdefault("timeout", 30)
    kwargs.setdefault("headers", {"Connection": "close"})  # (a new Session each call anyway)
    if isinstance(kwargs.get("cert"), list):  # (a pair, through JSON)
        kwargs["cert"] = tuple(kwargs["cert"])
    try:
        response = requests.get(url, **kwargs)
    except Exception as exc:
        message = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x?", str(exc))
        result["outcomes"].append([type(exc).__qualname__, message])
    else:
        seen = response.json()["client_cn"] if response.status_code == 200 else None
        result["outcomes"].append([str(response.status_code), seen])


def rotate(source):  # a new file renamed over the bundle
    shutil.copyfile(source, S.rotating + ".new")
    os.replace(S.rotating + ".new", S.rotating)


def rewrite(source):  # the bundle rewritten in place (same inode)
    with open(source, "rb") as src, open(S.rotating, "r+b") as dst:
        dst.truncate(0)
        dst.write(src.read())


def keylog():
    os.environ["SSLKEYLOGFILE"] = S.keylog


def keylog_lines():  # the secrets' labels written, in order
    with open(S.keylog) as f:
        return [line.split()[0] for line in f if line.strip()]


def note(value):
    result["notes"].append(value)


shutil.copyfile(S.bundle, S.rotating)
exec(spec["body"])
if spec["mode"] == "shim":
    stats = requests_fastssl.stats()
    result["shim"] = {
        "state": requests_fastssl.status().state.value,
        "ca_loads": stats.ca_loads,
        "contexts_built": stats.contexts_built,
        "connections": stats.connections,
        "step_aside_reasons": dict(stats.step_aside_reasons),
    }
else:
    result["shim"] = sorted(m for m in sys.modules if "requests_fastssl" in m)  # none
print(json.dumps(result))
"""


@dataclass(frozen=True)
class World:
    """The servers and files the children use, and what the servers saw."""

    names: dict[str, Any]  # S in the child
    servers: dict[str, HTTPSServer]
    proxy: LoopbackProxy

    def seen(self) -> tuple[Any, ...]:
        """Marks of what the servers recorded so far (see ``since``)."""
        return (
            {name: len(server.clients_seen) for name, server in self.servers.items()},
            len(self.proxy.client_cns),
            len(self.proxy.requests),
        )

    def since(self, mark: tuple[Any, ...]) -> dict[str, Any]:
        """The client certificates each server (and the proxy, per TLS leg to it) saw, and
        the requests the proxy was asked for, since ``mark``. Both are recorded before the
        server answers, so a child that has exited has all of its entries in."""
        servers, proxy_cns, proxy_requests = mark
        return {
            **{name: s.clients_seen[servers[name] :] for name, s in self.servers.items()},
            "proxy_legs_showed": self.proxy.client_cns[proxy_cns:],
            "proxy_asked_for": [m for m, _ in self.proxy.requests[proxy_requests:]],
        }


@pytest.fixture(scope="module")
def world(pki: PKI) -> Iterator[World]:
    """A server trusting the bundle (asking for a client certificate, optional), one with a
    certificate from the rogue CA, one for another host name, an HTTPS proxy whose own
    certificate the bundle trusts (asking every leg for a certificate: none may show one),
    and a port that accepts connections and never answers (the kernel's backlog; nothing
    calls accept)."""

    def asking(issuer: Any, names: tuple[str, ...] = ("127.0.0.1",)) -> ssl.SSLContext:
        return server_context(issuer, names, client_ca=pki.ca, client_mode=ssl.CERT_OPTIONAL)

    with ExitStack() as stack:
        servers = {
            "ok": asking(pki.ca),
            "rogue": asking(pki.rogue_ca),
            "wrong_host": asking(pki.ca, ("other.example",)),
        }
        running = {name: stack.enter_context(HTTPSServer(ctx)) for name, ctx in servers.items()}
        proxy = stack.enter_context(LoopbackProxy(tls=asking(pki.ca)))
        silent = stack.enter_context(socket.socket())
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        names = {
            **{name: server.url for name, server in running.items()},
            "silent": f"https://127.0.0.1:{silent.getsockname()[1]}/",
            "proxy": {"https": proxy.url},
            "bundle": pki.bundle,
            "rogue_bundle": pki.rogue_bundle,
            "client_a": list(pki.client_a.pair),
            "client_b_pem": pki.client_b.combined,
        }
        yield World(names, running, proxy)


@dataclass(frozen=True)
class Run:
    result: dict[str, Any]  # what the child printed
    seen: dict[str, Any]  # what the servers saw meanwhile

    @property
    def compared(self) -> dict[str, Any]:
        """Everything stock and the shim must agree on."""
        return {k: v for k, v in {**self.result, "seen": self.seen}.items() if k != "shim"}

    @property
    def shim(self) -> dict[str, Any]:
        shim: dict[str, Any] = self.result["shim"]
        return shim


def run_child(
    world: World,
    where: Path,
    green: str,
    mode: str,
    case: Case,
    order: str = "patch-then-install",
) -> Run:
    """Run ``case`` in a fresh interpreter (a clean environment: no trust variables)."""
    where.mkdir(parents=True, exist_ok=True)
    files = {"rotating": str(where / "bundle.pem"), "keylog": str(where / "keys.log")}
    spec = {
        "patch": GREENS[green][0],
        "mode": mode,
        "late": case.late,
        "order": order,
        "body": case.body,
        "world": {**world.names, **files},
    }
    mark = world.seen()
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", CHILD, json.dumps(spec)],
        capture_output=True,
        text=True,
        env=clean_env("SSL_CERT_FILE", "SSL_CERT_DIR"),
        cwd=str(ROOT),
        timeout=120,
    )
    assert proc.returncode == 0, f"{green} {mode} {case.name}:\n{proc.stdout}\n{proc.stderr}"
    return Run(json.loads(proc.stdout.strip().splitlines()[-1]), world.since(mark))


Pair = Callable[[str, str], tuple[Run, Run]]


@pytest.fixture(scope="module")
def pair(world: World, tmp_path_factory: pytest.TempPathFactory) -> Pair:
    """``pair(green, case name)``: the case run stock, then with the shim (once per module:
    the equivalence and late-patch tests share the runs)."""
    runs: dict[tuple[str, str], tuple[Run, Run]] = {}

    def get(green: str, name: str) -> tuple[Run, Run]:
        if (green, name) not in runs:
            where = tmp_path_factory.mktemp(f"{green}-{name}")
            runs[green, name] = (
                run_child(world, where / "stock", green, "stock", BY_NAME[name]),
                run_child(world, where / "shim", green, "shim", BY_NAME[name]),
            )
        return runs[green, name]

    return get


@pytest.mark.parametrize("name", [case.name for case in CASES])
@pytest.mark.parametrize("green", list(GREENS))
def test_stock_outcomes_under_green(green: str, name: str, pair: Pair) -> None:
    """Stock's outcomes, the shim's equal to them: requests, servers' records, patching."""
    case = BY_NAME[name]
    stock, shim = pair(green, name)
    assert stock.result["shim"] == []  # stock was stock
    assert shim.shim["state"] == "active"
    assert tuple(kind for kind, _ in stock.result["outcomes"]) == case.expect, stock.result
    if not case.late:
        assert stock.result["context_class"] == GREENS[green][1]
        assert stock.result["patch_warnings"] == []
    assert shim.compared == stock.compared


def test_what_the_servers_saw(pair: Pair) -> None:
    """The comparisons above include what the servers recorded; here, that it is what the
    cases mean (so that an empty record on both sides cannot pass for equal)."""
    stock, _ = pair("gevent", "client-cert")
    assert stock.seen["ok"] == ["client-a", None]
    stock, _ = pair("gevent", "https-proxy-client-cert")
    assert stock.seen["ok"] == ["client-a"]
    assert stock.seen["proxy_legs_showed"] == [None]  # the leg to the proxy shows none
    assert stock.seen["proxy_asked_for"] == ["CONNECT"]
    stock, _ = pair("gevent", "keylog")
    assert stock.result["notes"][0].count("CLIENT_TRAFFIC_SECRET_0") == 2  # both connections


@pytest.mark.parametrize("name", [case.name for case in CASES if case.late])
@pytest.mark.parametrize("green", list(GREENS))
def test_late_patch_steps_aside(green: str, name: str, pair: Pair) -> None:
    """Patched after urllib3 was imported: urllib3 kept the standard library's class, whose
    methods now recurse through the green one. Stock raises RecursionError on every new
    connection; the shim steps aside for each (context-class), its cached context unused."""
    stock, shim = pair(green, name)
    assert stock.result["context_class"] == "ssl.SSLContext"
    assert shim.result["context_class"] == "ssl.SSLContext"
    assert stock.result["patch_warnings"] == shim.result["patch_warnings"]
    outcomes = [kind for kind, _ in shim.result["outcomes"]]
    assert outcomes == [kind for kind, _ in stock.result["outcomes"]]
    failed = outcomes.count("RecursionError")
    assert failed >= 2
    if not URLLIB3_1:  # (1.26 is left to stock whatever the class: reason urllib3-1.26)
        assert shim.shim["step_aside_reasons"].get("context-class") == failed


# --- SHARING (issue 42's point, not equivalence): fails while the shim steps aside -------


SHARED_CASES = [
    Case("verify-bundle", f"for _ in range({N}): get(S.ok)", ("200",) * N),
    Case(
        "verify-bundle-client-cert",
        f"for _ in range({N}): get(S.ok, cert=S.client_a)",
        ("200",) * N,
    ),
]


@pytest.mark.urllib3_2
@pytest.mark.parametrize("case", SHARED_CASES, ids=lambda case: case.name)
@pytest.mark.parametrize("order", ["patch-then-install", "install-then-patch"])
@pytest.mark.parametrize("green", list(GREENS))
def test_SHARING_the_shim_shares_under_green_patching(
    green: str, order: str, case: Case, world: World, tmp_path: Path
) -> None:
    """SHARING, a separate assertion from equivalence: under gevent or eventlet, N new
    connections with one bundle make one CA load into one context, none left to stock. (On
    main before issue 42 every one steps aside with context-class: this test fails there.)
    The shim installed after the patch (in code) or before it (sitecustomize.py, ``run``,
    ``pytest --fastssl``)."""
    shim = run_child(world, tmp_path, green, "shim", case, order)
    client = "client-a" if "cert=" in case.body else None
    assert shim.result["outcomes"] == [["200", client]] * N
    assert shim.result["context_class"] == GREENS[green][1]
    assert shim.shim["step_aside_reasons"] == {}
    assert (shim.shim["ca_loads"], shim.shim["contexts_built"]) == (1, 1)
    assert shim.shim["connections"] == N
