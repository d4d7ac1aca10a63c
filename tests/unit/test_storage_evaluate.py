"""The storage verdicts, decided purely: one row per reason and per transition of the write test.

``evaluate`` (phase one) sees the StorageClasses and the memory of the last pass; ``evaluate_test``
(phase two) sees the running test's live PVC and pods. Each row names what it starts from, the
StorageReady it expects (status, reason, a message fragment) and what apply is asked to do.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenant_platform.api import reasons
from tenant_platform.api.models import Storage
from tenant_platform.api.status.storage import StorageVerification, VerificationResult
from tenant_platform.concerns.storage import manifests
from tenant_platform.concerns.storage.verdict import (
    POLL_SECONDS,
    SETTLE_SECONDS,
    VERIFY_TIMEOUT,
    Action,
    StorageFacts,
    WriteTestObjects,
    evaluate,
    evaluate_test,
    read_memory,
    select_storage_class,
)

GA = "storageclass.kubernetes.io/is-default-class"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = NOW - timedelta(minutes=2)
ATTEMPT = int(EARLIER.timestamp())
R = reasons.Storage


def sc(name: str, *, default: bool = False, mode: str = "Immediate") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {GA: "true"}
    return {"metadata": meta, "provisioner": "example.com/p", "volumeBindingMode": mode}


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def memory(
    result: VerificationResult = VerificationResult.RUNNING, *, cls: str = "local", **extra: Any
) -> StorageVerification:
    fields: dict[str, Any] = {
        "storage_class_name": cls,
        "attempt": ATTEMPT,
        "result": result,
        "started_at": stamp(EARLIER),
    }
    if result != VerificationResult.RUNNING:
        fields.update(finished_at=stamp(EARLIER + timedelta(minutes=1)), message="Earlier verdict.", cleaned_up=True)
    fields.update(extra)
    return StorageVerification(**fields)


ONE_DEFAULT = [sc("local", default=True), sc("other")]


# ---- phase one: the class, and what becomes of the test -----------------------------------------


@dataclass
class Row:
    classes: list[dict[str, Any]] = field(default_factory=lambda: list(ONE_DEFAULT))
    spec: dict[str, Any] = field(default_factory=lambda: {"verify": True})
    memory: StorageVerification | None = None
    dry_run: bool = False
    now: datetime = NOW
    namespace: str = ""
    """Where the test runs (the platform's namespace)."""
    # Expected: the condition (None: advance the test first), what apply deletes, what it keeps.
    status: str | None = None
    reason: str = ""
    fragment: str = ""
    delete: int | None = None
    test_started: bool = False
    kept: VerificationResult | None = None
    requeue: float | None = None


PHASE_ONE = [
    pytest.param(
        Row(
            spec={"verify": False},
            status="True",
            reason=R.STORAGE_CLASS_FOUND,
            fragment="StorageClass local (the cluster default",
        ),
        id="found, no test",
    ),
    pytest.param(
        Row(
            spec={"verify": False},
            status="True",
            reason=R.STORAGE_CLASS_FOUND,
            fragment="The write test is turned off (spec.storage.verify: false): that the class exists proves nothing",
        ),
        id="verify off: the message says the class's existence proves nothing",
    ),
    pytest.param(Row(spec={}, test_started=True), id="verify is on by default: a test starts"),
    pytest.param(
        Row(
            spec={"storageClassName": "fast"},
            status="False",
            reason=R.STORAGE_CLASS_NOT_FOUND,
            fragment="StorageClass fast named in spec.storage.storageClassName does not exist",
        ),
        id="named class missing",
    ),
    pytest.param(
        Row(
            classes=[sc("a"), sc("b")],
            status="False",
            reason=R.NO_DEFAULT_STORAGE_CLASS,
            fragment="no StorageClass is marked default (classes in the cluster: a, b)",
        ),
        id="no default",
    ),
    pytest.param(
        Row(
            classes=[sc("a", default=True), sc("b", default=True)],
            status="False",
            reason=R.AMBIGUOUS_DEFAULT_STORAGE_CLASS,
            fragment="several StorageClasses are marked default: a, b",
        ),
        id="two defaults",
    ),
    pytest.param(
        Row(
            dry_run=True,
            memory=memory(),
            status="True",
            reason=R.STORAGE_CLASS_FOUND,
            fragment="does not run in a dry run",
            kept=VerificationResult.RUNNING,
        ),
        id="dry run keeps the memory",
    ),
    pytest.param(
        Row(spec={"verify": False}, memory=memory(), status="True", reason=R.STORAGE_CLASS_FOUND, delete=ATTEMPT),
        id="verify turned off: running test discarded",
    ),
    pytest.param(
        Row(
            spec={"verify": False},
            memory=memory(VerificationResult.FAILED, cleaned_up=False),
            status="True",
            reason=R.STORAGE_CLASS_FOUND,
            delete=ATTEMPT,
        ),
        id="verify turned off: leftovers deleted",
    ),
    pytest.param(
        Row(
            spec={"verify": False},
            memory=memory(VerificationResult.SUCCEEDED),
            status="True",
            reason=R.STORAGE_CLASS_FOUND,
        ),
        id="verify turned off: result forgotten",
    ),
    pytest.param(
        Row(
            spec={"verify": False},
            memory=memory(),
            dry_run=True,
            status="True",
            reason=R.STORAGE_CLASS_FOUND,
            kept=VerificationResult.RUNNING,
        ),
        id="verify off in a dry run: nothing deleted",
    ),
    pytest.param(
        Row(classes=[], memory=memory(), status="False", reason=R.NO_DEFAULT_STORAGE_CLASS, delete=ATTEMPT),
        id="class gone: running test discarded",
    ),
    pytest.param(Row(test_started=True), id="no memory: a test starts"),
    pytest.param(Row(memory=memory()), id="running test of this class advances"),
    pytest.param(
        Row(memory=memory(cls="gone"), delete=ATTEMPT, test_started=True),
        id="running test of another class: deleted, a new one starts",
    ),
    pytest.param(
        Row(
            memory=memory(VerificationResult.SUCCEEDED, message="Write test passed."),
            status="True",
            reason=R.VERIFIED,
            fragment="Write test passed.",
            kept=VerificationResult.SUCCEEDED,
        ),
        id="success stands",
    ),
    pytest.param(
        Row(
            memory=memory(VerificationResult.SUCCEEDED, message=None),
            status="True",
            reason=R.VERIFIED,
            fragment="StorageClass local (the cluster default",
            kept=VerificationResult.SUCCEEDED,
        ),
        id="success without a message names the class",
    ),
    pytest.param(
        Row(
            memory=memory(VerificationResult.SUCCEEDED, cleaned_up=False),
            status="True",
            reason=R.VERIFIED,
            delete=ATTEMPT,
            kept=VerificationResult.SUCCEEDED,
        ),
        id="success whose objects remain: deleted",
    ),
    pytest.param(
        Row(
            memory=memory(VerificationResult.FAILED),
            status="False",
            reason=R.VERIFICATION_FAILED,
            fragment="It runs again after 2026-01-01T12:59:00Z",
            kept=VerificationResult.FAILED,
            requeue=3540.0,
        ),
        id="failure stands until retry",
    ),
    pytest.param(
        Row(
            memory=memory(VerificationResult.TIMED_OUT),
            status="False",
            reason=R.VERIFICATION_TIMED_OUT,
            fragment="spec.storage.verify is set to false and back to true",
            kept=VerificationResult.TIMED_OUT,
            requeue=3540.0,
        ),
        id="time-out stands until retry",
    ),
    pytest.param(
        Row(memory=memory(VerificationResult.FAILED), now=NOW + timedelta(hours=1), test_started=True),
        id="failure retried after RETRY_AFTER",
    ),
    pytest.param(
        Row(memory=memory(VerificationResult.SUCCEEDED, cls="other"), test_started=True),
        id="success on another class: a new test",
    ),
    pytest.param(
        Row(
            namespace="tenant",
            memory=memory(VerificationResult.SUCCEEDED, namespace="tenant"),
            status="True",
            reason=R.VERIFIED,
            kept=VerificationResult.SUCCEEDED,
        ),
        id="success in the platform's namespace stands",
    ),
    pytest.param(
        Row(namespace="tenant", memory=memory(VerificationResult.SUCCEEDED), test_started=True),
        id="success in the operator's namespace (before the move): a new test in the platform's",
    ),
    pytest.param(
        Row(namespace="tenant", memory=memory(VerificationResult.FAILED), test_started=True),
        id="failure in the operator's namespace: no wait, a new test in the platform's",
    ),
    pytest.param(
        Row(namespace="tenant", memory=memory(), delete=ATTEMPT, test_started=True),
        id="running in the operator's namespace: dropped, a new one starts in the platform's",
    ),
]


@pytest.mark.parametrize("row", PHASE_ONE)
def test_evaluate(row: Row) -> None:
    spec = Storage.model_validate(row.spec)
    facts = StorageFacts(classes=row.classes, memory=row.memory, namespace=row.namespace)
    verdict = evaluate(spec, facts, now=row.now, dry_run=row.dry_run)
    assert verdict.delete == row.delete
    if verdict.delete is not None:
        assert verdict.if_not_deleted is not None
    if row.status is None:
        assert verdict.report is None and verdict.test is not None
        assert verdict.test.result == VerificationResult.RUNNING and verdict.test.storage_class_name == "local"
        if row.test_started:
            assert verdict.test.attempt == int(row.now.timestamp()) and verdict.test.started_at == stamp(row.now)
            assert verdict.test.namespace == (row.namespace or None)
        else:
            assert verdict.test == row.memory
        return
    report = verdict.report
    assert report is not None and verdict.test is None
    cond = report.condition
    assert (cond.status, cond.reason) == (row.status, row.reason)
    assert row.fragment in cond.message
    assert (report.memory.result if report.memory else None) == row.kept
    assert report.requeue_after == row.requeue
    assert not report.progressing and not report.failed


@pytest.mark.parametrize(
    ("row", "kept", "status", "reason", "failed"),
    [
        pytest.param(
            Row(spec={"verify": False}, memory=memory()),
            VerificationResult.RUNNING,
            "True",
            R.STORAGE_CLASS_FOUND,
            False,
            id="discard refused: memory kept",
        ),
        pytest.param(
            Row(memory=memory(VerificationResult.SUCCEEDED, cleaned_up=False)),
            VerificationResult.SUCCEEDED,
            "True",
            R.VERIFIED,
            False,
            id="cleanup refused: cleanedUp stays false",
        ),
        pytest.param(
            Row(memory=memory(cls="gone")),
            VerificationResult.RUNNING,
            "False",
            reasons.Common.API_ERROR,
            True,
            id="old class's test not deleted: APIError",
        ),
    ],
)
def test_when_the_deletion_fails(row: Row, kept: VerificationResult, status: str, reason: str, failed: bool) -> None:
    spec = Storage.model_validate(row.spec)
    verdict = evaluate(spec, StorageFacts(classes=row.classes, memory=row.memory), now=NOW)
    report = verdict.if_not_deleted
    assert report is not None and report.memory is not None
    assert report.memory.result == kept and report.memory == row.memory
    assert (report.condition.status, report.condition.reason) == (status, reason)
    assert report.failed == failed and report.progressing == failed
    if failed:
        assert "previously used StorageClass" in report.condition.message and report.requeue_after == POLL_SECONDS


def test_recorded_facts() -> None:
    verdict = evaluate(
        Storage(verify=False), StorageFacts(classes=[sc("lp", default=True, mode="WaitForFirstConsumer")]), now=NOW
    )
    assert verdict.report is not None
    assert verdict.recorded(verdict.report).dump() == {
        "storageClassName": "lp",
        "storageVolumeBindingMode": "WaitForFirstConsumer",
    }
    missing = evaluate(Storage(verify=False), StorageFacts(classes=[]), now=NOW)
    assert missing.report is not None and missing.recorded(missing.report).dump() == {}


def test_read_memory() -> None:
    assert read_memory(memory().dump()) == memory()
    assert read_memory(None) is None
    assert read_memory({"attempt": "soon"}) is None


# ---- phase two: the running test's objects --------------------------------------------------------


def obj(name: str, phase: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", **extra}, "status": {"phase": phase} if phase else {}}


def written(pvc: dict[str, Any]) -> dict[str, Any]:
    pvc["metadata"]["annotations"] = {manifests.WRITTEN_ANNOTATION: "true"}
    return pvc


PVC, WRITER, READER = "tp-storage-verify-1", "tp-storage-write-1", "tp-storage-read-1"


@dataclass
class ProbeRow:
    pvc: dict[str, Any] | None = None
    writer: dict[str, Any] | None = None
    reader: dict[str, Any] | None = None
    now: datetime = NOW
    classes: list[dict[str, Any]] = field(default_factory=lambda: list(ONE_DEFAULT))
    status: str = "Unknown"
    reason: str = R.VERIFICATION_PENDING
    fragment: str = ""
    actions: tuple[Action, ...] = ()
    finished: VerificationResult | None = None
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What the operator renders for the objects (empty: not compared)."""


def ours(role: str) -> dict[str, Any]:
    """A test object exactly as the operator renders it (``pvc``, ``write``, ``read``)."""
    common: dict[str, Any] = {"platform_name": "tp", "namespace": "ns", "attempt": 1}
    if role == "pvc":
        return manifests.render_pvc(**common, storage_class="local")
    return manifests.render_pod(**common, platform_uid="u", role=role)


def live(rendered: dict[str, Any], phase: str, **spec: Any) -> dict[str, Any]:
    """``rendered`` as the API server returns it, in ``phase``, with ``spec`` changed."""
    body = copy.deepcopy(rendered)
    body["metadata"]["uid"] = "uid"
    body["spec"].update(spec)
    body["status"] = {"phase": phase}
    return body


EXPECTED = {role: ours(role) for role in ("pvc", "write", "read")}
TAMPERED_IMAGE = [{**ours("read")["spec"]["containers"][0], "image": "example.com/always-exit-0"}]


PHASE_TWO = [
    pytest.param(
        ProbeRow(
            actions=(Action.CREATE_PVC, Action.CREATE_WRITER),
            fragment=f"PVC {PVC} is Pending; pod {WRITER} is Pending (not scheduled yet). "
            "It times out at 2026-01-01T12:08:00Z",
        ),
        id="nothing yet: PVC and writer created",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound"),
            actions=(Action.CREATE_WRITER,),
            fragment=f"PVC {PVC} is Bound; pod {WRITER} is Pending",
        ),
        id="PVC there: writer created",
    ),
    pytest.param(
        ProbeRow(pvc=obj(PVC, "Bound"), writer=obj(WRITER, "Running"), fragment=f"pod {WRITER} is Running"),
        id="writer running: wait",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound"),
            writer=obj(WRITER, "Succeeded"),
            actions=(Action.MARK_WRITTEN, Action.DELETE_WRITER, Action.CREATE_READER),
            fragment=f"pod {WRITER} wrote the marker and was deleted; a new pod reads it back",
        ),
        id="writer done: noted on the PVC, reader created",
    ),
    pytest.param(
        ProbeRow(
            pvc=written(obj(PVC, "Bound")),
            writer=obj(WRITER, "Succeeded"),
            actions=(Action.DELETE_WRITER, Action.CREATE_READER),
            fragment=f"pod {WRITER} wrote the marker and was deleted; a new pod reads it back",
        ),
        id="writer done, already noted: reader created",
    ),
    pytest.param(
        ProbeRow(
            pvc=written(obj(PVC, "Bound")),
            actions=(Action.CREATE_READER,),
            fragment=f"pod {WRITER} wrote the marker and was deleted; a new pod reads it back",
        ),
        id="killed between deleting the writer and creating the reader: reader, not a second writer",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound"),
            writer=obj(WRITER, "Succeeded"),
            reader=obj(READER, "Pending"),
            fragment=f"pod {READER} is Pending",
        ),
        id="reader pending: wait",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound", deletionTimestamp="2026-01-01T11:00:00Z"),
            fragment=f"waiting for PVC {PVC} to finish deleting",
        ),
        id="PVC deleting: wait",
    ),
    pytest.param(
        ProbeRow(
            classes=[sc("local", default=True, mode="WaitForFirstConsumer")],
            actions=(Action.CREATE_PVC, Action.CREATE_WRITER),
            fragment="(WaitForFirstConsumer), so the pod must be scheduled first.",
        ),
        id="WaitForFirstConsumer noted",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound"),
            reader=obj(READER, "Succeeded"),
            status="True",
            reason=R.VERIFIED,
            fragment=f"Write test passed at 2026-01-01T12:00:00Z: pod {WRITER} wrote a marker to PVC {PVC}",
            finished=VerificationResult.SUCCEEDED,
        ),
        id="reader succeeded: Verified",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound"),
            reader=obj(READER, "Failed"),
            status="False",
            reason=R.VERIFICATION_FAILED,
            fragment="was not read back intact",
            finished=VerificationResult.FAILED,
        ),
        id="reader failed",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Bound"),
            writer=obj(WRITER, "Failed"),
            status="False",
            reason=R.VERIFICATION_FAILED,
            fragment="writable by a non-root pod (fsGroup 65534)",
            finished=VerificationResult.FAILED,
        ),
        id="writer failed",
    ),
    pytest.param(
        ProbeRow(
            pvc=obj(PVC, "Pending"),
            writer=obj(WRITER, "Pending"),
            now=EARLIER + VERIFY_TIMEOUT,
            status="False",
            reason=R.VERIFICATION_TIMED_OUT,
            fragment=f"did not finish within 10 minutes (started {stamp(EARLIER)}): PVC {PVC} is Pending; "
            f"pod {WRITER} is Pending (not scheduled yet). Check that the provisioner creates volumes and that "
            "pods in namespace ns (the platform's) can be scheduled and can pull busybox",
            finished=VerificationResult.TIMED_OUT,
        ),
        id="deadline passed: TimedOut",
    ),
    pytest.param(
        ProbeRow(
            pvc=live(ours("pvc"), "Bound"),
            reader=live(ours("read"), "Succeeded"),
            expected=EXPECTED,
            status="True",
            reason=R.VERIFIED,
            finished=VerificationResult.SUCCEEDED,
        ),
        id="reader exactly as rendered succeeded: Verified",
    ),
    pytest.param(
        ProbeRow(
            pvc=live(ours("pvc"), "Bound"),
            reader=live(ours("read"), "Succeeded", containers=TAMPERED_IMAGE),
            expected=EXPECTED,
            status="False",
            reason=R.VERIFICATION_FAILED,
            fragment=f"pod {READER} in namespace ns is not as the operator created it (spec.containers[0].image "
            "differs)",
            finished=VerificationResult.FAILED,
        ),
        id="a succeeded reader whose image was changed: Failed, never Verified",
    ),
    pytest.param(
        ProbeRow(
            pvc=live(ours("pvc"), "Bound", storageClassName="fast"),
            reader=live(ours("read"), "Succeeded"),
            expected=EXPECTED,
            status="False",
            reason=R.VERIFICATION_FAILED,
            fragment=f"PVC {PVC} in namespace ns is not as the operator created it (spec.storageClassName differs)",
            finished=VerificationResult.FAILED,
        ),
        id="the PVC replaced by one of another class: Failed",
    ),
    pytest.param(
        ProbeRow(
            pvc=live(ours("pvc"), "Bound"),
            writer=live(ours("write"), "Running", initContainers=[{"name": "fill", "image": "busybox"}]),
            expected=EXPECTED,
            status="False",
            reason=R.VERIFICATION_FAILED,
            fragment="(spec.initContainers differs)",
            finished=VerificationResult.FAILED,
        ),
        id="a writer with an init container of its own: Failed",
    ),
]


@pytest.mark.parametrize("row", PHASE_TWO)
def test_evaluate_test(row: ProbeRow) -> None:
    selection = select_storage_class(row.classes, "")
    objects = WriteTestObjects(
        attempt=ATTEMPT,
        pvc_name=PVC,
        writer_name=WRITER,
        reader_name=READER,
        image="busybox",
        pvc=row.pvc,
        writer=row.writer,
        reader=row.reader,
        expected=row.expected,
    )
    verdict = evaluate_test(selection, memory(), objects, namespace="ns", now=row.now)
    report = verdict.report
    assert report is not None
    cond = report.condition
    assert (cond.status, cond.reason) == (row.status, row.reason)
    assert row.fragment in cond.message, cond.message
    assert verdict.actions == row.actions
    assert report.memory is not None
    if row.finished is None:
        assert report.memory == memory() and report.progressing and report.requeue_after == POLL_SECONDS
        assert verdict.delete is None
        return
    # A finished test is recorded with its message; the result goes onto the PVC and only the pods
    # are deleted (the PVC goes on the next pass, once the status holds the result).
    assert report.memory.result == row.finished and report.memory.finished_at == stamp(row.now)
    assert report.memory.message and report.memory.message in cond.message
    assert verdict.delete == ATTEMPT and verdict.keep_pvc and report.memory.cleaned_up is False
    assert verdict.record_result == report.memory.model_copy(update={"cleaned_up": None})
    assert verdict.if_not_deleted is not None and verdict.if_not_deleted.memory is not None
    assert verdict.if_not_deleted.memory.cleaned_up is False
    assert report.requeue_after == SETTLE_SECONDS
    assert not report.progressing and not report.failed
