"""The at-exit report (``run --report``, ``REQUESTS_FASTSSL_REPORT=1``): one line on stderr
per Python process that imported requests, with the shim's state and counters."""

from __future__ import annotations

import os
import sys

__all__ = ["print_report"]


def print_report() -> None:
    if "requests" not in sys.modules:  # a process that never used requests has nothing to say
        return
    import requests_fastssl

    command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))
    where = f"pid {os.getpid()}, {command or sys.executable}"
    status = requests_fastssl.status()
    if status.state is requests_fastssl.State.ACTIVE:
        said = str(requests_fastssl.stats())
    else:
        said = f"the shim was not active ({status})"
    print(f"requests_fastssl report ({where}): {said}", file=sys.stderr, flush=True)
