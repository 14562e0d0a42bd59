"""The one counter of CA and client-chain loads, for the benchmarks and the tests.

It watches calls through the profiler in every thread instead of replacing the load methods:
the shim leaves alone a context class whose methods were replaced (they might do more than
load), so a counting wrapper would change what it counts. The profiler slows Python down:
count in runs that are not timed.
"""

from __future__ import annotations

import ssl
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["LoadCount", "counting_loads"]

_FIELDS = {
    "load_verify_locations": "verify_locations",
    "load_default_certs": "default_certs",
    "load_cert_chain": "cert_chains",
}


@dataclass
class LoadCount:
    """Loads into client-side contexts (a server's own context is not counted)."""

    verify_locations: int = 0
    default_certs: int = 0
    cert_chains: int = 0


@contextmanager
def counting_loads() -> Iterator[LoadCount]:
    """Count loads in this thread and the threads started inside the block (every thread
    on Python 3.12 and later)."""
    counter = LoadCount()
    lock = threading.Lock()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "c_call" and event != "call":
            return
        name = getattr(arg, "__name__", None) if event == "c_call" else frame.f_code.co_name
        field = _FIELDS.get(name or "")
        if field is None:
            return
        owner = getattr(arg, "__self__", None) if event == "c_call" else frame.f_locals.get("self")
        if not isinstance(owner, ssl.SSLContext) or owner.protocol == ssl.PROTOCOL_TLS_SERVER:
            return
        if event == "call" and name != "load_default_certs":
            return  # (a Python-level method: only ssl.py's load_default_certs is one)
        with lock:
            setattr(counter, field, getattr(counter, field) + 1)

    # Every thread where the interpreter allows it (3.12+); before that, this thread and
    # the threads started inside the block.
    everywhere = getattr(threading, "setprofile_all_threads", None)
    if everywhere is not None:
        everywhere(profile)
    else:
        sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield counter
    finally:
        threading.setprofile(None)
        if everywhere is not None:
            everywhere(None)
        else:
            sys.setprofile(None)
