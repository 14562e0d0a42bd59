"""The value types of the public API: what ``status()`` and ``stats()`` return."""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["State", "Stats", "Status"]


class State(str, enum.Enum):
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
    ``step_asides``: HTTPS requests left entirely to stock requests; ``detaches``: pools
    handed back to stock behaviour at ``cert_verify`` time; ``build_failures``: builds that
    failed or raced a file change (those requests went stock, so they saw stock errors).
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
