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
    PENDING = "pending"  #: installed; patches when urllib3 is imported
    ACTIVE = "active"  #: urllib3 is patched (or httpx hooked) and contexts are shared
    UNSUPPORTED = "unsupported"  #: requests/urllib3 cannot be patched safely; left stock


class Status(NamedTuple):
    """``state`` plus a human-readable ``reason`` (empty when there is nothing to say)."""

    state: State
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.state.value}: {self.reason}" if self.reason else self.state.value


class Stats(NamedTuple):
    """Counters of the registry since the process started (``clear()`` keeps them)."""

    contexts_built: int = 0
    reuses: int = 0  #: set-ups that found their context built
    ca_loads: int = 0  #: the loads of the contexts built
    build_seconds: float = 0.0
    entries: int = 0  #: contexts held now
    evictions: int = 0
    step_asides: int = 0  #: set-ups left to stock, by Reason code in step_aside_reasons
    build_failures: int = 0  #: builds that failed (stock's error for those connections)
    connections: int = 0  #: set-ups given a shared context: each a load stock would make
    discards: int = 0  #: contexts dropped as a file they read changed
    failures_skipped: int = 0  #: set-ups sent to stock while failed files stay unchanged
    owned_loads_avoided: int = 0  #: loads left out of a given context holding the file
    step_aside_reasons: Mapping[str, int] = {}
    # (added after the mapping: every earlier field keeps its place)
    owned_connections: int = 0  #: own-context set-ups whose CA load the shim served
    mean_load_seconds: float = 0.0  #: one load, as a build here took (0.0: none was timed)
    # httpx (its transports' contexts, one per client; not TLS connection set-ups):
    httpx_transports: int = 0  #: httpx transports given a shared context
    httpx_step_asides: int = 0  #: httpx transports whose context httpx built, as stock
    httpx_step_aside_reasons: Mapping[str, int] = {}

    def __str__(self) -> str:
        """One readable line (``repr()`` keeps every field)."""

        def n(count: float, word: str) -> str:
            return f"{count:g} {word}{'' if count == 1 else 's'}"

        avoided, saved = self.loads_avoided, f"about {self.seconds_saved:.2f} s saved"
        if avoided and not self.seconds_saved:
            saved = "time saved not measured"
        elif self.owned_loads_avoided:  # (stock's loads, inside its set-up: none is timed)
            saved += f" by the {avoided - self.owned_loads_avoided} in shared contexts"
        parts = [
            f"{n(self.connections, 'TLS connection')} used shared contexts "
            f"({n(self.contexts_built, 'context')} built with {n(self.ca_loads, 'CA load')} "
            f"in {self.build_seconds * 1000:.1f} ms, {self.entries} held now)",
            f"{n(avoided, 'load')} avoided, {saved}",
        ]
        owned, reasons = self.owned_connections, dict(self.step_aside_reasons)
        if owned:  # served: not left to stock, though step_asides counts them (own-context)
            loads = n(max(0, owned - self.owned_loads_avoided), "CA load")
            said = f"{n(owned, 'TLS connection')} on contexts their callers brought made {loads}"
            shared = parts[:1] if self.connections or self.contexts_built else []  # (boto3 alone)
            parts = [*shared, f"{said} instead of {owned}", *parts[1:]]
            reasons["own-context"] = reasons.get("own-context", 0) - owned
        why = ", ".join(f"{code} {count}" for code, count in reasons.items() if count > 0)
        aside = f"{n(max(0, self.step_asides - owned), 'set-up')} left to stock ({why})"
        parts.append(aside if why else "none left to stock")
        if self.httpx_transports or self.httpx_step_asides:
            why = ", ".join(f"{c} {k}" for c, k in self.httpx_step_aside_reasons.items() if k > 0)
            parts.append(
                f"httpx: {n(self.httpx_transports, 'client transport')} used shared contexts, "
                f"{self.httpx_step_asides} left to httpx's own build" + (f" ({why})" if why else "")
            )
        names = ("build_failures", "failures_skipped", "discards", "evictions")
        parts += [f"{x.replace('_', ' ')} {getattr(self, x)}" for x in names if getattr(self, x)]
        return "; ".join(parts)

    @property
    def loads_avoided(self) -> int:
        """Loads stock would have done that the shim did not (an httpx transport: one each)."""
        shared = self.connections + self.httpx_transports
        return max(0, shared - self.ca_loads) + self.owned_loads_avoided

    @property
    def seconds_saved(self) -> float:
        """An estimate: loads avoided in shared contexts (the timed ones) times the mean build."""
        built = self.contexts_built
        mean = self.mean_load_seconds or (self.build_seconds / built if built else 0.0)
        return max(0, self.connections + self.httpx_transports - self.ca_loads) * mean

    def since(self, earlier: Stats) -> Stats:
        """The counters accumulated after ``earlier`` (``entries``, ``mean_load_seconds``: now)."""
        if not isinstance(earlier, Stats):
            raise TypeError(f"since() takes an earlier Stats, not {type(earlier).__name__}")

        def minus(now: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
            return {r: n - before.get(r, 0) for r, n in now.items() if n - before.get(r, 0)}

        mappings = ("step_aside_reasons", "httpx_step_aside_reasons")
        kept = ("entries", "mean_load_seconds", *mappings)
        counts = {f: getattr(self, f) - getattr(earlier, f) for f in self._fields if f not in kept}
        counts.update({f: minus(getattr(self, f), getattr(earlier, f)) for f in mappings})
        return self._replace(**counts)
