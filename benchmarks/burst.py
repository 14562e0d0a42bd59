"""A burst of N threads, one request each, in one process: where the shim's time against the
floor goes (docs/benchmarks.md, "Against the floor").

    python benchmarks/burst.py 300 shim     # the shim, building on first use
    python benchmarks/burst.py 300 warm     # the shim, warm() before the threads start
    python benchmarks/burst.py 300 floor    # an adapter handing urllib3 one pre-built context
    python benchmarks/burst.py 300 stock

Prints the wall time and peak RSS of the burst, then the shim's counters. Run each mode
several times in alternation: one run of 300 threads on a 2-core machine is noise.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests
import trustme
import urllib3

import requests_fastssl
from _requests_fastssl.cli.child import _floor_adapter, peak_rss_mb
from _requests_fastssl.cli.pki import certifi_plus
from _requests_fastssl.cli.server import HTTPSServer, server_context


def main() -> None:
    n, mode = int(sys.argv[1]), sys.argv[2]
    urllib3.disable_warnings()
    ca = trustme.CA()
    bundle = certifi_plus(ca, tempfile.mkdtemp(prefix="burst-"))
    if mode in ("stock", "floor"):
        requests_fastssl.uninstall()
    # The bench's floor: the context stock builds, built once, inside the timed window (as
    # the shim's one build is). Every mode has imported wrapt (with requests_fastssl, above).
    floor, build_floor = _floor_adapter(True, bundle)

    with HTTPSServer(server_context(ca, ("127.0.0.1",))) as server:
        if mode == "warm":
            requests_fastssl.warm(verify=bundle)
        gate = threading.Barrier(n + 1)

        def one() -> None:
            gate.wait()
            if mode == "floor":
                with requests.Session() as session:
                    session.mount("https://", floor())
                    session.get(server.url, verify=bundle).close()
            else:
                requests.get(server.url, verify=bundle).close()

        threads = [threading.Thread(target=one) for _ in range(n)]
        for thread in threads:
            thread.start()
        started = time.perf_counter()
        if mode == "floor":
            build_floor()
        gate.wait()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    print(f"{mode} {n} threads: {wall:.3f} s, peak RSS {peak_rss_mb():.0f} MB (pid {os.getpid()})")
    print(requests_fastssl.stats())


if __name__ == "__main__":
    main()
