"""Helpers for the networking integration tests (mesh, gateway, edge certificate, DNS)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, StepResult
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.steps import reconcile_step


def context(
    kube: Kube,
    platform_body: dict[str, Any],
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    settings: Settings | None = None,
) -> StepContext:
    return StepContext(
        platform=TenantPlatform.from_body(platform_body),
        kube=kube,
        settings=settings or Settings(),
        now=now or datetime.now(UTC),
        dry_run=dry_run,
    )


def run(step: Any, kube: Kube, platform_body: dict[str, Any], **kwargs: Any) -> StepResult:
    result: StepResult = reconcile_step(step, context(kube, platform_body, **kwargs))
    return result


def delete_namespace(kube: Kube, name: str) -> None:
    with contextlib.suppress(errors.KubeError):
        kube.delete("v1", "Namespace", name)


def writes(kube: Kube) -> int:
    return kube.counter.snapshot()[1]
