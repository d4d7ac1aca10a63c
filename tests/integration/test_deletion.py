"""Deletion never hangs for ever: while cleanup is blocked the platform's Ready condition says
what blocks it (reason DeletionBlocked); past the deadline the handler gives up, warns, and lets
kopf release the finalizer. The handler is a thin adapter around reconcile.cleanup, which writes
status through the same writer as reconcile.run."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
import pytest
from tests.support import condition

from tenant_platform import handlers, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.reconcile import registry
from tenant_platform.state import OperatorState, install


class BlockedStep:
    name = "blocked"
    condition_types: tuple[str, ...] = ()

    def action(self, platform: TenantPlatform) -> Action:
        return Action("block the deletion")

    def gather(self, ctx: StepContext) -> None:
        return None

    def evaluate(self, given: Given, facts: None) -> Verdict:
        return Verdict(conditions=[])

    def apply(self, ctx: StepContext, facts: None, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(False, "the CoreDNS ConfigMap is locked by a test")

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []


@pytest.fixture
def blocked(monkeypatch: pytest.MonkeyPatch, crd: Kube) -> Iterator[Kube]:
    monkeypatch.setattr(registry, "STEPS", [*registry.STEPS, BlockedStep()])
    install(OperatorState(Settings(), kube=crd))  # what main.run does at start-up
    try:
        yield crd
    finally:
        install(None)


def warnings_about(kube: Kube, name: str) -> list[tuple[str, str]]:
    """The Warning events posted about the platform, read back from the API server."""
    events = kube.list("events.k8s.io/v1", "Event", namespace="default", field_selector=f"regarding.name={name}")
    return [(e["reason"], e["note"]) for e in events if e.get("type") == "Warning"]


def _deleting_body(kube: Kube, name: str, since: datetime) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    body["metadata"]["deletionTimestamp"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    return body


def test_blocked_cleanup_is_reported_then_given_up(
    blocked: Kube, crd: Kube, make_platform: Any, unique_name: str
) -> None:
    make_platform(unique_name, unique_name)
    now = datetime.now(UTC)
    body = _deleting_body(crd, unique_name, now)
    with pytest.raises(kopf.TemporaryError):
        handlers.on_delete(body=body, name=unique_name, logger=logging.getLogger("test"))
    status = crd.get(constants.API_VERSION, constants.KIND, unique_name)["status"]  # type: ignore[index]
    ready = condition(status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "DeletionBlocked")
    assert "blocked: the CoreDNS ConfigMap is locked by a test" in ready["message"]
    assert not warnings_about(crd, unique_name)

    # Past the deadline: no exception (kopf releases the finalizer), and a warning says what stayed.
    old = now - timedelta(seconds=reconcile.DELETION_DEADLINE_SECONDS + 60)
    handlers.on_delete(body=_deleting_body(crd, unique_name, old), name=unique_name, logger=logging.getLogger("t"))
    warned = warnings_about(crd, unique_name)
    assert warned and warned[0][0] == "DeletionBlocked"
    assert "locked by a test" in warned[0][1]
