"""The write test as its objects tell it (concerns/storage/live.py), and ``evaluate`` using it: a
lost status write or a killed process neither leaks a test's objects nor runs the test twice.
Table-driven, one row per situation."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenant_platform.api.models import Storage
from tenant_platform.api.status.storage import StorageVerification, VerificationResult
from tenant_platform.concerns.storage import manifests
from tenant_platform.concerns.storage.live import attempt_of, live_attempts
from tenant_platform.concerns.storage.verdict import DEFAULT_CLASS_ANNOTATIONS, StorageFacts, evaluate, settled

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
OLD = int((NOW - timedelta(hours=3)).timestamp())
LOST = int((NOW - timedelta(minutes=1)).timestamp())
CLASSES = [{"metadata": {"name": "local", "annotations": {DEFAULT_CLASS_ANNOTATIONS[0]: "true"}}}]


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pvc(attempt: int, *, cls: str = "local", deleting: bool = False, **notes: str) -> dict[str, Any]:
    body = manifests.render_pvc(
        platform_name="tp",
        namespace="ops",
        attempt=attempt,
        storage_class=cls,
        started_at=stamp(datetime.fromtimestamp(attempt, UTC)),
    )
    body["metadata"]["annotations"].update(notes)
    if deleting:
        body["metadata"]["deletionTimestamp"] = stamp(NOW)
    return body


def pod(attempt: int, role: str = "write") -> dict[str, Any]:
    return manifests.render_pod(platform_name="tp", platform_uid="u", namespace="ops", attempt=attempt, role=role)


def memory(attempt: int, result: VerificationResult = VerificationResult.RUNNING, **extra: Any) -> StorageVerification:
    fields: dict[str, Any] = {
        "storage_class_name": "local",
        "attempt": attempt,
        "result": result,
        "started_at": stamp(datetime.fromtimestamp(attempt, UTC)),
    }
    if result != VerificationResult.RUNNING:
        fields.update(finished_at=stamp(NOW - timedelta(hours=2)), message="Earlier.", cleaned_up=True)
    fields.update(extra)
    return StorageVerification(**fields)


RESULT = {
    manifests.RESULT_ANNOTATION: "Succeeded",
    manifests.FINISHED_ANNOTATION: stamp(NOW),
    manifests.MESSAGE_ANNOTATION: "Write test passed.",
}
FAILURE = {**RESULT, manifests.RESULT_ANNOTATION: "Failed", manifests.MESSAGE_ANNOTATION: "Not read back."}


@dataclass
class Row:
    memory: StorageVerification | None
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    verify: bool = True
    test: int | None = None
    """The attempt the verdict goes on with (None: no test runs this pass)."""
    result: VerificationResult | None = None
    """The memory's result after this pass."""
    orphans: tuple[int, ...] = ()
    delete: int | None = None


ROWS = [
    pytest.param(Row(None, test=int(NOW.timestamp())), id="nothing anywhere: a new test starts"),
    pytest.param(
        Row(None, pvcs=[pvc(LOST)], pods=[pod(LOST)], test=LOST),
        id="status write lost after creating the test: adopted, no second test",
    ),
    pytest.param(
        Row(memory(OLD, VerificationResult.FAILED), pvcs=[pvc(LOST)], pods=[pod(LOST)], test=LOST),
        id="retry after a failure created objects, status lost: adopted",
    ),
    pytest.param(
        Row(memory(LOST), pvcs=[pvc(LOST, **FAILURE)], result=VerificationResult.FAILED, delete=LOST),
        id="failed on the PVC, status still Running: failure taken over, PVC deleted, not rerun",
    ),
    pytest.param(
        Row(None, pvcs=[pvc(LOST, **FAILURE)], result=VerificationResult.FAILED, delete=LOST),
        id="failed on the PVC, no memory at all: failure taken over",
    ),
    pytest.param(
        Row(memory(LOST), pvcs=[pvc(LOST, **RESULT)], test=LOST),
        id="a success on the PVC, status still Running: not believed (anyone in the namespace can write it), "
        "the test goes on",
    ),
    pytest.param(
        Row(None, pvcs=[pvc(LOST, **RESULT)], test=LOST),
        id="a success on the PVC, no memory at all: adopted as running, not as a success",
    ),
    pytest.param(
        Row(memory(LOST, namespace="elsewhere"), test=int(NOW.timestamp()), delete=LOST),
        id="running in another namespace (the operator's, before the move): dropped, a new one starts here",
    ),
    pytest.param(
        Row(memory(LOST), pvcs=[pvc(LOST), pvc(OLD)], pods=[pod(OLD, "read")], test=LOST, orphans=(OLD,)),
        id="an older test's objects next to the running one: orphans deleted",
    ),
    pytest.param(
        Row(memory(LOST), pvcs=[pvc(LOST), pvc(OLD, deleting=True)], test=LOST),
        id="an orphan already being deleted is left to finish",
    ),
    pytest.param(
        Row(None, pvcs=[pvc(LOST, cls="other")], test=int(NOW.timestamp()), orphans=(LOST,)),
        id="a lost test of another class: deleted, a new one starts",
    ),
    pytest.param(
        Row(None, pvcs=[pvc(LOST, deleting=True)], test=int(NOW.timestamp())),
        id="a test being deleted is not adopted",
    ),
    pytest.param(
        Row(
            memory(OLD, VerificationResult.SUCCEEDED),
            pvcs=[pvc(OLD)],
            result=VerificationResult.SUCCEEDED,
            orphans=(OLD,),
        ),
        id="verified, but its PVC is still there: deleted",
    ),
    pytest.param(
        Row(None, pvcs=[pvc(LOST)], pods=[pod(LOST)], verify=False, orphans=(LOST,)),
        id="verify off: every live test is deleted",
    ),
]


@pytest.mark.parametrize("row", ROWS)
def test_evaluate_with_live_objects(row: Row) -> None:
    facts = StorageFacts(classes=CLASSES, memory=row.memory, live=live_attempts(row.pvcs, row.pods))
    verdict = evaluate(Storage(verify=row.verify), facts, now=NOW)
    assert (verdict.test.attempt if verdict.test else None) == row.test
    assert verdict.orphans == row.orphans
    if row.result is not None:
        assert verdict.report is not None and verdict.report.memory is not None
        assert verdict.report.memory.result == row.result
    if row.delete is not None:
        assert verdict.delete == row.delete and not verdict.keep_pvc


def test_a_dry_run_adopts_and_deletes_nothing() -> None:
    facts = StorageFacts(classes=CLASSES, memory=None, live=live_attempts([pvc(LOST)], []))
    verdict = evaluate(Storage(verify=True), facts, now=NOW, dry_run=True)
    assert verdict.orphans == () and verdict.delete is None


@pytest.mark.parametrize(
    ("labels", "name", "attempt"),
    [
        ({manifests.ATTEMPT_LABEL: "17"}, "tp-storage-verify-17", 17),
        ({}, "tp-storage-verify-42", 42),
        ({manifests.ATTEMPT_LABEL: "²"}, "x", None),
        ({}, "tp-storage-verify-" + "9" * 40, None),
        ({}, "tp-storage-verify-abc", None),
    ],
)
def test_attempt_of(labels: dict[str, str], name: str, attempt: int | None) -> None:
    assert attempt_of({"metadata": {"name": name, "labels": labels}}) == attempt


def test_live_attempts_reads_progress_from_the_pvc() -> None:
    (live,) = live_attempts([pvc(LOST, **{manifests.WRITTEN_ANNOTATION: "true"})], [pod(LOST, "read")])
    assert live.attempt == LOST and live.written and live.has_pvc and not live.deleting
    assert live.storage_class == "local" and live.result is None
    (finished,) = live_attempts([pvc(LOST, **{**RESULT, manifests.RESULT_ANNOTATION: "Bogus"})], [])
    assert finished.result is None  # an unknown result is not taken over


@pytest.mark.parametrize(
    ("mem", "verify", "expected"),
    [
        pytest.param(None, True, False, id="no memory: list (a lost test may exist)"),
        pytest.param(memory(LOST), True, False, id="running: list"),
        pytest.param(memory(OLD, VerificationResult.SUCCEEDED), True, True, id="success stands, cleaned up: no list"),
        pytest.param(memory(OLD, VerificationResult.SUCCEEDED, cleaned_up=False), True, False, id="objects left: list"),
        pytest.param(
            memory(OLD, VerificationResult.FAILED, finished_at=stamp(NOW - timedelta(minutes=5))),
            True,
            True,
            id="failure stands until its retry: no list",
        ),
        pytest.param(memory(OLD, VerificationResult.FAILED), True, False, id="failure's retry due: list"),
        pytest.param(
            memory(OLD, VerificationResult.SUCCEEDED, storage_class_name="other"), True, False, id="another class: list"
        ),
        pytest.param(
            memory(OLD, VerificationResult.SUCCEEDED, namespace="elsewhere"), True, False, id="another namespace: list"
        ),
        pytest.param(memory(OLD, VerificationResult.SUCCEEDED), False, False, id="verify off: list (to forget)"),
    ],
)
def test_settled_skips_the_listing(mem: StorageVerification | None, verify: bool, expected: bool) -> None:
    facts = StorageFacts(classes=CLASSES, memory=mem)
    assert settled(Storage(verify=verify), facts, now=NOW) == expected
