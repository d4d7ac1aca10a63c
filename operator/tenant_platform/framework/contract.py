"""The step contract every concern implements in full, checked by mypy (no optional methods).

A step is one checklist concern. The pipeline (reconcile/pipeline.py ``run_step``) drives it:

    facts   = step.gather(ctx)                  # reads only (through ctx.kube, fenced)
    verdict = step.evaluate(given, facts)       # PURE: ``Given`` carries no client
    verdict = step.apply(ctx, facts, verdict)   # writes only what the verdict asks for
    if verdict.publish: the pipeline writes those status sections (the one status writer)
    if verdict.again:   the pipeline gathers and evaluates once more (at most MAX_ROUNDS rounds)

so decisions live in ``evaluate`` (table-tested, one row per reason), writes in ``apply``, and no
step writes status. An API error escaping any of the three becomes "<Forbidden|APIError>: ...
failed to <action>" on each of the step's conditions (``action``), in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.config import Settings
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.kube.client import Obj

MAX_ROUNDS = 3
"""Rounds of gather -> evaluate -> apply one step may ask for in a pass (``Verdict.again``)."""

F = TypeVar("F")


@dataclass(frozen=True)
class Given:
    """What a pure ``evaluate`` may know besides the facts: no client, no clock but ``now``."""

    platform: TenantPlatform
    now: datetime
    settings: Settings
    dry_run: bool = False
    recorded: Recorded = field(default_factory=Recorded)
    """Facts the earlier steps of this pass recorded (the install-values hand-off reads them)."""
    status_written: Mapping[str, Any] = field(default_factory=dict)
    """Status sections the pipeline already published in this pass (``Verdict.publish``)."""

    @classmethod
    def of(cls, ctx: StepContext) -> Given:
        return cls(
            platform=ctx.platform,
            now=ctx.now,
            settings=ctx.settings,
            dry_run=ctx.dry_run,
            recorded=ctx.recorded,
            status_written=dict(ctx.status_written),
        )


@dataclass(frozen=True)
class Action:
    """What a step does, as an API error names it: "<Forbidden|APIError>: ... failed to <doing>"."""

    doing: str
    retry_soon: bool = False
    """An API error leaves the step in progress (Reconciling True, another pass within 10 s)
    rather than failed and waiting for the next trigger."""


class Step(Protocol[F]):
    """One concern. Implementations are module-level singletons listed in reconcile/registry.py."""

    name: str
    condition_types: tuple[str, ...]

    def action(self, platform: TenantPlatform) -> Action:
        """What the step does, for "failed to <action>" ("check the edge certificate")."""
        ...

    def gather(self, ctx: StepContext) -> F:
        """Reads only: everything ``evaluate`` needs, as a small frozen dataclass."""
        ...

    def evaluate(self, given: Given, facts: F) -> Verdict:
        """PURE: the decision (children, conditions, recorded facts, sections)."""
        ...

    def apply(self, ctx: StepContext, facts: F, verdict: Verdict) -> Verdict:
        """Write what ``verdict`` asks for (nothing in a dry run); the verdict as the writes left it."""
        ...

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Undo what only we may undo on TenantPlatform deletion (idempotent, fast)."""
        ...

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """Every manifest the step would apply, without a cluster (for `tenant-platform render`)."""
        ...
