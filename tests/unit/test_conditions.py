"""Conditions: reasons come from the catalogue; lastTransitionTime moves only on flips; Ready
summarises every concern."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml

from tenant_platform.api import constants, reasons
from tenant_platform.api.reasons import DNS, Common, Summary
from tenant_platform.core import conditions
from tenant_platform.reconcile import merge_patch_for

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
A = constants.DNS_READY


def true_for(type_: str, message: str = "ok") -> conditions.Condition:
    """A True condition of any concern type, with a reason its catalogue class has."""
    own = reasons.CATALOGUE[type_]
    return conditions.true(type_, next(iter(own)), message)  # type: ignore[arg-type]


def test_transition_time_kept_when_status_unchanged() -> None:
    first = conditions.set_condition([], conditions.true(A, DNS.CONFIGURED, "ok"), now=T0, generation=1)
    second = conditions.set_condition(first, conditions.true(A, DNS.RESOLVES, "ok too"), now=T1, generation=2)
    assert second[0]["lastTransitionTime"] == "2026-11-01T12:00:00Z"
    assert second[0]["reason"] == "Resolves"
    assert second[0]["observedGeneration"] == 2


def test_transition_time_moves_on_flip() -> None:
    first = conditions.set_condition([], conditions.true(A, DNS.CONFIGURED, "ok"), now=T0, generation=1)
    second = conditions.set_condition(first, conditions.false(A, DNS.COREDNS_NOT_FOUND, "no"), now=T1, generation=1)
    assert second[0]["lastTransitionTime"] == "2026-11-01T12:05:00Z"


def test_set_condition_returns_new_list() -> None:
    first = conditions.set_condition([], conditions.true(A, DNS.CONFIGURED, "ok"), now=T0, generation=1)
    conditions.set_condition(first, conditions.false(A, DNS.COREDNS_NOT_FOUND, "no"), now=T1, generation=1)
    assert first[0]["status"] == "True"


@pytest.mark.parametrize("reason", ["not camel", "Trailing-", "9Lives", ""])
def test_reason_must_be_camel_case(reason: str) -> None:
    with pytest.raises(ValueError, match="CamelCase"):
        conditions.true(A, reason, "x")  # type: ignore[arg-type]


def test_reason_must_be_in_the_types_catalogue() -> None:
    with pytest.raises(ValueError, match="not a reason of DNSReady"):
        conditions.false(A, reasons.Storage.STORAGE_CLASS_NOT_FOUND, "x")
    with pytest.raises(ValueError, match="not a reason of Ready"):
        conditions.true(constants.READY, Common.DISABLED, "x")
    with pytest.raises(ValueError, match="not a reason of DNSReady"):
        conditions.true(A, "Fine", "x")  # type: ignore[arg-type]
    # Common reasons are allowed for every concern, and the same value from another class is that value.
    assert conditions.false(A, Common.CONFLICT, "x").reason == "Conflict"
    assert conditions.true(constants.NAMESPACES_READY, reasons.Installer.RECONCILED, "x").reason == "Reconciled"


def test_condition_keeps_the_plain_string_so_yaml_dumps_it() -> None:
    cond = conditions.true(A, DNS.CONFIGURED, "ok")
    assert type(cond.reason) is str
    status = {"conditions": conditions.set_condition([], cond, now=T0, generation=1)}
    assert "reason: Configured\n" in yaml.safe_dump(status)
    summary = conditions.summarize({}, constants.CONCERN_TYPES, stalled_reason=Summary.INVALID_SPEC)
    assert yaml.safe_dump({"ready": summary.ready.reason}) == "ready: InvalidSpec\n"


def test_every_catalogue_value_is_a_valid_condition_reason() -> None:
    for type_, cls in [*reasons.CATALOGUE.items(), (constants.READY, Summary)]:
        for member in [*cls, *(Common if cls is not Summary else ())]:
            assert conditions.unknown(type_, member, "x").reason == member.value


def test_ready_true_only_when_every_concern_true() -> None:
    concerns = {t: true_for(t) for t in constants.CONCERN_TYPES}
    summary = conditions.summarize(concerns, constants.CONCERN_TYPES)
    assert summary.ready.status == "True"
    assert summary.reconciling.status == "False"
    assert summary.stalled.status == "False"


def test_unreported_concern_keeps_ready_unknown() -> None:
    concerns = {t: true_for(t) for t in constants.CONCERN_TYPES[1:]}
    summary = conditions.summarize(concerns, constants.CONCERN_TYPES)
    assert summary.ready.status == "Unknown"
    assert summary.ready.reason == Summary.NOT_YET_REPORTED
    assert constants.CONCERN_TYPES[0] in summary.ready.message


def test_false_concern_makes_ready_false_naming_it() -> None:
    concerns = {t: true_for(t) for t in constants.CONCERN_TYPES}
    concerns[constants.DNS_READY] = conditions.false(constants.DNS_READY, DNS.MANAGED_BY_DISTRIBUTION, "k0s owns it")
    summary = conditions.summarize(concerns, constants.CONCERN_TYPES, progressing=[constants.DNS_READY])
    assert summary.ready.status == "False"
    assert "DNSReady: ManagedByDistribution: k0s owns it" in summary.ready.message
    assert summary.reconciling.status == "True"


def test_stalled_for_invalid_spec() -> None:
    summary = conditions.summarize(
        {}, constants.CONCERN_TYPES, stalled_reason=Summary.INVALID_SPEC, stalled_message="spec.x: bad"
    )
    assert (summary.stalled.status, summary.ready.status, summary.reconciling.status) == ("True", "False", "False")
    assert summary.ready.reason == Summary.INVALID_SPEC


def test_order_puts_summary_first() -> None:
    conds = [{"type": t} for t in ("GPUReady", "Zeta", "Ready", "NamespacesReady", "Stalled")]
    assert [c["type"] for c in conditions.order(conds)] == ["Ready", "Stalled", "NamespacesReady", "GPUReady", "Zeta"]


def test_status_merge_patch_removes_nested_keys() -> None:
    old = {"recorded": {"objectStore": {"mode": "S3", "bucket": "b"}, "domain": "d"}, "gone": 1, "same": [1]}
    new = {"recorded": {"objectStore": {"mode": "Builtin"}, "domain": "d"}, "same": [1], "added": {"x": 1}}
    patch = merge_patch_for(old, new)
    assert patch == {"gone": None, "recorded": {"objectStore": {"mode": "Builtin", "bucket": None}}, "added": {"x": 1}}


# -- the progress deadline: Reconciling while waiting, Stalled after it (docs/status.md) ----------

DEADLINE = 600.0
NO_CLASS = conditions.false(constants.STORAGE_READY, "StorageClassNotFound", "StorageClass fast does not exist.")
TERMINATING = conditions.false(constants.NAMESPACES_READY, "Terminating", "Namespace x is terminating.")


def _summary(
    broken: list[conditions.Condition], waited: float, progressing: tuple[str, ...] = ()
) -> conditions.Summary:
    concerns = {t: conditions.true(t, Common.DISABLED, "ok") for t in constants.CONCERN_TYPES}
    concerns.update({c.type: c for c in broken})
    since = {c.type: T0 for c in broken}
    deadline = conditions.Deadline(DEADLINE, T0 + timedelta(seconds=waited), since)
    return conditions.summarize(concerns, constants.CONCERN_TYPES, progressing=progressing, deadline=deadline)


# (case, broken concerns, seconds waited, progressing) -> (Reconciling, its reason, Stalled, its reason)
DEADLINE_CASES = [
    ("all ready", [], 10_000, (), ("False", "Reconciled", "False", "Reconciled")),
    ("waiting", [NO_CLASS], 0, (), ("True", "StorageClassNotFound", "False", "WithinProgressDeadline")),
    ("waiting, just before", [NO_CLASS], 599, (), ("True", "StorageClassNotFound", "False", "WithinProgressDeadline")),
    ("past the deadline", [NO_CLASS], 600, (), ("False", "ProgressDeadlineExceeded", "True", "StorageClassNotFound")),
    ("converging", [TERMINATING], 30, ("NamespacesReady",), ("True", "Progressing", "False", "WithinProgressDeadline")),
    (
        "converging and waiting: the waiting reason",
        [TERMINATING, NO_CLASS],
        30,
        ("NamespacesReady",),
        ("True", "StorageClassNotFound", "False", "WithinProgressDeadline"),
    ),
    (
        "converging past the deadline stalls too",
        [TERMINATING],
        900,
        ("NamespacesReady",),
        ("False", "ProgressDeadlineExceeded", "True", "Terminating"),
    ),
]


@pytest.mark.parametrize(
    ("broken", "waited", "progressing", "expected"),
    [case[1:] for case in DEADLINE_CASES],
    ids=[case[0] for case in DEADLINE_CASES],
)
def test_progress_deadline(
    broken: list[conditions.Condition], waited: float, progressing: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    summary = _summary(broken, waited, progressing)
    got = (summary.reconciling.status, summary.reconciling.reason, summary.stalled.status, summary.stalled.reason)
    assert got == expected
    assert summary.ready.status == ("True" if not broken else "False")


def test_waiting_message_names_the_concern_and_when_it_stalls() -> None:
    summary = _summary([NO_CLASS], 120)
    assert "StorageReady: StorageClassNotFound: StorageClass fast does not exist." in summary.reconciling.message
    assert "Stalled at 2026-11-01T12:10:00Z" in summary.reconciling.message
    assert summary.stalls_in == 480
    # The same message on the next pass: no countdown that would rewrite status every time.
    assert _summary([NO_CLASS], 130).reconciling.message == summary.reconciling.message


def test_stalled_message_names_the_concern_and_since_when() -> None:
    summary = _summary([NO_CLASS], 700)
    assert summary.stalled.message.startswith("StorageReady: StorageClassNotFound: StorageClass fast does not exist.")
    assert "Not ready since 2026-11-01T12:00:00Z" in summary.stalled.message
    assert summary.stalls_in is None


def test_unreported_concern_waits_with_not_yet_reported() -> None:
    concerns = {t: conditions.true(t, Common.DISABLED, "ok") for t in constants.CONCERN_TYPES[1:]}
    deadline = conditions.Deadline(DEADLINE, T0)
    summary = conditions.summarize(concerns, constants.CONCERN_TYPES, deadline=deadline)
    assert (summary.reconciling.status, summary.reconciling.reason) == ("True", Summary.NOT_YET_REPORTED)
