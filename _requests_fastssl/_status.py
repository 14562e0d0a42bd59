"""The value types of the public API: what ``status()`` and ``stats()`` return."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["State", "Stats", "Status"]


class State(enum.StrEnum):
    """Where the shim stands in this process."""

    NOT_INSTALLED = "not-installed"  #: install() never called, or uninstall() called since
    DISABLED = "disabled"  #: REQUESTS_FASTSSL_DISABLE is set; install() did nothing
    PENDING = "pending"  #: installed; patches when requests.adapters is imported
    ACTIVE = "active"  #: requests is patched and contexts are shared
    UNSUPPORTED = "unsupported"  #: requests/urllib3 cannot be patched safely; left stock


class Status(NamedTuple):
    """``state`` plus a human-readable ``reason`` (empty when there is nothing to say)."""

    state: State
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.state.value}: {self.reason}" if self.reason else self.state.value


class Stats(NamedTuple):
    """Counters of the context registry since the process started (``clear()`` keeps them).

    ``contexts_built``: contexts created and published; ``reuses``: requests served by an
    existing context; ``ca_loads``: CA bundle/directory loads done while building (stock
    requests does one per new connection); ``build_seconds``: wall time spent building;
    ``entries``: contexts held now; ``evictions``: contexts dropped by the LRU bound;
    ``step_asides``: HTTPS requests left entirely to stock requests, and
    ``step_aside_reasons`` the same counted by reason; ``detaches``: pools handed back to
    stock behaviour; ``build_failures``: builds that failed or raced a file change (those
    requests went stock, so they saw stock errors); ``connections``: TLS connections opened
    with a shared context, each one a CA load (or, for ``verify=False``, a system-store load)
    that stock requests would have done; ``private_connections``: connections of pools
    holding a shared context that used a fresh, stock-built context instead (a file or a
    urllib3 setting changed since the build); ``discards``: contexts dropped because a file
    they read changed; ``owned_loads_avoided``: connections of pools with an adapter's own
    context that skipped loading a CA file that context already held (``_owned``);
    ``failures_skipped``: requests sent straight to stock because the same files failed to
    build before and have not changed (no CA load paid to find that out again);
    ``proxy_legs``: TLS connections to an HTTPS proxy made with a shared context (also
    counted in ``connections``; urllib3 2.x only).
    """

    contexts_built: int = 0
    reuses: int = 0
    ca_loads: int = 0
    build_seconds: float = 0.0
    entries: int = 0
    evictions: int = 0
    step_asides: int = 0
    detaches: int = 0
    build_failures: int = 0
    connections: int = 0
    private_connections: int = 0
    discards: int = 0
    owned_loads_avoided: int = 0
    failures_skipped: int = 0
    proxy_legs: int = 0
    step_aside_reasons: Mapping[str, int] = {}

    @property
    def loads_avoided(self) -> int:
        """Loads stock requests would have done that the shim did not."""
        return max(0, self.connections - self.ca_loads) + self.owned_loads_avoided

    @property
    def seconds_saved(self) -> float:
        """An estimate: loads avoided times the mean time it took us to build a context."""
        if not self.contexts_built:
            return 0.0
        return self.loads_avoided * self.build_seconds / self.contexts_built

    def since(self, earlier: Stats) -> Stats:
        """The counters accumulated after ``earlier`` (``entries`` stays as it is now)."""
        delta: dict[str, object] = {}
        for name, now, then in zip(self._fields, self, earlier, strict=True):
            if name == "entries":
                delta[name] = now
            elif isinstance(now, Mapping) and isinstance(then, Mapping):  # step_aside_reasons
                delta[name] = {
                    reason: count - then.get(reason, 0)
                    for reason, count in now.items()
                    if count - then.get(reason, 0)
                }
            else:
                delta[name] = now - then  # type: ignore[operator]  # int or float
        return Stats(**delta)  # type: ignore[arg-type]
