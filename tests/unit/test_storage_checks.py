"""The first phase of StorageReady as a chain of named checks (concerns/storage/verdict.py
``FIRST_PHASE``): one table per check (what it decides, or None when it passes), and the
chain's order (the first check that finds gives the verdict)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.test_storage_evaluate import ATTEMPT, NOW, ONE_DEFAULT, memory

from tenant_platform.api import reasons
from tenant_platform.api.models import Storage
from tenant_platform.api.status.storage import StorageVerification, VerificationResult
from tenant_platform.concerns.storage import verdict as st

R = reasons.Storage
V = VerificationResult
FOUND = st.select_storage_class(ONE_DEFAULT, "")
MISSING = st.select_storage_class(ONE_DEFAULT, "nope")
LONG_AGO = dict(finished_at="2025-12-31T00:00:00Z")  # a failure whose retry is due


def subject(
    *, verify: bool = True, found: bool = True, mem: StorageVerification | None = None, dry_run: bool = False
) -> st.Subject:
    return st.Subject(Storage(verify=verify), FOUND if found else MISSING, mem, NOW, dry_run)


def summary(found: st.StorageVerdict | None) -> Any:
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
    assert summary(st.no_test_wanted(subject(**kwargs))) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, None, id="not a dry run"),
        pytest.param({"dry_run": True}, (R.STORAGE_CLASS_FOUND, False, None, None), id="dry run"),
        pytest.param({"dry_run": True, "mem": memory()}, (R.STORAGE_CLASS_FOUND, True, None, None), id="memory kept"),
    ],
)
def test_dry_run(kwargs: dict[str, Any], expected: Any) -> None:
    assert summary(st.dry_run(subject(**kwargs))) == expected


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
    ],
)
def test_verdict_stands(mem: StorageVerification | None, expected: Any) -> None:
    assert summary(st.verdict_stands(subject(mem=mem))) == expected


@pytest.mark.parametrize(
    ("mem", "expected"),
    [
        pytest.param(None, None, id="no memory"),
        pytest.param(memory(), None, id="this class"),
        pytest.param(memory(V.FAILED, cls="other"), None, id="another class, finished"),
        pytest.param(memory(cls="other"), (None, None, ATTEMPT, int(NOW.timestamp())), id="another class running"),
    ],
)
def test_other_class_running(mem: StorageVerification | None, expected: Any) -> None:
    found = st.other_class_running(subject(mem=mem))
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
    assert summary(st.run_the_test(subject(mem=mem))) == (None, None, None, attempt)


def test_the_chain_order() -> None:
    assert st.FIRST_PHASE.names == (
        "no test wanted",
        "dry run",
        "finished verdict stands",
        "test of another class running",
        "run the test",
    )
    # A subject several checks find something in: the first in the chain decides.
    assert st.FIRST_PHASE.first(subject(verify=False, dry_run=True)).check == "no test wanted"  # type: ignore[union-attr]
    standing = subject(mem=memory(V.SUCCEEDED), dry_run=True)
    assert [f.check for f in st.FIRST_PHASE.every(standing)] == ["dry run", "finished verdict stands", "run the test"]
    other = subject(mem=memory(cls="other"))
    assert [f.check for f in st.FIRST_PHASE.every(other)] == ["test of another class running", "run the test"]
    assert st.FIRST_PHASE.first(other).check == "test of another class running"  # type: ignore[union-attr]
