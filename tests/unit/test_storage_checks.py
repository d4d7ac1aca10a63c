"""StorageReady as chains of named checks (concerns/storage/verdict.py): the class
(``CLASS_CHECKS``), the first phase (``FIRST_PHASE``) and the second (``TEST_ENDINGS``, then
``TEST_PROGRESS``): one table per check (what it decides, or None when it passes), and each
chain's order (the first check that finds gives the verdict)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from tests.unit.test_storage_evaluate import (
    ATTEMPT,
    EARLIER,
    NOW,
    ONE_DEFAULT,
    PVC,
    READER,
    WRITER,
    memory,
    obj,
    sc,
    written,
)

from tenant_platform.api import reasons
from tenant_platform.api.models import Storage
from tenant_platform.api.status.storage import StorageVerification, VerificationResult
from tenant_platform.concerns.storage import verdict
from tenant_platform.concerns.storage.verdict import Action

R = reasons.Storage
V = VerificationResult
FOUND = verdict.select_storage_class(ONE_DEFAULT, "")
MISSING = verdict.select_storage_class(ONE_DEFAULT, "nope")
LONG_AGO = dict(finished_at="2025-12-31T00:00:00Z")  # a failure whose retry is due


def subject(
    *,
    verify: bool = True,
    found: bool = True,
    mem: StorageVerification | None = None,
    dry_run: bool = False,
    namespace: str = "",
) -> verdict.Subject:
    return verdict.Subject(Storage(verify=verify), FOUND if found else MISSING, mem, NOW, dry_run, namespace)


def summary(found: verdict.StorageVerdict | None) -> Any:
    """(reason, memory kept, delete, test started or advanced) of a verdict; None when the check passed."""
    if found is None:
        return None
    report = found.report
    return (
        report.condition.reason if report else None,
        report.memory is not None if report else None,
        found.delete,
        found.test.attempt if found.test else None,
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="verify on, class found: passes"),
        pytest.param({"verify": False}, (R.STORAGE_CLASS_FOUND, False, None, None), id="verify off"),
        pytest.param({"found": False}, (R.STORAGE_CLASS_NOT_FOUND, False, None, None), id="no class"),
        pytest.param(
            {"verify": False, "mem": memory()}, (R.STORAGE_CLASS_FOUND, False, ATTEMPT, None), id="running test removed"
        ),
        pytest.param(
            {"verify": False, "mem": memory(), "dry_run": True},
            (R.STORAGE_CLASS_FOUND, True, None, None),
            id="dry run keeps the memory",
        ),
        pytest.param(
            {"verify": False, "mem": memory(V.SUCCEEDED)}, (R.STORAGE_CLASS_FOUND, False, None, None), id="finished"
        ),
    ],
)
def test_no_test_wanted(kwargs: dict[str, Any], expected: Any) -> None:
    found = verdict.no_test_wanted(subject(**kwargs))
    assert summary(found) == expected
    if found is not None and found.report is not None:
        # Turned off, the class is True but says its existence proves nothing; no class: no such note.
        proves_nothing = "that the class exists proves nothing" in found.report.condition.message
        assert proves_nothing == kwargs.get("found", True)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="not a dry run"),
        pytest.param({"dry_run": True}, (R.STORAGE_CLASS_FOUND, False, None, None), id="dry run"),
        pytest.param({"dry_run": True, "mem": memory()}, (R.STORAGE_CLASS_FOUND, True, None, None), id="memory kept"),
    ],
)
def test_dry_run(kwargs: dict[str, Any], expected: Any) -> None:
    assert summary(verdict.dry_run(subject(**kwargs))) == expected


@pytest.mark.parametrize(
    ("mem", "expected"),
    [
        pytest.param(None, None, id="no memory"),
        pytest.param(memory(), None, id="running"),
        pytest.param(memory(V.SUCCEEDED), (R.VERIFIED, True, None, None), id="success stands"),
        pytest.param(memory(V.SUCCEEDED, cls="other"), None, id="another class"),
        pytest.param(memory(V.FAILED), (R.VERIFICATION_FAILED, True, None, None), id="failure stands"),
        pytest.param(memory(V.TIMED_OUT), (R.VERIFICATION_TIMED_OUT, True, None, None), id="timeout stands"),
        pytest.param(memory(V.FAILED, **LONG_AGO), None, id="retry due"),
        pytest.param(
            memory(V.SUCCEEDED, cleaned_up=False), (R.VERIFIED, True, ATTEMPT, None), id="objects left: deleted"
        ),
        pytest.param(
            memory(V.SUCCEEDED, namespace="tenant"), (R.VERIFIED, True, None, None), id="here: success stands"
        ),
        pytest.param(memory(V.SUCCEEDED, namespace="elsewhere"), None, id="another namespace"),
    ],
)
def test_verdict_stands(mem: StorageVerification | None, expected: Any) -> None:
    here = "tenant" if mem is not None and mem.namespace else ""
    assert summary(verdict.verdict_stands(subject(mem=mem, namespace=here))) == expected


@pytest.mark.parametrize(
    ("mem", "expected"),
    [
        pytest.param(None, None, id="no memory"),
        pytest.param(memory(), None, id="this class"),
        pytest.param(memory(V.FAILED, cls="other"), None, id="another class, finished"),
        pytest.param(memory(cls="other"), (None, None, ATTEMPT, int(NOW.timestamp())), id="another class running"),
        pytest.param(memory(namespace="tenant"), None, id="this class, here"),
        pytest.param(
            memory(namespace="operator-ns"),
            (None, None, ATTEMPT, int(NOW.timestamp())),
            id="this class, in another namespace",
        ),
    ],
)
def test_other_class_running(mem: StorageVerification | None, expected: Any) -> None:
    found = verdict.other_class_running(subject(mem=mem, namespace="tenant" if mem and mem.namespace else ""))
    assert summary(found) == expected
    if found is not None:
        assert found.if_not_deleted is not None and found.if_not_deleted.failed


@pytest.mark.parametrize(
    ("mem", "attempt"),
    [
        pytest.param(None, int(NOW.timestamp()), id="none: start"),
        pytest.param(memory(), ATTEMPT, id="running: advance"),
        pytest.param(memory(V.FAILED, **LONG_AGO), int(NOW.timestamp()), id="retry due: start"),
    ],
)
def test_run_the_test(mem: StorageVerification | None, attempt: int) -> None:
    assert summary(verdict.run_the_test(subject(mem=mem))) == (None, None, None, attempt)


def test_the_chain_order() -> None:
    assert verdict.FIRST_PHASE.names == (
        "no test wanted",
        "dry run",
        "finished verdict stands",
        "test of another class or namespace running",
        "run the test",
    )
    # A subject several checks find something in: the first in the chain decides.
    assert verdict.FIRST_PHASE.first(subject(verify=False, dry_run=True)).check == "no test wanted"  # type: ignore[union-attr]
    standing = subject(mem=memory(V.SUCCEEDED), dry_run=True)
    assert [f.check for f in verdict.FIRST_PHASE.every(standing)] == [
        "dry run",
        "finished verdict stands",
        "run the test",
    ]
    other = subject(mem=memory(cls="other"))
    assert [f.check for f in verdict.FIRST_PHASE.every(other)] == [
        "test of another class or namespace running",
        "run the test",
    ]
    assert verdict.FIRST_PHASE.first(other).check == "test of another class or namespace running"  # type: ignore[union-attr]
    # A success in the operator's namespace (before the test moved) neither stands nor keeps a new test away.
    moved = subject(mem=memory(V.SUCCEEDED), namespace="tenant")
    assert [f.check for f in verdict.FIRST_PHASE.every(moved)] == ["run the test"]


# ---- the second phase: the running test's objects -------------------------------------------------

LATE = EARLIER + verdict.VERIFY_TIMEOUT
DELETING = dict(deletionTimestamp="2026-01-01T11:00:00Z")


def running(
    *,
    pvc: dict[str, Any] | None = None,
    writer: dict[str, Any] | None = None,
    reader: dict[str, Any] | None = None,
    now: datetime = NOW,
    expected: dict[str, dict[str, Any]] | None = None,
) -> verdict.RunningTest:
    objects = verdict.WriteTestObjects(
        ATTEMPT, PVC, WRITER, READER, "busybox", pvc=pvc, writer=writer, reader=reader, expected=expected or {}
    )
    return verdict.RunningTest(FOUND, memory(), objects, "ns", now)


def ending(found: verdict.StorageVerdict | None) -> Any:
    """(reason, result recorded, only the pods deleted) of a finished test; None when the check passed."""
    if found is None:
        return None
    assert found.report is not None and found.report.memory is not None
    return (found.report.condition.reason, found.report.memory.result, found.keep_pvc)


BOUND = obj(PVC, "Bound")
SPEC_OF = {"pvc": {"spec": {"storageClassName": "local"}}, "read": {"spec": {"containers": [{"image": "busybox"}]}}}


def with_spec(body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**body, "spec": spec}


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND, "reader": obj(READER, "Succeeded")}, None, id="nothing to compare with"),
        pytest.param(
            {
                "pvc": with_spec(BOUND, storageClassName="local", volumeName="pv-1"),
                "reader": with_spec(obj(READER, "Succeeded"), containers=[{"image": "busybox", "name": "read"}]),
                "expected": SPEC_OF,
            },
            None,
            id="as rendered (fields the API server adds aside)",
        ),
        pytest.param(
            {
                "pvc": with_spec(BOUND, storageClassName="local"),
                "reader": with_spec(obj(READER, "Succeeded"), containers=[{"image": "evil"}]),
                "expected": SPEC_OF,
            },
            (R.VERIFICATION_FAILED, V.FAILED, True),
            id="the reader's image changed",
        ),
        pytest.param(
            {"pvc": with_spec(BOUND, storageClassName="fast"), "expected": SPEC_OF},
            (R.VERIFICATION_FAILED, V.FAILED, True),
            id="the PVC of another class",
        ),
        pytest.param(
            {
                "pvc": with_spec(BOUND, storageClassName="local", dataSource={"kind": "PersistentVolumeClaim"}),
                "expected": SPEC_OF,
            },
            (R.VERIFICATION_FAILED, V.FAILED, True),
            id="the PVC cloned from another volume",
        ),
        pytest.param(
            {"reader": with_spec(obj(READER, "Succeeded"), containers=[{"image": "busybox"}]), "expected": SPEC_OF},
            None,
            id="the PVC gone: nothing to compare (recreated as ours)",
        ),
    ],
)
def test_not_as_created(kwargs: dict[str, Any], expected: Any) -> None:
    assert ending(verdict.not_as_created(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND, "reader": obj(READER, "Running")}, None, id="reader running"),
        pytest.param({"pvc": BOUND, "reader": obj(READER, "Failed")}, None, id="reader failed"),
        pytest.param(
            {"pvc": BOUND, "reader": obj(READER, "Succeeded")}, (R.VERIFIED, V.SUCCEEDED, True), id="read back"
        ),
        pytest.param({"reader": obj(READER, "Succeeded")}, (R.VERIFIED, V.SUCCEEDED, False), id="PVC gone already"),
    ],
)
def test_reader_succeeded(kwargs: dict[str, Any], expected: Any) -> None:
    assert ending(verdict.reader_succeeded(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND, "reader": obj(READER, "Succeeded")}, None, id="reader succeeded"),
        pytest.param({"pvc": BOUND, "writer": obj(WRITER, "Failed")}, None, id="only the writer failed"),
        pytest.param(
            {"pvc": BOUND, "reader": obj(READER, "Failed")},
            (R.VERIFICATION_FAILED, V.FAILED, True),
            id="not read back intact",
        ),
    ],
)
def test_reader_failed(kwargs: dict[str, Any], expected: Any) -> None:
    assert ending(verdict.reader_failed(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND, "writer": obj(WRITER, "Running")}, None, id="writer running"),
        pytest.param({"pvc": BOUND, "writer": obj(WRITER, "Succeeded")}, None, id="writer succeeded"),
        pytest.param(
            {"pvc": BOUND, "writer": obj(WRITER, "Failed")},
            (R.VERIFICATION_FAILED, V.FAILED, True),
            id="could not write",
        ),
    ],
)
def test_writer_failed(kwargs: dict[str, Any], expected: Any) -> None:
    assert ending(verdict.writer_failed(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="two minutes in"),
        pytest.param({"now": LATE - timedelta(seconds=1)}, None, id="just before"),
        pytest.param({"now": LATE}, (R.VERIFICATION_TIMED_OUT, V.TIMED_OUT, False), id="deadline: nothing yet"),
        pytest.param(
            {"now": LATE, "pvc": obj(PVC, "Pending"), "writer": obj(WRITER, "Pending")},
            (R.VERIFICATION_TIMED_OUT, V.TIMED_OUT, True),
            id="deadline: PVC pending",
        ),
    ],
)
def test_deadline_passed(kwargs: dict[str, Any], expected: Any) -> None:
    assert ending(verdict.deadline_passed(running(**kwargs))) == expected


def progress(found: verdict.Progress | None) -> Any:
    return None if found is None else (found.note, found.actions)


READ_BACK = f"pod {WRITER} wrote the marker and was deleted; a new pod reads it back"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="no PVC"),
        pytest.param({"pvc": BOUND}, None, id="PVC bound"),
        pytest.param(
            {"pvc": obj(PVC, "Bound", **DELETING), "writer": obj(WRITER, "Succeeded")},
            (f"waiting for PVC {PVC} to finish deleting", ()),
            id="PVC deleting: nothing else",
        ),
    ],
)
def test_pvc_deleting(kwargs: dict[str, Any], expected: Any) -> None:
    assert progress(verdict.pvc_deleting(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND, "writer": obj(WRITER, "Running")}, None, id="writer running"),
        pytest.param(
            {"pvc": BOUND, "writer": obj(WRITER, "Succeeded"), "reader": obj(READER)}, None, id="reader exists"
        ),
        pytest.param(
            {"pvc": BOUND, "writer": obj(WRITER, "Succeeded")},
            (READ_BACK, (Action.MARK_WRITTEN, Action.DELETE_WRITER, Action.CREATE_READER)),
            id="noted, writer deleted, reader created",
        ),
        pytest.param(
            {"pvc": written(obj(PVC, "Bound")), "writer": obj(WRITER, "Succeeded")},
            (READ_BACK, (Action.DELETE_WRITER, Action.CREATE_READER)),
            id="noted already",
        ),
        pytest.param(
            {"writer": obj(WRITER, "Succeeded")},
            (READ_BACK, (Action.CREATE_PVC, Action.MARK_WRITTEN, Action.DELETE_WRITER, Action.CREATE_READER)),
            id="PVC gone: created first",
        ),
    ],
)
def test_writer_done(kwargs: dict[str, Any], expected: Any) -> None:
    assert progress(verdict.writer_done(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND}, None, id="not noted"),
        pytest.param({"pvc": written(obj(PVC, "Bound")), "writer": obj(WRITER, "Succeeded")}, None, id="writer left"),
        pytest.param({"pvc": written(obj(PVC, "Bound")), "reader": obj(READER)}, None, id="reader exists"),
        pytest.param(
            {"pvc": written(obj(PVC, "Bound"))}, (READ_BACK, (Action.CREATE_READER,)), id="pods gone: reader created"
        ),
    ],
)
def test_marker_written(kwargs: dict[str, Any], expected: Any) -> None:
    assert progress(verdict.marker_written(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"pvc": BOUND, "writer": obj(WRITER, "Running")}, None, id="writer exists"),
        pytest.param({"pvc": BOUND, "reader": obj(READER, "Running")}, None, id="reader exists"),
        pytest.param(
            {"pvc": BOUND},
            (f"PVC {PVC} is Bound; pod {WRITER} is Pending (not scheduled yet)", (Action.CREATE_WRITER,)),
            id="writer created",
        ),
        pytest.param(
            {},
            (
                f"PVC {PVC} is Pending; pod {WRITER} is Pending (not scheduled yet)",
                (Action.CREATE_PVC, Action.CREATE_WRITER),
            ),
            id="PVC and writer created",
        ),
    ],
)
def test_nothing_written(kwargs: dict[str, Any], expected: Any) -> None:
    assert progress(verdict.nothing_written(running(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param(
            {"pvc": BOUND, "writer": obj(WRITER, "Running")}, (f"PVC {PVC} is Bound; pod {WRITER} is Running", ())
        ),
        pytest.param(
            {"pvc": BOUND, "writer": obj(WRITER, "Succeeded"), "reader": obj(READER, "Running")},
            (f"PVC {PVC} is Bound; pod {READER} is Running", ()),
            id="the reader is the pod at work",
        ),
        pytest.param(
            {"writer": obj(WRITER, "Running")},
            (f"PVC {PVC} is Pending; pod {WRITER} is Running", (Action.CREATE_PVC,)),
            id="PVC gone: created",
        ),
    ],
)
def test_pods_at_work(kwargs: dict[str, Any], expected: Any) -> None:
    assert progress(verdict.pods_at_work(running(**kwargs))) == expected


def test_the_second_phase_chain_order() -> None:
    assert verdict.TEST_ENDINGS.names == (
        "objects not as created",
        "reader succeeded",
        "reader failed",
        "writer failed",
        "deadline passed",
    )
    # A reader that succeeded but is not as we created it never verifies: the tampering decides.
    forged = running(
        pvc=with_spec(BOUND, storageClassName="local"),
        reader=with_spec(obj(READER, "Succeeded"), containers=[{"image": "evil"}]),
        expected=SPEC_OF,
    )
    assert [f.check for f in verdict.TEST_ENDINGS.every(forged)] == ["objects not as created", "reader succeeded"]
    assert verdict.TEST_ENDINGS.first(forged).check == "objects not as created"  # type: ignore[union-attr]
    assert verdict.TEST_PROGRESS.names == (
        "PVC still deleting",
        "writer done: read back next",
        "marker written, pods gone: read back",
        "no pod yet: write",
        "pods at work: wait",
    )
    # A test several endings find: the reader's outcome decides, then the writer's, then the clock.
    late_and_read = running(pvc=BOUND, writer=obj(WRITER, "Failed"), reader=obj(READER, "Succeeded"), now=LATE)
    assert [f.check for f in verdict.TEST_ENDINGS.every(late_and_read)] == [
        "reader succeeded",
        "writer failed",
        "deadline passed",
    ]
    decided = verdict.evaluate_test(FOUND, memory(), late_and_read.objects, namespace="ns", now=LATE)
    assert decided.report is not None and decided.report.condition.reason == R.VERIFIED
    late_and_failed = running(pvc=BOUND, writer=obj(WRITER, "Failed"), now=LATE)
    assert verdict.TEST_ENDINGS.first(late_and_failed).check == "writer failed"  # type: ignore[union-attr]
    # A deleting PVC waits, whatever the pods say; a noted PVC with no pods reads back, never writes again.
    deleting = running(pvc=written(obj(PVC, "Bound", **DELETING)))
    assert [f.check for f in verdict.TEST_PROGRESS.every(deleting)] == [
        "PVC still deleting",
        "marker written, pods gone: read back",
        "no pod yet: write",
        "pods at work: wait",
    ]
    noted = running(pvc=written(obj(PVC, "Bound")))
    assert verdict.TEST_PROGRESS.first(noted).check == "marker written, pods gone: read back"  # type: ignore[union-attr]
    # A test that has not ended runs on, whatever the progress checks find.
    assert verdict.TEST_ENDINGS.first(running(pvc=BOUND, writer=obj(WRITER, "Succeeded"))) is None


# ---- the class: CLASS_CHECKS -------------------------------------------------------------------------

TWO_DEFAULTS = [sc("a", default=True), sc("b", default=True)]
NO_DEFAULT = [sc("a"), sc("b")]


def chosen(found: verdict.Selection | None) -> Any:
    """(reason, class chosen) of a selection; None when the check passed."""
    return None if found is None else (found.reason, found.name)


@pytest.mark.parametrize(
    ("classes", "requested", "expected"),
    [
        pytest.param(ONE_DEFAULT, "", None, id="none named"),
        pytest.param(ONE_DEFAULT, "other", None, id="named, exists"),
        pytest.param(ONE_DEFAULT, "fast", (R.STORAGE_CLASS_NOT_FOUND, ""), id="named, missing"),
        pytest.param([], "fast", (R.STORAGE_CLASS_NOT_FOUND, ""), id="no classes at all"),
    ],
)
def test_named_class_missing(classes: list[dict[str, Any]], requested: str, expected: Any) -> None:
    assert chosen(verdict.named_class_missing(verdict.ClassRequest(classes, requested))) == expected


@pytest.mark.parametrize(
    ("classes", "requested", "expected"),
    [
        pytest.param(ONE_DEFAULT, "", None, id="one default"),
        pytest.param(TWO_DEFAULTS, "", None, id="two defaults"),
        pytest.param(NO_DEFAULT, "a", None, id="named"),
        pytest.param(NO_DEFAULT, "", (R.NO_DEFAULT_STORAGE_CLASS, ""), id="none default"),
        pytest.param([], "", (R.NO_DEFAULT_STORAGE_CLASS, ""), id="no classes"),
    ],
)
def test_no_default_class(classes: list[dict[str, Any]], requested: str, expected: Any) -> None:
    assert chosen(verdict.no_default_class(verdict.ClassRequest(classes, requested))) == expected


@pytest.mark.parametrize(
    ("classes", "requested", "expected"),
    [
        pytest.param(ONE_DEFAULT, "", None, id="one default"),
        pytest.param(NO_DEFAULT, "", None, id="none default"),
        pytest.param(TWO_DEFAULTS, "b", None, id="named"),
        pytest.param(TWO_DEFAULTS, "", (R.AMBIGUOUS_DEFAULT_STORAGE_CLASS, ""), id="two defaults"),
    ],
)
def test_several_default_classes(classes: list[dict[str, Any]], requested: str, expected: Any) -> None:
    found = verdict.several_default_classes(verdict.ClassRequest(classes, requested))
    assert chosen(found) == expected
    if found is not None:
        assert "several StorageClasses are marked default: a, b." in found.message


@pytest.mark.parametrize(
    ("classes", "requested", "expected"),
    [
        pytest.param(ONE_DEFAULT, "", (R.STORAGE_CLASS_FOUND, "local"), id="the default"),
        pytest.param(ONE_DEFAULT, "other", (R.STORAGE_CLASS_FOUND, "other"), id="named"),
        pytest.param(ONE_DEFAULT, "fast", None, id="named, missing"),
        pytest.param(NO_DEFAULT, "", None, id="no default"),
        pytest.param(TWO_DEFAULTS, "", (R.STORAGE_CLASS_FOUND, "a"), id="two defaults: the first (if it got here)"),
    ],
)
def test_class_found(classes: list[dict[str, Any]], requested: str, expected: Any) -> None:
    found = verdict.class_found(verdict.ClassRequest(classes, requested))
    assert chosen(found) == expected
    if found is not None:
        assert found.ok and found.message.startswith(f"StorageClass {found.name} (")


def test_the_class_chain_order() -> None:
    assert verdict.CLASS_CHECKS.names == (
        "named class missing",
        "no default class",
        "several default classes",
        "class found",
    )
    # Several defaults: refused, though a class could be picked.
    ambiguous = verdict.ClassRequest(TWO_DEFAULTS, "")
    assert [f.check for f in verdict.CLASS_CHECKS.every(ambiguous)] == ["several default classes", "class found"]
    assert verdict.select_storage_class(TWO_DEFAULTS, "").reason == R.AMBIGUOUS_DEFAULT_STORAGE_CLASS
    # A named class is looked up whatever the defaults say.
    assert [f.check for f in verdict.CLASS_CHECKS.every(verdict.ClassRequest(NO_DEFAULT, "b"))] == ["class found"]
