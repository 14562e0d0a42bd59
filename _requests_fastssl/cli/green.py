"""doctor's lines on green libraries: for gevent and eventlet where installed, whether their
monkey patching is in effect in this process, and whether the shim shares under it (their
context class's code reviewed, as the shim judges it per connection)."""

from __future__ import annotations

import importlib
import ssl
import sys
import warnings
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .report import Report

__all__ = ["green_libraries", "httpx_line"]

# distribution -> the module of its context class (the shim's _green.GREEN)
_LIBRARIES = {"gevent": "gevent.ssl", "eventlet": "eventlet.green.ssl"}


def green_libraries(out: Report) -> None:
    from .._green import GREEN, class_code, context_classes

    found: dict[str, Any] = {}
    for dist, module_name in _LIBRARIES.items():
        try:
            release = version(dist)
        except PackageNotFoundError:
            continue
        patched = getattr(ssl.SSLContext, "__module__", None) == module_name
        try:
            with warnings.catch_warnings():  # (eventlet's import warns of its maintenance)
                warnings.simplefilter("ignore")
                module = importlib.import_module(module_name)  # (imported, not patching)
            cls = getattr(module, GREEN[module_name][0])
            code = class_code(cls, module)
        except Exception as exc:  # (an install that cannot import here: say so)
            code = f"not importable here ({type(exc).__name__}: {exc})"
        if patched:
            u3 = sys.modules.get("urllib3.util.ssl_")
            reason = context_classes(getattr(u3, "SSLContext", ssl.SSLContext))
            where = f"its patching is in effect here: {_verdict(reason)}"
        else:
            where = (
                f"not patched in this process; patched before urllib3's import: {_verdict(code)}"
            )
        found[dist] = {"version": release, "patched": patched, "shared": code is None}
        out.say(f"{dist} {release}: {where}")
    if not found:
        out.say("green libraries: neither gevent nor eventlet installed", "green", found)
        return
    out.doc["green"] = found


def _verdict(reason: str | None) -> str:
    if reason is None:
        return "shared (its SSLContext's code is reviewed)"
    return f"every connection left to stock ({reason})"


def httpx_line(out: Report) -> None:
    """Whether httpx's transports (and its async clients, through anyio) share here, as the
    shim judges a transport: its and httpcore's code reviewed, and anyio's TLS wrap."""
    try:
        release = version("httpx")
    except PackageNotFoundError:
        out.say("httpx: not installed", "httpx", None)
        return
    try:
        import httpcore  # noqa: F401  (imports the httpcore modules the shim reads)
        import httpx  # noqa: F401

        from .._httpx_anyio import UNKNOWN, tls_known
        from .._httpx_code import known, unknown_code_reason

        why = known()
        sync = "shared" if why is None else f"left to stock ({unknown_code_reason() or why.text})"
        both = sync if why or tls_known() else f"{sync}; AsyncClient left to stock ({UNKNOWN})"
    except Exception as exc:  # (an install that cannot import here: say so)
        both = f"not importable here ({type(exc).__name__}: {exc})"
    out.say(f"httpx {release}: {both}", "httpx", {"version": release, "verdict": both})
