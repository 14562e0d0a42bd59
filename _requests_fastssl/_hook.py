"""The point of use: the wrapper on urllib3 2.x's ``_ssl_wrap_socket_and_match_hostname``.

urllib3 calls it for every new TLS connection (not keep-alive requests; both proxy legs), every
set-up input by keyword. With a shared context for those inputs, urllib3's own function runs
given it, minus the load inputs it holds already; else the call goes to urllib3 untouched.
"""

from __future__ import annotations

import logging
from typing import Any

from . import _contexts, _owned, _policy
from ._policy import Reason
from ._registry import REGISTRY
from ._state import STATE

__all__ = ["set_up_wrapper", "shared_context", "urllib3_1_wrapper"]

_log = logging.getLogger("requests_fastssl")
# What a bug of ours raises: that connection goes to stock. Anything else (MemoryError,
# KeyboardInterrupt, a signal handler's exception) propagates, as from stock's own code.
_BUGS = (AttributeError, LookupError, OSError, RuntimeError, TypeError, ValueError)
# The inputs the shared context already holds: urllib3 must not load them again.
_LOADED = dict.fromkeys(
    ("ca_certs", "ca_cert_dir", "ca_cert_data", "cert_file", "key_file", "key_password")
)


def shared_context(inputs: dict[str, Any]) -> Any:
    """The shared context for these inputs, or the Reason for stock; never raises ``_BUGS``."""
    settings = STATE.settings
    if settings is None:
        return Reason.INTERNAL_ERROR
    try:
        decision = _policy.decide(inputs, settings)
        if isinstance(decision, Reason):
            return decision
        key, paths = decision

        def build(checks: Any) -> Any:
            ca_check = checks[0] if inputs["ca_certs"] else None
            return _contexts.build(inputs, settings.connection, settings.ssl_, ca_check, checks)

        return REGISTRY.get(key, paths, build)
    except RecursionError:  # (a RuntimeError, but stock's own code would raise it too)
        raise
    except _BUGS:
        _log.exception("requests_fastssl: internal error; this connection goes to stock")
        return Reason.INTERNAL_ERROR


def set_up_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if not STATE.active:
        return wrapped(*args, **kwargs)
    if len(args) == 1 and "sock" not in kwargs:  # (the proxy leg passes the socket so)
        kwargs["sock"], args = args[0], ()
    if args or not _policy.INPUTS.issuperset(kwargs) or len(kwargs) < len(_policy.INPUTS) - 1:
        ctx: Any = Reason.CALL_SHAPE  # every input by keyword (tls_in_tls may be left out)
    else:
        ctx = shared_context({"tls_in_tls": False, **kwargs})
    if ctx is Reason.OWN_CONTEXT:
        return _given(wrapped, kwargs)
    if isinstance(ctx, Reason):
        REGISTRY.step_aside(ctx)
        return wrapped(*args, **kwargs)
    REGISTRY.enter(ctx)
    try:
        return wrapped(**{**kwargs, **_LOADED, "ssl_context": ctx})
    finally:
        REGISTRY.leave(ctx)


def _given(wrapped: Any, kwargs: dict[str, Any]) -> Any:
    """A connection given its own context: stock, with a CA load it holds already left out."""
    REGISTRY.step_aside(Reason.OWN_CONTEXT)
    inputs = {"tls_in_tls": False, **kwargs}
    try:
        held = _owned.loaded_already(inputs)
        check = None if held else _owned.before_load(inputs)
    except RecursionError:  # (a RuntimeError, but stock's own code would raise it too)
        raise
    except _BUGS:
        _log.exception("requests_fastssl: internal error; this connection goes to stock")
        held, check = False, None
    if held:
        REGISTRY.count("owned_loads_avoided")
        return wrapped(**{**kwargs, "ca_certs": None})
    result = wrapped(**kwargs)
    if check is not None:
        _owned.note_loaded(kwargs["ssl_context"], check)
    return result


def urllib3_1_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """urllib3 1.26 (its ``ssl_wrap_socket``): stock, counted."""
    if STATE.active:
        REGISTRY.step_aside(Reason.URLLIB3_1)
    return wrapped(*args, **kwargs)
