"""metav1.Condition handling and the kstatus-compatible summary.

A ``Condition`` takes its reason from the catalogue (api/reasons.py): the constructors accept only
a ``Reason`` member (mypy rejects a bare string), and a reason that is not allowed for the
condition's type raises ValueError. The condition keeps the reason's plain string value, so a
status built from conditions dumps as plain YAML and JSON.

``set_condition`` keeps ``lastTransitionTime`` unless the status flips (cert-manager's and
Cluster API's rule). ``summarize`` derives Ready, Reconciling and Stalled from the concern
conditions: a concern that has not reported is Unknown with reason NotYetReported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from tenant_platform.api import constants, timestamps
from tenant_platform.api.reasons import Reason, allowed, member
from tenant_platform.api.reasons import Summary as SummaryReason

Status = Literal["True", "False", "Unknown"]
REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_MESSAGE = 32768


@dataclass(frozen=True, init=False)
class Condition:
    """One concern's verdict, before timestamps and generations are attached."""

    type: str
    status: Status
    reason: str
    """The plain value of the catalogue member it was built with."""
    message: str

    def __init__(self, type: str, status: Status, reason: Reason, message: str) -> None:
        value = str(reason)
        if not REASON_PATTERN.match(value) or len(value) > 1024:
            raise ValueError(f"condition reason must be CamelCase: {value!r}")
        if value not in allowed(type):
            raise ValueError(f"{value!r} is not a reason of {type} (api/reasons.py)")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "reason", value)
        object.__setattr__(self, "message", message)

    @property
    def is_true(self) -> bool:
        return self.status == "True"


def true(type_: str, reason: Reason, message: str) -> Condition:
    return Condition(type_, "True", reason, message)


def false(type_: str, reason: Reason, message: str) -> Condition:
    return Condition(type_, "False", reason, message)


def unknown(type_: str, reason: Reason, message: str) -> Condition:
    return Condition(type_, "Unknown", reason, message)


# Condition timestamps, as the API writes them (api/timestamps.py; kube/ reads them too).
format_time = timestamps.format_time
parse_time = timestamps.parse_time


def set_condition(
    conditions: Sequence[dict[str, Any]], new: Condition, *, now: datetime, generation: int
) -> list[dict[str, Any]]:
    """Return a new list with ``new`` set; lastTransitionTime moves only when status flips."""
    result: list[dict[str, Any]] = []
    found = False
    for existing in conditions:
        if existing.get("type") != new.type:
            result.append(dict(existing))
            continue
        found = True
        unchanged = existing.get("status") == new.status
        since = existing.get("lastTransitionTime") if unchanged else None
        result.append(_as_dict(new, generation=generation, since=since or format_time(now)))
    if not found:
        result.append(_as_dict(new, generation=generation, since=format_time(now)))
    return result


def _as_dict(cond: Condition, *, generation: int, since: str) -> dict[str, Any]:
    return {
        "type": cond.type,
        "status": cond.status,
        "reason": cond.reason,
        "message": cond.message[:MAX_MESSAGE],
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


def get(conditions: Iterable[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    for cond in conditions:
        if cond.get("type") == type_:
            return cond
    return None


def order(conditions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summary conditions first, then concerns in their documented order, then anything else."""
    rank = {t: i for i, t in enumerate((*constants.SUMMARY_TYPES, *constants.CONCERN_TYPES))}
    return sorted(conditions, key=lambda c: (rank.get(str(c.get("type")), len(rank)), str(c.get("type"))))


@dataclass(frozen=True)
class Summary:
    ready: Condition
    reconciling: Condition
    stalled: Condition
    stalls_in: float | None = None
    """Seconds until the first not-ready concern passes the progress deadline (None: nothing waits)."""


@dataclass(frozen=True)
class Deadline:
    """The progress deadline: a concern not ready for ``seconds`` makes the platform Stalled.

    ``since`` maps a concern type to when it went not ready: its condition's lastTransitionTime,
    read back from status, so the clock survives operator restarts. A missing entry counts as now.
    """

    seconds: float
    now: datetime
    since: Mapping[str, datetime] = field(default_factory=dict)

    def waited(self, type_: str) -> float:
        return max(0.0, (self.now - self.since.get(type_, self.now)).total_seconds())

    def since_text(self, type_: str) -> str:
        return format_time(self.since.get(type_, self.now))


def summarize(
    concerns: dict[str, Condition],
    expected: Sequence[str],
    *,
    stalled_reason: SummaryReason | None = None,
    stalled_message: str = "",
    progressing: Sequence[str] = (),
    deadline: Deadline | None = None,
) -> Summary:
    """Derive Ready, Reconciling and Stalled (docs/status.md has the table).

    ``expected``: concern types that count toward Ready (disabled concerns report True with reason
    Disabled and still count). ``progressing``: concerns still converging on their own (a
    namespace terminating, staged enforcement waiting). ``stalled_reason``: set when no progress is
    possible without a change to the spec (invalid spec).

    Any expected concern that is not True keeps Reconciling True (kstatus InProgress, Argo CD
    Progressing): with reason Progressing when every such concern is converging on its own, else
    with the first waiting concern's own reason (e.g. StorageClassNotFound). Once one has been not
    ready for longer than ``deadline.seconds``, Stalled is True with that concern's reason and
    Reconciling False (kstatus Failed, Argo CD Degraded); fixing the cause clears both.
    """
    if stalled_reason:
        stalled = true(constants.STALLED, stalled_reason, stalled_message)
        ready = false(constants.READY, stalled_reason, stalled_message)
        reconciling = false(constants.RECONCILING, stalled_reason, "Waiting for a change to the spec.")
        return Summary(ready, reconciling, stalled)

    missing = [t for t in expected if t not in concerns]
    not_true = [t for t in expected if t in concerns and not concerns[t].is_true]
    ready = _ready(concerns, missing, not_true)
    blocking = [t for t in expected if t in missing or t in not_true]
    if not blocking:
        if progressing:
            reconciling = true(
                constants.RECONCILING,
                SummaryReason.PROGRESSING,
                "Still converging: " + ", ".join(progressing) + ".",
            )
        else:
            reconciling = false(constants.RECONCILING, SummaryReason.RECONCILED, "Nothing in progress.")
        return Summary(ready, reconciling, false(constants.STALLED, SummaryReason.RECONCILED, "Not stalled."))

    limit = deadline.seconds if deadline else None
    overdue = [t for t in blocking if deadline and limit is not None and deadline.waited(t) >= limit]
    if deadline and limit is not None and overdue:
        first = overdue[0]
        parts = [f"{_sentence(_describe(concerns, t))} Not ready since {deadline.since_text(t)}." for t in overdue]
        message = (
            " | ".join(parts) + f" Past spec.progressDeadlineSeconds ({limit:.0f}s): this needs a person;"
            " the operator keeps checking and clears Stalled once it is fixed."
        )
        stalled = true(constants.STALLED, _reason(concerns, first), message)
        reconciling = false(
            constants.RECONCILING,
            SummaryReason.PROGRESS_DEADLINE_EXCEEDED,
            f"No progress within spec.progressDeadlineSeconds ({limit:.0f}s); see Stalled.",
        )
        return Summary(ready, reconciling, stalled)

    waiting = [t for t in blocking if t not in progressing]
    reason = _reason(concerns, waiting[0]) if waiting else SummaryReason.PROGRESSING
    message = "Waiting for " + _sentence(" | ".join(_describe(concerns, t) for t in blocking))
    stalls_in: float | None = None
    if deadline and limit is not None:
        # Times, not countdowns: the message stays the same from one pass to the next.
        first = min(blocking, key=lambda t: limit - deadline.waited(t))
        stalls_in = limit - deadline.waited(first)
        at = format_time(deadline.now + timedelta(seconds=stalls_in))
        message += f" Stalled at {at} (spec.progressDeadlineSeconds: {limit:.0f}s) unless it resolves."
        stalled = false(
            constants.STALLED,
            SummaryReason.WITHIN_PROGRESS_DEADLINE,
            f"Not stalled: {first} has been not ready since {deadline.since_text(first)}; stalled at {at}.",
        )
    else:
        stalled = false(constants.STALLED, SummaryReason.WITHIN_PROGRESS_DEADLINE, "Not stalled.")
    reconciling = true(constants.RECONCILING, reason, message)
    return Summary(ready, reconciling, stalled, stalls_in)


def _ready(concerns: dict[str, Condition], missing: Sequence[str], not_true: Sequence[str]) -> Condition:
    if not (missing or not_true):
        return true(constants.READY, SummaryReason.ALL_READY, "Every prerequisite is in place.")
    parts = [f"{t}: {concerns[t].reason}: {concerns[t].message}" for t in not_true]
    parts += [f"{t}: not yet reported" for t in missing]
    status: Status = "False" if any(concerns[t].status == "False" for t in not_true) else "Unknown"
    reason = SummaryReason.CONCERNS_NOT_READY if not_true else SummaryReason.NOT_YET_REPORTED
    return Condition(constants.READY, status, reason, " | ".join(parts))


def _reason(concerns: dict[str, Condition], type_: str) -> Reason:
    return member(concerns[type_].reason) if type_ in concerns else SummaryReason.NOT_YET_REPORTED


def _sentence(text: str) -> str:
    return text if text.endswith(".") else text + "."


def _describe(concerns: dict[str, Condition], type_: str) -> str:
    if type_ not in concerns:
        return f"{type_}: not yet reported"
    return f"{type_}: {concerns[type_].reason}: {concerns[type_].message}"
