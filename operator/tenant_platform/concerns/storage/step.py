"""StorageReady: the StorageClass the platform will use, proven by the write test.

Verify: the class named in ``spec.storage.storageClassName`` exists, or exactly one class is the
cluster default. Record: ``storageClassName`` and ``storageVolumeBindingMode``.

With ``spec.storage.verify: true`` (the default; false is an explicit opt-out, and StorageReady
then says that the class's existence proves nothing) the step runs the checklist's storage check
where the checklist runs it, in the platform's namespace (``spec.namespace``: its quotas, limits,
Pod Security level and pod guard apply to the test as to the platform): a small PVC, a pod that
writes a marker, then (once it has succeeded and is deleted) a second pod that reads the marker
back. StorageReady is True (``Verified``) only once that has passed.

It is a state machine driven by the live objects plus a memory kept in
``status.recorded.storageVerification`` ({storageClassName, attempt, result, startedAt, namespace,
finishedAt, message, cleanedUp}); concerns/storage/verdict.py decides every transition, purely:

- a test runs once per StorageClass: a success stands until the class changes or ``verify`` is
  turned off and on again (turning it off forgets the result);
- a failure (VerificationFailed, VerificationTimedOut) stands for RETRY_AFTER, then a new test runs;
- a test still unfinished VERIFY_TIMEOUT after it started fails with VerificationTimedOut (a
  cluster without a working provisioner or scheduler keeps it Pending for ever);
- the test objects are deleted when it ends (the pods at once; the PVC, which then carries the
  result, on the next pass, once the status holds it), when ``verify`` is turned off, and by ``cleanup`` when
  the TenantPlatform is deleted (they also carry an owner reference to the platform, so garbage
  collection removes what a failed cleanup left). They carry our labels (component
  ``storage-verify``) and names made of the platform's name, ``storage-`` and the attempt id (the
  Unix time the test started), so a new test never collides with the volume of an earlier one
  that is still being deleted.

The namespace is the tenant's: the tenant may create, change and delete objects there, ours
included. Nothing a tenant can write there makes StorageReady True: the memory lives in the
platform's status, a success noted on a PVC is proven again, and a PVC or pod that is not as we
render it fails the test (concerns/storage/live.py, ``departure``).

This module gathers (the classes, the memory and every write test whose objects exist; then,
when the pure first phase names a running test, its PVC and pods) and applies (deletes, creates,
annotations on the PVC); ``evaluate`` is the pure verdict once every write succeeded, ``apply``
returns the one the writes left (a failed deletion's fallback, an API error). The memory is
not the only record: each object carries its attempt id and the PVC the test's progress
(concerns/storage/manifests.py), so a status write that fails or a process killed mid-pass
neither leaks a test's objects nor runs a failed test twice (concerns/storage/live.py).
An API error while the test advances keeps the memory
(its attempt id names the objects already created) and is retried soon. In a dry run
(``tenant-platform check``) nothing is created or deleted; only the class is checked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.storage import StorageVerification
from tenant_platform.concerns.storage import manifests, verdict
from tenant_platform.concerns.storage.live import live_attempts
from tenant_platform.concerns.storage.verdict import Action, Report, StorageVerdict
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import (
    CleanupResult,
    StepContext,
    api_error_condition,
    labelled_platform,
    selector,
    stamp,
)
from tenant_platform.framework.contract import Action as ContractAction
from tenant_platform.framework.contract import Given
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj

COMPONENT = "storage"
MEMORY_KEY = "storageVerification"


def gather(ctx: StepContext) -> verdict.StorageFacts:
    """Every StorageClass, the write test's memory from the last status, and (outside a dry run,
    unless a finished verdict stands with its objects gone: ``verdict.settled``) every write test
    of this platform whose objects exist in the platform's namespace."""
    classes = ctx.kube.list("storage.k8s.io/v1", "StorageClass")
    memory = verdict.read_memory((ctx.platform.status.get("recorded") or {}).get(MEMORY_KEY))
    namespace = probe_namespace(ctx)
    facts = verdict.StorageFacts(classes=classes, memory=memory, namespace=namespace)
    spec = ctx.platform.spec.storage
    if ctx.dry_run or not (spec.verify or memory is not None) or verdict.settled(spec, facts, now=ctx.now):
        return facts
    label_selector = selector(ctx.platform.name, manifests.COMPONENT)
    pvcs = ctx.kube.list("v1", "PersistentVolumeClaim", namespace, label_selector=label_selector)
    pods = ctx.kube.list("v1", "Pod", namespace, label_selector=label_selector)
    return dataclasses.replace(facts, live=live_attempts(pvcs, pods))


def probe_namespace(ctx: StepContext) -> str:
    """Where the write test runs: the platform's namespace, as the checklist runs it."""
    return ctx.platform.spec.namespace


def _ours(obj: Obj, ctx: StepContext) -> Obj:
    """``obj`` with our labels and an ownerReference to the platform (when it lives in the same
    cluster): unlike the namespaces' lasting contents (``stamp``), a test object never outlives
    the platform, so garbage collection backs up ``cleanup``."""
    stamped = stamp(obj, ctx, manifests.COMPONENT)
    if ctx.management is None and ctx.platform.uid:
        stamped["metadata"]["ownerReferences"] = [ctx.owner_reference()]
    return stamped


def _rendered(ctx: StepContext, attempt: int, storage_class: str) -> dict[str, Obj]:
    """The test's objects as ``_act`` creates them (``pvc``, ``write``, ``read``)."""
    platform = ctx.platform
    common: dict[str, Any] = {"platform_name": platform.name, "namespace": probe_namespace(ctx), "attempt": attempt}
    rendered = {"pvc": manifests.render_pvc(**common, storage_class=storage_class)}
    for role in ("write", "read"):
        rendered[role] = manifests.render_pod(**common, platform_uid=platform.uid, role=role)
    return {key: _ours(obj, ctx) for key, obj in rendered.items()}


def gather_test(ctx: StepContext, attempt: int, storage_class: str) -> verdict.WriteTestObjects:
    """The PVC and pods of write test ``attempt`` (None where absent), and what we render for them."""
    platform = ctx.platform
    namespace = probe_namespace(ctx)
    pvc_name = manifests.pvc_name(platform.name, attempt)
    writer_name = manifests.pod_name(platform.name, attempt, "write")
    reader_name = manifests.pod_name(platform.name, attempt, "read")
    return verdict.WriteTestObjects(
        attempt=attempt,
        pvc_name=pvc_name,
        writer_name=writer_name,
        reader_name=reader_name,
        image=manifests.IMAGE,
        pvc=ctx.kube.get("v1", "PersistentVolumeClaim", pvc_name, namespace),
        writer=ctx.kube.get("v1", "Pod", writer_name, namespace),
        reader=ctx.kube.get("v1", "Pod", reader_name, namespace),
        expected=_rendered(ctx, attempt, storage_class),
    )


@dataclass(frozen=True)
class Gathered:
    """What one storage pass read: the classes, the memory and the live tests, and (when the
    first phase names a test to advance) that test's objects, or the error reading them."""

    facts: verdict.StorageFacts
    objects: verdict.WriteTestObjects | None = None
    read_error: errors.KubeError | None = None


def error_report(test: StorageVerification, exc: errors.KubeError) -> Report:
    """The test could not advance: keep the memory (its attempt id names the objects already
    created) and retry soon."""
    return Report(
        api_error_condition(constants.STORAGE_READY, exc, "run the storage write test"),
        test,
        progressing=True,
        failed=True,
        requeue_after=verdict.POLL_SECONDS,
    )


class StorageStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.STORAGE_READY,)

    def action(self, platform: TenantPlatform) -> ContractAction:
        return ContractAction(f"reconcile {self.name}", retry_soon=True)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """Nothing: the write test's objects are transient (created, then deleted, by the test)."""
        return []

    def gather(self, ctx: StepContext) -> Gathered:
        """The first phase's facts; then, when its (pure) verdict names a test to advance, that
        test's objects (an error reading them is a fact: the test is retried soon)."""
        facts = gather(ctx)
        first = verdict.evaluate(ctx.platform.spec.storage, facts, now=ctx.now, dry_run=ctx.dry_run)
        if first.report is not None or first.test is None:
            return Gathered(facts)
        try:
            return Gathered(facts, objects=gather_test(ctx, first.test.attempt, first.selection.name))
        except errors.KubeError as exc:
            return Gathered(facts, read_error=exc)

    @staticmethod
    def _plan(given: Given, facts: Gathered) -> verdict.StoragePlan:
        return verdict.plan(
            given.platform.spec.storage,
            facts.facts,
            facts.objects,
            namespace=given.platform.spec.namespace,
            now=given.now,
            dry_run=given.dry_run,
        )

    def evaluate(self, given: Given, facts: Gathered) -> Verdict:
        """StorageReady as it stands once every write the plan names has succeeded."""
        plan = self._plan(given, facts)
        first, second = plan.first, plan.second
        if first.report is not None:
            return first.verdict(first.report)
        assert first.test is not None
        if second is None or second.report is None:
            assert facts.read_error is not None
            return first.verdict(error_report(first.test, facts.read_error))
        return first.verdict(second.report)

    def apply(self, ctx: StepContext, facts: Gathered, verdict: Verdict) -> Verdict:
        """Carry out both phases (deletes best effort); the verdict as the writes left it: the
        plan's fallback report when a deletion failed, an API error when the test's writes did."""
        plan = self._plan(Given.of(ctx), facts)
        first = plan.first
        for orphan in first.orphans:
            self._try_delete(ctx, orphan)  # best effort: found again by the next pass's listing
        report = self._settle(ctx, first)
        if report is None:
            assert first.test is not None
            report = self._advance(ctx, plan, first.test, facts)
        return first.verdict(report)

    def _settle(self, ctx: StepContext, verdict: StorageVerdict) -> Report | None:
        """Record a result on the PVC (raises KubeError), then delete what the verdict names (best
        effort); its report, or the one for a failed deletion."""
        done = verdict.record_result
        if done is not None:
            notes = manifests.result_annotations(done.result, done.finished_at or "", done.message or "")
            self._annotate_pvc(ctx, done.attempt, notes)
        if verdict.delete is not None and not self._try_delete(ctx, verdict.delete, pods_only=verdict.keep_pvc):
            return verdict.if_not_deleted
        return verdict.report

    @staticmethod
    def _annotate_pvc(ctx: StepContext, attempt: int, annotations: dict[str, str]) -> None:
        name = manifests.pvc_name(ctx.platform.name, attempt)
        patch = {"metadata": {"annotations": annotations}}
        ctx.kube.merge_patch("v1", "PersistentVolumeClaim", name, patch, namespace=probe_namespace(ctx))

    def _advance(
        self, ctx: StepContext, plan: verdict.StoragePlan, test: StorageVerification, facts: Gathered
    ) -> Report:
        """Carry out what evaluate_test decided from the running test's objects."""
        if facts.objects is None or plan.second is None:
            assert facts.read_error is not None
            return error_report(test, facts.read_error)
        second = plan.second
        try:
            for action in second.actions:
                self._act(
                    ctx, action, facts.objects, storage_class=plan.first.selection.name, started_at=test.started_at
                )
            report = self._settle(ctx, second)
            assert report is not None
            return report
        except errors.KubeError as exc:
            # Keep the memory (the attempt id names the objects already created) and retry soon.
            return error_report(test, exc)

    def _act(
        self,
        ctx: StepContext,
        action: Action,
        objects: verdict.WriteTestObjects,
        *,
        storage_class: str,
        started_at: str,
    ) -> None:
        common: dict[str, Any] = {
            "platform_name": ctx.platform.name,
            "namespace": probe_namespace(ctx),
            "attempt": objects.attempt,
        }
        if action is Action.CREATE_PVC:
            pvc = manifests.render_pvc(**common, storage_class=storage_class, started_at=started_at)
            ctx.kube.create(_ours(pvc, ctx))
        elif action is Action.MARK_WRITTEN:
            self._annotate_pvc(ctx, objects.attempt, {manifests.WRITTEN_ANNOTATION: "true"})
        elif action is Action.DELETE_WRITER:
            uid = ((objects.writer or {}).get("metadata") or {}).get("uid")
            ctx.kube.delete("v1", "Pod", objects.writer_name, probe_namespace(ctx), uid=uid)
        else:
            role = "read" if action is Action.CREATE_READER else "write"
            pod = manifests.render_pod(**common, platform_uid=ctx.platform.uid, role=role)
            ctx.kube.create(_ours(pod, ctx))

    def _try_delete(self, ctx: StepContext, attempt: int, *, pods_only: bool = False) -> bool:
        """Delete one test's pods and PVC (only ours; absent is fine). False when the API refused."""
        namespace = probe_namespace(ctx)
        names = [
            ("Pod", manifests.pod_name(ctx.platform.name, attempt, "read")),
            ("Pod", manifests.pod_name(ctx.platform.name, attempt, "write")),
        ]
        if not pods_only:
            names.append(("PersistentVolumeClaim", manifests.pvc_name(ctx.platform.name, attempt)))
        ok = True
        for kind, name in names:
            try:
                live = ctx.kube.get("v1", kind, name, namespace)
                if live is None or live["metadata"].get("deletionTimestamp"):
                    continue
                if labelled_platform(live) != ctx.platform.name:
                    continue
                ctx.kube.delete("v1", kind, name, namespace, uid=live["metadata"].get("uid"))
            except errors.KubeError as exc:
                ctx.logger.warning("could not delete storage test %s %s/%s: %s", kind, namespace, name, exc)
                ok = False
        return ok

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete any write test left in the platform's namespace (garbage collection would too,
        by the owner reference, but only after the platform is gone)."""
        namespace = probe_namespace(ctx)
        label_selector = selector(ctx.platform.name, manifests.COMPONENT)
        waiting: list[str] = []
        for kind in ("Pod", "PersistentVolumeClaim"):
            try:
                for item in ctx.kube.list("v1", kind, namespace, label_selector=label_selector):
                    meta = item["metadata"]
                    if not meta.get("deletionTimestamp"):
                        ctx.kube.delete("v1", kind, meta["name"], namespace, uid=meta.get("uid"))
            except errors.KubeError as exc:
                waiting.append(f"{kind} in {namespace}: {exc.message or exc}")
        if waiting:
            return CleanupResult(False, "Could not delete the storage write test: " + "; ".join(waiting))
        return CleanupResult(True)


STEP = StorageStep()
