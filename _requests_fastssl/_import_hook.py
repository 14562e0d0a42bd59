"""The ``sys.meta_path`` entry that calls back right after a module ran: ``urllib3.connection``
(the shim switches on for every urllib3 user, requests or not) and, for
``REQUESTS_FASTSSL_WARM``, ``requests.adapters``. Not wrapt's post-import hooks: importing wrapt
costs more than the whole start-up budget."""

from __future__ import annotations

import sys
from _thread import _local as _thread_local

from ._state import STATE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

__all__ = ["TARGET", "add", "is_ours", "remove"]

# The module holding the function wrapped: complete when it has run, whoever imports it and
# whatever the state of its package (urllib3's __init__ imports it; so does a direct import).
TARGET = "urllib3.connection"


class _ImportHook:
    def __init__(self) -> None:
        self.callbacks: dict[str, Callable[[ModuleType], None]] = {}
        self._asking = _thread_local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        callback = self.callbacks.get(fullname)
        if callback is None:
            return None
        asking = self._asking.__dict__.setdefault("names", set())
        if fullname in asking:
            # Asked again while asking the others: another finder that asks every finder, as
            # this one does (else each would ask the other for ever). It finds the module.
            return None
        asking.add(fullname)
        try:
            for finder in sys.meta_path:
                find_spec = getattr(finder, "find_spec", None)
                if finder is self or find_spec is None:
                    continue
                spec = find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            asking.discard(fullname)
        loader = spec.loader
        # A lazy loader runs the module at its first use: ours would run it now (and the
        # callback use it), turning a lazy import eager. Left alone: the shim stays pending.
        lazy = type(loader).__name__ == "LazyLoader"
        if loader is not None and hasattr(loader, "exec_module") and not lazy:
            spec.loader = _CallbackLoader(loader, callback)
        return spec


class _CallbackLoader:
    def __init__(self, loader: Any, callback: Callable[[ModuleType], None]) -> None:
        self._loader, self._callback = loader, callback

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        # What the import system does next, done first: the callback may name the module
        # as an attribute of its package (urllib3.connection).
        parent, _, child = module.__name__.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)
        self._callback(module)


def is_ours(loader: object) -> bool:
    """Whether ``loader`` is our wrapper (the import it runs will call back when done)."""
    return isinstance(loader, _CallbackLoader)


def add(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once module ``name`` is imported (called with the lock)."""
    if STATE.hook is None:
        STATE.hook = _ImportHook()
        sys.meta_path.insert(0, STATE.hook)
    STATE.hook.callbacks[name] = callback


def remove(name: str | None = None) -> None:
    """Stop waiting for ``name`` (None: for every module); the entry goes with the last."""
    if STATE.hook is None:
        return
    if name is None:
        STATE.hook.callbacks.clear()
    else:
        STATE.hook.callbacks.pop(name, None)
    if not STATE.hook.callbacks:
        try:  # noqa: SIM105 (contextlib is not loaded at start-up; this module must stay cheap)
            sys.meta_path.remove(STATE.hook)
        except ValueError:
            pass  # someone rebuilt sys.meta_path; the hook is gone either way
        STATE.hook = None
