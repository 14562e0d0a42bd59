"""httpx's and httpcore's code as the shim knows it: which of their functions the shared path
relies on (``FUNCTIONS``), whether each is its module's own and a variant in ``_known.TABLE``
(methods too: their blocks are compiled inside a class of their name), and the warnings 0.28's
``create_ssl_context`` issues, read from its code (message, line)."""

from __future__ import annotations

import dis
import symtable
import sys
import types
import warnings
from typing import Any

from . import _known
from ._files import propagate
from ._genuine import _compiled
from ._policy import Reason

__all__ = ["FUNCTIONS", "known", "own", "present", "unknown_code_reason", "warn"]

# Every function the shared path relies on, by module and qualified name: the builder it
# mirrors, the two callers it serves (their flags decide ALPN), and httpcore's writers of
# ALPN on the transport's context (a shared context accepts exactly their list).
FUNCTIONS = (
    ("httpx._config", "create_ssl_context"),
    ("httpx._transports.default", "HTTPTransport.__init__"),
    ("httpx._transports.default", "AsyncHTTPTransport.__init__"),
    ("httpcore._sync.connection", "HTTPConnection._connect"),
    ("httpcore._async.connection", "AsyncHTTPConnection._connect"),
    ("httpcore._sync.http_proxy", "TunnelHTTPConnection.handle_request"),
    ("httpcore._async.http_proxy", "AsyncTunnelHTTPConnection.handle_async_request"),
)

_FOUND: dict[int, tuple[types.CodeType, bool]] = {}
_IMPORTS: dict[str, frozenset[str]] = {}


def _module_imports(name: str, source: str) -> frozenset[str]:
    """The names the module imports at its top level, at any depth of ``if``/``try`` (an
    ``import ssl`` under ``TYPE_CHECKING`` included): CPython's compiler calls an imported
    name's attributes differently, from the module's symbol table, whatever runs."""
    found = _IMPORTS.get(name)
    if found is None:
        table = symtable.symtable(source, "<module>", "exec")
        found = frozenset(s.get_name() for s in table.get_symbols() if s.is_imported())
        _IMPORTS[name] = found
    return found


def _fingerprint(module: types.ModuleType, func: Any) -> str | None:
    """``_known.identify``'s fingerprint of ``func``, with the module's imports that bind
    nothing declared too (``httpx/_config.py``'s ``import ssl`` under ``TYPE_CHECKING``)."""
    source = _known.source_of(module.__name__)
    if source is None:
        return None
    also = _module_imports(module.__name__, source)
    return _known.identify(source, func.__code__, vars(module), also)


def _resolve(module_name: str, qualname: str) -> tuple[types.ModuleType | None, Any]:
    module = sys.modules.get(module_name)
    owner, _, name = qualname.rpartition(".")
    space: Any = vars(module) if module is not None else {}
    if owner:
        cls = space.get(owner)
        space = vars(cls) if isinstance(cls, type) else {}
    return module, space.get(name)


def own(func: Any, module: types.ModuleType) -> bool:
    """``_genuine``'s judgement without its ``__module__`` test: httpx renames its public
    objects' ``__module__`` to ``httpx``; the namespace and the code decide."""
    if type(func) is not types.FunctionType or func.__globals__ is not vars(module):
        return False
    code = func.__code__
    return any(code == c for c in _compiled(module.__name__).get(code.co_qualname, ()))


def _known_one(module: types.ModuleType, func: Any) -> bool | None:
    """True: the module's own function and a tabled variant; False: its own, not tabled;
    None: not its own (a layer, a replacement)."""
    if not own(func, module):
        return None
    code = func.__code__
    found = _FOUND.get(id(code))
    if found is None or found[0] is not code:
        variants = _known.TABLE.get(f"{module.__name__}.{code.co_qualname}", {})
        try:
            known = _fingerprint(module, func) in variants
        except Exception as exc:  # (a source the tokenizer or symtable refuses: not known)
            known = propagate(exc)
        found = _FOUND[id(code)] = (code, known)
    return found[1]


_MEMO: list[tuple[Any, ...]] = [()]


def known() -> Reason | None:
    """None if every function of ``FUNCTIONS`` is its module's own and tabled, else why not:
    ``layer-below`` (something else stands there) or ``unknown-code``. By identity with the
    last reading found known, codes included."""
    read = [_resolve(module, name)[1] for module, name in FUNCTIONS]
    read += [getattr(f, "__code__", None) for f in read]
    if len(read) == len(_MEMO[0]) and all(a is b for a, b in zip(read, _MEMO[0], strict=True)):
        return None
    for module_name, name in FUNCTIONS:
        module, func = _resolve(module_name, name)
        own = None if module is None else _known_one(module, func)
        if module is None:  # (httpcore is imported by the first transport, not by httpx)
            return Reason.UNKNOWN_CODE
        if own is None:
            return Reason.LAYER_BELOW
        if not own:
            return Reason.UNKNOWN_CODE
    _MEMO[0] = tuple(read)
    return None


def unknown_code_reason() -> str | None:
    """What the log says once where httpx's code is its own but not a variant reviewed."""
    for module_name, name in FUNCTIONS:
        module, func = _resolve(module_name, name)
        if module is not None and _known_one(module, func) is False:
            version = getattr(sys.modules.get("httpx"), "__version__", "?")
            return (f"httpx {version}: {module_name}.{name} is not code this shim has "
                    "reviewed; every httpx client builds its own context, as stock")  # fmt: skip
    return None


_WARNINGS: dict[int, tuple[types.CodeType, tuple[tuple[str, int], ...]]] = {}


def _warnings_of(code: types.CodeType) -> tuple[tuple[str, int], ...]:
    """The (message, line) of each ``warnings.warn(message, DeprecationWarning)`` in the tabled
    builder, in order (``verify=<str>``'s, then ``cert=``'s), read from its code: the line is
    the one stock's warning names (its frame's line at the call, stacklevel 1)."""
    found = _WARNINGS.get(id(code))
    if found is None or found[0] is not code:
        messages: list[str] = []
        lines: list[int] = []
        pending, prev = False, None
        for ins in dis.get_instructions(code):
            if ins.opname == "STORE_FAST" and ins.argval == "message" and prev is not None:
                messages.append(prev)
            prev = ins.argval if ins.opname == "LOAD_CONST" else None
            if ins.argval == "warn" and ins.opname in ("LOAD_METHOD", "LOAD_ATTR"):
                pending = True
            elif pending and ins.opname == "CALL":
                lines.append((ins.positions and ins.positions.lineno) or 0)
                pending = False
        if len(messages) != 2 or len(lines) != 2 or 0 in lines:
            raise TypeError("create_ssl_context's warnings could not be read")
        found = _WARNINGS[id(code)] = (code, tuple(zip(messages, lines, strict=True)))
    return found[1]


def warn(builder: Any, which: int) -> None:
    """Stock's ``DeprecationWarning`` number ``which``, as ``warnings.warn`` issues it from
    inside httpx/_config.py: its file, line, module name and registry, so ``-W`` filters on
    ``httpx._config`` and once/default deduplication act as on stock's own."""
    message, line = _warnings_of(builder.__code__)[which]
    space = builder.__globals__
    registry = space.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, DeprecationWarning, builder.__code__.co_filename, line,
                           space["__name__"], registry)  # fmt: skip


def present(owner: object, name: str, handle: object) -> bool:
    """Whether our layer ``handle`` is still on ``owner.name``, under other layers or not (a
    reload of its module puts a new function there: the layer is gone, wrap again)."""
    current = getattr(owner, name, None)
    for _ in range(16):
        if current is handle:
            return True
        current = getattr(current, "__wrapped__", None)
        if current is None:
            return False
    return False
