"""What counts as urllib3's and the standard library's own code: a function whose code equals
what its module's own file compiles to (read once, through its loader), so that neither a layer
put there before the shim nor bytecode rewritten in place counts as theirs; and which of
urllib3's is code the shim knows (its source's fingerprint in ``_known.TABLE``)."""

from __future__ import annotations

import _thread
import operator
import os
import ssl  # (its code is also read through sys.modules)
import sys
import types
from typing import Any

from . import _known
from ._files import propagate

__all__ = [
    "GENUINE_CONTEXT", "GENUINE_SOCKET", "IDENTIFIED", "KnownCode", "genuine_classes",
    "genuine_unpatched", "is_genuine_function", "known_function", "plain_data",
    "unknown_code_reason",
]  # fmt: skip

# module name -> its file's code objects by qualified name; ids of code objects found genuine
# (kept alive here, so an id is never another object's).
_COMPILED: dict[str, dict[str, list[types.CodeType]]] = {}
_GENUINE_CODE: dict[int, types.CodeType] = {}
# module name -> its source as read with its code (None: none to read); ids of genuine code
# objects whose fingerprint was taken, tabled (True) or not: each is identified once.
_SOURCES: dict[str, str | None] = {}
_FOUND: dict[int, tuple[types.CodeType, bool]] = {}
_IDENTIFYING = _thread.RLock()  # (reentrant: a signal handler's request inside a first check)
if hasattr(os, "register_at_fork"):  # (held by a thread that a fork leaves behind)
    os.register_at_fork(after_in_child=_IDENTIFYING._at_fork_reinit)  # type: ignore[attr-defined]


def _compiled(name: str) -> dict[str, list[types.CodeType]]:
    found = _COMPILED.get(name)
    if found is None:
        found = {}
        try:  # (the cached .pyc, as the import read it; a source or a sourceless .pyc alike)
            module = sys.modules[name]
            todo = [module.__spec__.loader.get_code(name)]  # type: ignore[union-attr]
        except BaseException as exc:  # (no loader that can say: nothing genuine, this time)
            propagate(exc)
            return found
        while todo:
            for const in todo.pop().co_consts:
                if isinstance(const, types.CodeType):
                    found.setdefault(const.co_qualname, []).append(const)
                    todo.append(const)
        _COMPILED[name] = found
        _SOURCES[name] = _known.source_of(name)  # (the same moment: the file the code came from)
    return found


def _genuine_code(func: Any, module: str) -> bool:
    if type(func) is not types.FunctionType or func.__module__ != module:
        return False
    code = func.__code__
    if func.__globals__ is not getattr(sys.modules.get(module), "__dict__", None):
        return False  # (the same code over other names is not the module's function)
    if _GENUINE_CODE.get(id(code)) is code:
        return True
    if any(code == c for c in _compiled(module).get(code.co_qualname, ())):
        _GENUINE_CODE[id(code)] = code
        return True
    return False


def is_genuine_function(func: Any, module: types.ModuleType) -> bool:
    """Whether ``func`` is a plain function of ``module``, as its file compiles it."""
    return _genuine_code(func, module.__name__)


def known_function(func: Any, module: types.ModuleType) -> bool | None:
    """True if ``func`` is ``module``'s own function (``is_genuine_function``) and a variant the
    table holds; False if its own but not tabled (a local patch, a release not reviewed, no
    source to read); None if not its own function at all (a layer, a replacement)."""
    name = module.__name__
    if not _genuine_code(func, name):
        return None
    code = func.__code__
    found = _FOUND.get(id(code))
    if found is not None and found[0] is code:
        return found[1]
    # A burst of first connections would each take the same fingerprint (ms of compiling,
    # under the interpreter lock): the first takes it, the others wait for it, bounded.
    held = _IDENTIFYING.acquire(True, 5.0)
    try:
        found = _FOUND.get(id(code))
        if found is not None and found[0] is code:
            return found[1]
        variants = _known.TABLE.get(f"{name}.{code.co_qualname}", {})
        source = _SOURCES.get(name)
        known = (source and _known.identify(source, code, func.__globals__)) in variants
        _FOUND[id(code)] = (code, known)
        return known
    finally:
        if held:
            _IDENTIFYING.release()


class KnownCode:
    """Every tabled function as each of urllib3's two TLS modules binds it (the names the tabled
    code calls, and more), with the module defining it; the last reading found known."""

    def __init__(self, connection: types.ModuleType, ssl_: types.ModuleType) -> None:
        self.connection, self._ssl = connection, ssl_
        modules = {connection.__name__: connection, ssl_.__name__: ssl_}
        homes = {name: modules[module] for module, name in _known.FUNCTIONS}
        self._bindings = tuple(
            (space, name, homes[name])
            for space in (vars(connection), vars(ssl_))
            for name in homes
            if name in space and name != "_ssl_wrap_socket_and_match_hostname"
        )
        self._known: tuple[Any, ...] = ()

    def check(self, set_up: Any = None) -> str | None:
        """None if ``set_up`` (the function under the shim's layer) and every binding are
        urllib3's own and tabled, else the reason code: ``layer-below``, ``urllib3-replaced``
        or ``unknown-code``. By identity with the last such reading, codes included (a tracer
        may rewrite a function's code in place)."""
        if vars(self.connection).get("ssl_") is not self._ssl:
            return "urllib3-replaced"  # (the set-up reads its flags through it, the build not)
        if set_up is not None:  # (apart from the memo, which the snapshot's reading shares)
            own = known_function(set_up, self.connection)
            if not own:
                return "layer-below" if own is None else "unknown-code"
        read = [space.get(name) for space, name, _ in self._bindings]
        read += [getattr(f, "__code__", None) for f in read]
        memo = self._known
        if len(read) == len(memo) and all(map(operator.is_, read, memo)):
            return None
        found = [known_function(space.get(name), home) for space, name, home in self._bindings]
        if None in found:
            return "urllib3-replaced"
        if False in found:
            return "unknown-code"
        self._known = tuple(read)
        return None


def unknown_code_reason() -> str | None:
    """What ``status()`` says where a tabled function of urllib3 2 is its own but not tabled,
    else None (a function replaced or wrapped is each connection's reason, not the release's)."""
    connection = sys.modules.get("urllib3.connection")
    if not hasattr(connection, "_ssl_wrap_socket_and_match_hostname"):
        return None  # (urllib3 1.26: stock anyway)
    for module, name in _known.FUNCTIONS:
        home = sys.modules.get(module)
        func = getattr(home, name, None)
        for _ in range(8):  # (the set-up under the shim's layer, and any other wrapt layer)
            func = getattr(func, "__wrapped__", func)
        if home is not None and known_function(func, home) is False:
            version = getattr(sys.modules.get("urllib3._version"), "__version__", "?")
            why = ("no source to read: a sourceless or frozen install"
                   if _known.source_of(module) is None
                   else "a local patch, or a release the table lacks")  # fmt: skip
            return (f"urllib3 {version}: {module}.{name} is not code this shim has reviewed "
                    f"({why}); every connection is left to stock")  # fmt: skip
    return None


def _genuine_context_class() -> type | None:
    """The subclass of the C type that ssl.py defines, whatever ``ssl.SSLContext`` names now."""
    import _ssl

    for cls in _ssl._SSLContext.__subclasses__():
        new = cls.__dict__.get("__new__")
        if cls.__module__ == "ssl" and _genuine_code(getattr(new, "__func__", None), "ssl"):
            return cls
    return None  # (then _compat leaves requests stock)


IDENTIFIED = _genuine_context_class()
GENUINE_CONTEXT: type = IDENTIFIED or type("NoGenuineSSLContext", (), {})
# ssl.py's own SSLSocket, as its SSLContext names it before anything could rebind ssl.SSLSocket.
_socket_class = getattr(IDENTIFIED, "sslsocket_class", None)
GENUINE_SOCKET: type = (
    _socket_class
    if isinstance(_socket_class, type) and _socket_class.__module__ == "ssl"
    else type("NoGenuineSSLSocket", (), {})
)


def genuine_classes() -> bool:
    """Whether the names ssl.py's own methods look up when they run (``super(SSLContext, ...)``,
    ``super(SSLSocket, ...)``) still name its own classes: rebound (a subclass, gevent patched
    after urllib3's import), stock's set-up fails (RecursionError), and so must every connection."""
    return ssl.SSLContext is GENUINE_CONTEXT and ssl.SSLSocket is GENUINE_SOCKET


# The last namespace of the class found to be ssl.py's own (its names, their values) and its
# functions with their code (a tracer may rewrite a function's code in place), compared by
# identity per connection.
_VERIFIED: list[tuple[tuple[str, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]] = [
    ((), (), (), ())
]
_CODE = operator.attrgetter("__code__")


def _from_ssl(name: str, value: Any) -> bool:
    """Whether one entry of the class's namespace is ssl.py's own code under its own name,
    whenever it was put there."""
    if isinstance(value, property):
        return all(f is None or _from_ssl(name, f) for f in (value.fget, value.fset, value.fdel))
    if isinstance(value, staticmethod | classmethod):
        return _from_ssl(name, value.__func__)
    if type(value) is types.FunctionType:
        return value.__code__.co_name == name and _genuine_code(value, "ssl")
    if isinstance(value, types.GetSetDescriptorType | types.MemberDescriptorType):
        return value.__objclass__ is GENUINE_CONTEXT  # (__dict__, __weakref__)
    if isinstance(value, type):  # sslsocket_class, sslobject_class
        return value.__module__ == "ssl" and value.__qualname__ in ("SSLSocket", "SSLObject")
    return plain_data(value)  # (__doc__, __module__)


def plain_data(value: Any) -> bool:
    """Not code, and no descriptor either (a setter-only layer has no ``__get__``)."""
    kind = type(value)
    return not callable(value) and not any(
        hasattr(kind, name) for name in ("__get__", "__set__", "__delete__")
    )


def genuine_unpatched() -> bool:
    ns, (names, values, functions, codes) = GENUINE_CONTEXT.__dict__, _VERIFIED[0]
    if (
        len(ns) == len(names)
        and tuple(ns) == names
        and all(map(operator.is_, ns.values(), values))
        and all(map(operator.is_, map(_CODE, functions), codes))
    ):
        return True
    items = tuple(ns.items())
    if not all(_from_ssl(name, value) for name, value in items):
        return False
    parts = [getattr(v, a, None) for _, v in items for a in ("fget", "fset", "fdel", "__func__")]
    found = tuple(f for f in (*parts, *(v for _, v in items)) if type(f) is types.FunctionType)
    _VERIFIED[0] = tuple(ns), tuple(ns.values()), found, tuple(map(_CODE, found))
    return True
