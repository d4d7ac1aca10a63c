"""The platform loop (handlers.platform_loop, scheduler.py) on the real API server, outside kopf's
context (as passes run in our thread pool): events are posted and listed back, a step's requeue
is honoured, repeats are de-duplicated within bounds, and a deletion waits for the pass in flight."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from tenant_platform import handlers, reconcile, scheduler
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.kube.events import CLUSTER_SCOPED_NAMESPACE, EventRecorder
from tenant_platform.reconcile import registry
from tenant_platform.state import REPORTING_CONTROLLER, OperatorState, install


class Requeuing:
    """A step asking for another pass after one second; counts the passes."""

    name = "requeuing"
    condition_types: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.passes = 0

    def action(self, platform: TenantPlatform) -> Action:
        return Action("ask for another pass")

    def gather(self, ctx: StepContext) -> None:
        self.passes += 1

    def evaluate(self, given: Given, facts: None) -> Verdict:
        return Verdict(conditions=[], requeue_after=1.0)

    def apply(self, ctx: StepContext, facts: None, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []


class Stopped:
    """What kopf passes an async daemon: falsy until stopped; ``await stopped.wait()`` returns then."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float | None = None) -> Stopped:
        await asyncio.wait_for(self.event.wait(), timeout)
        return self

    def set(self) -> None:
        self.event.set()


@pytest.fixture
def state(crd: Kube) -> Iterator[OperatorState]:
    installed = OperatorState(Settings(drift_interval=300, identity="test-operator"), kube=crd)
    install(installed)
    try:
        yield installed
    finally:
        install(None)


def events_about(kube: Kube, name: str) -> list[Obj]:
    return kube.list(
        "events.k8s.io/v1", "Event", namespace=CLUSTER_SCOPED_NAMESPACE, field_selector=f"regarding.name={name}"
    )


def test_passes_post_events_and_honour_the_requeue(
    state: OperatorState,
    make_platform: Any,
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    crd = state.client()
    step = Requeuing()
    monkeypatch.setattr(registry, "STEPS", [*registry.STEPS, step])
    make_platform(unique_name, unique_name)
    stopped = Stopped()

    async def drive() -> None:
        loop = asyncio.create_task(handlers.platform_loop(unique_name, stopped, logging.getLogger("test")))
        deadline = time.monotonic() + 60
        while step.passes < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stopped.set()
        await asyncio.wait_for(loop, 10)

    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        asyncio.run(drive())
    took = time.monotonic() - started
    assert "crashed" not in caplog.text and "LookupError" not in caplog.text, caplog.text
    # Three passes 1 s apart, not one pass and a 30 s crash back-off (nor the 300 s drift interval).
    assert step.passes >= 3
    assert took < scheduler.CRASH_RETRY_SECONDS
    posted = events_about(crd, unique_name)
    notes = {e["note"] for e in posted}
    assert any(n.startswith("Ready is now") for n in notes), notes
    uid = crd.get(constants.API_VERSION, constants.KIND, unique_name)["metadata"]["uid"]  # type: ignore[index]
    for event in posted:
        assert event["regarding"] == {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "name": unique_name,
            "uid": uid,
        }
        assert event["reportingController"] == REPORTING_CONTROLLER
        assert event["reportingInstance"] == "test-operator"
    # kubectl describe finds them too (core/v1 view of the same events).
    core = crd.list("v1", "Event", namespace=CLUSTER_SCOPED_NAMESPACE, field_selector=f"involvedObject.uid={uid}")
    assert len(core) == len(posted)


def test_repeats_are_counted_not_reposted_and_memory_is_bounded(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    body = make_platform(unique_name, unique_name)
    recorder = EventRecorder(crd, controller=REPORTING_CONTROLLER, instance="test", max_entries=5)
    for _ in range(3):
        recorder.post(body, "Warning", "TokenMinted", "the same note")
    (event,) = events_about(crd, unique_name)
    assert event["series"]["count"] == 3
    assert (recorder.posted, recorder.deduplicated) == (1, 2)
    for i in range(12):
        recorder.post(body, "Normal", "Distinct", f"note {i}")
    assert len(recorder) == 5
    assert len(events_about(crd, unique_name)) == 13
    # A note over the API's 1 kB limit is cut, not rejected.
    recorder.post(body, "Normal", "Long", "x" * 5000)
    assert recorder.failed == 0


def corefile_mentions(kube: Kube, domain: str) -> bool:
    return any(
        domain in value
        for cm in kube.list("v1", "ConfigMap", namespace="kube-system")
        for value in (cm.get("data") or {}).values()
    )


def test_deletion_waits_for_the_pass_in_flight(
    state: OperatorState, make_platform: Any, unique_name: str, crd: Kube, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_name
    domain = f"{name}.example.com"
    make_platform(name, name)
    scheduler.reconcile_once(name)
    assert corefile_mentions(crd, domain), "the DNS step adds the domain's Corefile block"

    # A late pass: it read the platform before the deletion and writes after cleanup would have.
    real_run, real_cleanup = reconcile.run, reconcile.cleanup
    in_pass, release = threading.Event(), threading.Event()
    timeline: list[str] = []

    def slow_run(*args: Any, **kwargs: Any) -> Any:
        in_pass.set()
        release.wait(30)
        outcome = real_run(*args, **kwargs)
        timeline.append("pass ended")
        return outcome

    def traced_cleanup(*args: Any, **kwargs: Any) -> Any:
        timeline.append("cleanup started")
        return real_cleanup(*args, **kwargs)

    monkeypatch.setattr(reconcile, "run", slow_run)
    monkeypatch.setattr(reconcile, "cleanup", traced_cleanup)
    late = threading.Thread(target=scheduler.reconcile_once, args=(name,))
    late.start()
    assert in_pass.wait(10)

    crd.merge_patch(constants.API_VERSION, constants.KIND, name, {"metadata": {"finalizers": [constants.FINALIZER]}})
    crd.delete(constants.API_VERSION, constants.KIND, name)
    deleting = crd.get(constants.API_VERSION, constants.KIND, name)
    assert deleting is not None and deleting["metadata"].get("deletionTimestamp")
    errors: list[BaseException] = []

    def delete() -> None:
        try:
            handlers.on_delete(body=kopf.Body(deleting), name=name, logger=logging.getLogger("test"))
        except BaseException as exc:
            errors.append(exc)

    deletion = threading.Thread(target=delete)
    deletion.start()
    deletion.join(1.5)
    assert deletion.is_alive(), "cleanup must wait for the pass in flight"
    assert timeline == []
    release.set()
    late.join(60)
    deletion.join(60)
    assert not errors, errors
    assert timeline == ["pass ended", "cleanup started"]
    assert not corefile_mentions(crd, domain), "cleanup ran last: the late pass's Corefile block is gone"
    # A pass starting now sees the deletionTimestamp and writes nothing.
    before = crd.counter.snapshot()[1]
    scheduler.reconcile_once(name)
    assert crd.counter.snapshot()[1] == before
    assert not corefile_mentions(crd, domain)
