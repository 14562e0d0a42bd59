"""httpx 0.28's transports: the context ``HTTPTransport`` and ``AsyncHTTPTransport`` build in
their ``__init__`` (``create_ssl_context``, as ``httpx._transports.default`` binds it) is served
from the registry, one frozen context per trust configuration, built as httpx's own function
builds it; anything else is httpx's own call, untouched (docs/design.md, httpx).

Only that binding is wrapped: a program's ``httpx.create_ssl_context()`` (the names in
``httpx`` and ``httpx._config``) is not, so what it returns stays the program's. The wrapper
serves a shared context only when its caller is one of the two transports' own ``__init__``
and every function whose steps it mirrors or whose writes the context must accept (httpcore's
``set_alpn_protocols`` before each handshake) is a variant in ``_known.TABLE``."""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import sys
from collections.abc import Hashable
from typing import Any

from . import _contexts, _httpx_anyio
from ._contexts import _pinned, _stock, _through
from ._files import FileCheck, propagate
from ._genuine import GENUINE_CONTEXT, _genuine_code, genuine_classes, genuine_unpatched
from ._httpx_code import FUNCTIONS, known, own, present, unknown_code_reason, warn
from ._policy import Reason, StockError, _Secret
from ._registry import REGISTRY
from ._state import STATE

__all__ = ["FUNCTIONS", "TARGET", "activate", "deactivate", "reasons", "wrapper"]

_log = logging.getLogger("requests_fastssl")
# The module whose binding is wrapped, imported by ``import httpx``.
TARGET = "httpx._transports.default"
TAG = "httpx"  # (first item of every key: never one of urllib3's keys)
_BUGS = (AttributeError, LookupError, OSError, RuntimeError, TypeError, ValueError)
_ON = [False]  # read by the wrapper on every call (uninstall() turns it off)
_HANDLES: list[tuple[Any, str, Any]] = []
_REASONS: dict[str, int] = {}
_ANNOUNCED: dict[str, object] = {}


# --- the decision and the build --------------------------------------------------------------


class _CertStep(StockError):
    """Stock's error from the client certificate's load (after the cert warning in stock)."""


def _decide(inputs: dict[str, Any], alpn: tuple[str, ...]) -> Reason | tuple[Any, ...]:
    """(key, paths, cafile, cert triple) for one transport's context, or why stock: inputs read
    as 0.28's ``create_ssl_context`` reads them, in its order."""
    verify, cert, trust_env = inputs["verify"], inputs["cert"], inputs["trust_env"]
    if type(trust_env) is not bool:
        return Reason.CALL_SHAPE
    if verify is True:
        if trust_env and os.environ.get("SSL_CERT_FILE"):
            cafile = os.environ["SSL_CERT_FILE"]
        elif trust_env and os.environ.get("SSL_CERT_DIR"):
            return Reason.CA_DIRECTORY
        else:
            import certifi  # (as the builder imports it)

            cafile = certifi.where()
    elif verify is False:
        cafile = None
    elif type(verify) is str:
        if not verify:  # (create_default_context(cafile="") loads the system store)
            return Reason.DEFAULT_STORE
        if os.path.isdir(verify):
            return Reason.CA_DIRECTORY
        cafile, cert = verify, None  # (0.28 returns before cert is handled: never loaded)
    elif isinstance(verify, ssl.SSLContext):
        return Reason.OWN_CONTEXT
    else:
        return Reason.CALL_SHAPE
    if cafile is not None and "SSLKEYLOGFILE" in os.environ:
        return Reason.KEY_LOG  # (create_default_context opens it; verify=False's does not)
    if type(cafile) not in (str, type(None)):
        return Reason.CALL_SHAPE
    triple: tuple[Any, Any, Any] = (None, None, None)
    if cert:
        parts = (cert,) if type(cert) is str else cert
        if type(parts) is not tuple or not 1 <= len(parts) <= 3 or type(parts[0]) is not str:
            return Reason.CALL_SHAPE
        triple = (*parts, *(None,) * (3 - len(parts)))
        if type(triple[1]) not in (str, type(None)):
            return Reason.CALL_SHAPE
        if callable(triple[2]):
            return Reason.KEY_PASSWORD_CALLABLE
        if type(triple[2]) not in (str, bytes, type(None)):
            return Reason.CALL_SHAPE
    if not genuine_classes() or ssl.SSLContext is not GENUINE_CONTEXT:
        return Reason.CONTEXT_CLASS  # (truststore.inject_into_ssl(), gevent)
    if not genuine_unpatched() or not _genuine_code(ssl.create_default_context, "ssl"):
        return Reason.CONTEXT_PATCHED
    paths = tuple(p for p in (cafile, triple[0], triple[1]) if p)
    key: tuple[Hashable, ...] = (TAG, cafile, triple[0], triple[1], _Secret((triple[2],)), alpn)
    return key, paths, cafile, triple


def _build(cafile: str | None, triple: tuple[Any, Any, Any], alpn: tuple[str, ...],
           checks: tuple[FileCheck, ...]) -> ssl.SSLContext:  # fmt: skip
    """A frozen context made as 0.28's ``create_ssl_context`` makes it (``verify=True`` or a
    file: ``ssl.create_default_context(cafile=...)``; ``verify=False``: a client context not
    verifying), the files loaded through the descriptors their checks read."""
    ctx: ssl.SSLContext
    if cafile is None:
        ctx = _stock(ssl.SSLContext, ssl.PROTOCOL_TLS_CLIENT)
        _stock(setattr, ctx, "check_hostname", False)
        _stock(setattr, ctx, "verify_mode", ssl.CERT_NONE)
    else:
        with _pinned(checks[:1]) as names:
            made: list[ssl.SSLContext] = []

            def create(name: str) -> None:
                made.append(ssl.create_default_context(cafile=name))

            _through(names, create, names[0])
            ctx = made[0]
    if type(ctx) is not GENUINE_CONTEXT:
        raise TypeError(f"ssl made a {type(ctx).__qualname__}, not an ssl.SSLContext")
    if ctx.keylog_filename is not None:  # (SSLKEYLOGFILE set after the decision)
        from ._policy import Aside

        raise Aside(Reason.SETTINGS_CHANGED)
    certfile, keyfile, password = triple
    if certfile:
        chain = checks[cafile is not None :]
        if password is None and any(b"ENCRYPTED" in check.contents for check in chain):
            # OpenSSL would ask for the passphrase on the terminal, as stock does per client.
            raise ssl.SSLError("an encrypted key without a password: left to stock")
        try:
            with _pinned(chain) as pins:
                given = (pins[0], keyfile and pins[-1], *(() if password is None else (password,)))
                _through(pins, ctx.load_cert_chain, *given)
        except StockError as err:
            raise _CertStep(err.error, err.transient) from None
    _stock(ctx.set_alpn_protocols, list(alpn))
    _contexts._ALPN[ctx] = alpn  # (the list httpcore writes before each handshake: accepted)
    ctx.__class__ = _contexts.FrozenContext
    return ctx


def _context(
    inputs: dict[str, Any], alpn: tuple[str, ...], sync: bool
) -> tuple[Any, tuple[int, ...]]:
    """The shared context, a Reason for stock, or the ``StockError`` whose error stock's own
    build raises for these inputs; with the warnings stock issues before that (by number), for
    the wrapper to issue outside its net for our bugs and outside any ``except`` block (a
    warning hook's error, ``-W error``, is the program's, with no context of ours)."""
    decision = _decide(inputs, alpn)
    if isinstance(decision, Reason):
        return decision, ()
    if not sync and (why := _httpx_anyio.reason()):  # (its connections wrap through anyio)
        return why, ()
    key, paths, cafile, triple = decision
    verify_str = type(inputs["verify"]) is str
    try:
        found = REGISTRY.get(key, paths, lambda checks: _build(cafile, triple, alpn, checks))
    except _CertStep as failed:  # (the CA loaded: stock warned of cert=, then failed)
        return failed, (1,)
    except StockError as failed:  # (the CA's load failed: only verify=<str>'s warning came first)
        return failed, (0,) if verify_str else ()
    if isinstance(found, Reason):
        return found, ()  # (nothing issued: stock issues every warning itself)
    return found, (0,) if verify_str else (1,) if triple[0] else ()


def _caller(frame: Any) -> Any:
    while frame is not None and frame.f_globals.get("__name__", "").startswith("wrapt"):
        frame = frame.f_back  # (wrapt without its C extension adds frames of its own)
    return frame


def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """On ``httpx._transports.default.create_ssl_context``: a transport's context, shared."""
    if not _ON[0]:
        return wrapped(*args, **kwargs)
    frame = _caller(sys._getframe(1))
    transports = sys.modules.get(TARGET)
    inits = [getattr(vars(transports).get(cls), "__dict__", {}).get("__init__")
             for cls in ("HTTPTransport", "AsyncHTTPTransport")]  # fmt: skip
    if frame is None or not any(frame.f_code is getattr(f, "__code__", 0) for f in inits):
        return wrapped(*args, **kwargs)  # (not a transport's call: its caller's own context)
    del transports
    owed: tuple[int, ...] = ()
    try:
        builder = sys.modules.get("httpx._config")
        ours = builder is not None and own(wrapped, builder)
        reason: Any = known() or (None if ours else Reason.LAYER_BELOW)
        if reason is None and (args or set(kwargs) != {"verify", "cert", "trust_env"}):
            reason = Reason.CALL_SHAPE
        if reason is None:
            local = frame.f_locals
            http2, proxy = local.get("http2"), local.get("proxy")
            sync = frame.f_code is not getattr(inits[1], "__code__", 0)
            del frame, local
            if type(http2) is not bool:
                reason = Reason.CALL_SHAPE
            elif proxy is not None and proxy.url.scheme not in ("http", "https"):
                reason = Reason.UNKNOWN_CODE  # (SOCKS: its httpcore code is not reviewed)
            else:
                alpn = ("http/1.1", "h2") if http2 else ("http/1.1",)
                reason, owed = _context(dict(kwargs), alpn, sync)
    except _BUGS as exc:
        propagate(exc)
        _log.exception("requests_fastssl: internal error; this httpx client builds its own")
        reason = Reason.INTERNAL_ERROR
    for which in owed:
        warn(wrapped, which)
    if isinstance(reason, StockError):
        REGISTRY.count("httpx_step_asides")  # (stock's error for this client, as stock's)
        raise reason.error
    if isinstance(reason, Reason):
        _aside(reason)
        return wrapped(*args, **kwargs)
    REGISTRY.count("httpx_transports")
    return reason


def _aside(reason: Reason) -> None:
    REGISTRY.count("httpx_step_asides")
    _REASONS[reason.code] = _REASONS.get(reason.code, 0) + 1
    token = object()
    if _ANNOUNCED.setdefault(reason.code, token) is token:
        text = unknown_code_reason() if reason is Reason.UNKNOWN_CODE else None
        if reason is Reason.UNKNOWN_CODE and not text and not _httpx_anyio.tls_known():
            text = _httpx_anyio.UNKNOWN
        with contextlib.suppress(Exception):  # (an application's log filter may raise)
            _log.log(
                20 if _log.level == 20 else 10,
                "requests_fastssl: an httpx transport's context was left to httpx's own build "
                "(%s): %s (logged once per reason; stats().httpx_step_aside_reasons counts them)",
                reason.code, text or reason.text,
            )  # fmt: skip


def reasons() -> dict[str, int]:
    return dict(sorted(_REASONS.copy().items()))


# --- activation --------------------------------------------------------------------------------


def activate() -> None:
    """Wrap the binding the transports call (with ``_state.LOCK`` held), once."""
    import wrapt

    module = sys.modules[TARGET]
    _HANDLES[:] = [h for h in _HANDLES if present(*h)]  # (reloaded: gone)
    if not any(owner is module for owner, _, _ in _HANDLES):
        handle = wrapt.wrap_function_wrapper(module, "create_ssl_context", wrapper)
        _HANDLES.append((module, "create_ssl_context", handle))
    _httpx_anyio.activate()
    _ON[0] = True
    with contextlib.suppress(Exception):  # (identified now, not in a first client)
        known()
    version = getattr(sys.modules.get("httpx"), "__version__", "?")
    _log.log(20 if _log.level == 20 else 10,
             "requests_fastssl: active for httpx %s in pid %d: wrapped %s.create_ssl_context",
             version, os.getpid(), TARGET)  # fmt: skip


def deactivate() -> None:
    """Take our layer off (only ours, by identity), with ``_state.LOCK`` held."""
    _ON[0] = False
    _httpx_anyio.deactivate()
    import wrapt

    for handles in (_HANDLES, _httpx_anyio.HANDLES):
        kept = []
        for owner, name, handle in handles:
            try:
                wrapt.unwrap_object(owner, name, handle, missing_ok=True)
            except wrapt.WrapperNotOutermostError:
                kept.append((owner, name, handle))  # (inactive under another layer)
        handles[:] = kept


def active() -> bool:
    return _ON[0] and STATE.wanted


def _after_fork() -> None:
    """A child drops every httpx context: another thread may have been in a handshake with one
    at the fork (OpenSSL may hold a lock inside it), and unlike urllib3's set-up, no handshake
    of httpx's passes through the shim to be counted."""
    for key in [k for k in list(REGISTRY._entries) if type(k) is tuple and k[:1] == (TAG,)]:
        REGISTRY._entries.pop(key, None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
