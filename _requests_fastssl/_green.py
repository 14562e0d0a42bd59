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

from ._genuine import GENUINE_CONTEXT, _genuine_code, genuine_classes, known_function

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
_GREEN_VERIFIED: list[tuple[Any, ...]] = [(None, (), (), (), ())]


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
    last, names_, values, functions, codes = _GREEN_VERIFIED[0]
    if (
        last is cls
        and tuple(ns) == names_
        and all(map(operator.is_, ns.values(), values))
        and all(map(operator.is_, map(_CODE, functions), codes))
    ):
        return None
    found = [_green_entry(name, value, module) for name, value in ns.items()]
    if None in found:
        return "context-patched"
    if False in found:
        return "unknown-code"
    items = tuple(ns.items())
    parts = [getattr(v, a, None) for _, v in items for a in ("fget", "fset", "fdel")]
    funcs = tuple(f for f in (*parts, *(v for _, v in items)) if type(f) is types.FunctionType)
    _GREEN_VERIFIED[0] = (cls, tuple(ns), tuple(ns.values()), funcs, tuple(map(_CODE, funcs)))
    return None


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
    return True if not callable(value) and not hasattr(value, "__get__") else None


def whoami() -> tuple[int, Any]:
    """This OS thread and, where greenlet is imported, this greenlet: under gevent without its
    thread patches (``patch_all(thread=False)``) every greenlet has the thread's ident."""
    greenlet = sys.modules.get("greenlet")
    current = getattr(greenlet, "getcurrent", None)
    return _thread.get_native_id(), None if current is None else current()


def green_lock(builder: int) -> Any:
    """A lock to wait on that yields to this thread's green hub, where one runs it (gevent's;
    eventlet's only for a builder of this very thread: its locks do not cross threads); None
    for a real lock; False where this greenlet may not wait (the hub itself, or nothing to
    yield to while the builder is a greenlet of this thread: stock)."""
    same = builder == _thread.get_native_id()
    gevent_hub = sys.modules.get("gevent._hub_local")
    hub = None if gevent_hub is None else gevent_hub.get_hub_if_exists()
    if hub is not None:
        if sys.modules["greenlet"].getcurrent() is hub:
            return False
        return sys.modules["gevent.lock"].Semaphore(0) if "gevent.lock" in sys.modules else False
    eventlet_hubs = sys.modules.get("eventlet.hubs")
    if same and eventlet_hubs is not None and "eventlet.semaphore" in sys.modules:
        hub = eventlet_hubs._threadlocal.__dict__.get("hub")
        if hub is not None and sys.modules["greenlet"].getcurrent() is not hub.greenlet:
            return sys.modules["eventlet.semaphore"].Semaphore(0)
    return False if same else None
