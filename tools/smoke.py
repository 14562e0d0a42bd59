"""A smoke test that needs only the shim's runtime dependencies: for interpreters where the
test suite's own dependencies do not install (PyPy 8.0: no cryptography wheel, so no trustme).

    python tools/smoke.py --make-pki DIR     # on an interpreter with trustme: certificates
    python tools/smoke.py --pki DIR          # anywhere: stock vs shim, compared

The second form starts an HTTPS server on 127.0.0.1 that requires a client certificate and
one whose CA nobody trusts, makes the same requests stock and with the shim (new connections
each, verify with a bundle and off, with and without a client certificate), compares status,
exception type and message and the client certificate the server saw, and checks that the
shim loaded the bundle once per verifying configuration. Exit status 0 only if everything matched.
"""

from __future__ import annotations

import json
import ssl
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_pki(where: Path) -> None:
    import trustme

    where.mkdir(parents=True, exist_ok=True)
    ca, rogue = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    for name, issuer in (("server", ca), ("rogue", rogue)):
        leaf = issuer.issue_cert("127.0.0.1")
        leaf.cert_chain_pems[0].write_to_path(str(where / f"{name}.pem"))
        leaf.private_key_pem.write_to_path(str(where / f"{name}.key"))
    client = ca.issue_cert("client-a@example.test", common_name="client-a")
    client.cert_chain_pems[0].write_to_path(str(where / "client.pem"))
    client.private_key_pem.write_to_path(str(where / "client.key"))


def smoke(pki: Path) -> int:
    import requests
    import urllib3

    import requests_fastssl
    from _requests_fastssl.cli.server import HTTPSServer

    urllib3.disable_warnings()
    requests_fastssl.uninstall()  # (the import installed it) stock first

    def server_ctx(name: str) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(pki / f"{name}.pem"), str(pki / f"{name}.key"))
        ctx.load_verify_locations(str(pki / "ca.pem"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    bundle, client = str(pki / "ca.pem"), (str(pki / "client.pem"), str(pki / "client.key"))
    with HTTPSServer(server_ctx("server")) as good, HTTPSServer(server_ctx("rogue")) as rogue:
        cases: list[tuple[str, dict[str, Any]]] = [
            (good.url, {"verify": bundle}),
            (good.url, {"verify": bundle, "cert": client}),
            (good.url, {"verify": False}),
            (rogue.url, {"verify": bundle}),
            (rogue.url, {"verify": False, "cert": client}),
        ]

        def run() -> list[tuple[str, Any]]:
            out: list[tuple[str, Any]] = []
            for url, kwargs in cases * 2:  # each twice: the second reuses a shared context
                try:
                    response = requests.get(url, **kwargs)
                    out.append((str(response.status_code), response.json()["client_cn"]))
                except Exception as exc:
                    out.append((type(exc).__name__, str(exc)))
            return out

        stock = run()
        requests_fastssl.install()
        before = requests_fastssl.stats()
        shim = run()
        stats = requests_fastssl.stats().since(before)
        requests_fastssl.uninstall()
    import platform

    report = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "openssl": ssl.OPENSSL_VERSION,
        "status_while_installed": "active" if stats.connections else "not sharing",
        "same": shim == stock,
        "outcomes": [o[0] for o in stock],
        "ca_loads": stats.ca_loads,
        "connections_shared": stats.connections,
        "step_aside_reasons": dict(stats.step_aside_reasons),
    }
    print(json.dumps(report, indent=1))
    if shim != stock:
        for a, b in zip(stock, shim, strict=True):
            if a != b:
                print(f"MISMATCH stock {a} shim {b}", file=sys.stderr)
    # Two verifying configurations (without and with the client certificate): two loads,
    # where stock loads once per verifying connection.
    return 0 if shim == stock and stats.ca_loads == 2 and stats.connections >= 6 else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--make-pki"]:
        make_pki(Path(sys.argv[2]))
        sys.exit(0)
    if sys.argv[1:2] == ["--pki"]:
        sys.exit(smoke(Path(sys.argv[2])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
