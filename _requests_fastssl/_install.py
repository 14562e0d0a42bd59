"""``install()``, ``uninstall()``, ``status()``, ``stats()``, ``clear()`` and the kill switch.
Imports only what the interpreter has loaded already (start-up must cost nothing where requests
is never used). ``_state.LOCK`` serialises every state change; the wrapper never takes it."""

from __future__ import annotations

import os
import sys

from . import _httpx_watch, _import_hook, _observe
from ._errors import UnsupportedVersionError
from ._observe import _logger
from ._state import LOCK as _lock
from ._state import STATE

# Not typing.TYPE_CHECKING: importing typing costs more than our start-up budget.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

    from ._status import Stats, Status

__all__ = ["STATE", "activate", "clear", "install", "stats", "status", "uninstall"]

ENV_DISABLE = "REQUESTS_FASTSSL_DISABLE"
_MISSED = ("urllib3 was imported through another finder in front of the shim's, which did "
           "not call back; install() activates it")  # fmt: skip
_BEING_IMPORTED = ("urllib3 was being imported when install() ran; call install() again once "
                   "it is imported")  # fmt: skip


def _debug(message: str, *args: Any) -> None:
    # Until logging is imported nobody can have configured a handler, and a DEBUG record
    # with no handler goes nowhere: importing logging (tens of ms) just to drop it is waste.
    if "logging" in sys.modules:
        _logger().debug(message, *args)


def disabled_by_env() -> str | None:
    """The kill switch's value if it disables the shim, else None. A value it does not know
    disables, with one warning: an operator who set it to something meant "off"."""
    return os.environ.get(ENV_DISABLE) if _observe.switch(ENV_DISABLE, unknown=True) else None


def install(*, strict: bool = False, max_contexts: int | None = None) -> Status:
    """Install the shim (idempotent, thread-safe; now, or once urllib3 is imported); returns
    the status. ``strict=True``: ``UnsupportedVersionError`` instead of a warning where it cannot
    patch safely. ``max_contexts``: the shared contexts kept (default 64, LRU)."""
    activate(strict=strict, max_contexts=max_contexts)
    return status()


def activate(*, strict: bool = False, max_contexts: int | None = None) -> None:
    """``install()`` minus its Status, whose module (enum, typing) would dominate start-up."""
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, not {type(strict).__name__}")
    if max_contexts is not None and (type(max_contexts) is not int or max_contexts < 1):
        raise ValueError(f"max_contexts must be a positive int, not {max_contexts!r}")
    if disabled_by_env() is None:  # (the kill switch turns every other switch off too)
        _observe.configure_from_env()
    with _lock:
        _notice_detached()
        was_active = STATE.active
        if max_contexts is not None:
            STATE.max_contexts = max_contexts
            registry = sys.modules.get("_requests_fastssl._registry")
            if registry is not None:
                registry.REGISTRY.resize(max_contexts)
        switch = disabled_by_env()
        if switch is not None:
            if not STATE.active:
                STATE.phase, STATE.reason = "disabled", f"{ENV_DISABLE}={switch}"
                _debug("requests_fastssl: %s=%s, not installing", ENV_DISABLE, switch)
            return
        if STATE.veto is not None:
            STATE.phase, STATE.reason = "disabled", STATE.veto
            return
        STATE.wanted, STATE.strict = True, strict
        _httpx_watch.watch()
        if not STATE.active:
            connection = sys.modules.get(_import_hook.TARGET)
            if connection is None:
                _import_hook.add(_import_hook.TARGET, _on_urllib3_imported)
                STATE.phase, STATE.reason = "pending", "waiting for urllib3 to be imported"
            elif not _initializing(connection):
                _import_hook.remove(_import_hook.TARGET)  # (imported past our entry)
                _activate()
            elif _import_hook.is_ours(getattr(connection, "__loader__", None)):
                STATE.phase, STATE.reason = "pending", "urllib3 is being imported"
            else:
                # Being run right now, in this thread (an import hook of another library) or
                # another, past our hook: never waited for (that import may wait for this
                # thread, or fail). It stays stock; install() again once it is imported.
                STATE.phase, STATE.reason = "pending", _BEING_IMPORTED
    if STATE.active and not was_active:
        _warm_from_env()  # outside the lock: a build takes tens of milliseconds


def uninstall() -> Status:
    """Remove our layer alone (idempotent, thread-safe) and drop the cached contexts; under a
    non-wrapt layer (one that captured ours) it cannot be spliced out: it stays, inactive."""
    with _lock:
        STATE.wanted = STATE.active = False
        _import_hook.remove()  # (the wait for urllib3, and for requests.adapters to warm)
        _httpx_watch.stop()
        if STATE.handles:
            import wrapt

            kept = []
            for owner, name, handle in STATE.handles:
                try:  # (ours alone, found by identity: spliced out from under wrapt layers)
                    wrapt.unwrap_object(owner, name, handle, missing_ok=True)
                except wrapt.WrapperNotOutermostError as exc:
                    _debug("requests_fastssl: leaving an inactive wrapper on %s: %s", name, exc)
                    kept.append((owner, name, handle))
            STATE.handles = kept
        STATE.phase, STATE.reason = "not-installed", ""
        if STATE.veto is not None:
            STATE.phase, STATE.reason = "disabled", STATE.veto
        if STATE.handles:
            STATE.reason = "inactive wrappers left under other layers"
        hook = sys.modules.get("_requests_fastssl._hook")
        if hook is not None:
            hook.forget_all()
        clear()
    return status()


def status() -> Status:
    """Whether the shim is not installed, disabled, pending, active or unsupported, and why."""
    from ._status import State, Status

    with _lock:
        _notice_detached()
        if STATE.phase == "pending" and _import_hook.missed(_import_hook.TARGET):
            STATE.reason = _MISSED
        if STATE.active and STATE.phase == "active":
            # (activated inside urllib3's import, where the code was not yet read: now it is)
            _observe.unknown_code()
        if STATE.phase == "pending" and _httpx_watch.hooked():
            return Status(State.ACTIVE, f"for httpx; urllib3: {STATE.reason}")
        return Status(State(STATE.phase), STATE.reason)


def _in_chain(current: Any, handle: Any) -> bool | None:
    """Whether ``handle`` is a layer below ``current`` (by identity, down each ``__wrapped__``);
    None: what ``handle`` wraps is there without it (someone took our layer out)."""
    inner = handle.__wrapped__
    for _ in range(64):
        if current is handle:
            return True
        if current is inner:
            return None
        current = getattr(current, "__wrapped__", None)
        if current is None:
            return False
    return False


def _notice_detached() -> None:
    """With the lock (status(), install()): if another library took our layer out, or urllib3
    was reloaded, nothing calls us any more: say so, and let install() wrap again."""
    if not STATE.active:
        return
    for owner, name, handle in STATE.handles:
        try:
            found = _in_chain(getattr(owner, name, None), handle)
        except Exception:  # (a layer whose attributes raise: it cannot be told)
            found = False
        if found and sys.modules.get(getattr(owner, "__name__", "")) is not owner:
            found = False  # (deleted from sys.modules and imported again: a new module)
        if found:
            continue
        where = f"{getattr(owner, '__name__', owner)}.{name}"
        STATE.reason = (
            f"another library removed the shim's layer from {where} (an unwrap of it)"
            if found is None
            else f"{where} is no longer the function the shim wrapped (reloaded, or replaced)"
        ) + "; install() wraps again"
        STATE.handles = [h for h in STATE.handles if h[2] is not handle]
        STATE.active, STATE.wanted, STATE.phase = False, False, "not-installed"
        _debug("requests_fastssl: %s", STATE.reason)


def stats() -> Stats:
    """The registry's counters (see ``Stats``)."""
    from ._registry import REGISTRY

    return _httpx_watch.with_reasons(REGISTRY.stats())


def clear() -> None:
    """Drop every cached context; the next new pool builds afresh. Counters are kept."""
    registry = sys.modules.get("_requests_fastssl._registry")
    if registry is not None:
        registry.REGISTRY.clear()


def _initializing(module: ModuleType) -> bool:
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def _activate(deferred: bool = False) -> None:
    """Patch the imported urllib3 (called with the lock held). ``deferred``: inside its import,
    where an untabled TLS code must not make the import fail or warn: the first set-up (or
    ``status()``) says so, and every connection is stock. Its code is identified here either
    way (ms of compiling): a first request, or each worker a server forks, does not pay it."""
    from . import _compat

    reason = _compat.unsupported_reason(code=not deferred)
    if reason is not None:
        STATE.phase, STATE.reason = "unsupported", reason
        if STATE.strict:
            raise UnsupportedVersionError(f"requests_fastssl cannot patch: {reason}")
        _observe.warn_unsupported(reason)
        return
    import urllib3.connection
    import urllib3.util.ssl_
    import wrapt

    from ._genuine import _compiled as compiled
    from ._genuine import known_function
    from ._green import context_classes
    from ._known import FUNCTIONS
    from ._policy import Settings
    from ._registry import REGISTRY  # (imports ssl)

    if STATE.max_contexts is not None:
        REGISTRY.resize(STATE.max_contexts)
    STATE.settings = Settings(urllib3.connection, urllib3.util.ssl_)
    for module in (urllib3.util.ssl_, urllib3.connection):  # (read now: not in a first request)
        compiled(module.__name__)
    try:  # (its code identified now too, once, not in a first request; failing: the set-up asks)
        for module_name, function in FUNCTIONS:
            known_function(getattr(sys.modules[module_name], function), sys.modules[module_name])
        context_classes(urllib3.util.ssl_.SSLContext)  # (gevent's, eventlet's: the overrides)
    except Exception:
        pass
    owner, name, wrapper = _compat.hook()
    if not any(o is owner and n == name for o, n, _ in STATE.handles):
        # (else left inactive by uninstall() under another layer: reused)
        handle = wrapt.wrap_function_wrapper(owner, name, wrapper)  # positional: wrapt 2.0
        STATE.handles.append((owner, name, handle))
    STATE.active, STATE.phase, STATE.reason = True, "active", ""
    if name == "ssl_wrap_socket":
        STATE.reason = "urllib3 1.26: every connection is left to stock (counted as urllib3-1.26)"
    _observe.activated(name)


def _on_urllib3_imported(module: ModuleType) -> None:
    """The import hook's callback. Never raises: the program's ``import urllib3`` (or
    ``import requests``, ``import botocore``) must not."""
    try:
        with _lock:
            _import_hook.remove(_import_hook.TARGET)
            activated = STATE.wanted and not STATE.active
            if activated:
                STATE.strict = False  # nobody to raise to inside someone else's import
                _activate(deferred=True)
        if activated and STATE.active:
            _warm_from_env()
    except Exception as exc:
        with _lock:
            STATE.phase, STATE.reason = "unsupported", f"patching failed: {exc!r}"
        _logger().exception("requests_fastssl: patching urllib3 failed; it stays stock")


_ADAPTERS = "requests.adapters"


def _warm_from_env() -> None:
    """``REQUESTS_FASTSSL_WARM`` warms what ``requests.get(verify=True)`` uses: now if requests
    is imported, else when it is (a program that never imports requests never pays for it)."""
    if "REQUESTS_FASTSSL_WARM" not in os.environ:  # else not even the module is imported
        return
    adapters = sys.modules.get(_ADAPTERS)
    if adapters is None:
        with _lock:
            if STATE.active:
                _import_hook.add(_ADAPTERS, _on_adapters_imported)
        return
    if _initializing(adapters):  # (by our hook's loader, which warms when the import ends; or
        return  # by a thread past the hook: skipped, the first request pays, as without it)
    from ._warm import warm_from_env

    warm_from_env()


def _on_adapters_imported(module: ModuleType) -> None:
    """The import hook's callback for the warm switch; never raises (``warm_from_env`` logs)."""
    with _lock:
        _import_hook.remove(_ADAPTERS)
        active = STATE.active
    if active:
        from ._warm import warm_from_env

        warm_from_env()
