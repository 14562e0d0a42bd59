"""The point of use: the wrapper on urllib3 2.x's ``_ssl_wrap_socket_and_match_hostname``, which
urllib3 calls with every set-up input by keyword for every new TLS connection. With a shared
context, urllib3's own function runs given it, minus the loads it holds; else untouched."""

from __future__ import annotations

import logging
import weakref
from typing import Any

from . import _contexts, _policy
from ._errors import FrozenContextError
from ._files import FileCheck, propagate, read_checks
from ._genuine import GENUINE_CONTEXT, genuine_classes
from ._policy import Aside, Reason, StockError
from ._registry import REGISTRY
from ._state import STATE

__all__ = ["set_up_wrapper", "shared_context", "urllib3_1_wrapper"]

_log = logging.getLogger("requests_fastssl")
# What a bug of ours raises: that connection goes to stock. Anything else, and what stock's
# own code would raise too (RecursionError, a signal handler's exception), propagates.
_BUGS = (AttributeError, LookupError, OSError, RuntimeError, TypeError, ValueError)
# The inputs the shared context already holds: urllib3 must not load them again.
_LOADED = dict.fromkeys(
    ("ca_certs", "ca_cert_dir", "ca_cert_data", "cert_file", "key_file", "key_password")
)


def shared_context(inputs: dict[str, Any]) -> Any:
    """The shared context for these inputs, the Reason for stock, or the ``StockError`` whose
    error this connection raises (stock's own load failed in its build); never raises ``_BUGS``."""
    settings = STATE.settings
    if settings is None:
        return Reason.INTERNAL_ERROR
    try:
        decision = _policy.decide(inputs, settings)
        if isinstance(decision, Reason):
            return decision

        def build(checks: Any) -> Any:
            ca_check = checks[0] if inputs["ca_certs"] else None
            connection, ssl_ = settings.connection, settings.ssl_
            ctx = _contexts.build(inputs, connection, ssl_, decision.alpn, ca_check, checks)
            # Built from the key's own reading where it could be (ALPN); the rest (the
            # factory's module, the environment) is read again: published only if unchanged.
            if _policy.decide(inputs, settings) != decision:
                raise Aside(Reason.SETTINGS_CHANGED)
            return ctx

        return REGISTRY.get(decision.key, decision.paths, build)
    except StockError as failed:
        return failed
    except _BUGS as exc:
        propagate(exc)
        _log.exception("requests_fastssl: internal error; this connection goes to stock")
        return Reason.INTERNAL_ERROR


def set_up_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    settings = STATE.settings
    if not STATE.active or settings is None:
        return wrapped(*args, **kwargs)
    unknown = settings.known(wrapped)
    if unknown is not None:
        # Another library's layer below ours, a replacement, or urllib3 code not reviewed: it
        # gets the caller's inputs, as without the shim; rewritten ones would defeat it.
        REGISTRY.step_aside(unknown)
        return wrapped(*args, **kwargs)
    if len(args) == 1 and "sock" not in kwargs:  # (the proxy leg passes the socket so)
        kwargs["sock"], args = args[0], ()
    if args or not _policy.INPUTS.issuperset(kwargs) or len(kwargs) < len(_policy.INPUTS) - 1:
        ctx: Any = Reason.CALL_SHAPE  # every input by keyword (tls_in_tls may be left out)
    else:
        ctx = shared_context({"tls_in_tls": False, **kwargs})
    if ctx is Reason.OWN_CONTEXT:
        return _given(wrapped, kwargs)
    if isinstance(ctx, StockError):
        raise ctx.error  # what stock's set-up raises for this connection, at the same call
    if isinstance(ctx, Reason):
        REGISTRY.step_aside(ctx)
        return wrapped(*args, **kwargs)
    REGISTRY.enter(ctx)
    try:
        return wrapped(**{**kwargs, **_LOADED, "ssl_context": ctx})
    except FrozenContextError:
        # urllib3 wrote a setting the context does not hold: one changed after the decision
        # (ALPN switched by another thread). Its writes all come before the socket is used.
        if kwargs["sock"].fileno() < 0:  # (used after all: stock could not start over)
            raise
    finally:
        REGISTRY.leave(ctx)
    REGISTRY.step_aside(Reason.SETTINGS_CHANGED)
    return wrapped(**kwargs)


def _given(wrapped: Any, kwargs: dict[str, Any]) -> Any:
    """A connection given its own context: stock, with a CA load it holds already left out."""
    inputs = {"tls_in_tls": False, **kwargs}
    try:
        held = loaded_already(inputs)
        check = None if held else before_load(inputs)
    except _BUGS as exc:
        propagate(exc)
        _log.exception("requests_fastssl: internal error; this connection goes to stock")
        held, check = False, None
    REGISTRY.step_aside(Reason.OWN_CONTEXT, served=held or check is not None)
    if held:
        REGISTRY.count("owned_loads_avoided")
        return wrapped(**{**kwargs, "ca_certs": None})
    result = wrapped(**kwargs)
    if check is not None:
        note_loaded(kwargs["ssl_context"], check)
    return result


def urllib3_1_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """urllib3 1.26 (its ``ssl_wrap_socket``): stock, counted."""
    if STATE.active:
        REGISTRY.step_aside(Reason.URLLIB3_1)
    return wrapped(*args, **kwargs)


# --- Contexts a connection is given: never shared, but their CA file is loaded once per contents
# (docs/design.md, Contexts a connection is given).

# The C type's own method: that type cannot be patched, the Python class above it can.
_GENUINE_LOAD = GENUINE_CONTEXT.__mro__[1].__dict__["load_verify_locations"]
# context -> the CA file (path and bytes) a stock load put in it
_loaded: weakref.WeakKeyDictionary[Any, FileCheck] = weakref.WeakKeyDictionary()


def _eligible(ctx: Any, inputs: dict[str, Any]) -> bool:
    return (type(ctx) is GENUINE_CONTEXT and GENUINE_CONTEXT.load_verify_locations is _GENUINE_LOAD
            and genuine_classes()
            and "load_verify_locations" not in getattr(ctx, "__dict__", {})
            and bool(inputs["ca_certs"]) and not inputs["ca_cert_dir"]
            and inputs["ca_cert_data"] is None)  # fmt: skip


def loaded_already(inputs: dict[str, Any]) -> bool:
    """Whether the given context already holds exactly the CA file this set-up loads."""
    ctx = inputs["ssl_context"]
    if not _eligible(ctx, inputs):
        return False
    check = _loaded.get(ctx)
    return check is not None and check.path == inputs["ca_certs"] and check.unchanged()


def before_load(inputs: dict[str, Any]) -> FileCheck | None:
    """The file as it is before stock's load, to note once that load succeeded."""
    if not _eligible(inputs["ssl_context"], inputs):
        return None
    checks = read_checks((inputs["ca_certs"],))
    return checks[0] if checks else None


def note_loaded(ctx: Any, check: FileCheck) -> None:
    """Stock's load succeeded; if the file kept the identity read before it (and, racily clean,
    its contents), that is what the context holds now. Else the next connection loads again."""
    try:
        if check.unchanged(strict=True):
            _loaded[ctx] = check
    finally:
        check.contents = b""  # (the digest stays: no copy of the file outlives the load)


def forget_all() -> None:
    _loaded.clear()
