"""The first new connection's own costs, split: the check of urllib3's code, the trust file's
read and digest, stock's CA load (through the descriptor), and the rest of the build; beside
one plain load of the same bundle. Each repetition is a fresh interpreter; medians.

    python benchmarks/first_build.py [--repeat 21]

Needs the test dependencies (trustme): pip install -e . --group test
"""

from __future__ import annotations

import argparse
import contextlib
import json
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = (
    "code check, at urllib3's import",
    "code check, at the set-up",
    "read and digest",
    "CA load",
    "rest of the build",
    "first request",
)


def timed(spent: dict[str, float], part: str, func: Any) -> Any:
    def run(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            spent[part] += time.perf_counter() - started

    return run


def _child(url: str, bundle: str) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    import requests_fastssl

    requests_fastssl.install()
    from _requests_fastssl import _contexts, _genuine, _policy, _registry

    spent: dict[str, float] = dict.fromkeys(PARTS, 0.0)
    identify = _genuine.known_function
    _genuine.known_function = timed(spent, "code check, at urllib3's import", identify)
    import requests

    _genuine.known_function = identify

    _policy.Settings.known = timed(spent, "code check, at the set-up", _policy.Settings.known)  # type: ignore[method-assign]
    _registry.read_checks = timed(spent, "read and digest", _registry.read_checks)  # type: ignore[attr-defined]
    _contexts._through = timed(spent, "CA load", _contexts._through)
    _contexts.build = timed(spent, "rest of the build", _contexts.build)
    started = time.perf_counter()
    status = requests.get(url, verify=bundle, timeout=30).status_code
    spent["first request"] = time.perf_counter() - started
    if status != 200 or requests_fastssl.stats().ca_loads != 1:
        raise RuntimeError(f"{status}: {requests_fastssl.stats()}")
    spent["rest of the build"] -= spent["CA load"]  # (the build's own steps, without the load)
    ctx = ssl.create_default_context()
    started = time.perf_counter()
    ctx.load_verify_locations(bundle)
    spent["plain load"] = time.perf_counter() - started
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
    from reach import serve

    runs: list[dict[str, float]] = []
    with contextlib.ExitStack() as stack:
        url, pki = serve(stack, "rfs-first-")
        for _ in range(args.repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--child", url, str(pki / "bundle.pem")],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs.append(json.loads(out.stdout))
    print(f"Python {sys.version.split()[0]}, {ssl.OPENSSL_VERSION}; median of {args.repeat} "
          "fresh interpreters, one request each (the shim's first build)")  # fmt: skip
    for part in (*PARTS, "plain load"):
        print(f"  {part:<32} {statistics.median(r[part] for r in runs) * 1000:7.2f} ms")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_child(sys.argv[2], sys.argv[3])))
    else:
        raise SystemExit(main())
