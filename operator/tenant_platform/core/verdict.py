"""The pure half of a step: what its ``evaluate`` decides from gathered facts and the spec.

Every step has one shape (docs/architecture.md):

    facts   = gather(ctx)                      # reads only (reconcile/<step>.py)
    verdict = evaluate(platform, facts, ...)   # PURE: no I/O, no clock but the one passed in
    result  = apply(ctx, verdict)              # writes what the verdict wants, reports

``evaluate`` lives in a pure module (status/ or render/) and gets table-driven unit tests, one
row per reason. A verdict names the children to apply (unstamped: apply adds our labels and
owner), the conditions with their reasons and messages, the facts to record and the status
sections; apply may still turn it into an API error condition when a write fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import reasons
from tenant_platform.core.conditions import Condition

Manifest = dict[str, Any]
Event = tuple[str, reasons.Event, str]
"""(type "Normal"|"Warning", reason, message) for an event on the TenantPlatform."""


@dataclass
class Verdict:
    conditions: list[Condition]
    desired: list[Manifest] = field(default_factory=list)
    """Children to apply (server-side apply under our field manager), unstamped."""
    recorded: dict[str, Any] = field(default_factory=dict)
    """Facts for status.recorded (and the install values)."""
    sections: dict[str, Any] = field(default_factory=dict)
    """Top-level status sections the step owns."""
    progressing: bool = False
    requeue_after: float | None = None
    events: list[Event] = field(default_factory=list)

    @property
    def condition(self) -> Condition:
        """The one condition of a single-condition step."""
        if len(self.conditions) != 1:
            raise ValueError(f"expected one condition, got {len(self.conditions)}")
        return self.conditions[0]
