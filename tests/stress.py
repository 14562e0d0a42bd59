"""Differential stress run: the shim against stock requests, request by request.

    python -X faulthandler tests/stress.py --requests 3000 --threads 16 --seed 1
    python -X faulthandler tests/stress.py --duration 600          # the soak run

Everything runs on 127.0.0.1 inside this process: eight HTTPS servers (two trusted CAs,
an untrusted one, an expired and a wrong-host certificate, servers that require, accept
or refuse client certificates, each answering with the client certificate it saw), an
HTTP CONNECT proxy and an HTTPS proxy.

A *case* is a full set of request settings: server, ``verify`` (True, False, a file, a
directory), ``cert`` (none, A, A in one file, B, A with an encrypted key), the client
(``requests.get``, one Session shared by all threads, adapters with their own context,
with verification forced off, with an asserted host name, with a key password) and the
proxy. The stock outcome is a function of the case, so:

1. oracle: with the shim uninstalled, each case is requested once, sequentially, through
   stock requests; its outcome (status or exception type, and the client certificate the
   server saw) is recorded;
2. load: with the shim installed, ``--threads`` threads draw cases at random (seeded),
   half of them with ``Connection: close`` (a new connection each), and compare every
   outcome with the oracle, while a chaos thread empties and resizes the registry,
   flips the shim off and on, rewrites the bundles, forks, and interrupts requests at random
   lines (each interrupted thread's retry must match the oracle).

A *bypass* is a request that succeeded where stock failed, or a verifying request with
the default adapter that got an answer from a server its trust does not cover. The HTTPS
proxy asks every client for a certificate; no TLS leg to it may show one. Exit status 0
only with zero mismatches, zero bypasses and no certificate shown to the proxy; the last
line of stdout is a JSON
report. ``--sabotage`` breaks the shim on purpose, to prove the run can see it fail.
"""

from __future__ import annotations

import argparse
import faulthandler
import itertools
import json
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple

import requests
import trustme
import urllib3
from adapters import ContextAdapter, HostHeaderAdapter, KwargsAdapter, NoVerifyAdapter
from cryptography.hazmat.primitives import serialization
from loopback_proxy import LoopbackProxy
from requests.adapters import HTTPAdapter
from urllib3.util.ssl_ import create_urllib3_context

import requests_fastssl
from _requests_fastssl import _contexts
from _requests_fastssl._genuine import GENUINE_CONTEXT
from _requests_fastssl._registry import REGISTRY
from _requests_fastssl.cli.server import HTTPSServer, server_context

SERVERS = ("ca1", "ca2", "rogue", "expired", "wrong-host", "require", "optional", "refuse")
# "path-ca1": the file as a pathlib.Path; "none": verify=None on the request (requests'
# default trust, unless the session's own verify is None: the "session-none" client).
VERIFY = ("default", "off", "none", "file-ca1", "path-ca1", "file-ca2", "file-both", "dir-ca2")
CERTS = ("none", "a", "a-combined", "b", "a-encrypted")
CLIENTS = (
    "get",
    "shared",
    "context",
    "context-empty",
    "noverify",
    "hostheader",
    "password",
    "bounds",  # a pool manager with TLS version bounds
    "session-none",  # a new Session whose verify is None (stock: unverified without an env bundle)
)
PROXIES = ("none", "connect", "https", "socks")
# Which CAs each verify setting trusts, and who issued each server's certificate: the
# independent bypass check for the default adapter (expired and wrong-host never pass).
TRUSTS = {
    "default": {"ca1"},
    "none": {"ca1"},
    "file-ca1": {"ca1"},
    "path-ca1": {"ca1"},
    "file-ca2": {"ca2"},
    "file-both": {"ca1", "ca2"},
    "dir-ca2": {"ca2"},
}
ISSUER = {"ca1": "ca1", "ca2": "ca2", "require": "ca1", "optional": "ca1", "refuse": "ca1"}


class Case(NamedTuple):
    server: str
    verify: str
    cert: str
    client: str
    proxy: str


Outcome = tuple[str, "str | None"]  # ("200", "client-a") or ("SSLError", None)


# --- the world: CAs, files, servers, proxies ----------------------------------------------


class World:
    def __init__(self, stack: ExitStack, where: Path) -> None:
        self.where = where
        ca1, ca2, rogue = trustme.CA(), trustme.CA(), trustme.CA()
        self.ca1 = ca1
        self.bundle = self._write("ca1.pem", ca1.cert_pem.bytes())  # what verify=True uses
        self.files = {
            "file-ca1": self._write("copy-of-ca1.pem", ca1.cert_pem.bytes()),
            "file-ca2": self._write("ca2.pem", ca2.cert_pem.bytes()),
            "file-both": self._write("both.pem", ca1.cert_pem.bytes() + ca2.cert_pem.bytes()),
            "dir-ca2": self._hashed_dir(ca2),
        }
        self.certs: dict[str, Any] = {"none": None}
        for name in ("a", "b"):
            leaf = ca1.issue_cert(f"client-{name}@example.test", common_name=f"client-{name}")
            cert = self._write(f"client-{name}.crt", leaf.cert_chain_pems[0].bytes())
            key = self._write(f"client-{name}.key", leaf.private_key_pem.bytes())
            self.certs[name] = (cert, key)
            if name == "a":
                combined = leaf.private_key_and_cert_chain_pem.bytes()
                self.certs["a-combined"] = self._write("client-a.pem", combined)
                private = serialization.load_pem_private_key(
                    leaf.private_key_pem.bytes(), password=None
                )
                encrypted = private.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.BestAvailableEncryption(b"secret"),
                )
                self.certs["a-encrypted"] = (cert, self._write("client-a.enc.key", encrypted))
        tls12 = ssl.TLSVersion.TLSv1_2  # client-certificate refusals fail in the handshake
        self.servers = {
            "ca1": self._server(stack, ca1),
            "ca2": self._server(stack, ca2),
            "rogue": self._server(stack, rogue),
            "expired": self._server(stack, ca1, expired=True),
            "wrong-host": self._server(stack, ca1, names=("localhost",)),
            "require": self._server(stack, ca1, clients=ca1, mode=ssl.CERT_REQUIRED, top=tls12),
            "optional": self._server(stack, ca1, clients=ca1, mode=ssl.CERT_OPTIONAL),
            "refuse": self._server(stack, ca1, clients=rogue, mode=ssl.CERT_REQUIRED, top=tls12),
        }
        # The HTTPS proxy asks for a client certificate (optional): no leg to it may show
        # one, stock or shimmed (see Load's report, proxy_saw_client_certs).
        proxy_tls = server_context(
            ca1, ("127.0.0.1",), client_ca=ca1, client_mode=ssl.CERT_OPTIONAL
        )
        self.https_proxy = stack.enter_context(LoopbackProxy(tls=proxy_tls))
        self.proxies = {
            "none": None,
            "connect": stack.enter_context(LoopbackProxy()).url,
            "https": self.https_proxy.url,
            "socks": stack.enter_context(LoopbackProxy(socks=True)).url,
        }
        self.ca2_bundle = self.files["file-ca2"]

    def _write(self, name: str, data: bytes) -> str:
        path = self.where / name
        path.write_bytes(data)
        return str(path)

    def _hashed_dir(self, ca: trustme.CA) -> str:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise SystemExit("stress: the openssl command is needed to hash a CA directory")
        directory = self.where / "hashed"
        directory.mkdir()
        pem = self._write("dir-source.pem", ca.cert_pem.bytes())
        digest = subprocess.run(
            [openssl, "x509", "-hash", "-noout", "-in", pem],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (directory / f"{digest}.0").write_bytes(ca.cert_pem.bytes())
        return str(directory)

    @staticmethod
    def _server(
        stack: ExitStack,
        issuer: trustme.CA,
        *,
        names: tuple[str, ...] = ("127.0.0.1", "localhost"),
        expired: bool = False,
        clients: trustme.CA | None = None,
        mode: ssl.VerifyMode = ssl.CERT_NONE,
        top: ssl.TLSVersion | None = None,
    ) -> str:
        ctx = server_context(
            issuer, names, expired=expired, client_ca=clients, client_mode=mode, maximum_version=top
        )
        return stack.enter_context(HTTPSServer(ctx)).url


# --- clients ---------------------------------------------------------------------------------


class PasswordAdapter(HTTPAdapter):
    """The one way to give requests a key password: a pool-manager keyword."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["key_password"] = "secret"
        super().init_poolmanager(*args, **kwargs)

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        kwargs["key_password"] = "secret"
        return super().proxy_manager_for(proxy, **kwargs)


def _session(adapter: HTTPAdapter) -> requests.Session:
    session = requests.Session()
    session.mount("https://", adapter)
    return session


class Clients:
    """The sessions one phase uses: shared ones for all threads, the rest per thread."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.shared = requests.Session()
        self.noverify = _session(NoVerifyAdapter())
        self.password = _session(PasswordAdapter())
        self.bounds = _session(KwargsAdapter(ssl_maximum_version=ssl.TLSVersion.TLSv1_2))
        self._local = threading.local()

    def _context_session(self, with_cas: bool) -> requests.Session:
        # A new adapter (and context) per request: urllib3 writes to a context it is given
        # (verify_mode, loaded CAs), so one reused across cases would carry history.
        ctx = create_urllib3_context()
        if with_cas:
            ctx.load_verify_locations(self.world.ca2_bundle)
        return _session(ContextAdapter(ctx, proxied=True))

    def request(self, case: Case, close: bool) -> requests.Response:
        world = self.world
        url = world.servers[case.server]
        verify: Any
        if case.verify in ("default", "off", "none"):
            verify = {"default": True, "off": False, "none": None}[case.verify]
        elif case.verify == "path-ca1":
            verify = Path(world.files["file-ca1"])
        else:
            verify = world.files[case.verify]
        proxy = world.proxies[case.proxy]
        kwargs: dict[str, Any] = {
            "verify": verify,
            "cert": world.certs[case.cert],
            "proxies": {"https": proxy} if proxy else None,
            "headers": {"Connection": "close"} if close else {},
            "timeout": 60,
        }
        if case.client == "get":
            return requests.get(url, **kwargs)
        if case.client == "session-none":
            # A Session of its own per request: with verify=None, requests' verify=None and
            # verify=True requests share one pool, and urllib3 reuses a connection object
            # with the attributes of the request that made it (CVE-2024-35195's pattern, in
            # stock), so a Session kept across cases would carry history.
            with requests.Session() as unverifying:
                unverifying.verify = None  # type: ignore[assignment]  # (stubs: bool | str)
                return unverifying.get(url, **kwargs)
        if case.client == "hostheader":
            session = getattr(self._local, "hostheader", None)
            if session is None:  # the adapter rewrites its pool kwargs: one per thread
                session = self._local.hostheader = _session(HostHeaderAdapter())
            kwargs["headers"] = {**kwargs["headers"], "Host": "localhost"}
            return session.get(url, **kwargs)
        if case.client in ("context", "context-empty"):
            with self._context_session(case.client == "context") as session:
                return session.get(url, **kwargs)
        session = {
            "shared": self.shared,
            "noverify": self.noverify,
            "bounds": self.bounds,
        }.get(case.client)
        return (session or self.password).get(url, **kwargs)


def outcome(clients: Clients, case: Case, close: bool) -> Outcome:
    try:
        response = clients.request(case, close)
    except Exception as exc:
        return type(exc).__qualname__, None
    seen = response.json().get("client_cn") if response.status_code == 200 else None
    return str(response.status_code), seen


def sharing_candidate(case: Case) -> bool:
    return case.client in ("get", "shared", "bounds", "session-none") and case.proxy in (
        "none",
        "connect",
        "socks",
        "https",
    )


def untrusted_answer(case: Case, result: Outcome) -> bool:
    """A verifying request through the default adapter answered by a server it must not
    trust: a verification bypass whatever stock did."""
    if result[0] != "200" or case.client not in ("get", "shared", "password", "bounds"):
        return False
    if case.verify == "off":
        return False
    trusted = ISSUER.get(case.server) in TRUSTS[case.verify]
    return not trusted


# --- sabotage: proof that this run notices a broken shim ---------------------------------


def sabotage(kind: str, world: World) -> Callable[[], None]:
    """Make the shim's contexts wrong in a way its own checks cannot see; returns the undo."""
    original = _contexts.FrozenContext

    def evil(ctx: Any) -> None:
        if kind == "leak":  # every shared context presents client A (R1)
            ctx.load_cert_chain(*world.certs["a"])
        else:  # "bypass": every verifying shared context also trusts everything seen
            for path in world.files.values():
                if path.endswith(".pem"):
                    ctx.load_verify_locations(path)

    patched_build = _contexts.build

    def build(*args: Any, **kwargs: Any) -> Any:
        ctx = patched_build(*args, **kwargs)
        object.__setattr__(ctx, "__class__", GENUINE_CONTEXT)
        evil(ctx)
        object.__setattr__(ctx, "__class__", original)
        return ctx

    _contexts.build = build
    return lambda: setattr(_contexts, "build", patched_build)


# --- the run ---------------------------------------------------------------------------------


def all_cases() -> list[Case]:
    return [Case(*c) for c in itertools.product(SERVERS, VERIFY, CERTS, CLIENTS, PROXIES)]


def sample_cases(seed: int) -> list[Case]:
    """Every (server, verify, cert) twice: once with a client and proxy the shim shares
    contexts for, once with any client and proxy; both drawn at random (seeded)."""
    rng = random.Random(seed)
    sharing = [
        (c, p) for c in CLIENTS for p in PROXIES if sharing_candidate(Case("", "", "", c, p))
    ]
    anything = list(itertools.product(CLIENTS, PROXIES))
    cases = set()
    for server, verify, cert in itertools.product(SERVERS, VERIFY, CERTS):
        for choices in (sharing, anything):
            cases.add(Case(server, verify, cert, *rng.choice(choices)))
    return sorted(cases)


def contexts_intact() -> bool:
    """Every shared context still has the verify mode its key asks for (cert_reqs first)."""
    for key, (ctx, _checks) in list(REGISTRY._entries.items()):
        assert isinstance(key, tuple)
        expected = ssl.CERT_NONE if key[0] == (str, "CERT_NONE") else ssl.CERT_REQUIRED
        if ctx.verify_mode != expected:
            return False
    return True


CHAOS = ("clear", "flip", "rewrite", "shrink", "fork", "grow", "interrupt")
SHIM_CODE = os.path.dirname(os.path.abspath(requests_fastssl.__file__)).replace(
    "requests_fastssl", "_requests_fastssl"
)


class Interrupt(BaseException):
    """What the chaos raises inside a request, as KeyboardInterrupt or a signal handler's
    exception would arrive: at one bytecode line, chosen at random."""


class Load:
    """The shim phase: threads drawing cases, a chaos thread, the tally."""

    def __init__(self, clients: Clients, oracle: dict[Case, Outcome], args: Any) -> None:
        self.clients, self.oracle, self.args = clients, oracle, args
        self.cases = sorted(oracle)
        # The cases the shim shares contexts for (default adapter, no proxy or a CONNECT
        # proxy) are drawn as often as all the others together: they are what is at stake.
        self.sharing = [c for c in self.cases if sharing_candidate(c)] or self.cases
        self.lock = threading.Lock()
        self.progress = threading.Condition(self.lock)
        self.done = 0
        self.stop = False
        self.mismatches: list[tuple[Case, bool, Outcome, Outcome]] = []
        self.bypasses = 0
        self.crashes: list[str] = []
        # Forked children that hung inside OpenSSL (see fork_check): reported, not mismatches.
        self.openssl_fork_hangs: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self.chaos_actions: Counter[str] = Counter()
        # Where the chaos's interrupts landed: in the shim's code, elsewhere in the request,
        # or nowhere (the request ended before the chosen line).
        self.interrupts: Counter[str] = Counter()
        # urllib3 1.26 reconnects a pool's connection object with the pyOpenSSL context it
        # made for the first connect, and current pyOpenSSL refuses that context's
        # verify_mode write ("Context has already been used ..."): in stock, a request after
        # a "Connection: close" then fails or not depending on history. Keep-alive only there.
        self.close_allowed = not (args.pyopenssl and version("urllib3").startswith("1."))
        self.deadline: float | None = time.monotonic() + args.duration if args.duration else None

    def _finished(self) -> bool:
        if self.stop:
            return True
        if self.deadline is not None:
            return time.monotonic() >= self.deadline
        return bool(self.done >= self.args.requests)

    def worker(self, index: int) -> None:
        rng = random.Random(self.args.seed * 1000 + index)
        try:
            while True:
                with self.lock:
                    if self._finished():
                        return
                pool = self.sharing if rng.random() < 0.5 else self.cases
                case, close = rng.choice(pool), rng.random() < 0.5 and self.close_allowed
                got = outcome(self.clients, case, close)
                expected = self.oracle[case]
                bypass = (got[0] == "200" and expected[0] != "200") or untrusted_answer(case, got)
                with self.progress:
                    self.done += 1
                    self.outcomes[got[0]] += 1
                    if got != expected:
                        self.mismatches.append((case, close, expected, got))
                    self.bypasses += bypass
                    self.progress.notify_all()
        except BaseException as exc:  # a bug in this harness: stop everyone, report it
            with self.progress:
                self.crashes.append(f"thread {index}: {exc!r}")
                self.stop = True
                self.progress.notify_all()

    def chaos(self) -> None:
        """Every ``--chaos-every`` requests, one of: empty the registry, shrink or grow it,
        uninstall and reinstall the shim, replace every CA bundle file with one of the same
        contents (new file identities, same trust), or fork a child that makes requests
        of its own and checks them against the oracle, all while the workers run."""
        rng = random.Random(self.args.seed)
        mark = self.args.chaos_every
        while True:
            with self.progress:
                while not self._finished() and self.done < mark:
                    self.progress.wait(timeout=1.0)  # the deadline needs a look now and then
                if self._finished():
                    return
                mark = self.done + self.args.chaos_every
            action = CHAOS[sum(self.chaos_actions.values()) % len(CHAOS)]  # each in turn
            if action == "clear":
                requests_fastssl.clear()
            elif action in ("shrink", "grow"):
                requests_fastssl.install(max_contexts=2 if action == "shrink" else 64)
            elif action == "flip":
                requests_fastssl.uninstall()
                requests_fastssl.install()
            elif action == "rewrite":
                # Replaced atomically (a torn read would fail stock too): a new identity,
                # the same trust, as a sidecar refreshing a bundle leaves it.
                for path in {*self.clients.world.files.values(), self.clients.world.bundle}:
                    if path.endswith(".pem"):
                        Path(path + ".new").write_bytes(Path(path).read_bytes())
                        os.replace(path + ".new", path)
            elif action == "interrupt":
                self.interrupt_check(rng)
            else:
                self.fork_check(rng)
            self.chaos_actions[action] += 1

    def interrupt_check(self, rng: random.Random) -> None:
        """A request on a new connection, with an empty registry so that a build happens (its
        own, or the workers' it waits on), gets ``Interrupt`` at a random line: half the time
        counted over the shim's own code only (the build's bookkeeping), half over every
        line of the request. The same thread then retries the case and must get the oracle's
        outcome; neither it nor any worker may hang (the workers' outcomes are checked as
        always, the whole run is under faulthandler's deadline)."""
        # Sessions of its own only: an interrupt inside a Session the workers share could
        # break that Session's pool for everyone, in stock as well.
        own = [
            c for c in self.sharing if c.client not in ("shared", "noverify", "password", "bounds")
        ]
        case = rng.choice(own or self.sharing)
        only_shim = rng.random() < 0.5
        at = rng.randrange(1, 150 if only_shim else 4000)
        landed: list[str] = []
        retried: list[Outcome] = []

        def tracer(frame: Any, event: str, _arg: Any) -> Any:
            inside = frame.f_code.co_filename.startswith(SHIM_CODE)
            if only_shim and not inside:
                return None
            return lines

        def lines(frame: Any, event: str, _arg: Any) -> Any:
            nonlocal at
            if event == "line":
                at -= 1
                if at == 0:
                    landed.append(
                        "shim" if frame.f_code.co_filename.startswith(SHIM_CODE) else "request"
                    )
                    raise Interrupt
            return lines

        def victim() -> None:
            requests_fastssl.clear()
            sys.settrace(tracer)
            try:
                outcome(self.clients, case, True)
            except Interrupt:
                pass
            finally:
                sys.settrace(None)
            retried.append(outcome(self.clients, case, True))

        thread = threading.Thread(target=victim, name="stress-interrupted")
        thread.start()
        thread.join(timeout=120)
        with self.progress:
            if thread.is_alive():
                self.crashes.append(f"interrupted request hung: {case}")
                self.stop = True
                self.progress.notify_all()
                return
            self.interrupts[landed[0] if landed else "nowhere"] += 1
            if retried != [self.oracle[case]]:
                got = retried[0] if retried else ("no retry outcome", None)
                self.mismatches.append((case, True, self.oracle[case], got))

    def fork_check(self, rng: random.Random) -> None:
        """A child forked mid-load makes a few requests (new connections, sharing cases)
        and exits 0 if each gives the oracle's outcome; a child that hangs is killed."""
        # Only clients with sessions of their own: a Session the workers share may be mid-
        # request in another thread at the fork, its pool manager's lock held for ever in
        # the child (stock urllib3 is not fork-safe there either).
        own = [
            c for c in self.sharing if c.client not in ("shared", "noverify", "password", "bounds")
        ]
        cases = [rng.choice(own) for _ in range(4)]
        dump = tempfile.TemporaryFile()  # noqa: SIM115 (the child writes it; closed below)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                # A hung child writes where it hangs, and dies. (Not dump_traceback_later:
                # it would wait for the parent's watchdog thread, absent in the child.)
                faulthandler.register(signal.SIGALRM, file=dump, chain=True)
                signal.alarm(30)
                code = (
                    0
                    if all(outcome(self.clients, case, True) == self.oracle[case] for case in cases)
                    else 3
                )
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        result = os.waitstatus_to_exitcode(status)
        dump.seek(0)
        stack = dump.read().decode(errors="replace")
        dump.close()
        frames = [line.strip() for line in stack.splitlines() if line.strip().startswith("File")]
        if result == -signal.SIGALRM and frames and f"{os.sep}ssl.py" in frames[0]:
            # Hung inside OpenSSL (creating a context, a handshake): a lock of OpenSSL's own,
            # held by a parent thread at the fork, is never released in the child. Python
            # warns that fork() in a threaded process may deadlock, and stock requests hangs
            # the same way (tools/fork_hazard.py: 3 of 150 stock children, 2 of 150 shimmed,
            # same frames). Not a divergence of the shim: counted and reported. The shim's
            # own fork handling (in-flight builds, its locks) has deterministic tests in
            # tests/test_equivalence.py.
            with self.progress:
                self.openssl_fork_hangs.append(frames[0])
            return
        if result != 0:
            if stack:
                print(f"fork child {result}:\n{stack}", file=sys.stderr)
            with self.progress:
                got = (f"fork child exit {result}", None)
                self.mismatches.append((cases[0], True, self.oracle[cases[0]], got))

    def run(self) -> None:
        threads = [
            threading.Thread(target=self.worker, args=(i,), name=f"stress-{i}")
            for i in range(self.args.threads)
        ]
        threads.append(threading.Thread(target=self.chaos, name="stress-chaos"))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


@contextmanager
def environment(world: World, env_bundle: bool) -> Iterator[None]:
    """verify=True trusts ca1 only: through requests' default bundle path, and with
    ``--env-bundle`` (or on requests 2.32.3/2.32.4, whose import-time context ignores
    that path) through REQUESTS_CA_BUNDLE, as on our machines."""
    for name in list(os.environ):
        if name.upper() in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSLKEYLOGFILE") or (
            name.lower().endswith("_proxy")
        ):
            del os.environ[name]
    os.environ.pop("REQUESTS_FASTSSL_DISABLE", None)
    requests.adapters.DEFAULT_CA_BUNDLE_PATH = world.bundle  # type: ignore[attr-defined]
    preloaded = getattr(requests.adapters, "_preloaded_ssl_context", None) is not None
    if env_bundle or preloaded:
        os.environ["REQUESTS_CA_BUNDLE"] = world.bundle
    yield


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--requests", type=int, default=3000, help="requests in the shim phase")
    size.add_argument("--duration", type=float, help="seconds of shim phase instead (soak)")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--all-cases",
        action="store_true",
        help=f"all {len(all_cases())} cases, not a stratified sample of {len(sample_cases(1))}",
    )
    parser.add_argument("--chaos-every", type=int, default=400, metavar="N")
    parser.add_argument("--env-bundle", action="store_true", help="REQUESTS_CA_BUNDLE set")
    parser.add_argument(
        "--pyopenssl", action="store_true", help="urllib3.contrib.pyopenssl injected throughout"
    )
    parser.add_argument(
        "--sabotage", choices=("leak", "bypass"), action="append", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    for name in ("requests", "threads", "chaos_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be positive")
    # A hang is a failure too: dump every thread's stack and exit non-zero. The budget is
    # generous (the oracle over all cases takes minutes; requests run at ~100/s here).
    load_budget = args.duration if args.duration else args.requests / 10
    faulthandler.dump_traceback_later(1800 + load_budget, exit=True)

    # verify=False warns in stock requests too; thousands of warnings would hide the report.
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    started = time.monotonic()
    with ExitStack() as stack:
        where = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fastssl-stress-")))
        world = World(stack, where)
        stack.enter_context(environment(world, args.env_bundle))
        cases = all_cases() if args.all_cases else sample_cases(args.seed)

        requests_fastssl.uninstall()  # importing it installed the shim
        if args.pyopenssl:
            import warnings

            with warnings.catch_warnings():  # urllib3 1.26 deprecates the module on import
                warnings.simplefilter("ignore", DeprecationWarning)
                from urllib3.contrib import pyopenssl
            pyopenssl.inject_into_urllib3()
        stock_clients = Clients(world)
        oracle = {case: outcome(stock_clients, case, True) for case in cases}
        stock_bypasses = [c for c, o in oracle.items() if untrusted_answer(c, o)]
        oracle_seconds = time.monotonic() - started

        # One load phase; with --sabotage, one per kind of sabotage, on the same oracle.
        dirty = bool(stock_bypasses)
        for kind in args.sabotage or [None]:
            status = requests_fastssl.install()
            if status.state is not requests_fastssl.State.ACTIVE:
                print(f"stress: the shim did not activate: {status}", file=sys.stderr)
                return 2
            requests_fastssl.clear()
            del world.https_proxy.client_cns[:]
            undo = sabotage(kind, world) if kind else None
            load = Load(Clients(world), oracle, args)
            load_started = time.monotonic()
            load.run()
            load_seconds = time.monotonic() - load_started
            intact = contexts_intact()
            proxy_saw = sum(cn is not None for cn in world.https_proxy.client_cns)
            stats = requests_fastssl.stats()._asdict()
            if undo is not None:
                undo()
            requests_fastssl.uninstall()
            for case, close, expected, got in load.mismatches[:20]:
                print(
                    f"MISMATCH {case} close={close}: stock {expected}, shim {got}", file=sys.stderr
                )
            for crash in load.crashes:
                print(f"CRASH {crash}", file=sys.stderr)
            for case in stock_bypasses:
                print(f"STOCK BYPASS? {case}: {oracle[case]}", file=sys.stderr)
            report = {
                "requests": load.done,
                "threads": args.threads,
                "seed": args.seed,
                "cases": len(cases),
                "mismatches": len(load.mismatches),
                "bypasses": load.bypasses,
                "crashes": len(load.crashes),
                "openssl_fork_hangs": len(load.openssl_fork_hangs),
                "stock_bypasses": len(stock_bypasses),
                "contexts_intact": intact,
                "proxy_legs": len(world.https_proxy.client_cns),
                "proxy_saw_client_certs": proxy_saw,
                "outcomes": dict(load.outcomes.most_common()),
                "chaos": dict(load.chaos_actions),
                "interrupts": dict(load.interrupts),
                "shim_stats": {
                    k: round(v, 3) if isinstance(v, float) else v for k, v in stats.items()
                },
                "oracle_seconds": round(oracle_seconds, 1),
                "load_seconds": round(load_seconds, 1),
                "requests_per_second": round(load.done / load_seconds, 1) if load_seconds else None,
                "versions": {name: version(name) for name in ("requests", "urllib3")},
                "env_bundle": bool(args.env_bundle),
                "pyopenssl": bool(args.pyopenssl),
                "connection_close": load.close_allowed,
                "sabotage": kind,
            }
            print(json.dumps(report, sort_keys=True), flush=True)
            dirty = dirty or bool(load.mismatches or load.bypasses or load.crashes) or not intact
            dirty = dirty or bool(proxy_saw)
    faulthandler.cancel_dump_traceback_later()
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
