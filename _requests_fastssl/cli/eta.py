"""The time left of a ``bench`` run, estimated from the children that ran."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["Remaining"]


class Scenario(Protocol):  # (engine's Scenario; not imported: engine imports this module)
    @property
    def requests(self) -> int: ...


class Remaining:
    """The time left, from the children that ran: for each child to come, the last duration
    of the same variant, scenario and kind (the warm-up's profiler makes it slower), else that
    variant's seconds per unit of work so far (a new connection's price differs fivefold
    between stock and shim), else every variant's. A fixed price per request, which this
    replaced, overshot by the ratio of stock's price to the shim's."""

    START = 10  # an interpreter's start-up, in requests' worth of work

    def __init__(self) -> None:
        self._last: dict[tuple[str, Scenario, bool], float] = {}
        self._spent: dict[str, list[float]] = {}  # variant -> [seconds, units]

    def _units(self, scenario: Scenario) -> int:
        return scenario.requests + self.START

    def record(self, variant: str, scenario: Scenario, counted: bool, seconds: float) -> None:
        self._last[(variant, scenario, counted)] = seconds
        spent = self._spent.setdefault(variant, [0.0, 0.0])
        spent[0] += seconds
        spent[1] += self._units(scenario)

    def left(self, queue: Sequence[tuple[str, Scenario, bool]]) -> float | None:
        """Seconds for the children in ``queue`` (variant, scenario, counted); None before
        any child ran."""
        if not self._spent:
            return None
        seconds = sum(s for s, _ in self._spent.values())
        units = sum(u for _, u in self._spent.values())
        total = 0.0
        for variant, scenario, counted in queue:
            known = self._last.get((variant, scenario, counted))
            if known is None and not counted:  # (a warm-up's time bounds a timed run's)
                known = self._last.get((variant, scenario, True))
            if known is None:
                spent, per = self._spent.get(variant), seconds / units
                if spent is not None:
                    per = spent[0] / spent[1]
                known = per * self._units(scenario)
            total += known
        return total
