"""The one verdict type: what a step's pure ``evaluate`` decides from gathered facts and the spec.

Every step has one shape (docs/architecture.md, framework/contract.py):

    facts   = step.gather(ctx)                  # reads only
    verdict = step.evaluate(given, facts)       # PURE: no client, no clock but ``given.now``
    verdict = step.apply(ctx, facts, verdict)   # writes only what the verdict asks for
    ...and, when ``verdict.again``, the pipeline gathers and evaluates once more on what the API
    server kept (a second round: the pod guard's staged promotion, the installer's token minted
    after its access review, a certificate issued and then judged).

A verdict names the children to apply (unstamped: apply adds our labels and owner), the
conditions with their reasons and messages, the facts to record (typed: a fragment of
``status.recorded``), the status sections, and whether work is in flight and when to come back.
``apply`` returns the verdict as its writes left it (the same one, or one whose conditions say
which write failed); the pipeline turns the last one into the pass's result, in one place.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import reasons
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.core.conditions import Condition

Manifest = dict[str, Any]
Event = tuple[str, reasons.Event, str]
"""(type "Normal"|"Warning", reason, message) for an event on the TenantPlatform."""


@dataclass(frozen=True)
class Verdict:
    conditions: list[Condition]
    """One condition per type the step owns."""
    desired: list[Manifest] = field(default_factory=list)
    """Children to apply (server-side apply under our field manager), unstamped."""
    recorded: Recorded = field(default_factory=Recorded)
    """This step's fragment of status.recorded (and the install values): only the fields it sets."""
    sections: dict[str, Any] = field(default_factory=dict)
    """Top-level status sections the step owns, e.g. {"podGuard": {...}}."""
    progressing: bool = False
    """Work in flight that will finish without a human (Reconciling=True; requeue soon)."""
    requeue_after: float | None = None
    """Ask for another pass within this many seconds (renewal, staged checks)."""
    events: list[Event] = field(default_factory=list)
    failed: bool = False
    """The step could not finish (an API error): observedGeneration is not bumped."""
    again: bool = False
    """After ``apply``, gather and evaluate once more on what the API server kept (a second round)."""
    publish: tuple[str, ...] = ()
    """Sections the pipeline must write to the API server before the next round (the pod guard's
    parameter, which the API server reads from the TenantPlatform status for the shared guard)."""

    @property
    def condition(self) -> Condition:
        """The one condition of a single-condition step."""
        if len(self.conditions) != 1:
            raise ValueError(f"expected one condition, got {len(self.conditions)}")
        return self.conditions[0]

    def but(self, **changes: Any) -> Verdict:
        """This verdict with ``changes`` (what an apply reports after its writes)."""
        return dataclasses.replace(self, **changes)
