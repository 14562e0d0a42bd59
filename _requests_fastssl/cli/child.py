"""What runs inside a benchmark child (``python -m _requests_fastssl.cli.child run|micro``):
one variant's requests in a fresh interpreter, or the keep-alive micro-benchmark."""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict
from typing import Any

from .engine import VARIANTS, Run
from .loads import counting_loads

# Every request's bound (connecting, and each read): a server that stops answering fails
# the request, counted, instead of holding the run until the parent gives up.
TIMEOUT = 10

__all__ = ["micro_main", "run_main"]


def micro_main(raw: str) -> None:
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
        if hasattr(adapter, "get_connection_with_tls_context"):
            conn = adapter.get_connection_with_tls_context(request, verify)
        else:  # requests < 2.32.2
            conn = adapter.get_connection(url)
        adapter.cert_verify(conn, url, verify, None)

    one()  # the pool exists from here on
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(args["calls"]):
            one()
        best = min(best, (time.perf_counter() - started) / args["calls"])

    try:
        session.get(url, verify=verify, timeout=TIMEOUT).close()  # the one new connection
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
            session.get(url, verify=verify, timeout=TIMEOUT).close()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    print(json.dumps([best * 1e6, counted / gets]))


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
            source = bundle or requests.utils.DEFAULT_CA_BUNDLE_PATH
            if os.path.isdir(source):  # (a CA directory, as REQUESTS_CA_BUNDLE may name)
                ctx.load_verify_locations(capath=source)
            else:
                ctx.load_verify_locations(source)
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


def peak_rss_mb() -> float:
    """This process's own peak resident memory. Not ``ru_maxrss`` alone: a child started by
    vfork (as subprocess does) has its parent's peak folded in at exec, and the bench's
    parent, with the server's threads, is larger than most children."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_main(raw: str) -> None:
    args = json.loads(raw)
    # The warm-up run counts the loads (from before requests is imported: some versions
    # load at import); timed runs count nothing, the profiler would slow them down.
    counter: Any = counting_loads() if args["count"] else nullcontext(None)
    with counter as counts:
        wall, ok, errors = _requests(args)
    n, calls = args["n"], args["calls"]
    run = Run(
        wall=wall,
        ok=ok,
        failed=n * calls - ok,
        ca_loads=counts.verify_locations if counts else None,
        default_loads=counts.default_certs if counts else None,
        peak_rss_mb=peak_rss_mb(),
        errors=errors[:5],
    )
    print(json.dumps(asdict(run)))


def _requests(args: dict[str, Any]) -> tuple[float, int, list[str]]:
    """The variant's requests from ``n`` threads, ``calls`` each: wall time, successes, errors."""
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
        import wrapt  # noqa: F401 (the product needs it: the floor's memory holds it too)

        adapter_class, prepare = _floor_adapter(verifying, bundle)

        def call() -> int:
            # What requests.get does, with an adapter that hands urllib3 one pre-built
            # context and never asks it to load anything: no wrapper can do less.
            with requests.Session() as session:
                session.mount("https://", adapter_class())
                return session.get(url, verify=verify, timeout=TIMEOUT).status_code

    else:

        def call() -> int:
            return requests.get(url, verify=verify, timeout=TIMEOUT).status_code

    errors: list[str] = []
    ok = 0
    lock = threading.Lock()
    gate = threading.Barrier(n + 1)

    def worker() -> None:
        nonlocal ok
        try:
            gate.wait()
        except threading.BrokenBarrierError:  # (prepare() failed: the child reports it)
            return
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
    try:
        prepare()
    except BaseException:
        gate.abort()  # (else the workers would wait at the gate for ever)
        raise
    gate.wait()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started, ok, errors


if __name__ == "__main__":
    {"run": run_main, "micro": micro_main}[sys.argv[1]](sys.argv[2])
