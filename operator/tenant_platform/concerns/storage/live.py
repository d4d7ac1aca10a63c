"""The storage write test as its own objects tell it. Pure.

``status.recorded.storageVerification`` is the write test's memory, but a status write can fail
and the process can die between creating an object and recording it. So every test object
carries its attempt id (label ``render/storage.ATTEMPT_LABEL``) and the PVC carries the test's
progress in annotations (class, start, marker written, result). Here:

- ``live_attempts``: the tests whose objects exist, from one listing of the component's PVCs and
  pods in the platform's namespace;
- ``adopt``: the memory to go on with. A running test the status does not know (its status write
  was lost) is adopted instead of starting another one; a failure the PVC carries but the status
  does not is taken over (the test is not run again before its retry);
- ``orphans``: every live attempt other than the one kept, for apply to delete;
- ``departure``: how a live test object differs from what the operator renders for it;
- ``describe_pod``, ``describe_pvc``: where a test object stands, for condition messages.

The platform's namespace is the tenant's: whoever may write there (the installer holds ``admin``)
can create, change or delete objects carrying our names, labels and annotations. So nothing read
from these objects alone makes the test pass: a success the PVC carries is never taken over (the
marker is read back again by a new reader pod), and a pod or PVC that is not as we render it
(``departure``) fails the test (concerns/storage/verdict.py, ``not_as_created``). A pod that is
exactly ours runs exactly our test, whoever created it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tenant_platform.api.status.storage import FINISHED, StorageVerification, VerificationResult
from tenant_platform.concerns.storage import manifests


@dataclass(frozen=True)
class LiveAttempt:
    """One write test whose objects exist (some may be being deleted)."""

    attempt: int
    storage_class: str = ""
    started_at: str = ""
    written: bool = False
    result: VerificationResult | None = None
    finished_at: str = ""
    message: str = ""
    has_pvc: bool = False
    deleting: bool = False
    """Every object of this attempt is being deleted already."""


def attempt_of(obj: Mapping[str, Any]) -> int | None:
    """The attempt id on a test object: its label, else the digits its name ends in (older objects)."""
    meta = obj.get("metadata") or {}
    value = str((meta.get("labels") or {}).get(manifests.ATTEMPT_LABEL) or "")
    if not value:
        value = str(meta.get("name") or "").rsplit("-", 1)[-1]
    if not value.isascii() or not value.isdigit() or len(value) > 12:
        return None
    return int(value)


def live_attempts(pvcs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> tuple[LiveAttempt, ...]:
    """Every attempt with an object among ``pvcs`` and ``pods``, oldest first."""
    found: dict[int, dict[str, Any]] = {}
    for kind, items in (("pvc", pvcs), ("pod", pods)):
        for obj in items:
            attempt = attempt_of(obj)
            if attempt is None:
                continue
            meta = obj.get("metadata") or {}
            entry = found.setdefault(attempt, {"attempt": attempt, "deleting": True})
            entry["deleting"] = entry["deleting"] and bool(meta.get("deletionTimestamp"))
            if kind != "pvc":
                continue
            notes = meta.get("annotations") or {}
            entry["has_pvc"] = True
            entry["storage_class"] = str(notes.get(manifests.CLASS_ANNOTATION) or "")
            entry["started_at"] = str(notes.get(manifests.STARTED_ANNOTATION) or "")
            entry["written"] = notes.get(manifests.WRITTEN_ANNOTATION) == "true"
            result = notes.get(manifests.RESULT_ANNOTATION)
            if result in {r.value for r in FINISHED}:
                entry["result"] = VerificationResult(result)
                entry["finished_at"] = str(notes.get(manifests.FINISHED_ANNOTATION) or "")
                entry["message"] = str(notes.get(manifests.MESSAGE_ANNOTATION) or "")
    return tuple(LiveAttempt(**found[a]) for a in sorted(found))


def _finished(memory: StorageVerification, live: LiveAttempt) -> StorageVerification:
    """``memory`` ended as its PVC says; its objects are still to be deleted."""
    return memory.model_copy(
        update={
            "result": live.result,
            "finished_at": live.finished_at or memory.finished_at,
            "message": live.message or memory.message,
            "cleaned_up": False,
        }
    )


def _failure(live: LiveAttempt) -> bool:
    """The PVC says the test failed (a claimed success is not believed: see the module docstring)."""
    return live.result is not None and live.result != VerificationResult.SUCCEEDED


def adopt(
    memory: StorageVerification | None, live: tuple[LiveAttempt, ...], storage_class: str, namespace: str = ""
) -> StorageVerification | None:
    """The memory to go on with, given the tests whose objects exist in ``namespace``.

    - the memory's own test: a failure its PVC records wins over a status that still says Running
      (a success it records does not: the test goes on and reads the marker back again);
    - no running test for ``storage_class`` in this namespace in the memory, but a newer live test
      of that class (not being deleted) that has started: go on with that one (its failure too, if
      it records one).
    """
    by_attempt = {a.attempt: a for a in live}
    if memory is not None and memory.result == VerificationResult.RUNNING:
        own = by_attempt.get(memory.attempt)
        here = (memory.namespace or "") == namespace
        if here and own is not None and _failure(own):
            return _finished(memory, own)
        if here and memory.storage_class_name == storage_class:
            return memory
    newest = max(
        (
            a
            for a in live
            if a.has_pvc and not a.deleting and a.storage_class == storage_class and a.started_at
            if memory is None or a.attempt > memory.attempt
        ),
        key=lambda a: a.attempt,
        default=None,
    )
    if newest is None:
        return memory
    found = StorageVerification(
        storage_class_name=storage_class,
        attempt=newest.attempt,
        result=VerificationResult.RUNNING,
        started_at=newest.started_at,
        namespace=namespace or None,
    )
    return _finished(found, newest) if _failure(newest) else found


def orphans(live: tuple[LiveAttempt, ...], keep: int | None) -> tuple[int, ...]:
    """The live attempts to delete: all but ``keep`` (those already being deleted aside)."""
    return tuple(a.attempt for a in live if a.attempt != keep and not a.deleting)


def _differs(live: Any, expected: Any, path: str) -> str | None:
    """The first place ``live`` differs from ``expected`` (every key ``expected`` sets, every list
    element by position, lists of equal length; keys only ``live`` has are defaults, ignored)."""
    if isinstance(expected, Mapping):
        if not isinstance(live, Mapping):
            return path
        for key, value in expected.items():
            found = _differs(live.get(key), value, f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(live, list) or len(live) != len(expected):
            return path
        for i, (one, other) in enumerate(zip(live, expected, strict=True)):
            found = _differs(one, other, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if live == expected else path


_NEVER_IN_OURS: tuple[str, ...] = (
    "initContainers",
    "ephemeralContainers",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "dataSource",
    "dataSourceRef",
)
"""Spec fields our test objects never set: present on a live one, it is not ours."""


def departure(live: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """Where a live test object is not as the operator renders it (None: it is): a label, an owner,
    a field of the spec it sets, or a spec field it never sets (init containers, host namespaces,
    a PVC cloned from another volume)."""
    meta = live.get("metadata") or {}
    want = expected.get("metadata") or {}
    found = _differs(meta.get("labels") or {}, want.get("labels") or {}, "metadata.labels")
    if found is not None:
        return found
    owners = {str(o.get("uid")) for o in meta.get("ownerReferences") or []}
    if any(str(o.get("uid")) not in owners for o in want.get("ownerReferences") or []):
        return "metadata.ownerReferences"
    spec = live.get("spec") or {}
    extra = next((key for key in _NEVER_IN_OURS if spec.get(key)), None)
    if extra is not None:
        return f"spec.{extra}"
    return _differs(spec, expected.get("spec") or {}, "spec")


def describe_pod(pod: Mapping[str, Any] | None) -> str:
    """One clause on where a write-test pod stands, for condition messages."""
    if pod is None:
        return "not created"
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = meta.get("name", "")
    phase = status.get("phase") or "Pending"
    details: list[str] = []
    if phase == "Pending":
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if not (pod.get("spec") or {}).get("nodeName"):
            if scheduled and scheduled.get("status") == "False" and scheduled.get("message"):
                details.append(f"not scheduled: {scheduled['message']}")
            else:
                details.append("not scheduled yet")
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            waiting = state["waiting"]
            text = f"container waiting: {waiting['reason']}"
            if waiting.get("message"):
                text += f" ({waiting['message']})"
            details.append(text)
        if "terminated" in state:
            term = state["terminated"]
            text = f"container exited with code {term.get('exitCode', '?')}"
            if term.get("message"):
                text += f": {str(term['message']).strip()}"
            details.append(text)
    suffix = f" ({'; '.join(details)})" if details else ""
    return f"pod {name} is {phase}{suffix}"


def describe_pvc(pvc: Mapping[str, Any] | None) -> str:
    if pvc is None:
        return "not created"
    name = (pvc.get("metadata") or {}).get("name", "")
    phase = (pvc.get("status") or {}).get("phase") or "Pending"
    return f"PVC {name} is {phase}"
