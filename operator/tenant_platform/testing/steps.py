"""Stand-in steps for tests and benchmarks that run one concern through the whole pipeline."""

from __future__ import annotations

from typing import Any

from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext, StepResult
from tenant_platform.framework.contract import Action, Given, Step


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


def reconcile_step(step: Step[Any], ctx: StepContext) -> StepResult:
    """One step's pass as the pipeline drives it (rounds, published sections), with API errors
    escaping instead of becoming conditions, so a test can assert on either."""
    from tenant_platform.reconcile import pipeline  # noqa: PLC0415 (testing/ sits beside the operator)

    result = pipeline.result_of(pipeline.run_rounds(step, ctx))
    ctx.events.extend(result.events)
    return result
