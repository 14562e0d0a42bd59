"""Scope: stock / shim / floor for urllib3 users other than requests.get (issue 27).

    python benchmarks/scope.py [--calls 20] [--repeat 11] [--json FILE]

Each configuration makes ``--calls`` calls, each on a new TLS connection (the server closes
every connection), in a fresh interpreter per variant and repetition, interleaved after one
counting round. The times are medians; the ratios are medians of the ratios within each
repetition (with their range), as this machine's speed drifts between repetitions. *shim* is
``import requests_fastssl`` as the program's first line; in the boto3 and urllib3 rows the
program never imports requests (checked: a row whose child imported it fails). *floor* is the
same program with one context built by hand, inside the timed window, holding the bundle,
handed to urllib3 with nothing left to load: what no cache can beat. Loads are counted in the
counting round by the profiler (``cli/loads.py``).

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


def _child(config: str, variant: str, calls: int, pki: str, count: bool) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT)]
    if variant == "shim":
        import requests_fastssl  # noqa: F401  (the program's first line)
    from contextlib import ExitStack

    from _requests_fastssl.cli.loads import counting_loads

    stack = ExitStack()
    counter = stack.enter_context(counting_loads()) if count else None
    import ssl

    import urllib3
    from urllib3.util.ssl_ import create_urllib3_context

    from _requests_fastssl.cli.server import HTTPSServer

    files = Path(pki)
    bundle = str(files / "bundle.pem")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(files / "server.pem"), str(files / "server.key"))
    # The floor's one context: made with the clients (outside the timed window), loaded at
    # the start of the window, as the shim's one build happens inside it.
    floor = create_urllib3_context()

    with HTTPSServer(server_ctx) as server:
        go = _prepare(config, variant, calls, server.url, bundle, floor)
        if counter is not None:  # what the calls load, not the server's set-up
            counter.verify_locations = counter.default_certs = counter.cert_chains = 0
        started = time.perf_counter()
        if variant == "floor":
            floor.load_verify_locations(bundle)
        outcomes = go()
        wall = time.perf_counter() - started
    stack.close()
    loads = {} if counter is None else {"ca_loads": counter.verify_locations}
    return {
        "wall": wall,
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
    config: str, variant: str, calls: int, url: str, bundle: str, floor: Any
) -> Callable[[], list[str]]:
    """The clients, made before the timed window; returns the calls, timed."""
    close = {"Connection": "close"}
    if config == "boto3":
        client = _s3_client(url, bundle, variant, floor)
        return lambda: [str(client.list_objects_v2(Bucket="b")["KeyCount"]) for _ in range(calls)]
    if config == "boto3-client-per-call":

        def per_call() -> list[str]:
            out = []
            for _ in range(calls):
                client = _s3_client(url, bundle, variant, floor)
                out.append(str(client.list_objects_v2(Bucket="b")["KeyCount"]))
                client.close()
            return out

        return per_call
    if config in ("poolmanager", "poolmanager-per-thread"):
        import urllib3

        def manager() -> Any:
            if variant == "floor":
                return urllib3.PoolManager(ssl_context=floor, cert_reqs="CERT_REQUIRED")
            return urllib3.PoolManager(ca_certs=bundle)

        if config == "poolmanager":
            shared = manager()
            return lambda: [
                str(shared.request("GET", url, headers=close).status) for _ in range(calls)
            ]
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
    return lambda: [
        str(session.get(url, verify=bundle, headers=close).status_code) for _ in range(calls)
    ]


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
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if not (1 <= args.calls <= 500 and 1 <= args.repeat <= 100):
        parser.error("--calls 1-500, --repeat 1-100")
    import ssl

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from reach import _make_pki

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-scope-") as pki:
        _make_pki(Path(pki))
        for config in CONFIGS:
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
            counted: dict[str, dict[str, Any]] = {}
            for rep in range(args.repeat + 1):  # the first round counts loads, untimed
                for variant in VARIANTS:
                    print(f"{config} {variant} ({rep}/{args.repeat})", file=sys.stderr)
                    what = "count" if rep == 0 else "time"
                    run = _run(["--child", config, variant, str(args.calls), pki, what])
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
        config, variant, n, pki, what = sys.argv[2:7]
        print(json.dumps(_child(config, variant, int(n), pki, what == "count")))
    else:
        sys.exit(main())
