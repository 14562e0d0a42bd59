"""Which requests and urllib3 the shim can patch, and the one function it wraps in each. urllib3
2.x: ``_ssl_wrap_socket_and_match_hostname``, only if it takes exactly ``_policy.INPUTS`` (an
input the key does not see could change the context). urllib3 1.26 has no single call holding
the inputs: its ``ssl_wrap_socket`` is wrapped only to count those connections."""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

__all__ = ["hook", "unsupported_reason", "version_tuple"]

MIN_REQUESTS = (2, 32, 3)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in text.split(".")[:3])


def unsupported_reason(adapters: types.ModuleType) -> str | None:
    """Why the imported requests cannot be patched safely, or None if it can."""
    requests_version = getattr(sys.modules.get("requests.__version__"), "__version__", "")
    if not requests_version or version_tuple(requests_version) < MIN_REQUESTS:
        return f"requests {requests_version or '(unknown version)'} is older than 2.32.3"
    if version_tuple(requests_version)[0] >= 3:
        return f"requests {requests_version} is newer than the 2.x line this shim knows"
    import urllib3

    urllib3_version = getattr(urllib3, "__version__", "")
    if version_tuple(urllib3_version) < (1, 26) or version_tuple(urllib3_version)[0] >= 3:
        return f"urllib3 {urllib3_version} is outside 1.26.x-2.x"
    try:
        import ssl  # noqa: F401
    except ImportError:
        return "this Python has no ssl module"
    try:
        import wrapt
    except ImportError:
        return "wrapt is not installed"
    if not hasattr(wrapt, "unwrap_object"):
        return f"wrapt {getattr(wrapt, '__version__', '?')} is older than 2.4"
    if version_tuple(urllib3_version)[0] == 2:
        import urllib3.connection

        from ._genuine import IDENTIFIED
        from ._policy import INPUTS  # (imports ssl)

        if IDENTIFIED is None:
            return "the standard library's ssl.SSLContext could not be identified from ssl.py"

        set_up = getattr(urllib3.connection, "_ssl_wrap_socket_and_match_hostname", None)
        try:
            params = set(inspect.signature(set_up).parameters)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            params = set()
        if params != INPUTS:
            return f"urllib3 {urllib3_version}'s TLS set-up takes inputs this shim does not know"
    return None


def hook() -> tuple[types.ModuleType, str, Any]:
    """(owner, attribute, wrapper) of the one function to wrap."""
    import urllib3.connection

    from . import _hook

    if version_tuple(urllib3.__version__)[0] == 1:  # type: ignore[attr-defined]
        return urllib3.connection, "ssl_wrap_socket", _hook.urllib3_1_wrapper
    return urllib3.connection, "_ssl_wrap_socket_and_match_hostname", _hook.set_up_wrapper
