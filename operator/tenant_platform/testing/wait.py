"""The one polling helper of the tests, the benchmarks and the demo: ``wait_for``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """``wait_for`` gave up (an AssertionError, so pytest reports it as a failed expectation)."""


def wait_for(
    predicate: Callable[[], T],
    what: str = "condition",
    timeout: float = 30.0,
    *,
    interval: float = 0.1,
    context: Callable[[], Any] | None = None,
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that.

    On timeout raise WaitTimeout naming ``what``, with the last value and ``context()`` (a
    status, a log tail).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{context()}" if context else ""
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; last value: {value!r}{detail}")
        time.sleep(interval)
