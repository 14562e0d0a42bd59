"""Reach: stock / shim / floor for each configuration beyond the common path.

    python benchmarks/reach.py [--connections 10] [--repeat 5] [--keepalive 10000] [--json FILE]

Each configuration makes ``--connections`` requests, each on a new connection, in a fresh
interpreter per variant and repetition (interleaved, after a warm-up). CA loads and client
chain loads are counted in that interpreter by wrapping ``ssl.SSLContext`` before anything
else is imported: from outside the shim. *floor* is the same requests with one context built
by hand, holding what stock's holds (CA or, unverified, the system store; client chain;
version bounds), handed to urllib3 so that nothing is loaded per connection: what no wrapper
can beat. Everything runs on
127.0.0.1 (servers and proxies in the child). The keep-alive rows make ``--keepalive`` GETs
on one Session, stock and shim (CA file and CA directory): the shim's per-request overhead.

Needs the test dependencies (trustme, PySocks): pip install -e . --group test
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

CONFIGS = {
    "https-proxy": "HTTPS proxy (proxies={'https': 'https://proxy'})",
    "socks5": "SOCKS5 proxy (requests[socks])",
    "verify-path": "verify=pathlib.Path(bundle)",
    "verify-none": "session.verify = None (stock: unverified)",
    "key-password": "encrypted client key, key_password through the pool manager",
    "assert-hostname": "assert_hostname (toolbelt's HostHeaderSSLAdapter)",
    "tls-bounds": "TLS version bounds (ssl_minimum_version)",
    "own-context": "adapter with its own ssl_context (X509Adapter, httpie)",
    "first-request": "first request of a process, after warm() at start-up",
}
VARIANTS = ("stock", "shim", "floor")


# --- inside the child ---------------------------------------------------------------------------


def _child(config: str, variant: str, connections: int, pki: str, count: bool) -> dict[str, Any]:
    # Counting runs are not timed, timed runs not counted: the profiler slows Python down.
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    from contextlib import ExitStack as _Stack

    from _requests_fastssl.cli.loads import LoadCount, counting_loads

    keep = _Stack()  # (held until the child returns: its end would stop the counting)
    counter: LoadCount | None = keep.enter_context(counting_loads()) if count else None

    def zero() -> None:
        if counter is not None:
            counter.verify_locations = counter.default_certs = counter.cert_chains = 0

    if variant == "shim":
        import requests_fastssl

        requests_fastssl.install()
    import ssl
    from contextlib import ExitStack

    import requests
    import urllib3
    from requests.adapters import HTTPAdapter
    from urllib3.util.ssl_ import create_urllib3_context

    from _requests_fastssl.cli.server import HTTPSServer

    urllib3.disable_warnings()
    files = Path(pki)
    bundle = str(files / "bundle.pem")
    client = (str(files / "client.pem"), str(files / "client.key"))
    encrypted = (str(files / "client.pem"), str(files / "client.encrypted.key"))

    def server_ctx(name: str = "server") -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(files / f"{name}.pem"), str(files / f"{name}.key"))
        ctx.load_verify_locations(str(files / "ca.pem"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    with ExitStack() as stack:
        server = stack.enter_context(HTTPSServer(server_ctx()))
        url = server.url
        verify: Any = bundle
        cert: Any = None
        tls: dict[str, Any] = {}
        proxies: dict[str, str] = {}
        if config == "https-proxy":
            from loopback_proxy import LoopbackProxy

            proxy = stack.enter_context(LoopbackProxy(tls=server_ctx()))
            proxies = {"https": proxy.url}
        elif config == "socks5":
            from loopback_proxy import LoopbackProxy

            proxies = {"https": stack.enter_context(LoopbackProxy(socks=True)).url}
        elif config == "verify-path":
            verify = Path(bundle)
        elif config == "verify-none":
            verify = None
        elif config == "key-password":
            cert = encrypted
            tls = {"key_password": "secret"}
        elif config == "assert-hostname":
            tls = {"assert_hostname": "127.0.0.1"}
        elif config == "tls-bounds":
            tls = {"ssl_minimum_version": ssl.TLSVersion.TLSv1_2}

        def floor_context() -> ssl.SSLContext:
            verifying = verify is not None
            ctx = create_urllib3_context(
                cert_reqs=ssl.CERT_REQUIRED if verifying else ssl.CERT_NONE,
                ssl_minimum_version=tls.get("ssl_minimum_version"),
            )
            if config == "assert-hostname":
                ctx.check_hostname = False  # urllib3 matches the asserted name itself
            if verifying:
                ctx.load_verify_locations(bundle)
            else:  # what stock's context holds: urllib3 loads the system store
                ctx.load_default_certs()
            if cert is not None:
                ctx.load_cert_chain(cert[0], cert[1], password=tls.get("key_password"))
            if config == "own-context":
                ctx.load_cert_chain(*client)  # what the user's context holds
            return ctx

        held: list[ssl.SSLContext] = []

        class Adapter(HTTPAdapter):
            """The configuration's adapter; for floor, one pre-built context and no paths."""

            def build_connection_pool_key_attributes(
                self, request: Any, verify: Any, cert: Any = None
            ) -> Any:
                host, pool_kwargs = super().build_connection_pool_key_attributes(
                    request, verify, cert
                )
                if variant == "floor":  # in the context already
                    for name in ("ca_certs", "ca_cert_dir", "cert_file", "key_file"):
                        pool_kwargs.pop(name, None)
                return host, pool_kwargs

            def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
                kwargs.update(tls)
                if variant == "floor" or config == "own-context":
                    kwargs["ssl_context"] = held[0]
                super().init_poolmanager(*args, **kwargs)

            def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
                kwargs.update(tls)
                if variant == "floor":
                    kwargs["ssl_context"] = held[0]
                    if proxy.startswith("https:"):
                        kwargs["proxy_ssl_context"] = held[0]  # the proxy's own leg too
                return super().proxy_manager_for(proxy, **kwargs)

            def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
                if variant != "floor":
                    return super().cert_verify(conn, url, verify, cert)
                # Loaded already: urllib3 gets the mode and nothing to load.
                conn.cert_reqs = "CERT_REQUIRED" if verify is not None else "CERT_NONE"
                return None

        if config == "own-context" and variant != "floor":
            # The user's context (a client certificate in it, no CAs), made when the adapter
            # is: it stays the user's.
            user_ctx = create_urllib3_context()
            user_ctx.load_cert_chain(*client)
            held.append(user_ctx)
        zero()  # from here on: what the requests load

        def one() -> str:
            with requests.Session() as session:
                session.mount("https://", Adapter())
                session.verify = verify
                response = session.get(
                    url, cert=cert, proxies=proxies, headers={"Connection": "close"}
                )
                return str(response.status_code)

        started = time.perf_counter()
        if config == "first-request":
            # Start-up (outside the timed window, as a program's import time is): the shim
            # warms, the floor builds its context, stock does nothing.
            if variant == "shim":
                import requests_fastssl

                requests_fastssl.warm(verify=bundle)
            elif variant == "floor":
                held.append(floor_context())
            zero()  # what the request itself loads
            started = time.perf_counter()
            outcomes = [one()]
        else:
            if variant == "floor" and not held:
                held.append(floor_context())  # inside the window, like the shim's one build
            outcomes = [one() for _ in range(connections)]
        wall = time.perf_counter() - started
    sys.setprofile(None)
    counts = (
        {
            "load_verify_locations": counter.verify_locations,
            "load_cert_chain": counter.cert_chains,
            "load_default_certs": counter.default_certs,
        }
        if counter is not None
        else {}
    )
    return {"wall": wall, "outcomes": outcomes, **counts}


def _keepalive_child(kind: str, variant: str, calls: int, pki: str) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT)]
    if variant == "shim":
        import requests_fastssl

        requests_fastssl.install()
    import ssl

    import requests

    from _requests_fastssl.cli.server import HTTPSServer

    files = Path(pki)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(files / "server.pem"), str(files / "server.key"))
    verify = str(files / ("bundle.pem" if kind == "file" else "hashed"))
    with HTTPSServer(ctx) as server, requests.Session() as session:
        session.get(server.url, verify=verify)  # the connection, opened once
        started = time.perf_counter()
        for _ in range(calls):
            session.get(server.url, verify=verify)
        wall = time.perf_counter() - started
    return {"wall": wall, "per_request_us": wall / calls * 1e6}


# --- the parent ---------------------------------------------------------------------------------


def _make_pki(where: Path) -> None:
    import trustme
    from cryptography.hazmat.primitives import serialization

    from _requests_fastssl.cli.pki import certifi_plus

    ca = trustme.CA()
    (where / "ca.pem").write_bytes(ca.cert_pem.bytes())
    certifi_plus(ca, str(where))
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    leaf.cert_chain_pems[0].write_to_path(str(where / "server.pem"))
    leaf.private_key_pem.write_to_path(str(where / "server.key"))
    client = ca.issue_cert("client-a@example.test", common_name="client-a")
    client.cert_chain_pems[0].write_to_path(str(where / "client.pem"))
    client.private_key_pem.write_to_path(str(where / "client.key"))
    key = serialization.load_pem_private_key(client.private_key_pem.bytes(), password=None)
    (where / "client.encrypted.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    hashed = where / "hashed"  # a c_rehash-style directory of certifi's CAs plus ours
    hashed.mkdir()
    marker = b"-----BEGIN CERTIFICATE-----"
    pems = (where / "bundle.pem").read_bytes().split(marker)[1:]
    for i, pem in enumerate(pems):  # one certificate per file, as rehash wants
        (hashed / f"ca-{i}.pem").write_bytes(marker + pem)
    subprocess.run(["openssl", "rehash", str(hashed)], check=True, capture_output=True)


def serve(stack: contextlib.ExitStack, prefix: str) -> tuple[str, Path]:
    """A throwaway PKI (``_make_pki``) and an HTTPS server on 127.0.0.1 using it, both undone
    with ``stack``: the server's URL and the PKI's folder (``bundle.pem``: certifi plus the CA)."""
    import ssl

    from _requests_fastssl.cli.server import HTTPSServer

    pki = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
    _make_pki(pki)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(pki / "server.pem"), str(pki / "server.key"))
    return stack.enter_context(HTTPSServer(server_ctx)).url, pki


def _run(args: list[str]) -> dict[str, Any]:
    # verify=True must mean requests' default here, whatever this machine exports.
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, timeout=900, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[:3]} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/reach.py", description=__doc__)
    parser.add_argument("--connections", type=int, default=20)  # (what the docs quote)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--keepalive", type=int, default=10_000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if not (1 <= args.connections <= 1000 and 1 <= args.repeat <= 100 and args.keepalive >= 1):
        parser.error("--connections 1-1000, --repeat 1-100, --keepalive >= 1")
    import ssl

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="requests-fastssl-reach-") as pki:
        _make_pki(Path(pki))
        for config in CONFIGS:
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
            loads: dict[str, dict[str, Any]] = {}
            for rep in range(args.repeat + 1):  # the first round counts loads, untimed
                for variant in VARIANTS:
                    print(f"{config} {variant} ({rep}/{args.repeat})", file=sys.stderr)
                    what = "count" if rep == 0 else "time"
                    run = _run(["--child", config, variant, str(args.connections), pki, what])
                    if rep:
                        runs[variant].append(run)
                    else:
                        loads[variant] = run
            for variant in VARIANTS:
                outcomes = {o for run in runs[variant] for o in run["outcomes"]}
                rows.append(
                    {
                        "config": config,
                        "variant": variant,
                        "median_s": statistics.median(r["wall"] for r in runs[variant]),
                        "ca_loads": loads[variant]["load_verify_locations"],
                        "chain_loads": loads[variant]["load_cert_chain"],
                        "default_loads": loads[variant]["load_default_certs"],
                        "outcomes": sorted(outcomes | set(loads[variant]["outcomes"])),
                    }
                )
        keepalive: dict[str, dict[str, float]] = {}
        for kind in ("file", "directory"):
            best = {v: float("inf") for v in ("stock", "shim")}
            for _ in range(3):  # best of 3, alternating: a noisy neighbour does not decide
                for variant in best:
                    print(f"keep-alive {kind} {variant}", file=sys.stderr)
                    got = _run(["--keepalive", kind, variant, str(args.keepalive), pki])
                    best[variant] = min(best[variant], got["per_request_us"])
            keepalive[kind] = best

    by = {(r["config"], r["variant"]): r for r in rows}
    print(
        f"Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}; {args.connections} new "
        f"connections per run, median of {args.repeat} runs per variant"
    )
    header = (
        f"{'configuration':<16} {'loads stock/shim/floor (CA+chain+default)':<44} "
        f"{'stock ms':>9} {'shim ms':>8} {'floor ms':>9} {'vs stock':>9} {'vs floor':>9}"
    )
    print(header)
    print("-" * len(header))
    for config in CONFIGS:
        stock, shim, floor = (by[(config, v)] for v in VARIANTS)

        def shown(r: dict[str, Any]) -> str:
            return f"{r['ca_loads']:g}+{r['chain_loads']:g}+{r['default_loads']:g}"

        same = stock["outcomes"] == shim["outcomes"] == floor["outcomes"]
        print(
            f"{config:<16} {shown(stock) + ' / ' + shown(shim) + ' / ' + shown(floor):<44} "
            f"{stock['median_s'] * 1000:>9.1f} {shim['median_s'] * 1000:>8.1f} "
            f"{floor['median_s'] * 1000:>9.1f} {stock['median_s'] / shim['median_s']:>8.2f}x "
            f"{shim['median_s'] / floor['median_s']:>9.2f}" + ("" if same else "  OUTCOMES DIFFER")
        )
    for kind, best in keepalive.items():
        print(
            f"keep-alive, CA {kind}: {args.keepalive} GETs on one Session: stock "
            f"{best['stock']:.0f} us, shim {best['shim']:.0f} us per request "
            f"({(best['shim'] / best['stock'] - 1) * 100:+.1f}%, best of 3)"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "configs": CONFIGS,
                    "rows": rows,
                    "keepalive_us": keepalive,
                    "python": sys.version,
                    "openssl": ssl.OPENSSL_VERSION,
                    "connections": args.connections,
                    "repeat": args.repeat,
                    "keepalive_calls": args.keepalive,
                },
                indent=1,
            )
        )
    differ = any(by[(c, "stock")]["outcomes"] != by[(c, "shim")]["outcomes"] for c in CONFIGS)
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        config, variant, n, pki, what = sys.argv[2:7]
        print(json.dumps(_child(config, variant, int(n), pki, what == "count")))
    elif sys.argv[1:2] == ["--keepalive"]:
        kind, variant, n, pki = sys.argv[2:6]
        print(json.dumps(_keepalive_child(kind, variant, int(n), pki)))
    else:
        sys.exit(main())
