"""Stand-in steps for tests and benchmarks that run one concern through the whole pipeline."""

from __future__ import annotations

from typing import Any

from tenant_platform.framework.base import CleanupResult, StepContext, StepResult


class NoHandoff:
    """Replaces the install-values hand-off (``registry.HANDOFF``) when a test or benchmark
    measures one concern alone: no values ConfigMap, nothing read or written."""

    name = "installvalues"
    condition_types: tuple[str, ...] = ()

    def reconcile(self, ctx: StepContext) -> StepResult:
        return StepResult(conditions=[])

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)

    def render(self, platform: Any) -> list[dict[str, Any]]:
        return []
