"""The ``sys.meta_path`` entry that calls back right after a module ran: ``urllib3.connection``
(the shim switches on for every urllib3 user, requests or not) and, for
``REQUESTS_FASTSSL_WARM``, ``requests.adapters``. Not wrapt's post-import hooks: importing wrapt
costs more than the whole start-up budget. Once inserted the entry stays where it is (inert
while it awaits nothing): an import may be iterating ``sys.meta_path`` at any moment, even
inside urllib3's import (a finder that imports lazily), and a list that shifts under CPython's
loop makes it skip the next finder."""

from __future__ import annotations

import _frozen_importlib as _bootstrap  # (importlib._bootstrap itself, loaded before any code)
import sys
from _thread import _local as _thread_local

from ._state import STATE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

__all__ = ["TARGET", "add", "is_ours", "missed", "remove"]

# The module holding the function wrapped: complete when it has run, whoever imports it and
# whatever the state of its package (urllib3's __init__ imports it; so does a direct import).
TARGET = "urllib3.connection"


class _ImportHook:
    def __init__(self) -> None:
        self.callbacks: dict[str, Callable[[ModuleType], None]] = {}
        self.loading: set[str] = set()  # (load_module sets no _initializing to tell it by)
        self._asking = _thread_local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        callback = self.callbacks.get(fullname)
        if callback is None:
            return None
        asking = self._asking.__dict__.setdefault("names", set())
        if fullname in asking:
            # Asked again while asking the others: a finder that asks every finder (wrapt
            # 1.12's importlib.util.find_spec) finds the module without us.
            return None
        asking.add(fullname)
        try:
            # Only those after this entry, in the live list, as CPython's loop goes on: those in
            # front were asked already (by that loop, or by a finder in front walking the list).
            finders = iter(sys.meta_path)
            if not any(finder is self for finder in finders):
                return None  # (out of the list: someone kept us and asks; not the import)
            for finder in finders:
                try:
                    find_spec = finder.find_spec
                except AttributeError:  # 3.11: find_module, with its ImportWarning; 3.12: skipped
                    legacy = getattr(_bootstrap, "_find_spec_legacy", None)
                    spec = legacy and legacy(finder, fullname, path)
                else:
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
        if loader is None or type(loader).__name__ == "LazyLoader":
            return spec
        if hasattr(loader, "exec_module"):
            spec.loader = _CallbackLoader(loader, callback, self, spec)
        elif hasattr(loader, "load_module"):
            spec.loader = _LegacyCallbackLoader(loader, callback, self, spec)
        return spec


class _LegacyCallbackLoader:  # (no exec_module: CPython picks by hasattr(loader, "exec_module"))
    def __init__(self, loader: Any, callback: Callable[[ModuleType], None], hook: Any, spec: Any):
        self._loader, self._callback, self._hook, self._spec = loader, callback, hook, spec
        # CPython's ImportWarning names a loader by its __qualname__: the one stock would name.
        self.__qualname__ = getattr(loader, "__qualname__", type(loader).__qualname__)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def load_module(self, fullname: str) -> Any:
        self._hook.loading.add(fullname)
        try:
            module = self._loader.load_module(fullname)
            self._ran(sys.modules.get(fullname, module))  # (what the import returns)
        finally:
            self._hook.loading.discard(fullname)
        return module

    def _ran(self, module: ModuleType) -> None:
        # The loader found where ours stands, and only there: a loader wrapping ours (another
        # hook's) stays; the spec's own is what CPython puts on a module load_module left bare.
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        for spec in (getattr(module, "__spec__", None), self._spec):
            if spec is not None and getattr(spec, "loader", None) is self:
                spec.loader = self._loader
        # What the import system does next, done first: the callback may name the module
        # as an attribute of its package (urllib3.connection).
        parent, _, child = module.__name__.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)
        self._callback(module)


class _CallbackLoader(_LegacyCallbackLoader):
    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._ran(module)


def is_ours(loader: object) -> bool:
    """Whether ``loader`` is our wrapper (the import it runs will call back when done)."""
    return isinstance(loader, _LegacyCallbackLoader)


def missed(name: str) -> bool:
    """Whether module ``name`` is imported, complete, while we still wait for it: loaded by
    a finder in front of our entry (or lazily), so that our loader never ran for it."""
    hook = STATE.hook
    module = sys.modules.get(name)
    if hook is None or name not in hook.callbacks or module is None or name in hook.loading:
        return False
    if type(module).__name__ == "_LazyModule":
        return False  # (not run yet; reading its __spec__ would run it)
    return not getattr(getattr(module, "__spec__", None), "_initializing", False)


def add(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once module ``name`` is imported (called with the lock)."""
    if STATE.hook is None:
        STATE.hook = _ImportHook()
    STATE.hook.callbacks[name] = callback
    # Inserted once (or again, if someone rebuilt the list): this may run inside an import.
    if not any(finder is STATE.hook for finder in sys.meta_path):
        sys.meta_path.insert(0, STATE.hook)


def remove(name: str | None = None) -> None:
    """Stop waiting for ``name`` (None: for every module). The entry stays, inert: this runs
    inside urllib3's import, maybe while another finder's lazy import is iterating the list."""
    if STATE.hook is not None:
        if name is None:
            STATE.hook.callbacks.clear()
        else:
            STATE.hook.callbacks.pop(name, None)
