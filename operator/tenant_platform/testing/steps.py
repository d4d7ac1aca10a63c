"""Stand-in steps for tests and benchmarks that run one concern through the whole pipeline."""

from __future__ import annotations

from typing import Any

from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given


class NoHandoff:
    """Replaces the install-values hand-off (``registry.HANDOFF``) when a test or benchmark
    measures one concern alone: no values ConfigMap, nothing read or written."""

    name = "installvalues"
    condition_types: tuple[str, ...] = ()

    def action(self, platform: Any) -> Action:
        return Action("skip the install values")

    def gather(self, ctx: StepContext) -> None:
        return None

    def evaluate(self, given: Given, facts: None) -> Verdict:
        return Verdict(conditions=[])

    def apply(self, ctx: StepContext, facts: None, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)

    def render(self, platform: Any) -> list[dict[str, Any]]:
        return []
