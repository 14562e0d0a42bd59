"""The benchmark engine behind ``python -m requests_fastssl bench``.

Two scenarios. The seed's: N threads each call ``requests.get(url, verify=...)`` once, so
every call makes a new Session, a new pool and a new TLS connection. And a script's loop: one
thread calling ``requests.get`` N times in a row (a fresh Session, so a fresh connection, each
time). Each variant runs in a
fresh interpreter per repetition (``python -m _requests_fastssl.cli.bench --child ...``), so
caches and import state never leak between variants, and the variants are interleaved
(A B C D E, A B C D E, ...) after one untimed warm-up round. CA loads are counted inside
the child by wrapping ``ssl.SSLContext.load_verify_locations`` / ``load_default_certs``
before anything else is imported: from outside the shim, so the shim cannot flatter itself.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "VARIANTS",
    "Interrupted",
    "Plan",
    "Result",
    "Scenario",
    "ca_load_ms",
    "micro",
    "run_plan",
    "startup_cost",
]

# name -> (uses the shim, verify setting); "floor" is the context stock builds, built once
# and given to urllib3.
VARIANTS: dict[str, tuple[str, bool]] = {
    "stock-verify": ("stock", True),
    "stock-noverify": ("stock", False),
    "shim-verify": ("shim", True),
    "shim-noverify": ("shim", False),
    "floor-verify": ("floor", True),
    "floor-noverify": ("floor", False),
}


@dataclass(frozen=True)
class Scenario:
    threads: int
    calls: int  # requests.get calls per thread, one after the other

    @property
    def requests(self) -> int:
        return self.threads * self.calls

    @property
    def label(self) -> str:
        return f"{self.threads} thr" if self.calls == 1 else f"{self.calls} seq"


@dataclass
class Plan:
    url: str
    bundle: str | None  # the CA bundle for verify=<bundle>; None: requests' own default
    scenarios: list[Scenario]
    repeat: int
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))


class Interrupted(Exception):  # not an ...Error: the user asked to stop
    """Ctrl-C during a run; ``results`` holds every run that finished before it."""

    def __init__(self, results: list[Result]) -> None:
        super().__init__("interrupted")
        self.results = results


@dataclass
class Run:
    wall: float
    ok: int
    failed: int
    ca_loads: int
    default_loads: int
    peak_rss_mb: float
    server_cpu: float = 0.0
    errors: list[str] = field(default_factory=list)


@dataclass
class Result:
    variant: str
    scenario: Scenario
    runs: list[Run]

    def summary(self) -> dict[str, Any]:
        walls = [r.wall for r in self.runs]
        return {
            "variant": self.variant,
            "scenario": self.scenario.label,
            "threads": self.scenario.threads,
            "calls_per_thread": self.scenario.calls,
            "requests": self.scenario.requests,
            "mean_s": statistics.fmean(walls),
            "stdev_s": statistics.stdev(walls) if len(walls) > 1 else 0.0,
            "median_s": statistics.median(walls),
            "min_s": min(walls),
            "max_s": max(walls),
            "per_request_ms": statistics.fmean(walls) / self.scenario.requests * 1000,
            "ca_loads": statistics.median(r.ca_loads for r in self.runs),
            "default_loads": statistics.median(r.default_loads for r in self.runs),
            "peak_rss_mb": max(r.peak_rss_mb for r in self.runs),
            "server_cpu_share": statistics.median(
                r.server_cpu / r.wall if r.wall else 0.0 for r in self.runs
            ),
            "failed": sum(r.failed for r in self.runs),
            "runs": [asdict(r) for r in self.runs],
        }


def run_plan(
    plan: Plan, *, server_cpu: Callable[[], float], progress: Callable[[str], None]
) -> list[Result]:
    """Run every variant in every scenario, interleaved, each run in a fresh child.

    Ctrl-C raises ``Interrupted`` with the runs that finished (the running child is killed).
    """
    results = {(v, s): Result(v, s, []) for s in plan.scenarios for v in plan.variants}
    total = len(results) * plan.repeat

    def cost(scenario: Scenario) -> int:
        # A child costs about its requests plus an interpreter start (~10 requests' worth).
        return scenario.requests + 10

    children_per_scenario = len(plan.variants) * (plan.repeat + 1)  # with the warm-ups
    work = {"done": 0, "left": sum(cost(s) for s in plan.scenarios) * children_per_scenario}
    started = time.monotonic()

    def child(variant: str, scenario: Scenario) -> Run:
        run = _child(plan, variant, scenario)
        work["done"] += cost(scenario)
        work["left"] -= cost(scenario)
        return run

    def left() -> str:
        # Time so far per unit of work, times the work to come: rough, and better as it runs.
        if not work["done"]:
            return ""
        seconds = (time.monotonic() - started) / work["done"] * work["left"]
        if seconds >= 90:
            return f", about {seconds / 60:.0f} min left"
        return f", about {seconds:.0f} s left"

    done = 0
    try:
        for scenario in plan.scenarios:
            for variant in plan.variants:  # warm-up: file caches, server threads, imports
                progress(f"warm-up {variant} {scenario.label}{left()}")
                child(variant, scenario)
            for rep in range(plan.repeat):
                for variant in plan.variants:
                    done += 1
                    progress(
                        f"[{done}/{total}] {variant} {scenario.label} "
                        f"(repetition {rep + 1}){left()}"
                    )
                    before = server_cpu()
                    run = child(variant, scenario)
                    run.server_cpu = server_cpu() - before
                    results[(variant, scenario)].runs.append(run)
    except KeyboardInterrupt:
        raise Interrupted([r for r in results.values() if r.runs]) from None
    return list(results.values())


def ca_load_ms(bundle: str, rounds: int = 5) -> float:
    """Milliseconds for one ``load_verify_locations`` of ``bundle`` (a file or a directory)
    into a fresh urllib3 context, median of ``rounds``: what stock pays per new connection.
    Raises ``OSError`` / ``ssl.SSLError`` as the load does."""
    from urllib3.util.ssl_ import create_urllib3_context

    timings = []
    for _ in range(rounds):
        ctx = create_urllib3_context()
        started = time.perf_counter()
        if os.path.isdir(bundle):
            ctx.load_verify_locations(capath=bundle)
        else:
            ctx.load_verify_locations(bundle)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def _child(plan: Plan, variant: str, scenario: Scenario) -> Run:
    args = {
        "variant": variant,
        "url": plan.url,
        "bundle": plan.bundle,
        "n": scenario.threads,
        "calls": scenario.calls,
    }
    proc = subprocess.run(
        [sys.executable, "-m", "_requests_fastssl.cli.bench", "--child", json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child {variant} failed:\n{proc.stderr[-2000:]}")
    return Run(**json.loads(proc.stdout.strip().splitlines()[-1]))


def micro(
    url: str, bundle: str | None, calls: int = 5000, rounds: int = 3
) -> dict[str, float | None]:
    """The shim's own cost per keep-alive request, stock vs shim, with a warm pool.

    Two figures per side. The time of what ``HTTPAdapter.send`` does before it reuses a pooled
    connection (``get_connection_with_tls_context`` and ``cert_verify``: no traffic, best of
    5 x ``calls``), where the shim used to sit. And the number of Python-level calls into the
    shim's modules during 200 real keep-alive GETs on one Session (a profile hook counts
    them), the direct measure: a warm pool never reaches the shim's hook. None where the
    request fails (the table reports the failure).

    Stock and shim alternate in fresh interpreters and each keeps its best time, so a
    noisy neighbour slows a round down without deciding the result.
    """
    best = {"stock": float("inf"), "shim": float("inf")}
    shim_calls: float | None = 0.0
    for _ in range(rounds):
        for kind in best:
            args = {"kind": kind, "url": url, "bundle": bundle, "calls": calls}
            proc = subprocess.run(
                [sys.executable, "-m", "_requests_fastssl.cli.bench", "--micro", json.dumps(args)],
                capture_output=True,
                text=True,
                timeout=600,
                check=True,
            )
            seconds, counted = json.loads(proc.stdout.strip().splitlines()[-1])
            best[kind] = min(best[kind], seconds)
            if kind == "shim":
                shim_calls = (
                    None if counted is None or shim_calls is None else max(shim_calls, counted)
                )
    return {**best, "overhead": best["shim"] - best["stock"], "shim_calls_per_request": shim_calls}


def startup_cost(rounds: int = 20) -> dict[str, float]:
    """Milliseconds to start an interpreter bare and with the start-up line (best of N,
    alternating), in a program that never imports requests."""
    commands = {"bare": "pass", "activated": "import requests_fastssl"}
    best = dict.fromkeys(commands, float("inf"))
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-pyc-") as cache:
        # Bytecode as an installed package has it, even where PYTHONDONTWRITEBYTECODE is
        # set (as on our machines), kept in a private cache: the install is not touched.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for code in commands.values():  # writes the cache
            subprocess.run([sys.executable, "-c", code], check=True, env=env)
        for _ in range(rounds):
            for name, code in commands.items():
                started = time.perf_counter()
                subprocess.run([sys.executable, "-c", code], check=True, env=env)
                best[name] = min(best[name], (time.perf_counter() - started) * 1000)
    return {**best, "added": best["activated"] - best["bare"]}


def _micro_main(raw: str) -> None:
    args = json.loads(raw)
    if args["kind"] == "shim":
        import requests_fastssl

        requests_fastssl.install()
    import requests
    import urllib3

    urllib3.disable_warnings()
    url, verify = args["url"], args["bundle"] or True
    session = requests.Session()
    adapter = session.get_adapter(url)
    assert isinstance(adapter, requests.adapters.HTTPAdapter)
    request = session.prepare_request(requests.Request("GET", url))

    def one() -> None:  # what HTTPAdapter.send does before it reuses a connection
        conn = adapter.get_connection_with_tls_context(request, verify)
        adapter.cert_verify(conn, url, verify, None)

    one()  # the pool exists from here on
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(args["calls"]):
            one()
        best = min(best, (time.perf_counter() - started) / args["calls"])

    try:
        session.get(url, verify=verify).close()  # the one new connection, before counting
    except requests.RequestException:  # the failure is the table's to report
        print(json.dumps([best * 1e6, None]))
        return
    shim_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    counted = 0

    def profile(frame: Any, event: str, _arg: Any) -> None:
        nonlocal counted
        if event == "call" and frame.f_code.co_filename.startswith(shim_dir):
            counted += 1

    gets = 200
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        for _ in range(gets):
            session.get(url, verify=verify).close()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    print(json.dumps([best * 1e6, counted / gets]))


# --- inside the child ---------------------------------------------------------------------------


def _count_loads() -> dict[str, int]:
    """Wrap the two load methods on ssl.SSLContext (the real ones still run)."""
    import ssl

    counts = {"ca": 0, "default": 0}
    for name, key in (("load_verify_locations", "ca"), ("load_default_certs", "default")):
        original = getattr(ssl.SSLContext, name)

        def counting(self: Any, *a: Any, _o: Any = original, _k: str = key, **k: Any) -> Any:
            counts[_k] += 1
            return _o(self, *a, **k)

        setattr(ssl.SSLContext, name, counting)
    return counts


def _floor_adapter(verifying: bool, bundle: str | None) -> tuple[Any, Callable[[], None]]:
    """An adapter class using one pre-built context, and the function that builds it.

    The build runs inside the timed window, as the shim's one build does.
    """
    import requests
    from urllib3.util.ssl_ import create_urllib3_context

    holder: list[Any] = []

    def build() -> None:
        # What stock builds for each connection: with verify=False urllib3 loads the
        # system store, which OpenSSL may use for the client's chain; a floor without it
        # would be a context stock never uses.
        ctx = create_urllib3_context(cert_reqs=2 if verifying else 0)  # REQUIRED / NONE
        if verifying:
            ctx.load_verify_locations(bundle or requests.utils.DEFAULT_CA_BUNDLE_PATH)
        else:
            ctx.load_default_certs()
        holder.append(ctx)

    class FloorAdapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, ssl_context=holder[0], **kwargs)

        def build_connection_pool_key_attributes(
            self, request: Any, verify: Any, cert: Any = None
        ) -> Any:
            host_params, pool_kwargs = super().build_connection_pool_key_attributes(
                request, verify, cert
            )
            pool_kwargs.pop("ca_certs", None)  # already in ctx
            return host_params, pool_kwargs

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED" if verifying else "CERT_NONE"

    return FloorAdapter, build


def _child_main(raw: str) -> None:
    args = json.loads(raw)
    counts = _count_loads()
    kind, verifying = VARIANTS[args["variant"]]
    if kind == "shim":
        import requests_fastssl

        requests_fastssl.install()
    import requests
    import urllib3

    urllib3.disable_warnings()
    bundle = args["bundle"]
    verify: bool | str = (bundle or True) if verifying else False
    url, n, calls = args["url"], args["n"], args["calls"]
    prepare: Callable[[], None] = lambda: None  # noqa: E731
    if kind == "floor":
        adapter_class, prepare = _floor_adapter(verifying, bundle)

        def call() -> int:
            # What requests.get does, with an adapter that hands urllib3 one pre-built
            # context and never asks it to load anything: no wrapper can do less.
            with requests.Session() as session:
                session.mount("https://", adapter_class())
                return session.get(url, verify=verify).status_code

    else:

        def call() -> int:
            return requests.get(url, verify=verify).status_code

    errors: list[str] = []
    ok = 0
    lock = threading.Lock()
    gate = threading.Barrier(n + 1)

    def worker() -> None:
        nonlocal ok
        gate.wait()
        for _ in range(calls):
            try:
                status = call()
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            with lock:
                if status == 200:
                    ok += 1
                else:
                    errors.append(f"HTTP {status}")

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    prepare()
    gate.wait()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    run = Run(
        wall=wall,
        ok=ok,
        failed=n * calls - ok,
        ca_loads=counts["ca"],
        default_loads=counts["default"],
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        errors=errors[:5],
    )
    print(json.dumps(asdict(run)))


# --- the embedded server --------------------------------------------------------------------


@contextmanager
def embedded_server() -> Iterator[tuple[str, str]]:
    """An HTTPS server on 127.0.0.1 with a throwaway trustme CA; yields (url, bundle).

    The bundle is certifi's plus that CA, so every load costs what a real one costs.
    """

    import certifi

    try:
        import trustme
    except ImportError:
        raise SystemExit(
            "the benchmark needs trustme for its throwaway CA: "
            "pip install 'requests-fastssl[bench]'"
        ) from None
    from .server import HTTPSServer, server_context

    ca = trustme.CA()
    server_ctx = server_context(ca, ("127.0.0.1",))
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-bench-") as tmp:
        bundle = os.path.join(tmp, "bundle.pem")
        with open(certifi.where(), "rb") as src, open(bundle, "wb") as dst:
            dst.write(src.read() + b"\n" + ca.cert_pem.bytes())
        with HTTPSServer(server_ctx) as server:
            yield server.url, bundle


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    _child_main(sys.argv[2])
elif __name__ == "__main__" and sys.argv[1:2] == ["--micro"]:
    _micro_main(sys.argv[2])
