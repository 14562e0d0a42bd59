"""What counts as urllib3's and the standard library's own code, judged by where the code comes
from (the file it was compiled from), so that it does not depend on what was patched before or
after the shim was imported: the shim rewrites a connection's inputs only over such code."""

from __future__ import annotations

import ssl
import types
from typing import Any

__all__ = ["GENUINE_CONTEXT", "genuine_unpatched", "is_genuine_function"]


def _genuine_context_class() -> type:
    """The standard library's SSLContext: the subclass of the C type that ssl.py defines, not
    what ``ssl.SSLContext`` names now (gevent, eventlet, applications put stateful ones there)."""
    import _ssl

    for cls in _ssl._SSLContext.__subclasses__():
        init = cls.__dict__.get("__new__")
        code = getattr(getattr(init, "__func__", init), "__code__", None)
        if cls.__module__ == "ssl" and getattr(code, "co_filename", None) == ssl.__file__:
            return cls
    raise ImportError("the standard library's ssl.SSLContext was not found")


GENUINE_CONTEXT = _genuine_context_class()
# The last namespace of the class found to be ssl.py's own, compared by identity per connection.
_VERIFIED: list[tuple[tuple[str, Any], ...]] = [()]


def _from_ssl(name: str, value: Any) -> bool:
    """Whether one entry of the class's namespace is ssl.py's own, by where its code comes from
    (compiled from ssl.py under its own name), not by what it was when we were imported."""
    if isinstance(value, property):
        return all(f is None or _from_ssl(name, f) for f in (value.fget, value.fset, value.fdel))
    if isinstance(value, staticmethod | classmethod):
        return _from_ssl(name, value.__func__)
    if type(value) is types.FunctionType:
        code = value.__code__
        return (
            code.co_filename == ssl.__file__ and code.co_name == name and value.__module__ == "ssl"
        )
    if isinstance(value, types.GetSetDescriptorType | types.MemberDescriptorType):
        return value.__objclass__ is GENUINE_CONTEXT  # (__dict__, __weakref__)
    if isinstance(value, type):  # sslsocket_class, sslobject_class
        return value.__module__ == "ssl" and value.__qualname__ in ("SSLSocket", "SSLObject")
    return not callable(value) and not hasattr(value, "__get__")  # (__doc__, plain data)


def genuine_unpatched() -> bool:
    ns, known = GENUINE_CONTEXT.__dict__, _VERIFIED[0]
    if len(ns) == len(known) and all(ns.get(n) is v for n, v in known):
        return True
    items = tuple(ns.items())
    if not all(_from_ssl(name, value) for name, value in items):
        return False
    _VERIFIED[0] = items
    return True


def is_genuine_function(func: Any, module: types.ModuleType) -> bool:
    """Whether ``func`` is a plain function of ``module``'s own file (no wrapper or partial)."""
    return (
        type(func) is types.FunctionType
        and func.__code__.co_filename == getattr(module, "__file__", None)
        and func.__module__ == module.__name__
    )
