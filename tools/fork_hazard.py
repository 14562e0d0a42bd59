"""How often a child forked from a threaded requests process hangs, stock or shimmed.

16 threads make requests (a new connection each) to a loopback HTTPS server; the main
thread forks N times; each child makes one request and is killed after 10 s if it hangs.
A hang is reported with its innermost frame: inside ``ssl.py`` means inside OpenSSL, whose
locks a parent thread held at the fork. This is the measurement behind the stress run's
``openssl_fork_hangs`` (tests/stress.py, fork_check)::

    python tools/fork_hazard.py stock 150
    python tools/fork_hazard.py shim 150
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
import trustme
import urllib3

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _requests_fastssl.cli.pki import certifi_plus
from _requests_fastssl.cli.server import HTTPSServer, server_context


def main() -> int:
    mode, forks = sys.argv[1], int(sys.argv[2])
    if mode == "shim":
        import requests_fastssl

        requests_fastssl.install()
    urllib3.disable_warnings()
    ca = trustme.CA()
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp, HTTPSServer(server_context(ca)) as server:
        bundle = certifi_plus(ca, tmp)

        def load() -> None:
            while not stop.is_set():
                with contextlib.suppress(requests.RequestException):
                    requests.get(server.url, verify=bundle, headers={"Connection": "close"})

        threads = [threading.Thread(target=load, daemon=True) for _ in range(16)]
        for thread in threads:
            thread.start()
        hangs: list[str] = []
        for _ in range(forks):
            time.sleep(0.05)  # pacing between forks, not synchronisation
            with tempfile.TemporaryFile() as dump:
                pid = os.fork()
                if pid == 0:
                    faulthandler.register(signal.SIGALRM, file=dump, chain=True)
                    signal.alarm(10)
                    code = 1
                    try:
                        code = 0 if requests.get(server.url, verify=bundle).ok else 1
                    finally:
                        os._exit(code)
                _, status = os.waitpid(pid, 0)
                if os.waitstatus_to_exitcode(status) == -signal.SIGALRM:
                    dump.seek(0)
                    lines = dump.read().decode(errors="replace").splitlines()
                    hangs += [line.strip() for line in lines if line.strip().startswith("File")][:1]
        stop.set()
    print(f"{mode}: {forks} forks, {len(hangs)} children hung")
    for frame in hangs:
        print(f"  innermost: {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
