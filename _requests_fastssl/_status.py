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

    ``contexts_built``: contexts built, each one CA load (``ca_loads``), in ``build_seconds``;
    ``entries``: held now; ``evictions``: dropped by the LRU bound; ``connections``: TLS set-ups
    with a shared context, each a load stock would have done; ``reuses``: set-ups that found a
    context built; ``discards``: contexts dropped as a file they read changed;
    ``build_failures``: builds that failed or saw a file change (those connections saw stock's
    errors); ``failures_skipped``: set-ups sent to stock as the same unchanged files failed to
    build before; ``owned_loads_avoided``: CA loads left out of a given context that held the
    file already; ``step_asides``: set-ups left to stock, by ``Reason`` in ``step_aside_reasons``.
    """

    contexts_built: int = 0
    reuses: int = 0
    ca_loads: int = 0
    build_seconds: float = 0.0
    entries: int = 0
    evictions: int = 0
    step_asides: int = 0
    build_failures: int = 0
    connections: int = 0
    discards: int = 0
    failures_skipped: int = 0
    owned_loads_avoided: int = 0
    step_aside_reasons: Mapping[str, int] = {}

    def __str__(self) -> str:
        """One readable line (``repr()`` keeps every field)."""

        def n(count: float, word: str) -> str:
            return f"{count:g} {word}{'' if count == 1 else 's'}"

        parts = [
            f"{n(self.connections, 'TLS connection')} used shared contexts "
            f"({n(self.contexts_built, 'context')} built with {n(self.ca_loads, 'CA load')} "
            f"in {self.build_seconds * 1000:.1f} ms, {self.entries} held now)",
            f"{n(self.loads_avoided, 'load')} avoided, about {self.seconds_saved:.2f} s saved",
        ]
        why = ", ".join(f"{code} {count}" for code, count in self.step_aside_reasons.items())
        aside = f"{n(self.step_asides, 'set-up')} left to stock ({why})"
        parts.append(aside if why else "none left to stock")
        names = ("build_failures", "failures_skipped", "discards", "evictions")
        parts += [f"{x.replace('_', ' ')} {getattr(self, x)}" for x in names if getattr(self, x)]
        return "; ".join(parts)

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
        if not isinstance(earlier, Stats):
            raise TypeError(f"since() takes an earlier Stats, not {type(earlier).__name__}")
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
