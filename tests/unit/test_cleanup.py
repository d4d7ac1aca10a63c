"""reconcile.cleanup (the deletion pass) and the delete handler around it, without a cluster.

Fake steps and a fake client that records status patches: the cluster-level behaviour is in
tests/integration/test_deletion.py and test_reconcile_core.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import kopf
import pytest
from tests.support import condition, platform_body

from tenant_platform import handlers, metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.framework.base import CleanupResult, StepContext, StepResult
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.reconcile import registry
from tenant_platform.state import OperatorState, current, install

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@dataclass
class FakeStep:
    name: str
    outcome: CleanupResult | Exception = field(default_factory=lambda: CleanupResult(True))
    condition_types: tuple[str, ...] = ()
    calls: list[str] = field(default_factory=list)

    def reconcile(self, ctx: StepContext) -> StepResult:
        return StepResult(conditions=[])

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        self.calls.append(ctx.name)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []


class FakeKube:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any], str | None]] = []

    def merge_patch(
        self, api_version: str, kind: str, name: str, patch: dict[str, Any], *, subresource: str | None = None
    ) -> Obj:
        self.patches.append((name, patch, subresource))
        return {}

    def fenced(self, check: Any) -> FakeKube:
        return self


def body(*, deleting_since: datetime | None = NOW, status: dict[str, Any] | None = None, **spec: Any) -> Obj:
    """The TenantPlatform tp, being deleted since ``deleting_since`` (None: not being deleted)."""
    deleting = (
        {"deletionTimestamp": deleting_since.strftime("%Y-%m-%dT%H:%M:%SZ")} if deleting_since is not None else {}
    )
    return platform_body("tp", uid="u-1", generation=3, metadata=deleting, status=status or {}, **spec)


@pytest.fixture
def fake_steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeStep]]:
    steps = [FakeStep("first"), FakeStep("second"), FakeStep("third")]
    monkeypatch.setattr(registry, "STEPS", steps[:2])
    monkeypatch.setattr(registry, "HANDOFF", steps[2])  # the hand-off runs last, cleans up first
    yield steps


def cleanup(kube: FakeKube, obj: Obj, *, now: datetime = NOW) -> reconcile.CleanupOutcome:
    return reconcile.cleanup(obj, kube=cast(Kube, kube), settings=Settings(), now=now)


def test_every_step_cleans_up_last_first(fake_steps: list[FakeStep]) -> None:
    kube = FakeKube()
    outcome = cleanup(kube, body())
    assert outcome.finished and not outcome.gave_up and not outcome.events
    assert list(outcome.results) == ["third", "second", "first"]
    assert kube.patches == []


def test_a_blocked_step_is_reported_through_the_status_writer(fake_steps: list[FakeStep]) -> None:
    fake_steps[0].outcome = CleanupResult(False, "the Corefile is locked")
    fake_steps[1].outcome = errors.Forbidden(403, "Forbidden", "nodes is forbidden")
    kube = FakeKube()
    outcome = cleanup(kube, body())
    assert not outcome.finished
    assert all(step.calls == ["tp"] for step in fake_steps), "one blocked step does not stop the others"
    assert outcome.message == (
        "Deletion is waiting for cleanup: second: nodes is forbidden; first: the Corefile is locked."
    )
    cond = condition(outcome.status, constants.READY)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "DeletionBlocked", outcome.message)
    assert cond["observedGeneration"] == 3
    assert kube.patches == [("tp", {"status": {"conditions": outcome.status["conditions"]}}, "status")]  # type: ignore[index]
    assert outcome.status_written and outcome.transitions == [(constants.READY, "False", "DeletionBlocked")]

    # The next attempt finds the same status: nothing to write.
    again = cleanup(kube, body(status=outcome.status))
    assert not again.finished and not again.status_written and len(kube.patches) == 1


def test_a_crashing_step_blocks_instead_of_aborting_the_rest(fake_steps: list[FakeStep]) -> None:
    fake_steps[2].outcome = RuntimeError("boom")
    outcome = cleanup(FakeKube(), body())
    assert not outcome.finished
    assert "third: failed unexpectedly: RuntimeError('boom')" in outcome.message
    assert fake_steps[0].calls == ["tp"]


def test_past_the_deadline_it_gives_up_with_a_warning(fake_steps: list[FakeStep]) -> None:
    fake_steps[1].outcome = CleanupResult(False, "still busy")
    kube = FakeKube()
    since = NOW - timedelta(seconds=reconcile.DELETION_DEADLINE_SECONDS + 1)
    outcome = cleanup(kube, body(deleting_since=since))
    assert outcome.finished and outcome.gave_up
    assert outcome.events == [
        ("Warning", "DeletionBlocked", "Gave up cleanup: Deletion is waiting for cleanup: second: still busy.")
    ]
    assert kube.patches == []


def test_a_spec_that_does_not_parse_is_still_cleaned_up_with_defaults(fake_steps: list[FakeStep]) -> None:
    """Version skew: a newer CRD's value must not orphan the Corefile block, labels and claims."""
    outcome = cleanup(FakeKube(), body(deletionPolicy="Sometimes"))
    assert outcome.finished
    assert all(len(step.calls) == 1 for step in fake_steps)


def test_a_spec_without_namespace_has_nothing_to_clean_up(fake_steps: list[FakeStep]) -> None:
    outcome = cleanup(FakeKube(), body(namespace="NOT A NAMESPACE"))
    assert outcome.finished and not outcome.results
    assert all(step.calls == [] for step in fake_steps)


def test_deletion_age_is_a_metric(fake_steps: list[FakeStep], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, datetime]] = []
    monkeypatch.setattr(metrics, "record_deletion_started", lambda name, since: seen.append((name, since)))
    fake_steps[0].outcome = CleanupResult(False, "busy")
    cleanup(FakeKube(), body(deleting_since=NOW - timedelta(seconds=30)))
    assert seen == [("tp", NOW - timedelta(seconds=30))]


@pytest.fixture
def operator_state() -> Iterator[OperatorState]:
    state = OperatorState(Settings(), kube=cast(Kube, FakeKube()))
    state.clock = lambda: NOW
    install(state)
    try:
        yield state
    finally:
        install(None)


def test_the_delete_handler_retries_while_blocked_then_forgets_the_platform(
    fake_steps: list[FakeStep], operator_state: OperatorState, monkeypatch: pytest.MonkeyPatch
) -> None:
    posted: list[tuple[str, str]] = []

    class Recorder:  # events are posted through the state's recorder (kube/events.py)
        def post(self, body: Any, type_: str, reason: str, message: str) -> None:
            posted.append((type_, reason))

    monkeypatch.setattr(operator_state, "events", Recorder)
    operator_state.wake("tp")
    fake_steps[0].outcome = CleanupResult(False, "busy")
    with pytest.raises(kopf.TemporaryError) as raised:
        handlers.on_delete(body=cast(kopf.Body, body()), name="tp", logger=handlers.log)
    assert raised.value.delay == handlers.DELETION_RETRY_SECONDS
    assert "tp" in operator_state.wakeups and not [p for p in posted if p[0] == "Warning"]

    fake_steps[0].outcome = CleanupResult(True)
    handlers.on_delete(body=cast(kopf.Body, body()), name="tp", logger=handlers.log)
    assert "tp" not in operator_state.wakeups and not [p for p in posted if p[0] == "Warning"]


def test_handlers_need_the_state_main_run_installs() -> None:
    install(None)
    with pytest.raises(RuntimeError, match=r"main\.run"):
        current()
