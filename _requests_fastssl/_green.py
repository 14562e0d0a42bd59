"""What the shim knows of green libraries (gevent, eventlet): which context classes it shares
under (their overrides' code tabled, as urllib3's), and how a greenlet waits for a build
without stopping its hub (docs/design.md, Green processes)."""

from __future__ import annotations

import _thread
import operator
import ssl
import sys
import types
from typing import Any

from ._genuine import GENUINE_CONTEXT, _genuine_code, genuine_classes, known_function, plain_data

__all__ = ["GREEN", "class_code", "context_classes", "green_lock", "whoami"]

_CODE = operator.attrgetter("__code__")
# Their monkey patching puts a subclass of ssl.py's class in ``ssl.SSLContext`` (and urllib3's,
# if urllib3 is imported afterwards) whose overrides keep ssl.py's setters from recursing and
# make ``wrap_socket`` cooperative. A shared context is built as that class, so its sockets are
# the library's. The module that defines the class -> (its name, its socket class's name).
GREEN = {
    "gevent.ssl": ("SSLContext", "SSLSocket"),
    "eventlet.green.ssl": ("GreenSSLContext", "GreenSSLSocket"),
}
# The last green class's namespace found known, as _VERIFIED holds ssl.py's.
_GREEN_VERIFIED: list[tuple[Any, ...]] = [(None, (), (), (), (), ())]
_C_CONTEXT = GENUINE_CONTEXT.__mro__[1]  # (the C type every context class derives from)


def context_classes(cls: Any) -> str | None:
    """None if urllib3's SSLContext ``cls``, ``ssl.SSLContext`` and ``ssl.SSLSocket`` are one set
    the shim knows: all ssl.py's, or all one green library's, patched before urllib3's import,
    whose class's code is tabled (``unknown-code`` if its own but not; ``context-patched`` if
    its namespace holds anything else). Any other set: ``context-class`` (a green library
    patched after urllib3's import: stock's set-up recurses, RecursionError)."""
    if cls is GENUINE_CONTEXT:
        return None if genuine_classes() else "context-class"
    if type(cls) is not type or cls.__bases__ != (GENUINE_CONTEXT,):
        return "context-class"
    home = cls.__dict__.get("__module__")
    names = GREEN.get(home) if type(home) is str else None
    module = sys.modules.get(home) if names is not None else None  # type: ignore[arg-type]
    if (
        names is None
        or module is None
        or vars(module).get(names[0]) is not cls
        or ssl.SSLContext is not cls
        or ssl.SSLSocket is not vars(module).get(names[1])
    ):
        return "context-class"
    return class_code(cls, module)


def class_code(cls: type, module: types.ModuleType) -> str | None:
    """None if every entry of the green class ``cls`` (defined in ``module``) is known, else
    ``unknown-code`` (its module's own code, not tabled) or ``context-patched``."""
    ns = cls.__dict__
    last, names_, values, functions, codes, reads = _GREEN_VERIFIED[0]
    if (
        last is cls
        and tuple(ns) == names_
        and all(map(operator.is_, ns.values(), values))
        and all(map(operator.is_, map(_CODE, functions), codes))
        and all(map(operator.is_, _reads(functions), reads))
    ):
        return None
    found = [_green_entry(name, value, module) for name, value in ns.items()]
    items = tuple(ns.items())
    parts = [getattr(v, a, None) for _, v in items for a in ("fget", "fset", "fdel")]
    funcs = tuple(f for f in (*parts, *(v for _, v in items)) if type(f) is types.FunctionType)
    # The globals its code reads: a context class there must be ssl.py's or this one (gevent's
    # setters call ``super(orig_SSLContext, ...)``: another class would run once per build).
    contexts = [v for v in _reads(funcs) if isinstance(v, type) and issubclass(v, _C_CONTEXT)]
    if None in found or any(v is not GENUINE_CONTEXT and v is not cls for v in contexts):
        return "context-patched"
    if False in found:
        return "unknown-code"
    codes_ = tuple(map(_CODE, funcs))
    _GREEN_VERIFIED[0] = (cls, tuple(ns), tuple(ns.values()), funcs, codes_, _reads(funcs))
    return None


def _reads(functions: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(f.__globals__.get(n) for f in functions for n in f.__code__.co_names)


def _green_entry(name: str, value: Any, module: types.ModuleType) -> bool | None:
    """One entry of a green class's namespace: True if known (a tabled function of its module
    under its own name, or ssl.py's own: a property's getter), False if its module's own but
    not tabled, None if anything else."""
    if isinstance(value, property):
        parts = (value.fget, value.fset, value.fdel)
        found = [_green_entry(name, f, module) for f in parts if f is not None]
        return None if None in found else all(found)
    if type(value) is types.FunctionType:
        if value.__code__.co_name != name:
            return None
        if value.__module__ == "ssl":
            return _genuine_code(value, "ssl") or None
        return known_function(value, module)
    if isinstance(value, type):  # sslsocket_class: the library's own socket class
        return True if value is vars(module).get(GREEN[module.__name__][1]) else None
    return True if plain_data(value) else None


def whoami() -> tuple[int, Any]:
    """This OS thread and, where greenlet is imported, this greenlet: under gevent without its
    thread patches (``patch_all(thread=False)``) every greenlet has the thread's ident."""
    greenlet = sys.modules.get("greenlet")
    current = getattr(greenlet, "getcurrent", None)
    return _thread.get_native_id(), None if current is None else current()


def green_lock(builder: int) -> Any:
    """A lock to wait on that yields to this thread's green hub, where ssl is a green library's
    (so that stock's own handshake yields too) and a hub runs this thread: gevent's (released
    from any thread), eventlet's (for a builder of this thread only: its locks do not cross
    threads). None: a real wait. False: no wait that would not stop the builder or the hub
    (the hub greenlet itself; a greenlet of the builder's thread with nothing to yield to):
    stock, at once."""
    same = builder == _thread.get_native_id()
    current = getattr(sys.modules.get("greenlet"), "getcurrent", None)
    patched = getattr(ssl.SSLContext, "__module__", None)
    if patched == "gevent.ssl":
        hubs, lock = sys.modules.get("gevent._hub_local"), sys.modules.get("gevent.lock")
        hub = hubs.get_hub_if_exists() if hubs is not None else None
        if hub is not None and current is not None:
            return False if current() is hub or lock is None else lock.Semaphore(0)
    elif patched == "eventlet.green.ssl":
        hubs, lock = sys.modules.get("eventlet.hubs"), sys.modules.get("eventlet.semaphore")
        hub = vars(hubs._threadlocal).get("hub") if hubs is not None else None
        if hub is not None and current is not None:
            if not same or current() is hub.greenlet or lock is None:
                return False
            return lock.Semaphore(0)
    return False if same else None
