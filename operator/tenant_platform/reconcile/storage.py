"""StorageReady: the StorageClass the platform will use, and the optional write test.

Verify: the class named in ``spec.storage.storageClassName`` exists, or exactly one class is the
cluster default. Record: ``storageClassName`` and ``storageVolumeBindingMode``.

With ``spec.storage.verify: true`` the step also runs the checklist's storage check in the tenant
namespace: a small PVC, a pod that writes a marker, then (once it has succeeded and is deleted) a
second pod that reads the marker back. It is a state machine driven by the live objects plus a
memory kept in ``status.recorded.storageVerification`` ({storageClassName, attempt, result,
startedAt, finishedAt, message}):

- a test runs once per StorageClass: a success stands until the class changes or ``verify`` is
  turned off and on again (turning it off forgets the result);
- a failure (VerificationFailed, VerificationTimedOut) stands for RETRY_AFTER, then a new test runs;
- a test still unfinished VERIFY_TIMEOUT after it started fails with VerificationTimedOut (a
  cluster without a working provisioner or scheduler keeps it Pending for ever);
- the test objects are deleted when it ends, when ``verify`` is turned off, and by ``cleanup`` when
  the TenantPlatform is deleted (objects in platform namespaces carry no owner reference, see
  base.stamp). They carry the component label ``storage-verify`` and names ending in
  the attempt id (the Unix time the test started), so a new test never collides with the volume
  of an earlier one that is still being deleted.

In a dry run (``tenant-platform check``) nothing is created or deleted; only the class is checked.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile.base import (
    CleanupResult,
    StepContext,
    StepResult,
    api_error_condition,
    labelled_platform,
    selector,
    stamp,
)
from tenant_platform.render import storage as render_storage
from tenant_platform.status import conditions
from tenant_platform.status import storage as storage_status

COMPONENT = "storage"
VERIFY_TIMEOUT = timedelta(minutes=10)
RETRY_AFTER = timedelta(hours=1)
POLL_SECONDS = 15.0

REASON_VERIFIED = "Verified"
REASON_PENDING = "VerificationPending"
REASON_FAILED = "VerificationFailed"
REASON_TIMED_OUT = "VerificationTimedOut"

RESULT_RUNNING = "Running"
RESULT_SUCCEEDED = "Succeeded"
RESULT_FAILED = "Failed"
RESULT_TIMED_OUT = "TimedOut"

MEMORY_KEY = "storageVerification"


def _stamp_time(moment: datetime) -> str:
    return conditions.format_time(moment)


class StorageStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.STORAGE_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """Nothing: the write test's objects are transient (created, then deleted, by the test)."""
        return []

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        classes = ctx.kube.list("storage.k8s.io/v1", "StorageClass")
        selection = storage_status.select_storage_class(classes, platform.spec.storage.storage_class_name)
        memory = (platform.status.get("recorded") or {}).get(MEMORY_KEY)
        memory = dict(memory) if isinstance(memory, dict) else None

        recorded: dict[str, Any] = {}
        if selection.ok:
            recorded["storageClassName"] = selection.name
            recorded["storageVolumeBindingMode"] = selection.volume_binding_mode
        if not selection.ok or not platform.spec.storage.verify:
            # No test wanted (or possible): remove one still running; remember it if that failed.
            leftover = self._discard(ctx, memory)
            if leftover:
                recorded[MEMORY_KEY] = leftover
            verdict = conditions.true if selection.ok else conditions.false
            return StepResult(
                conditions=[verdict(constants.STORAGE_READY, selection.reason, selection.message)],
                recorded=recorded,
            )
        if ctx.dry_run:
            if memory:
                recorded[MEMORY_KEY] = memory
            return StepResult(
                conditions=[
                    conditions.true(
                        constants.STORAGE_READY,
                        selection.reason,
                        selection.message + " The write test (spec.storage.verify) does not run in a dry run.",
                    )
                ],
                recorded=recorded,
            )
        return self._verify(ctx, selection, memory, recorded)

    # ---- the write test -----------------------------------------------------------------------

    def _verify(
        self,
        ctx: StepContext,
        selection: storage_status.Selection,
        memory: dict[str, Any] | None,
        recorded: dict[str, Any],
    ) -> StepResult:
        matches = bool(memory and memory.get("storageClassName") == selection.name)
        if memory and matches and memory.get("result") in (RESULT_SUCCEEDED, RESULT_FAILED, RESULT_TIMED_OUT):
            finished = conditions.parse_time(memory.get("finishedAt")) or ctx.now
            retry_at = finished + RETRY_AFTER
            if memory["result"] == RESULT_SUCCEEDED or ctx.now < retry_at:
                if not memory.get("cleanedUp", True):
                    memory["cleanedUp"] = self._try_delete(ctx, int(memory.get("attempt") or 0))
                recorded[MEMORY_KEY] = memory
                return StepResult(
                    conditions=[self._final_condition(selection, memory, retry_at)],
                    recorded=recorded,
                    requeue_after=None
                    if memory["result"] == RESULT_SUCCEEDED
                    else max((retry_at - ctx.now).total_seconds(), 1.0),
                )
            memory = None
        if memory and memory.get("result") == RESULT_RUNNING and not matches:
            # A test of another class: drop it and start over.
            if not self._try_delete(ctx, int(memory.get("attempt") or 0)):
                recorded[MEMORY_KEY] = memory
                return self._api_trouble(recorded, "delete the write test objects of the previously used StorageClass")
            memory = None
        if memory is None or memory.get("result") != RESULT_RUNNING:
            memory = {
                "storageClassName": selection.name,
                "attempt": int(ctx.now.timestamp()),
                "result": RESULT_RUNNING,
                "startedAt": _stamp_time(ctx.now),
            }
        try:
            return self._advance(ctx, selection, memory, recorded)
        except errors.KubeError as exc:
            # Keep the memory (the attempt id names the objects already created) and retry soon.
            recorded[MEMORY_KEY] = memory
            return StepResult(
                conditions=[api_error_condition(constants.STORAGE_READY, exc, "run the storage write test")],
                recorded=recorded,
                progressing=True,
                failed=True,
                requeue_after=POLL_SECONDS,
            )

    def _final_condition(
        self, selection: storage_status.Selection, memory: dict[str, Any], retry_at: datetime
    ) -> conditions.Condition:
        message = str(memory.get("message") or "")
        if memory["result"] == RESULT_SUCCEEDED:
            return conditions.true(constants.STORAGE_READY, REASON_VERIFIED, message or selection.message)
        reason = REASON_TIMED_OUT if memory["result"] == RESULT_TIMED_OUT else REASON_FAILED
        return conditions.false(
            constants.STORAGE_READY,
            reason,
            f"{message} It runs again after {_stamp_time(retry_at)}, or at once when spec.storage.verify is set to "
            "false and back to true.",
        )

    def _advance(
        self,
        ctx: StepContext,
        selection: storage_status.Selection,
        memory: dict[str, Any],
        recorded: dict[str, Any],
    ) -> StepResult:
        platform = ctx.platform
        kube = ctx.kube
        namespace = platform.spec.namespace
        attempt = int(memory["attempt"])
        pvc_name = render_storage.pvc_name(platform.name, attempt)
        writer_name = render_storage.pod_name(platform.name, attempt, "write")
        reader_name = render_storage.pod_name(platform.name, attempt, "read")

        pvc = kube.get("v1", "PersistentVolumeClaim", pvc_name, namespace)
        writer = kube.get("v1", "Pod", writer_name, namespace)
        reader = kube.get("v1", "Pod", reader_name, namespace)
        started = conditions.parse_time(memory.get("startedAt")) or ctx.now
        deadline = started + VERIFY_TIMEOUT

        def finish(result: str, message: str) -> StepResult:
            done = {
                **memory,
                "result": result,
                "finishedAt": _stamp_time(ctx.now),
                "message": message,
                "cleanedUp": self._try_delete(ctx, attempt),
            }
            recorded[MEMORY_KEY] = done
            return StepResult(
                conditions=[self._final_condition(selection, done, ctx.now + RETRY_AFTER)],
                recorded=recorded,
                requeue_after=None if result == RESULT_SUCCEEDED else RETRY_AFTER.total_seconds(),
            )

        reader_phase = (reader or {}).get("status", {}).get("phase")
        writer_phase = (writer or {}).get("status", {}).get("phase")
        if reader_phase == "Succeeded":
            return finish(
                RESULT_SUCCEEDED,
                f"{selection.message} Write test passed at {_stamp_time(ctx.now)}: pod {writer_name} wrote a marker "
                f"to PVC {pvc_name} and a new pod, {reader_name}, read it back; the test objects were deleted.",
            )
        if reader_phase == "Failed":
            return finish(
                RESULT_FAILED,
                f"Storage write test failed on StorageClass {selection.name}: the marker written by pod "
                f"{writer_name} was not read back intact: {storage_status.describe_pod(reader)}. Volumes of "
                "this class may not keep data when pods are replaced; check the provisioner.",
            )
        if writer_phase == "Failed":
            return finish(
                RESULT_FAILED,
                f"Storage write test failed on StorageClass {selection.name}: {storage_status.describe_pod(writer)} "
                f"while writing to PVC {pvc_name}. Check that the volume is writable by a non-root pod "
                "(fsGroup 65534).",
            )
        if ctx.now >= deadline:
            state = f"{storage_status.describe_pvc(pvc)}; {storage_status.describe_pod(reader or writer)}"
            return finish(
                RESULT_TIMED_OUT,
                f"Storage write test on StorageClass {selection.name} did not finish within "
                f"{int(VERIFY_TIMEOUT.total_seconds() // 60)} minutes (started {memory.get('startedAt')}): {state}. "
                "Check that the provisioner creates volumes and that pods in the tenant namespace can be "
                f"scheduled and can pull {render_storage.IMAGE}. The test objects were deleted.",
            )

        common: dict[str, Any] = {"platform_name": platform.name, "namespace": namespace, "attempt": attempt}
        step_note = ""
        if pvc is not None and pvc["metadata"].get("deletionTimestamp"):
            step_note = f"waiting for PVC {pvc_name} to finish deleting"
        else:
            if pvc is None:
                pvc = kube.create(
                    stamp(
                        render_storage.render_pvc(**common, storage_class=selection.name), ctx, render_storage.COMPONENT
                    )
                )
            if writer_phase == "Succeeded" and reader is None:
                assert writer is not None
                kube.delete("v1", "Pod", writer_name, namespace, uid=writer["metadata"].get("uid"))
                reader = kube.create(self._pod(ctx, common, "read"))
                step_note = f"pod {writer_name} wrote the marker and was deleted; a new pod reads it back"
            elif writer is None and reader is None:
                writer = kube.create(self._pod(ctx, common, "write"))
        if not step_note:
            step_note = f"{storage_status.describe_pvc(pvc)}; {storage_status.describe_pod(reader or writer)}"
        wait_note = ""
        if selection.volume_binding_mode == "WaitForFirstConsumer":
            wait_note = (
                f" StorageClass {selection.name} binds a volume only once a pod using it is scheduled "
                "(WaitForFirstConsumer), so the pod must be scheduled first."
            )
        recorded[MEMORY_KEY] = memory
        message = (
            f"{selection.summary} Write test in progress in namespace {namespace}: "
            f"{step_note}.{wait_note} It times out at {_stamp_time(deadline)}."
        )
        return StepResult(
            conditions=[conditions.unknown(constants.STORAGE_READY, REASON_PENDING, message)],
            recorded=recorded,
            progressing=True,
            requeue_after=POLL_SECONDS,
        )

    def _api_trouble(self, recorded: dict[str, Any], doing: str) -> StepResult:
        return StepResult(
            conditions=[
                conditions.false(
                    constants.STORAGE_READY,
                    constants.REASON_API_ERROR,
                    f"Could not {doing}; it is retried on the next pass.",
                )
            ],
            recorded=recorded,
            progressing=True,
            failed=True,
            requeue_after=POLL_SECONDS,
        )

    def _pod(self, ctx: StepContext, common: dict[str, Any], role: str) -> Obj:
        pod = render_storage.render_pod(**common, platform_uid=ctx.platform.uid, role=role)
        return stamp(pod, ctx, render_storage.COMPONENT)

    def _try_delete(self, ctx: StepContext, attempt: int) -> bool:
        """Delete one test's pods and PVC (only ours; absent is fine). False when the API refused."""
        namespace = ctx.platform.spec.namespace
        names = [
            ("Pod", render_storage.pod_name(ctx.platform.name, attempt, "read")),
            ("Pod", render_storage.pod_name(ctx.platform.name, attempt, "write")),
            ("PersistentVolumeClaim", render_storage.pvc_name(ctx.platform.name, attempt)),
        ]
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

    def _discard(self, ctx: StepContext, memory: dict[str, Any] | None) -> dict[str, Any] | None:
        """Remove a test still running (finished tests cleaned up already). Returns the memory to keep:
        None when nothing is left behind."""
        if not memory:
            return None
        leftover = memory.get("result") == RESULT_RUNNING or not memory.get("cleanedUp", True)
        if not leftover:
            return None
        if ctx.dry_run:
            return memory
        if self._try_delete(ctx, int(memory.get("attempt") or 0)):
            return None
        return memory

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete any write test left in the tenant namespace (objects there carry no owner
        reference, so garbage collection would not remove them with the TenantPlatform)."""
        namespace = ctx.platform.spec.namespace
        label_selector = selector(ctx.platform.name, render_storage.COMPONENT)
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
