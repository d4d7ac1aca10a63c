"""StorageReady, decided from gathered facts. Pure.

Which StorageClass the platform gets (``select_storage_class``): a named class must exist. With
no name, exactly one class must be marked default (the GA annotation
``storageclass.kubernetes.io/is-default-class`` or its old beta twin, value "true"). Kubernetes
itself tolerates several defaults (it picks the newest), but an install that lands on one by
accident is what this check exists to prevent, so several defaults is a failure naming them.

The write test (``spec.storage.verify``, on by default: that a class exists proves nothing about
its volumes) runs in the platform's namespace, as the checklist runs it. It is a state machine
over the memory the step keeps in ``status.recorded.storageVerification`` (api/status/storage.py)
and the live test objects. It is decided here in two phases, both pure:

- ``evaluate`` (the classes and the memory): report the class alone (the test turned off, no
  class, or a dry run), let a finished verdict of this class in this namespace stand, or name the
  running test to advance, starting a new one when none runs for this class here (a failure stands
  for RETRY_AFTER first);
- ``evaluate_test`` (that test's PVC and pods, read once the attempt is known): finish it
  (Succeeded, Failed, TimedOut after VERIFY_TIMEOUT; Failed too when an object is not as we
  created it) or say which object to create or delete next.

Each decision is a chain of named checks, in the order of its reasons: the class
(``CLASS_CHECKS``), the first phase (``FIRST_PHASE``), then the second: ``TEST_ENDINGS`` (how the
running test ends) and ``TEST_PROGRESS`` (where it stands otherwise).

Either may ask apply to delete one test's objects first (best effort), with the report to give
when that fails. concerns/storage/step.py gathers the facts and carries the verdicts out.

The memory alone is not trusted: the test's objects carry their attempt id and the PVC its
progress (concerns/storage/live.py). ``evaluate`` first adopts a test the status does not know (a
lost status write, a killed process) instead of starting another, and names every other live
test as an orphan to delete. A finished test records its result on the PVC and deletes only its
pods; the PVC goes on the next pass, once the status holds the result, so a lost status write
never runs a failed test again before its retry. The objects live in the tenant's namespace, where
the tenant may write: only the status (which only the operator writes) and pods found exactly as
we render them count towards a success; a success noted on the PVC is proven again by a new
reader, and an object not as we created it fails the test (``not_as_created``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

import pydantic

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import Storage
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.api.status.storage import FINISHED, StorageRecorded, StorageVerification, VerificationResult
from tenant_platform.concerns.storage import live, manifests
from tenant_platform.concerns.storage.live import LiveAttempt, describe_pod, describe_pvc
from tenant_platform.core import conditions
from tenant_platform.core.checks import Chain, Check
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict

DEFAULT_CLASS_ANNOTATIONS: tuple[str, ...] = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)

VERIFY_TIMEOUT = timedelta(minutes=10)
RETRY_AFTER = timedelta(hours=1)
POLL_SECONDS = 15.0
# A finished test's PVC is deleted on the next pass, once the status holds the result.
SETTLE_SECONDS = 1.0


@dataclass(frozen=True)
class Selection:
    """The verdict: ``name`` is set only when a class was found (``ok``)."""

    ok: bool
    reason: reasons.Storage
    message: str
    """The whole verdict, including the volumeBindingMode note."""
    summary: str = ""
    """The verdict without that note."""
    name: str = ""
    default: bool = False
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"


def is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(str(annotations.get(key, "")).lower() == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def _names(classes: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(str(c["metadata"]["name"]) for c in classes)


def binding_note(name: str, mode: str) -> str:
    """A sentence about the class's volumeBindingMode (empty for Immediate)."""
    if mode == "WaitForFirstConsumer":
        return (
            f" StorageClass {name} uses volumeBindingMode WaitForFirstConsumer: a PVC stays Pending until a pod "
            "using it is scheduled, which is expected and not a fault."
        )
    return ""


def select_storage_class(classes: Sequence[Mapping[str, Any]], requested: str) -> Selection:
    """Pick the class for ``requested`` (empty: the cluster default) among ``classes``: the first
    finding of ``CLASS_CHECKS``."""
    found = CLASS_CHECKS.first(ClassRequest(classes, requested))
    assert found is not None  # class_found finds whenever the checks before it pass
    return found.value


@dataclass(frozen=True)
class ClassRequest:
    """What the class checks look at: every StorageClass, and the name asked for (empty: the default)."""

    classes: Sequence[Mapping[str, Any]]
    requested: str

    @property
    def available(self) -> str:
        return ", ".join(_names(self.classes)) or "none"

    @property
    def named(self) -> Mapping[str, Any] | None:
        return next((c for c in self.classes if c["metadata"]["name"] == self.requested), None)

    @property
    def defaults(self) -> list[Mapping[str, Any]]:
        return [c for c in self.classes if is_default(c)]


def named_class_missing(request: ClassRequest) -> Selection | None:
    """The class named in spec.storage.storageClassName does not exist."""
    if not request.requested or request.named is not None:
        return None
    return Selection(
        ok=False,
        reason=reasons.Storage.STORAGE_CLASS_NOT_FOUND,
        message=(
            f"StorageClass {request.requested} named in spec.storage.storageClassName does not exist "
            f"(classes in the cluster: {request.available}). Create it, or name an existing class."
        ),
    )


def no_default_class(request: ClassRequest) -> Selection | None:
    """No class named, and none marked default."""
    if request.requested or request.defaults:
        return None
    return Selection(
        ok=False,
        reason=reasons.Storage.NO_DEFAULT_STORAGE_CLASS,
        message=(
            f"spec.storage.storageClassName is empty and no StorageClass is marked default "
            f"(classes in the cluster: {request.available}). Name a class in spec.storage.storageClassName, or "
            f"annotate one with {DEFAULT_CLASS_ANNOTATIONS[0]}=true."
        ),
    )


def several_default_classes(request: ClassRequest) -> Selection | None:
    """No class named, and several marked default (Kubernetes would pick the newest: name one)."""
    defaults = request.defaults
    if request.requested or len(defaults) <= 1:
        return None
    return Selection(
        ok=False,
        reason=reasons.Storage.AMBIGUOUS_DEFAULT_STORAGE_CLASS,
        message=(
            f"spec.storage.storageClassName is empty and several StorageClasses are marked default: "
            f"{', '.join(_names(defaults))}. Name one in spec.storage.storageClassName, or leave the "
            "default annotation on only one."
        ),
    )


def class_found(request: ClassRequest) -> Selection | None:
    """The named class, or the one default class: found."""
    if request.requested:
        chosen, how = request.named, "named in spec.storage.storageClassName"
    else:
        defaults = request.defaults
        chosen, how = (defaults[0] if defaults else None), "the cluster default"
    if chosen is None:
        return None
    name = str(chosen["metadata"]["name"])
    provisioner = str(chosen.get("provisioner") or "")
    mode = str(chosen.get("volumeBindingMode") or "Immediate")
    summary = f"StorageClass {name} ({how}, provisioner {provisioner or 'unknown'}) exists."
    return Selection(
        ok=True,
        reason=reasons.Storage.STORAGE_CLASS_FOUND,
        message=summary + binding_note(name, mode),
        summary=summary,
        name=name,
        default=is_default(chosen),
        provisioner=provisioner,
        volume_binding_mode=mode,
    )


CLASS_CHECKS: Final = Chain[ClassRequest, Selection](
    Check("named class missing", named_class_missing),
    Check("no default class", no_default_class),
    Check("several default classes", several_default_classes),
    Check("class found", class_found),
)
"""Which StorageClass, in order: the first check that finds gives the selection."""


# ---- the write test ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StorageFacts:
    """What the step read first: every StorageClass, and the write test's memory from the last status."""

    classes: Sequence[Mapping[str, Any]]
    memory: StorageVerification | None = None
    live: tuple[LiveAttempt, ...] = ()
    """The write tests whose objects exist (concerns/storage/live.py), whatever the memory says."""
    namespace: str = ""
    """Where the write test runs: the platform's namespace."""


@dataclass(frozen=True)
class WriteTestObjects:
    """The live objects of one write test (None: absent), read once the attempt is known."""

    attempt: int
    pvc_name: str
    writer_name: str
    reader_name: str
    image: str
    """The image the test pods run (for the timeout message)."""
    pvc: Mapping[str, Any] | None = None
    writer: Mapping[str, Any] | None = None
    reader: Mapping[str, Any] | None = None
    expected: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    """What the operator renders for each object (``pvc``, ``write``, ``read``), as it creates
    them: a live one that departs from it was changed or made by someone else."""

    @property
    def written(self) -> bool:
        """The PVC says the writer succeeded (so the reader comes next, even with both pods gone)."""
        notes = ((self.pvc or {}).get("metadata") or {}).get("annotations") or {}
        return notes.get(manifests.WRITTEN_ANNOTATION) == "true"


class Action(StrEnum):
    """One write the test needs next, in the order apply carries them out."""

    CREATE_PVC = "create the PVC"
    MARK_WRITTEN = "note on the PVC that the marker was written"
    DELETE_WRITER = "delete the writer pod"
    CREATE_READER = "create the reader pod"
    CREATE_WRITER = "create the writer pod"


@dataclass(frozen=True)
class Report:
    """What the step reports: StorageReady, the memory to keep, and when to come back."""

    condition: Condition
    memory: StorageVerification | None = None
    progressing: bool = False
    failed: bool = False
    requeue_after: float | None = None


@dataclass(frozen=True)
class StorageVerdict:
    """What ``evaluate`` or ``evaluate_test`` decided.

    Apply first deletes the objects of write test ``delete`` (when set; best effort) and reports
    ``if_not_deleted`` should that fail. Otherwise it carries out ``actions`` and reports
    ``report``, or, when ``report`` is None, reads the objects of ``test`` and asks
    ``evaluate_test``.
    """

    selection: Selection
    report: Report | None
    delete: int | None = None
    if_not_deleted: Report | None = None
    test: StorageVerification | None = None
    actions: tuple[Action, ...] = ()
    keep_pvc: bool = False
    """Delete only the pods of ``delete``: the PVC keeps the result until the status holds it."""
    record_result: StorageVerification | None = None
    """Write this finished test's result onto its PVC before anything is deleted."""
    orphans: tuple[int, ...] = ()
    """Other write tests whose objects exist (a lost status write, a killed process): delete them."""

    def recorded(self, report: Report) -> StorageRecorded:
        """The facts to record along with ``report``."""
        found = self.selection.ok
        return StorageRecorded(
            storage_class_name=self.selection.name if found else None,
            storage_volume_binding_mode=self.selection.volume_binding_mode if found else None,
            storage_verification=report.memory,
        )

    def verdict(self, report: Report) -> Verdict:
        """StorageReady and the recorded storage facts, as ``report`` says."""
        return Verdict(
            conditions=[report.condition],
            recorded=Recorded.fragment(self.recorded(report).dump()),
            progressing=report.progressing,
            failed=report.failed,
            requeue_after=report.requeue_after,
        )


@dataclass(frozen=True)
class StoragePlan:
    """Both phases, as the facts decide them: ``first`` (``evaluate``) and, when it names a test
    to advance and that test's objects were read, ``second`` (``evaluate_test``)."""

    first: StorageVerdict
    second: StorageVerdict | None = None


def read_memory(value: Any) -> StorageVerification | None:
    """``status.recorded.storageVerification`` as the last pass left it; None when absent or unreadable."""
    if not isinstance(value, Mapping):
        return None
    try:
        memory: StorageVerification = StorageVerification.model_validate(value)
    except pydantic.ValidationError:
        return None
    return memory


def _phase(obj: Mapping[str, Any] | None) -> str | None:
    phase = ((obj or {}).get("status") or {}).get("phase")
    return str(phase) if phase else None


def _just_created(name: str) -> dict[str, Any]:
    """An object apply is about to create, as the API server returns it: Pending, not scheduled."""
    return {"metadata": {"name": name}}


def final_condition(selection: Selection, memory: StorageVerification, retry_at: datetime) -> Condition:
    """StorageReady for a finished test; a failure says when it runs again."""
    message = memory.message or ""
    if memory.result == VerificationResult.SUCCEEDED:
        return conditions.true(constants.STORAGE_READY, reasons.Storage.VERIFIED, message or selection.message)
    reason = (
        reasons.Storage.VERIFICATION_TIMED_OUT
        if memory.result == VerificationResult.TIMED_OUT
        else reasons.Storage.VERIFICATION_FAILED
    )
    return conditions.false(
        constants.STORAGE_READY,
        reason,
        f"{message} It runs again after {conditions.format_time(retry_at)}, or at once when spec.storage.verify is "
        "set to false and back to true.",
    )


def _cleanup(
    selection: Selection,
    memory: StorageVerification,
    cond: Condition,
    requeue: float | None,
    *,
    keep_pvc: bool = False,
) -> StorageVerdict:
    """Report ``memory`` finished, after deleting its objects (``cleanedUp`` says whether that worked).

    With ``keep_pvc`` (the test just ended and its PVC exists) the result goes onto the PVC and
    only the pods are deleted; ``cleanedUp`` stays false and the next pass deletes the PVC.
    """
    if keep_pvc:
        soon = SETTLE_SECONDS if requeue is None else min(requeue, SETTLE_SECONDS)
        pending = Report(cond, memory.model_copy(update={"cleaned_up": False}), requeue_after=soon)
        return StorageVerdict(
            selection, pending, delete=memory.attempt, if_not_deleted=pending, keep_pvc=True, record_result=memory
        )
    return StorageVerdict(
        selection,
        Report(cond, memory.model_copy(update={"cleaned_up": True}), requeue_after=requeue),
        delete=memory.attempt,
        if_not_deleted=Report(cond, memory.model_copy(update={"cleaned_up": False}), requeue_after=requeue),
    )


def evaluate(spec: Storage, facts: StorageFacts, *, now: datetime, dry_run: bool = False) -> StorageVerdict:
    """Phase one: the class, and what becomes of the write test (see the module docstring).

    The memory is first reconciled with the tests whose objects exist (``storage_live.adopt``);
    every other live test is named in ``orphans``.
    """
    selection = select_storage_class(facts.classes, spec.storage_class_name)
    if dry_run:
        return _evaluate(spec, selection, facts.memory, now=now, dry_run=True, namespace=facts.namespace)
    memory = facts.memory
    if selection.ok and spec.verify:
        memory = live.adopt(memory, facts.live, selection.name, facts.namespace)
    verdict = _evaluate(spec, selection, memory, now=now, dry_run=False, namespace=facts.namespace)
    keep = verdict.test.attempt if verdict.test is not None else verdict.delete
    return dataclasses.replace(verdict, orphans=live.orphans(facts.live, keep))


def settled(spec: Storage, facts: StorageFacts, *, now: datetime) -> bool:
    """The first phase decides without the live test objects: a finished verdict of this class in
    this namespace stands and its objects are gone, so nothing listed could change it (a test the
    status does not know can only be older than that verdict: its objects were orphans while the
    verdict's test ran). Then the step need not list them: a converged pass reads nothing more."""
    found = evaluate(spec, dataclasses.replace(facts, live=()), now=now)
    memory = found.report.memory if found.report is not None else None
    return (
        found.delete is None
        and found.test is None
        and memory is not None
        and memory.result in FINISHED
        and memory.cleaned_up is True
    )


def plan(
    spec: Storage,
    facts: StorageFacts,
    objects: WriteTestObjects | None,
    *,
    namespace: str,
    now: datetime,
    dry_run: bool = False,
) -> StoragePlan:
    """``evaluate``, then ``evaluate_test`` on the running test's ``objects`` (when read)."""
    first = evaluate(spec, facts, now=now, dry_run=dry_run)
    if first.report is not None or first.test is None or objects is None:
        return StoragePlan(first)
    return StoragePlan(first, evaluate_test(first.selection, first.test, objects, namespace=namespace, now=now))


@dataclass(frozen=True)
class Subject:
    """What the first phase's checks look at: the spec, the class found, the memory, the clock,
    and where the test runs (the platform's namespace)."""

    spec: Storage
    selection: Selection
    memory: StorageVerification | None
    now: datetime
    dry_run: bool = False
    namespace: str = ""

    @property
    def ran_here(self) -> bool:
        """The memory's test ran in this namespace (one without a namespace ran in the operator's)."""
        return self.memory is not None and (self.memory.namespace or "") == self.namespace


TEST_TURNED_OFF: Final = (
    " The write test is turned off (spec.storage.verify: false): that the class exists proves nothing about "
    "whether its volumes are provisioned, written and kept when pods are replaced; set verify to true to prove it."
)


def no_test_wanted(subject: Subject) -> StorageVerdict | None:
    """No test wanted (turned off) or possible (no class): report the class, and that its existence
    proves nothing when the test is off; remove a test still running, and remember it while that fails."""
    selection, memory = subject.selection, subject.memory
    if selection.ok and subject.spec.verify:
        return None
    if selection.ok:
        cond = conditions.true(constants.STORAGE_READY, selection.reason, selection.message + TEST_TURNED_OFF)
    else:
        cond = conditions.false(constants.STORAGE_READY, selection.reason, selection.message)
    if memory is None or not memory.leftover:
        return StorageVerdict(selection, Report(cond))
    if subject.dry_run:
        return StorageVerdict(selection, Report(cond, memory))
    return StorageVerdict(selection, Report(cond), delete=memory.attempt, if_not_deleted=Report(cond, memory))


def dry_run(subject: Subject) -> StorageVerdict | None:
    """A dry run reports the class: the write test does not run."""
    if not subject.dry_run:
        return None
    note = " The write test (spec.storage.verify) does not run in a dry run."
    selection = subject.selection
    return StorageVerdict(
        selection,
        Report(conditions.true(constants.STORAGE_READY, selection.reason, selection.message + note), subject.memory),
    )


def _standing(subject: Subject) -> tuple[StorageVerification, datetime] | None:
    """The memory's finished test of this class and when it may run again, while its verdict
    stands (a success until the class changes, a failure until then)."""
    memory, now = subject.memory, subject.now
    if memory is None or memory.storage_class_name != subject.selection.name or memory.result not in FINISHED:
        return None
    if not subject.ran_here:
        return None
    retry_at = (conditions.parse_time(memory.finished_at) or now) + RETRY_AFTER
    if memory.result == VerificationResult.SUCCEEDED or now < retry_at:
        return memory, retry_at
    return None


def verdict_stands(subject: Subject) -> StorageVerdict | None:
    """A finished test of this class stands (deleting its objects first when they are left)."""
    standing = _standing(subject)
    if standing is None:
        return None
    memory, retry_at = standing
    cond = final_condition(subject.selection, memory, retry_at)
    requeue = (
        None if memory.result == VerificationResult.SUCCEEDED else max((retry_at - subject.now).total_seconds(), 1.0)
    )
    if memory.cleaned_up is False:
        return _cleanup(subject.selection, memory, cond, requeue)
    return StorageVerdict(subject.selection, Report(cond, memory, requeue_after=requeue))


def other_class_running(subject: Subject) -> StorageVerdict | None:
    """A test of another class, or in another namespace (the operator's, before the test moved to
    the platform's), is running: drop it and start one for this class here."""
    memory = subject.memory
    if memory is None or memory.result != VerificationResult.RUNNING:
        return None
    if memory.storage_class_name == subject.selection.name and subject.ran_here:
        return None
    if_not_deleted = Report(
        conditions.false(
            constants.STORAGE_READY,
            reasons.Common.API_ERROR,
            "Could not delete the write test objects of the previously used StorageClass; it is retried on the "
            "next pass.",
        ),
        memory,
        progressing=True,
        failed=True,
        requeue_after=POLL_SECONDS,
    )
    return StorageVerdict(
        subject.selection, None, delete=memory.attempt, if_not_deleted=if_not_deleted, test=_new_test(subject)
    )


def run_the_test(subject: Subject) -> StorageVerdict | None:
    """Advance the running test of this class, or start one (a failure's retry is due)."""
    memory = subject.memory
    if memory is None or memory.result != VerificationResult.RUNNING:
        memory = _new_test(subject)
    return StorageVerdict(subject.selection, None, test=memory)


def _new_test(subject: Subject) -> StorageVerification:
    return StorageVerification(
        storage_class_name=subject.selection.name,
        attempt=int(subject.now.timestamp()),
        result=VerificationResult.RUNNING,
        started_at=conditions.format_time(subject.now),
        namespace=subject.namespace or None,
    )


FIRST_PHASE: Final = Chain[Subject, StorageVerdict](
    Check("no test wanted", no_test_wanted),
    Check("dry run", dry_run),
    Check("finished verdict stands", verdict_stands),
    Check("test of another class or namespace running", other_class_running),
    Check("run the test", run_the_test),
)
"""The first phase, in order: the first check that finds gives the verdict (the last always does)."""


def _evaluate(
    spec: Storage,
    selection: Selection,
    memory: StorageVerification | None,
    *,
    now: datetime,
    dry_run: bool,
    namespace: str = "",
) -> StorageVerdict:
    found = FIRST_PHASE.first(Subject(spec, selection, memory, now, dry_run, namespace))
    assert found is not None  # run_the_test always finds
    return found.value


@dataclass(frozen=True)
class RunningTest:
    """What the second phase's checks look at: the running test, its live objects, the clock."""

    selection: Selection
    memory: StorageVerification
    objects: WriteTestObjects
    namespace: str
    now: datetime

    @property
    def deadline(self) -> datetime:
        return (conditions.parse_time(self.memory.started_at) or self.now) + VERIFY_TIMEOUT

    @property
    def writer_phase(self) -> str | None:
        return _phase(self.objects.writer)

    @property
    def reader_phase(self) -> str | None:
        return _phase(self.objects.reader)


def _finish(test: RunningTest, result: VerificationResult, message: str) -> StorageVerdict:
    """The test ended with ``result``: record it (onto the PVC first, when there is one) and clean up."""
    now, selection = test.now, test.selection
    done = test.memory.model_copy(
        update={"result": result, "finished_at": conditions.format_time(now), "message": message}
    )
    requeue = None if result == VerificationResult.SUCCEEDED else RETRY_AFTER.total_seconds()
    cond = final_condition(selection, done, now + RETRY_AFTER)
    return _cleanup(selection, done, cond, requeue, keep_pvc=test.objects.pvc is not None)


def not_as_created(test: RunningTest) -> StorageVerdict | None:
    """A test object is not as the operator renders it (someone who may write in the platform's
    namespace changed or replaced it): the test proves nothing, and fails."""
    objects = test.objects
    for key, name, obj in (
        ("pvc", objects.pvc_name, objects.pvc),
        ("write", objects.writer_name, objects.writer),
        ("read", objects.reader_name, objects.reader),
    ):
        expected = objects.expected.get(key)
        if obj is None or expected is None:
            continue
        where = live.departure(obj, expected)
        if where is None:
            continue
        kind = "PVC" if key == "pvc" else "pod"
        return _finish(
            test,
            VerificationResult.FAILED,
            f"Storage write test on StorageClass {test.selection.name} failed: {kind} {name} in namespace "
            f"{test.namespace} is not as the operator created it ({where} differs). Whoever may write in the "
            "platform's namespace changed or replaced it, so the test proves nothing. The test objects were deleted.",
        )
    return None


def reader_succeeded(test: RunningTest) -> StorageVerdict | None:
    """The reader read the marker back: Verified."""
    if test.reader_phase != "Succeeded":
        return None
    objects = test.objects
    return _finish(
        test,
        VerificationResult.SUCCEEDED,
        f"{test.selection.message} Write test passed at {conditions.format_time(test.now)}: pod "
        f"{objects.writer_name} wrote a marker to PVC {objects.pvc_name} and a new pod, {objects.reader_name}, read "
        "it back; the test objects were deleted.",
    )


def reader_failed(test: RunningTest) -> StorageVerdict | None:
    """The reader did not read the marker back intact."""
    if test.reader_phase != "Failed":
        return None
    return _finish(
        test,
        VerificationResult.FAILED,
        f"Storage write test failed on StorageClass {test.selection.name}: the marker written by pod "
        f"{test.objects.writer_name} was not read back intact: {describe_pod(test.objects.reader)}. Volumes of this "
        "class may not keep data when pods are replaced; check the provisioner.",
    )


def writer_failed(test: RunningTest) -> StorageVerdict | None:
    """The writer could not write the marker."""
    if test.writer_phase != "Failed":
        return None
    return _finish(
        test,
        VerificationResult.FAILED,
        f"Storage write test failed on StorageClass {test.selection.name}: {describe_pod(test.objects.writer)} "
        f"while writing to PVC {test.objects.pvc_name}. Check that the volume is writable by a non-root pod "
        "(fsGroup 65534).",
    )


def deadline_passed(test: RunningTest) -> StorageVerdict | None:
    """The test ran VERIFY_TIMEOUT without an outcome: TimedOut, saying where it stands."""
    if test.now < test.deadline:
        return None
    objects = test.objects
    state = f"{describe_pvc(objects.pvc)}; {describe_pod(objects.reader or objects.writer)}"
    return _finish(
        test,
        VerificationResult.TIMED_OUT,
        f"Storage write test on StorageClass {test.selection.name} did not finish within "
        f"{int(VERIFY_TIMEOUT.total_seconds() // 60)} minutes (started {test.memory.started_at}): {state}. "
        "Check that the provisioner creates volumes and that pods in namespace "
        f"{test.namespace} (the platform's) can be scheduled and can pull {objects.image}. "
        "The test objects were deleted.",
    )


TEST_ENDINGS: Final = Chain[RunningTest, StorageVerdict](
    Check("objects not as created", not_as_created),
    Check("reader succeeded", reader_succeeded),
    Check("reader failed", reader_failed),
    Check("writer failed", writer_failed),
    Check("deadline passed", deadline_passed),
)
"""How the running test ends, in order: the first check that finds gives the verdict; none: it runs on."""


@dataclass(frozen=True)
class Progress:
    """Where a running test stands (a clause of the message) and the writes it needs next."""

    note: str
    actions: tuple[Action, ...] = ()


def _writes(test: RunningTest, *actions: Action) -> tuple[Action, ...]:
    """``actions``, after creating the PVC when it is absent."""
    return (Action.CREATE_PVC, *actions) if test.objects.pvc is None else actions


def _state(test: RunningTest, pod: Mapping[str, Any] | None) -> str:
    """Where the PVC (as apply leaves it: created when absent) and the pod at work stand."""
    objects = test.objects
    pvc = objects.pvc if objects.pvc is not None else _just_created(objects.pvc_name)
    return f"{describe_pvc(pvc)}; {describe_pod(pod)}"


def _reading_back(test: RunningTest) -> str:
    return f"pod {test.objects.writer_name} wrote the marker and was deleted; a new pod reads it back"


def pvc_deleting(test: RunningTest) -> Progress | None:
    """The PVC (of an earlier test) is still being deleted: wait for it, write nothing."""
    pvc = test.objects.pvc
    if pvc is None or not (pvc.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return Progress(f"waiting for PVC {test.objects.pvc_name} to finish deleting")


def writer_done(test: RunningTest) -> Progress | None:
    """The writer succeeded and no reader exists: note it on the PVC, delete the writer, create the reader."""
    if test.writer_phase != "Succeeded" or test.objects.reader is not None:
        return None
    mark = () if test.objects.written else (Action.MARK_WRITTEN,)
    return Progress(_reading_back(test), _writes(test, *mark, Action.DELETE_WRITER, Action.CREATE_READER))


def marker_written(test: RunningTest) -> Progress | None:
    """Both pods are gone but the PVC says the marker was written (killed between deleting the
    writer and creating the reader): create the reader, not a second writer."""
    objects = test.objects
    if objects.writer is not None or objects.reader is not None or not objects.written:
        return None
    return Progress(_reading_back(test), _writes(test, Action.CREATE_READER))


def nothing_written(test: RunningTest) -> Progress | None:
    """No pod yet: create the writer (and the PVC, when absent)."""
    objects = test.objects
    if objects.writer is not None or objects.reader is not None:
        return None
    return Progress(_state(test, _just_created(objects.writer_name)), _writes(test, Action.CREATE_WRITER))


def pods_at_work(test: RunningTest) -> Progress | None:
    """A pod is at work: wait for it (recreating the PVC when it is gone)."""
    return Progress(_state(test, test.objects.reader or test.objects.writer), _writes(test))


TEST_PROGRESS: Final = Chain[RunningTest, Progress](
    Check("PVC still deleting", pvc_deleting),
    Check("writer done: read back next", writer_done),
    Check("marker written, pods gone: read back", marker_written),
    Check("no pod yet: write", nothing_written),
    Check("pods at work: wait", pods_at_work),
)
"""Where a test that has not ended stands, in order: the first check that finds says (the last always does)."""


def _in_progress(test: RunningTest, progress: Progress) -> StorageVerdict:
    """StorageReady Unknown while the test runs, and the writes it needs next."""
    selection = test.selection
    wait_note = ""
    if selection.volume_binding_mode == "WaitForFirstConsumer":
        wait_note = (
            f" StorageClass {selection.name} binds a volume only once a pod using it is scheduled "
            "(WaitForFirstConsumer), so the pod must be scheduled first."
        )
    message = (
        f"{selection.summary} Write test in progress in namespace {test.namespace}: "
        f"{progress.note}.{wait_note} It times out at {conditions.format_time(test.deadline)}."
    )
    return StorageVerdict(
        selection,
        Report(
            conditions.unknown(constants.STORAGE_READY, reasons.Storage.VERIFICATION_PENDING, message),
            test.memory,
            progressing=True,
            requeue_after=POLL_SECONDS,
        ),
        actions=progress.actions,
    )


def evaluate_test(
    selection: Selection, memory: StorageVerification, objects: WriteTestObjects, *, namespace: str, now: datetime
) -> StorageVerdict:
    """Phase two: finish the running test ``memory`` (``TEST_ENDINGS``) or name its next writes
    (``TEST_PROGRESS``), from its live objects."""
    test = RunningTest(selection, memory, objects, namespace, now)
    ended = TEST_ENDINGS.first(test)
    if ended is not None:
        return ended.value
    progress = TEST_PROGRESS.first(test)
    assert progress is not None  # pods_at_work always finds
    return _in_progress(test, progress.value)
