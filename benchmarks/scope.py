"""Scope: stock / shim / floor for urllib3 users other than requests.get (issue 27).

    python benchmarks/scope.py [--calls 20] [--repeat 21] [--json FILE]

Each configuration makes ``--calls`` calls, each on a new TLS connection (the server closes
every connection), in a fresh interpreter per variant and repetition, interleaved after one
counting round. The times are medians; the ratios are medians of the ratios within each
repetition (with their range), as this machine's speed drifts between repetitions. *shim* is
``import requests_fastssl`` as the program's first line; in the boto3 and urllib3 rows the
program never imports requests (checked: a row whose child imported it fails). *floor* is the
same program with one context built by hand, inside the timed window, holding the bundle,
handed to urllib3 with nothing left to load: what no cache can beat. Loads are counted in the
counting round by the profiler (``cli/loads.py``). The server runs in this (the parent)
process, which only waits meanwhile, so its handshakes never share the timed child's GIL.
For the configurations whose calls run in turn, a last block splits the shim's difference
from the floor into the first call (the one build against the one load) and each later call
(the per-connection decision and checks).

- ``boto3``: one S3 client, ``list_objects_v2`` against the embedded server (it answers S3's
  ListObjectsV2), ``verify=<bundle>`` (certifi's plus the test CA).
- ``boto3-client-per-call``: a new client per call: each brings a new context, which the shim
  leaves theirs, so each pays its one load, as in stock.
- ``poolmanager``: one ``urllib3.PoolManager(ca_certs=<bundle>)``; ``poolmanager-per-thread``:
  one per thread, the calls in as many threads.
- ``toolbelt-tls-client``: requests-toolbelt's ``SSLAdapter(ssl.PROTOCOL_TLS_CLIENT)``.

Needs the test dependencies (trustme, boto3, requests-toolbelt): pip install -e . --group test
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CONFIGS = {
    "boto3": "one boto3 S3 client, list_objects_v2 per call",
    "boto3-client-per-call": "a new boto3 S3 client per call",
    "poolmanager": "one urllib3.PoolManager(ca_certs=bundle)",
    "poolmanager-per-thread": "a PoolManager per thread, one call each",
    "toolbelt-tls-client": "requests-toolbelt SSLAdapter(ssl.PROTOCOL_TLS_CLIENT)",
}
VARIANTS = ("stock", "shim", "floor")
WITHOUT_REQUESTS = ("boto3", "boto3-client-per-call", "poolmanager", "poolmanager-per-thread")


# --- inside the child ---------------------------------------------------------------------------


def _child(
    config: str, variant: str, calls: int, pki: str, url: str, count: bool
) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT)]
    if variant == "shim":
        import requests_fastssl  # noqa: F401  (the program's first line)
    from contextlib import ExitStack

    from _requests_fastssl.cli.loads import counting_loads

    stack = ExitStack()
    counter = stack.enter_context(counting_loads()) if count else None
    import urllib3
    from urllib3.util.ssl_ import create_urllib3_context

    bundle = str(Path(pki) / "bundle.pem")
    # The floor's one context: made with the clients (outside the timed window), loaded at
    # the start of the window, as the shim's one build happens inside it.
    floor = create_urllib3_context()
    marks: list[float] = []  # when each call of a sequential configuration ended
    go = _prepare(config, variant, calls, url, bundle, floor, marks)
    if counter is not None:  # what the calls load, not the set-up's
        counter.verify_locations = counter.default_certs = counter.cert_chains = 0
    started = time.perf_counter()
    if variant == "floor":
        floor.load_verify_locations(bundle)
    outcomes = go()
    wall = time.perf_counter() - started
    stack.close()
    loads = {} if counter is None else {"ca_loads": counter.verify_locations}
    ends = [started, *marks]
    return {
        "wall": wall,
        "per_call_s": [b - a for a, b in itertools.pairwise(ends)],
        "outcomes": sorted(set(outcomes)),
        "requests_imported": "requests" in sys.modules,
        "urllib3": str(getattr(urllib3, "__version__", "?")),
        **loads,
    }


def _s3_client(url: str, bundle: str, variant: str, floor: Any) -> Any:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        verify=bundle,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    if variant == "floor":  # botocore's own per-client context, holding the bundle already
        session = client._endpoint.http_session
        session._manager.connection_pool_kw["ssl_context"] = floor

        def setup(conn: Any, url: str, verify: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED"  # and no ca_certs: nothing to load

        session._setup_ssl_cert = setup
    return client


def _prepare(
    config: str, variant: str, calls: int, url: str, bundle: str, floor: Any, marks: list[float]
) -> Callable[[], list[str]]:
    """The clients, made before the timed window; returns the calls, timed (the sequential
    ones note in ``marks`` when each ended)."""
    close = {"Connection": "close"}

    def in_turn(one: Callable[[], str]) -> Callable[[], list[str]]:
        def run() -> list[str]:
            out = []
            for _ in range(calls):
                out.append(one())
                marks.append(time.perf_counter())
            return out

        return run

    if config == "boto3":
        client = _s3_client(url, bundle, variant, floor)
        return in_turn(lambda: str(client.list_objects_v2(Bucket="b")["KeyCount"]))
    if config == "boto3-client-per-call":

        def per_call() -> str:
            client = _s3_client(url, bundle, variant, floor)
            try:
                return str(client.list_objects_v2(Bucket="b")["KeyCount"])
            finally:
                client.close()

        return in_turn(per_call)
    if config in ("poolmanager", "poolmanager-per-thread"):
        import urllib3

        def manager() -> Any:
            if variant == "floor":
                return urllib3.PoolManager(ssl_context=floor, cert_reqs="CERT_REQUIRED")
            return urllib3.PoolManager(ca_certs=bundle)

        if config == "poolmanager":
            shared = manager()
            return in_turn(lambda: str(shared.request("GET", url, headers=close).status))
        managers = [manager() for _ in range(calls)]

        def threaded() -> list[str]:
            out: list[str] = []

            def one(pool: Any) -> None:
                out.append(str(pool.request("GET", url, headers=close).status))

            threads = [threading.Thread(target=one, args=(m,)) for m in managers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return out

        return threaded
    assert config == "toolbelt-tls-client", config
    import ssl

    import requests
    from requests.adapters import HTTPAdapter
    from requests_toolbelt.adapters.ssl import SSLAdapter

    class FloorAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["ssl_context"] = floor
            super().init_poolmanager(*args, **kwargs)

        def build_connection_pool_key_attributes(
            self, request: Any, verify: Any, cert: Any = None
        ) -> Any:
            host, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
            pool_kwargs.pop("ca_certs", None)  # in the context already
            return host, pool_kwargs

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED"

    session = requests.Session()
    session.mount(
        "https://", FloorAdapter() if variant == "floor" else SSLAdapter(ssl.PROTOCOL_TLS_CLIENT)
    )
    return in_turn(lambda: str(session.get(url, verify=bundle, headers=close).status_code))


# --- the parent ---------------------------------------------------------------------------------


def _run(args: list[str]) -> dict[str, Any]:
    # The trust each variant uses is the bundle it names, whatever this machine exports.
    drop = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "AWS_CA_BUNDLE", "SSL_CERT_FILE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, timeout=900, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[:3]} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/scope.py", description=__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if not (1 <= args.calls <= 500 and 1 <= args.repeat <= 100):
        parser.error("--calls 1-500, --repeat 1-100")
    import ssl

    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
    from reach import _make_pki

    from _requests_fastssl.cli.server import HTTPSServer

    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        pki = stack.enter_context(tempfile.TemporaryDirectory(prefix="requests-fastssl-scope-"))
        _make_pki(Path(pki))
        # The server lives here, not in the timed child: in the child its handshakes would
        # share the child's GIL with the calls being timed, and a switch interval (5 ms)
        # lost now and then made single runs 0.8-1.6x of each other. This process only
        # waits on its child meanwhile.
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(str(Path(pki) / "server.pem"), str(Path(pki) / "server.key"))
        url = stack.enter_context(HTTPSServer(server_ctx)).url
        for config in CONFIGS:
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
            counted: dict[str, dict[str, Any]] = {}
            for rep in range(args.repeat + 1):  # the first round counts loads, untimed
                for variant in VARIANTS:
                    print(f"{config} {variant} ({rep}/{args.repeat})", file=sys.stderr)
                    what = "count" if rep == 0 else "time"
                    run = _run(["--child", config, variant, str(args.calls), pki, url, what])
                    if rep:
                        runs[variant].append(run)
                    else:
                        counted[variant] = run
            for variant in VARIANTS:
                every = [counted[variant], *runs[variant]]
                rows.append(
                    {
                        "config": config,
                        "variant": variant,
                        "median_s": statistics.median(r["wall"] for r in runs[variant]),
                        "walls_s": [r["wall"] for r in runs[variant]],
                        "per_call_s": [r["per_call_s"] for r in runs[variant]],
                        "ca_loads": counted[variant]["ca_loads"],
                        "outcomes": sorted({o for r in every for o in r["outcomes"]}),
                        "requests_imported": any(r["requests_imported"] for r in every),
                    }
                )
    by = {(r["config"], r["variant"]): r for r in rows}
    import boto3
    import urllib3

    urllib3_version = str(getattr(urllib3, "__version__", "?"))
    print(
        f"Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}; urllib3 {urllib3_version}, "
        f"boto3 {boto3.__version__}; {args.calls} calls per run, each a new connection, median "
        f"of {args.repeat} runs per variant"
    )
    header = (
        f"{'configuration':<23} {'CA loads stock/shim/floor':>26} {'stock ms':>9} "
        f"{'shim ms':>8} {'floor ms':>9} {'vs stock':>9} {'vs floor (min…max)':>19}"
    )
    print(header)
    print("-" * len(header))
    bad = False
    for config in CONFIGS:
        stock, shim, floor = (by[(config, v)] for v in VARIANTS)
        loads = f"{stock['ca_loads']} / {shim['ca_loads']} / {floor['ca_loads']}"
        notes = []
        if not stock["outcomes"] == shim["outcomes"] == floor["outcomes"]:
            notes.append("OUTCOMES DIFFER")
        if config in WITHOUT_REQUESTS and any(r["requests_imported"] for r in (stock, shim)):
            notes.append("REQUESTS WAS IMPORTED")
        bad = bad or bool(notes)
        # Ratios within each repetition (its variants ran one after the other), then their
        # median: this VM's speed drifts by 2x between repetitions, which a ratio of medians
        # taken over different repetitions would carry into the result.
        speed = [a / b for a, b in zip(stock["walls_s"], shim["walls_s"], strict=True)]
        off = [a / b for a, b in zip(shim["walls_s"], floor["walls_s"], strict=True)]
        stock["vs_shim"], shim["vs_floor"] = statistics.median(speed), statistics.median(off)
        spread = f"{shim['vs_floor']:.2f} ({min(off):.2f}…{max(off):.2f})"
        print(
            f"{config:<23} {loads:>26} {stock['median_s'] * 1000:>9.1f} "
            f"{shim['median_s'] * 1000:>8.1f} {floor['median_s'] * 1000:>9.1f} "
            f"{stock['vs_shim']:>8.2f}x {spread:>19}" + "".join(f"  {n}" for n in notes)
        )
    # Where the difference lies, for the configurations whose calls run one after the other:
    # the first call (the shim's one build against the floor's one load) and each later one
    # (the shim's per-connection decision and checks), as medians of per-repetition
    # differences; the later calls' median is taken within each run first.
    print("shim - floor, per repetition (median): first call; each later call")
    for config in CONFIGS:
        shim, floor = by[(config, "shim")], by[(config, "floor")]
        pairs = list(zip(shim["per_call_s"], floor["per_call_s"], strict=True))
        if not all(a and b for a, b in pairs):
            continue  # (concurrent calls: no order to split by)
        first = statistics.median(a[0] - b[0] for a, b in pairs)
        later = statistics.median(
            statistics.median(a[1:] or [0]) - statistics.median(b[1:] or [0]) for a, b in pairs
        )
        floor_later = statistics.median(statistics.median(b[1:] or [0]) for _, b in pairs)
        shim["first_vs_floor_s"], shim["later_vs_floor_s"] = first, later
        print(
            f"  {config:<23} {first * 1000:+7.2f} ms; {later * 1e6:+6.0f} µs"
            f" (the floor's later call: {floor_later * 1000:.2f} ms)"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "command": " ".join(["python benchmarks/scope.py", *sys.argv[1:]]),
                    "configs": CONFIGS,
                    "rows": rows,
                    "python": sys.version,
                    "openssl": ssl.OPENSSL_VERSION,
                    "urllib3": urllib3_version,
                    "boto3": boto3.__version__,
                    "calls": args.calls,
                    "repeat": args.repeat,
                },
                indent=1,
            )
        )
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        config, variant, n, pki, url, what = sys.argv[2:8]
        print(json.dumps(_child(config, variant, int(n), pki, url, what == "count")))
    else:
        sys.exit(main())
