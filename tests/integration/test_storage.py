"""StorageReady against the real API server: class selection, and the PVC + pod write test.

There is no kubelet, scheduler or provisioner: the write test's PVC and pods stay Pending, which
is exactly the "report progress, then time out" path. To see the success path the test plays the
kubelet and sets the pods' phase through the status subresource.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from facts_support import create_namespace, get_platform, kube_for, patch_spec, reconcile_once, run_step
from tests.support import condition, platform_body

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.storage import manifests, step, verdict
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, stamp
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane

GA = "storageclass.kubernetes.io/is-default-class"
BETA = "storageclass.beta.kubernetes.io/is-default-class"
SELECTOR = f"{constants.LABEL_COMPONENT}={manifests.COMPONENT}"
OPERATOR_NAMESPACE = Settings().operator_namespace
"""Where the write test runs (the operator's own namespace, see concerns/storage/step.py)."""


@pytest.fixture
def kube(crd: Kube) -> Kube:
    """The session's seeded control plane with our CRD (admin client), with the operator's namespace."""
    create_namespace(crd, OPERATOR_NAMESPACE)
    return crd


@pytest.fixture(scope="module")
def bare() -> Iterator[Kube]:
    """A second, empty control plane whose StorageClasses this module may change freely."""
    with ControlPlane(controller_manager=False) as cp:
        yield kube_for(cp)


def storage_class(name: str, *, annotation: str | None = None, mode: str = "Immediate") -> dict:
    meta: dict = {"name": name}
    if annotation:
        meta["annotations"] = {annotation: "true"}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": "example.com/test",
        "volumeBindingMode": mode,
    }


def test_the_seeded_default_class_is_found_and_binding_mode_noted(kube: Kube, unique_name: str) -> None:
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name))
    cond = result.conditions[0]
    assert (cond.type, cond.status, cond.reason) == (constants.STORAGE_READY, "True", "StorageClassFound")
    assert "local-path (the cluster default" in cond.message
    assert "WaitForFirstConsumer" in cond.message
    assert result.recorded == {"storageClassName": "local-path", "storageVolumeBindingMode": "WaitForFirstConsumer"}


def test_a_named_class_is_used_even_when_not_default(kube: Kube, unique_name: str) -> None:
    kube.create(storage_class(unique_name))
    try:
        body = platform_body(unique_name, unique_name, storage={"storageClassName": unique_name})
        result = run_step(step.STEP, kube, body)
    finally:
        kube.delete("storage.k8s.io/v1", "StorageClass", unique_name)
    assert result.conditions[0].status == "True"
    assert result.recorded["storageClassName"] == unique_name
    assert result.recorded["storageVolumeBindingMode"] == "Immediate"


def test_a_missing_named_class_fails_naming_the_field(kube: Kube, unique_name: str) -> None:
    body = platform_body(unique_name, unique_name, storage={"storageClassName": "no-such-class"})
    result = run_step(step.STEP, kube, body)
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("False", "StorageClassNotFound")
    assert "no-such-class" in cond.message and "spec.storage.storageClassName" in cond.message
    assert "local-path" in cond.message  # what exists
    assert "storageClassName" not in result.recorded


@pytest.mark.cluster
def test_no_default_then_ambiguous_defaults(bare: Kube) -> None:
    body = platform_body("tp", "tenant")
    kube = bare
    kube.create(storage_class("plain"))
    result = run_step(step.STEP, kube, body)
    assert (result.conditions[0].status, result.conditions[0].reason) == ("False", "NoDefaultStorageClass")
    assert "plain" in result.conditions[0].message

    kube.create(storage_class("fast", annotation=GA))
    kube.create(storage_class("old", annotation=BETA))  # the beta annotation counts too
    result = run_step(step.STEP, kube, body)
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("False", "AmbiguousDefaultStorageClass")
    assert "fast, old" in cond.message

    kube.delete("storage.k8s.io/v1", "StorageClass", "fast")
    result = run_step(step.STEP, kube, body)
    assert (result.conditions[0].status, result.recorded["storageClassName"]) == ("True", "old")


def verify_objects(kube: Kube, platform: str) -> tuple[list[dict], list[dict]]:
    """(PVCs, pods) of ``platform``'s write test that are not being deleted (in the operator's namespace)."""
    selector = f"{SELECTOR},{constants.LABEL_PLATFORM}={platform}"
    pvcs = kube.list("v1", "PersistentVolumeClaim", OPERATOR_NAMESPACE, label_selector=selector)
    pods = kube.list("v1", "Pod", OPERATOR_NAMESPACE, label_selector=selector)
    live = [o for o in pvcs if not o["metadata"].get("deletionTimestamp")]
    return live, [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def set_phase(kube: Kube, pod: dict, phase: str) -> None:
    """Play the kubelet: report the pod's phase."""
    meta = pod["metadata"]
    kube.merge_patch(
        "v1", "Pod", meta["name"], {"status": {"phase": phase}}, namespace=meta["namespace"], subresource="status"
    )


def test_write_test_pending_then_verified_and_cleaned_up(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})

    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("Unknown", "VerificationPending")
    assert "WaitForFirstConsumer" in cond["message"] and "scheduled" in cond["message"]
    assert "times out at" in cond["message"]
    assert outcome.results["storage"].progressing
    pvcs, pods = verify_objects(kube, unique_name)
    assert len(pvcs) == 1 and len(pods) == 1
    writer = pods[0]
    assert writer["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    assert writer["metadata"]["labels"][manifests.ROLE_LABEL] == "write"
    # In the operator's namespace, never the tenant's: owned by the platform (garbage collection
    # backs up cleanup), and nothing of the test is written where the tenant lives.
    assert writer["metadata"]["namespace"] == OPERATOR_NAMESPACE
    assert [o["name"] for o in writer["metadata"]["ownerReferences"]] == [unique_name]
    assert kube.list("v1", "Pod", ns, label_selector=SELECTOR) == []
    assert kube.list("v1", "PersistentVolumeClaim", ns, label_selector=SELECTOR) == []
    assert pvcs[0]["spec"]["storageClassName"] == "local-path"
    memory = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    assert memory["result"] == "Running"

    # A second pass while nothing moves creates nothing new.
    reconcile_once(kube, unique_name)
    assert [p["metadata"]["uid"] for p in verify_objects(kube, unique_name)[1]] == [writer["metadata"]["uid"]]

    # The writer finished: it is replaced by a reader pod on the same PVC.
    set_phase(kube, writer, "Succeeded")
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert cond["reason"] == "VerificationPending" and "reads it back" in cond["message"]
    pvcs, pods = verify_objects(kube, unique_name)
    assert [p["metadata"]["labels"][manifests.ROLE_LABEL] for p in pods] == ["read"]
    assert pods[0]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == pvcs[0]["metadata"]["name"]

    # The reader found the marker: verified; the result goes onto the PVC and the pods are deleted,
    # then (next pass, once the status holds the result) the PVC.
    set_phase(kube, pods[0], "Succeeded")
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("True", "Verified")
    assert outcome.requeue_after is not None and outcome.requeue_after <= verdict.SETTLE_SECONDS
    pvcs, pods = verify_objects(kube, unique_name)
    assert pods == [] and pvcs[0]["metadata"]["annotations"][manifests.RESULT_ANNOTATION] == "Succeeded"
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) == ([], [])
    memory = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    assert (memory["result"], memory["cleanedUp"]) == ("Succeeded", True)

    # The success stands: later passes start no new test.
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "Verified"
    assert verify_objects(kube, unique_name) == ([], [])

    # Turning verify off forgets the result.
    patch_spec(kube, unique_name, {"storage": {"verify": False}})
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "StorageClassFound"
    assert "storageVerification" not in outcome.status["recorded"]


def test_verify_off_and_on_again_runs_a_new_test(kube: Kube, make_platform: Any, unique_name: str) -> None:
    """The forgotten result must also leave the live status, or turning verify back on would
    find the old success. (Needs status writes to remove keys nested in status.recorded.)"""
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})
    reconcile_once(kube, unique_name)
    set_phase(kube, verify_objects(kube, unique_name)[1][0], "Succeeded")
    reconcile_once(kube, unique_name)
    set_phase(kube, verify_objects(kube, unique_name)[1][0], "Succeeded")
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "Verified"
    reconcile_once(kube, unique_name)

    patch_spec(kube, unique_name, {"storage": {"verify": False}})
    reconcile_once(kube, unique_name)
    assert "storageVerification" not in get_platform(kube, unique_name)["status"]["recorded"]
    assert not reconcile_once(kube, unique_name).status_written  # converged: no write per pass

    patch_spec(kube, unique_name, {"storage": {"verify": True}})
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "VerificationPending"
    assert len(verify_objects(kube, unique_name)[1]) == 1


def test_a_failed_read_back_fails_the_condition(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})
    reconcile_once(kube, unique_name)
    set_phase(kube, verify_objects(kube, unique_name)[1][0], "Succeeded")
    reconcile_once(kube, unique_name)
    set_phase(kube, verify_objects(kube, unique_name)[1][0], "Failed")
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("False", "VerificationFailed")
    assert "not read back intact" in cond["message"] and "runs again after" in cond["message"]
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) == ([], [])
    # Within the retry interval the failure stands and nothing is created.
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) == ([], [])


def test_a_test_that_never_finishes_times_out_and_cleans_up(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})
    start = datetime.now(UTC)
    reconcile_once(kube, unique_name, now=start)
    assert len(verify_objects(kube, unique_name)[1]) == 1

    outcome = reconcile_once(kube, unique_name, now=start + verdict.VERIFY_TIMEOUT - timedelta(seconds=1))
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "VerificationPending"

    outcome = reconcile_once(kube, unique_name, now=start + verdict.VERIFY_TIMEOUT + timedelta(seconds=1))
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("False", "VerificationTimedOut")
    assert "did not finish within 10 minutes" in cond["message"]
    assert "is Pending" in cond["message"]
    reconcile_once(kube, unique_name, now=start + verdict.VERIFY_TIMEOUT + timedelta(seconds=2))
    assert verify_objects(kube, unique_name) == ([], [])

    # After the retry interval a new test starts.
    later = start + verdict.VERIFY_TIMEOUT + verdict.RETRY_AFTER + timedelta(seconds=2)
    outcome = reconcile_once(kube, unique_name, now=later)
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "VerificationPending"
    assert len(verify_objects(kube, unique_name)[1]) == 1


def test_turning_verify_off_mid_test_deletes_the_test_objects(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) != ([], [])
    patch_spec(kube, unique_name, {"storage": {"verify": False}})
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.STORAGE_READY)["status"] == "True"
    assert verify_objects(kube, unique_name) == ([], [])
    assert "storageVerification" not in outcome.status["recorded"]


def test_dry_run_never_creates_the_test_objects(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    body = make_platform(unique_name, ns, storage={"verify": True})
    before = kube.counter.snapshot()[1]
    result = run_step(step.STEP, kube, body, dry_run=True)
    assert kube.counter.snapshot()[1] == before
    assert result.conditions[0].status == "True"
    assert "does not run in a dry run" in result.conditions[0].message
    assert verify_objects(kube, unique_name) == ([], [])


def test_cleanup_on_deletion_removes_a_running_test(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) != ([], [])
    ctx = StepContext(
        platform=TenantPlatform.from_body(get_platform(kube, unique_name)),
        kube=kube,
        settings=Settings(),
        now=datetime.now(UTC),
    )
    assert step.STEP.cleanup(ctx).done
    assert verify_objects(kube, unique_name) == ([], [])
    assert step.STEP.cleanup(ctx).done  # idempotent


def lose_status(kube: Kube, name: str, recorded: dict[str, Any] | None) -> None:
    """Put ``status.recorded.storageVerification`` back as it was: the pass's status write was lost."""
    kube.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        name,
        {"status": {"recorded": {"storageVerification": recorded}}},
        subresource="status",
    )


def test_a_lost_status_write_neither_leaks_nor_reruns_the_test(
    kube: Kube, make_platform: Any, unique_name: str
) -> None:
    """After every pass the status write is undone (the process died before it, or it failed): the
    next pass goes on with the test its objects describe; one PVC and one pod at a time, the test
    runs once, and its PVC is deleted only once the status holds the result."""
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage={"verify": True})

    reconcile_once(kube, unique_name)
    pvcs, pods = verify_objects(kube, unique_name)
    attempt = pvcs[0]["metadata"]["labels"][manifests.ATTEMPT_LABEL]
    assert [p["metadata"]["labels"][manifests.ATTEMPT_LABEL] for p in pods] == [attempt]
    uids = [pvcs[0]["metadata"]["uid"], pods[0]["metadata"]["uid"]]
    lose_status(kube, unique_name, None)
    # A later second (a new attempt id if a new test were started): the same test goes on.
    reconcile_once(kube, unique_name, now=datetime.now(UTC) + timedelta(seconds=5))
    pvcs, pods = verify_objects(kube, unique_name)
    assert [pvcs[0]["metadata"]["uid"], *(p["metadata"]["uid"] for p in pods)] == uids
    memory = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    assert str(memory["attempt"]) == attempt

    # The writer succeeded; the pass notes it on the PVC, deletes the writer, creates the reader:
    # undo the status, and delete the reader as if the process died before creating it.
    set_phase(kube, pods[0], "Succeeded")
    before = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    reconcile_once(kube, unique_name)
    lose_status(kube, unique_name, before)
    for pod in verify_objects(kube, unique_name)[1]:
        kube.delete("v1", "Pod", pod["metadata"]["name"], OPERATOR_NAMESPACE)
    assert verify_objects(kube, unique_name)[1] == []
    reconcile_once(kube, unique_name)
    pvcs, pods = verify_objects(kube, unique_name)
    assert [p["metadata"]["labels"][manifests.ROLE_LABEL] for p in pods] == ["read"], "no second writer"

    # The reader succeeded: the result goes onto the PVC; the status write is lost again.
    set_phase(kube, pods[0], "Succeeded")
    before = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    reconcile_once(kube, unique_name)
    lose_status(kube, unique_name, before)
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("True", "Verified"), cond
    assert verify_objects(kube, unique_name) == ([], [])
    memory = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    assert (str(memory["attempt"]), memory["result"], memory["cleanedUp"]) == (attempt, "Succeeded", True)


def test_objects_of_an_unrecorded_older_test_are_deleted(kube: Kube, make_platform: Any, unique_name: str) -> None:
    """Objects of a test nobody recorded (another attempt, e.g. killed before its status write and
    superseded) are found by their labels and deleted; the recorded test goes on."""
    ns = unique_name
    create_namespace(kube, ns)
    body = make_platform(unique_name, ns, storage={"verify": True})
    reconcile_once(kube, unique_name)
    attempt = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]["attempt"]
    platform = TenantPlatform.from_body(get_platform(kube, unique_name))
    ctx = StepContext(platform=platform, kube=kube, settings=Settings(), now=datetime.now(UTC))
    stray = manifests.render_pvc(
        platform_name=unique_name, namespace=OPERATOR_NAMESPACE, attempt=12345, storage_class="other-class"
    )
    kube.create(stamp(stray, ctx, manifests.COMPONENT))
    assert len(verify_objects(kube, unique_name)[0]) == 2
    reconcile_once(kube, unique_name)
    pvcs, pods = verify_objects(kube, unique_name)
    assert [p["metadata"]["name"] for p in pvcs] == [manifests.pvc_name(unique_name, attempt)]
    assert len(pods) == 1 and body["metadata"]["name"] == unique_name
