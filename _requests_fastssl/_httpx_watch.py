"""Following httpx's import as ``_install`` follows urllib3's: once the program imports httpx,
its transports' hook goes on (``_httpx.activate``); nothing of httpx, wrapt or ssl is
imported before (docs/design.md, httpx). Light: it runs at activation, at start-up."""

from __future__ import annotations

import sys

from . import _import_hook
from ._state import LOCK, STATE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    from ._status import Stats

__all__ = ["TARGET", "hooked", "stop", "watch", "with_reasons"]

TARGET = "httpx._transports.default"  # (its transports call its binding: design.md, httpx)


def watch(imported: ModuleType | None = None) -> None:
    """With the lock, or as the import hook's callback (never raising): share httpx's
    transports' contexts once it is imported."""
    with LOCK:
        module = imported or sys.modules.get(TARGET)
        spec = getattr(module, "__spec__", None)
        if module is None or (imported is None and getattr(spec, "_initializing", False)):
            if module is None:  # (else being imported: by our loader, which calls back)
                _import_hook.add(TARGET, watch)
            return
        _import_hook.remove(TARGET)
        try:
            if STATE.wanted:
                from . import _httpx

                _httpx.activate()
        except Exception:  # (never into the program's import of httpx: it stays stock)
            from ._observe import _logger

            _logger().exception("requests_fastssl: patching httpx failed; it stays stock")


def _module() -> ModuleType | None:
    return sys.modules.get("_requests_fastssl._httpx")  # (imported only once httpx is)


def stop() -> None:
    """uninstall(), with the lock: our layers off httpx (and anyio)."""
    httpx = _module()
    if httpx is not None:
        httpx.deactivate()


def hooked() -> bool:
    httpx = _module()
    return httpx is not None and bool(httpx.active())


def with_reasons(stats: Stats) -> Stats:
    """``stats()`` with httpx's own step-aside reasons."""
    httpx = _module()
    return stats if httpx is None else stats._replace(httpx_step_aside_reasons=httpx.reasons())
