"""Decisions as chains of small named checks, in order (the shape of cert-manager's readiness
policies): each check looks at one subject and either passes (returns None) or finds something
(a finding: usually the condition to report). The order of reasons is the order of the chain, in
code; each check is a plain function with a table test of its own, and the chain's order has one.

    GATEWAY_CHECKS = Chain[GatewaySubject, Condition](
        Check("domain held by another platform", held_elsewhere),
        Check("Gateway kind not served", kind_not_served),
        ...
    )
    found = GATEWAY_CHECKS.first(subject)   # the first finding, or None when every check passed
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S")
"""The subject every check of a chain looks at (the facts and the spec, bundled)."""
R = TypeVar("R")
"""What a check finds."""


@dataclass(frozen=True)
class Check(Generic[S, R]):
    """One named check: ``run(subject)`` is None when it passes, else what it found."""

    name: str
    run: Callable[[S], R | None]


@dataclass(frozen=True)
class Found(Generic[R]):
    """A finding and the name of the check that made it."""

    check: str
    value: R


class Chain(Generic[S, R]):
    """Checks run in order; ``first`` stops at the first finding, ``every`` collects them all."""

    def __init__(self, *checks: Check[S, R]) -> None:
        names = [c.name for c in checks]
        if len(set(names)) != len(names):
            raise ValueError(f"check names repeat: {names}")
        self.checks: tuple[Check[S, R], ...] = checks

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.checks)

    def __iter__(self) -> Iterator[Check[S, R]]:
        return iter(self.checks)

    def first(self, subject: S) -> Found[R] | None:
        """The first check's finding, or None when every check passes."""
        for check in self.checks:
            value = check.run(subject)
            if value is not None:
                return Found(check.name, value)
        return None

    def every(self, subject: S) -> list[Found[R]]:
        """Every check's finding, in chain order."""
        found = []
        for check in self.checks:
            value = check.run(subject)
            if value is not None:
                found.append(Found(check.name, value))
        return found
