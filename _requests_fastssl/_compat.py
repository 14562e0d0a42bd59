"""Which urllib3 the shim can patch, and the one function it wraps in each. urllib3
2.x: ``_ssl_wrap_socket_and_match_hostname``, only if it takes exactly ``_policy.INPUTS`` (an
input the key does not see could change the context). urllib3 1.26 has no single call holding
the inputs: its ``ssl_wrap_socket`` is wrapped only to count those connections."""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

__all__ = ["hook", "unsupported_reason", "version_tuple"]


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int("".join(c for c in part if c.isdigit()) or 0) for part in text.split(".")[:3])


def unsupported_reason(code: bool = True) -> str | None:
    """Why the imported urllib3 cannot be patched safely, or None if it can. requests' version
    plays no part: the hook is urllib3's, and whatever a requests gives urllib3 (2.32.0-2.32.4
    their own preloaded context) reaches it as any caller's input. ``code``: also whether its
    TLS code is tabled (ms of compiling: inside an import, the first set-up asks)."""
    # (from urllib3._version: inside urllib3's own import, where the package may not have
    # the attribute yet, that module ran first)
    urllib3_version = str(
        getattr(sys.modules.get("urllib3._version"), "__version__", None)
        or getattr(sys.modules.get("urllib3"), "__version__", "")
    )
    if not urllib3_version and "urllib3._version" not in sys.modules:
        # urllib3 before 1.26 has no _version module, and sets __version__ after importing
        # its connection module: older than 1.26 either way; the metadata names it.
        from importlib.metadata import PackageNotFoundError, version

        try:
            urllib3_version = version("urllib3")
        except PackageNotFoundError:
            return "urllib3 is older than 1.26 (it has no urllib3._version)"
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
        if code:
            from ._genuine import unknown_code_reason

            return unknown_code_reason()
    return None


def hook() -> tuple[types.ModuleType, str, Any]:
    """(owner, attribute, wrapper) of the one function to wrap."""
    import urllib3.connection

    from . import _hook

    if not hasattr(urllib3.connection, "_ssl_wrap_socket_and_match_hostname"):  # (1.26)
        return urllib3.connection, "ssl_wrap_socket", _hook.urllib3_1_wrapper
    return urllib3.connection, "_ssl_wrap_socket_and_match_hostname", _hook.set_up_wrapper
