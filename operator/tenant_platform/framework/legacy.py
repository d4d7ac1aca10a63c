"""TEMPORARY (issue: one room per concern): runs a step written before framework/contract.py
through the contract, while the concerns are moved to it one by one. Deleted with the last one."""

from __future__ import annotations

from typing import Any

from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext, StepResult
from tenant_platform.framework.contract import Action, Given
from tenant_platform.kube.client import Obj


class Legacy:
    def __init__(self, step: Any) -> None:
        self._step = step
        self.name: str = step.name
        self.condition_types: tuple[str, ...] = tuple(step.condition_types)

    def action(self, platform: TenantPlatform) -> Action:
        named = getattr(self._step, "action", None)
        if named is None:
            return Action(f"reconcile {self.name}", retry_soon=True)
        return Action(str(named(platform)))

    def gather(self, ctx: StepContext) -> StepResult:
        result: StepResult = self._step.reconcile(ctx)
        return result

    def evaluate(self, given: Given, facts: StepResult) -> Verdict:
        return Verdict(
            conditions=list(facts.conditions),
            recorded=Recorded.fragment(facts.recorded),
            sections=dict(facts.status),
            progressing=facts.progressing,
            requeue_after=facts.requeue_after,
            failed=facts.failed,
        )

    def apply(self, ctx: StepContext, facts: StepResult, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        result: CleanupResult = self._step.cleanup(ctx)
        return result

    def render(self, platform: TenantPlatform) -> list[Obj]:
        rendered: list[Obj] = self._step.render(platform)
        return rendered


def contract_step(step: Any) -> Any:
    """``step`` itself once it implements the contract (no ``reconcile``), else wrapped."""
    return Legacy(step) if hasattr(step, "reconcile") else step
