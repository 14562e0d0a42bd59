"""anyio's ``TLSStream.wrap`` (httpcore's ``AnyIOStream.start_tls`` calls it) hands ``wrap_bio``
to a worker thread (``to_thread.run_sync``) for a context whose type is not exactly
``ssl.SSLContext``, so a frozen context would take a thread and a hop per async connection
that stock's never takes. Our layer on ``anyio.to_thread.run_sync`` makes that one call as the
other branch does, directly, for the shim's frozen contexts, from tabled code only; every
other call of ``run_sync`` is anyio's, untouched (docs/design.md, httpx)."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types
from typing import Any

from . import _contexts, _import_hook, _known
from ._files import propagate
from ._genuine import GENUINE_CONTEXT, genuine_unpatched
from ._httpx_code import _known_one, _resolve, present
from ._policy import Reason
from ._state import LOCK, STATE

__all__ = ["HANDLES", "TLS", "TO_THREAD", "activate", "deactivate", "reason", "run_sync"]

TLS = ("anyio.streams.tls", "TLSStream.wrap")  # (tabled in _known.TABLE)
TO_THREAD = "anyio.to_thread"  # (imported by anyio.streams.tls: lazily since anyio 4.16)
ON = [False]
HANDLES: list[tuple[Any, str, Any]] = []
UNKNOWN = ("anyio's TLSStream.wrap is not code this shim has reviewed (it would hand a shared "
           "context's wrap_bio to a worker thread, which stock's context never takes): every "
           "httpx.AsyncClient builds its own context, as stock")  # fmt: skip
_WRAP_BIO = vars(GENUINE_CONTEXT)["wrap_bio"]
_TLS: dict[str, Any] = {}  # "code": the last code found tabled; "file": the file's verdict


def tls_code() -> types.CodeType | None:
    """The code of ``TLSStream.wrap`` as imported, if anyio's own and tabled."""
    module, method = _resolve(*TLS)
    func = method.__func__ if type(method) is classmethod else None
    if module is None or func is None:
        return None
    code = func.__code__
    if code is not _TLS.get("code"):
        if not _known_one(module, func):
            return None
        _TLS["code"] = code
    return code


def tls_known() -> bool:
    """Whether the ``TLSStream.wrap`` the first async connection runs is tabled: the live one
    once imported; until then (anyio 4.16 imports it lazily) its file's, read once, not run."""
    if TLS[0] in sys.modules:
        return tls_code() is not None
    if "file" not in _TLS:
        try:
            paths = [os.path.join(p, "streams") for p in sys.modules["anyio"].__path__]
            spec: Any = importlib.machinery.PathFinder.find_spec(TLS[0], paths)
            source = spec.loader.get_source(TLS[0])
            top = compile(source, spec.origin, "exec", dont_inherit=True)  # (its lines: not run)
            name = getattr  # (a constant's co_name, if it is code)
            lines = [m.co_firstlineno for c in top.co_consts if name(c, "co_name", 0) == "TLSStream"
                     for m in c.co_consts if name(m, "co_name", 0) == "wrap"]  # fmt: skip
            found = len(lines) == 1 and _known.fingerprint(source, lines[0], "wrap")
            _TLS["file"] = found in _known.TABLE[".".join(TLS)]
        except Exception as exc:  # (no anyio, a sourceless install: not known)
            _TLS["file"] = propagate(exc)
    return bool(_TLS["file"])


def reason() -> Reason | None:
    """None if an async transport's connections will call ``wrap_bio`` as stock's do:
    ``TLSStream.wrap`` tabled, and our layer outermost on ``run_sync`` (or awaited by the hook)."""
    module = sys.modules.get(TO_THREAD)
    if module is None:
        ready = STATE.hook is not None and TO_THREAD in STATE.hook.callbacks
    else:
        ready = any(vars(module).get("run_sync") is handle for _, _, handle in HANDLES)
    if not ready:
        return Reason.LAYER_BELOW  # (another layer above ours, or imported past our hook)
    return None if tls_known() else Reason.UNKNOWN_CODE


def run_sync(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """On ``anyio.to_thread.run_sync``: called by the tabled ``TLSStream.wrap`` with a frozen
    context's ``wrap_bio`` (ssl.py's), that call is made here, as the branch for an exact
    ``ssl.SSLContext`` makes it: no thread, no checkpoint. Anything else is anyio's."""
    try:
        func = args[0] if ON[0] and len(args) == 6 and not kwargs else None
        frozen = type(getattr(func, "__self__", None)) is _contexts.FrozenContext
        if frozen and getattr(func, "__func__", None) is _WRAP_BIO and genuine_unpatched():
            frame: Any = sys._getframe(1)
            while frame is not None and frame.f_globals.get("__name__", "").startswith("wrapt"):
                frame = frame.f_back  # (wrapt without its C extension adds frames of its own)
            if frame is not None and frame.f_code is tls_code():
                return _direct(func, args[1:])
    except Exception as exc:  # (anyio's own call then)
        propagate(exc)
    return wrapped(*args, **kwargs)


async def _direct(wrap_bio: Any, args: tuple[Any, ...]) -> Any:
    return wrap_bio(*args)  # (bio_in, bio_out, server_side, server_hostname, None)


def _wrap(module: Any) -> None:
    import wrapt

    HANDLES[:] = [h for h in HANDLES if present(*h)]  # (reloaded: gone)
    if not any(owner is module for owner, _, _ in HANDLES):
        handle = wrapt.wrap_function_wrapper(module, "run_sync", run_sync)
        HANDLES.append((module, "run_sync", handle))


def _imported(module: Any) -> None:
    """The import hook's callback, inside anyio's import: never raises."""
    try:
        with LOCK:
            _import_hook.remove(TO_THREAD)
            if ON[0]:
                _wrap(module)
    except Exception:
        import logging

        logging.getLogger("requests_fastssl").exception(
            "requests_fastssl: wrapping anyio failed; httpx's async clients stay stock"
        )


def activate() -> None:
    """With ``_state.LOCK`` held: our layer on ``run_sync`` now, or once anyio imports it."""
    ON[0] = True
    module = sys.modules.get(TO_THREAD)
    if module is None:
        _import_hook.add(TO_THREAD, _imported)
    else:
        _wrap(module)


def deactivate() -> None:
    """With ``_state.LOCK`` held: stop waiting; ``_httpx.deactivate`` unwraps ``HANDLES``."""
    ON[0] = False
    _import_hook.remove(TO_THREAD)
