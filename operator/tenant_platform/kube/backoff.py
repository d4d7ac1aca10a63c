"""Exponential back-off with full jitter, capped, reset on success.

After the n-th failure in a row the wait is drawn uniformly from ``[floor, min(cap, base * 2**n)]``
("full jitter"): retries of many clients (every platform loop, both watches, two replicas) that
failed at the same moment, for instance while the API server was down, spread out instead of
arriving together when it comes back. Used by the platform loop (scheduler.py) after a failed pass
and by the watches (observe/cluster.py) before a relist or a new watch.

The random source is injectable (``random.Random(seed)`` in the unit tests); no I/O here.
"""

from __future__ import annotations

import random
import threading
from typing import Protocol


class Uniform(Protocol):
    def uniform(self, a: float, b: float) -> float: ...


_SHARED = random.Random()


class Backoff:
    """Waits after consecutive failures; ``reset`` after a success."""

    def __init__(self, *, base: float, cap: float, floor: float = 0.0, rng: Uniform | None = None) -> None:
        if not 0 <= floor <= base <= cap:
            raise ValueError("need 0 <= floor <= base <= cap")
        self.base = base
        self.cap = cap
        self.floor = floor
        self.rng: Uniform = rng or _SHARED
        self.failures = 0
        self._lock = threading.Lock()

    def ceiling(self, failures: int) -> float:
        """The longest wait after ``failures`` failures in a row (at least one)."""
        exponent = min(max(failures - 1, 0), 62)  # 2**62 * base is past any cap
        return min(self.cap, self.base * 2.0**exponent)

    def next(self) -> float:
        """Count one more failure and return how long to wait before the next attempt."""
        with self._lock:
            self.failures += 1
            ceiling = self.ceiling(self.failures)
            return max(self.floor, self.rng.uniform(0.0, ceiling))

    def reset(self) -> None:
        """A success: the next failure waits at most ``base`` again."""
        with self._lock:
            self.failures = 0
