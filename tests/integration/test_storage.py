"""StorageReady against the real API server: class selection, and the PVC + pod write test.

The write test is on by default and runs in the platform's namespace. There is no kubelet,
scheduler or provisioner; the session plays them for the seeded class ``local-path`` only
(testing/kubelet.py). Most tests here name ``unplayed``, a class of an absent provisioner: its PVC
and pods stay Pending, which is exactly the "report progress, then time out" path, and the test
plays the kubelet itself (the pods' phase through the status subresource) to see the rest. The
tenant's tests, as the installer identity (``admin`` in the namespace), try to make StorageReady
True with objects of their own or by changing ours.
"""

from __future__ import annotations

import time
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
from tenant_platform.testing.wait import wait_for

GA = "storageclass.kubernetes.io/is-default-class"
BETA = "storageclass.beta.kubernetes.io/is-default-class"
SELECTOR = f"{constants.LABEL_COMPONENT}={manifests.COMPONENT}"
OPERATOR_NAMESPACE = Settings().operator_namespace
"""Where the write test ran before it moved to the platform's namespace."""
UNPLAYED = "unplayed"
"""A WaitForFirstConsumer class whose provisioner nobody plays: the test plays the kubelet."""
VERIFY = {"verify": True, "storageClassName": UNPLAYED}


@pytest.fixture
def kube(crd: Kube) -> Kube:
    """The session's seeded control plane with our CRD (admin client), the operator's namespace
    and the class ``unplayed``."""
    create_namespace(crd, OPERATOR_NAMESPACE)
    if crd.get("storage.k8s.io/v1", "StorageClass", UNPLAYED) is None:
        crd.create(storage_class(UNPLAYED, mode="WaitForFirstConsumer", provisioner="example.com/absent"))
    return crd


@pytest.fixture(scope="module")
def bare() -> Iterator[Kube]:
    """A second, empty control plane whose StorageClasses this module may change freely."""
    with ControlPlane(controller_manager=False) as cp:
        yield kube_for(cp)


def storage_class(
    name: str, *, annotation: str | None = None, mode: str = "Immediate", provisioner: str = "example.com/test"
) -> dict:
    meta: dict = {"name": name}
    if annotation:
        meta["annotations"] = {annotation: "true"}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta,
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def test_the_seeded_default_class_is_found_and_binding_mode_noted(kube: Kube, unique_name: str) -> None:
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, storage={"verify": False}))
    cond = result.conditions[0]
    assert (cond.type, cond.status, cond.reason) == (constants.STORAGE_READY, "True", "StorageClassFound")
    assert "local-path (the cluster default" in cond.message
    assert "WaitForFirstConsumer" in cond.message
    # The explicit opt-out says what it gives up.
    assert "write test is turned off (spec.storage.verify: false)" in cond.message
    assert "that the class exists proves nothing" in cond.message
    assert result.recorded == {"storageClassName": "local-path", "storageVolumeBindingMode": "WaitForFirstConsumer"}


def test_a_named_class_is_used_even_when_not_default(kube: Kube, unique_name: str) -> None:
    kube.create(storage_class(unique_name))
    try:
        body = platform_body(unique_name, unique_name, storage={"storageClassName": unique_name, "verify": False})
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
    body = platform_body("tp", "tenant", storage={"verify": False})
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


def verify_objects(kube: Kube, platform: str, namespace: str | None = None) -> tuple[list[dict], list[dict]]:
    """(PVCs, pods) of ``platform``'s write test that are not being deleted (in the platform's
    namespace, ``platform`` unless named)."""
    selector = f"{SELECTOR},{constants.LABEL_PLATFORM}={platform}"
    pvcs = kube.list("v1", "PersistentVolumeClaim", namespace or platform, label_selector=selector)
    pods = kube.list("v1", "Pod", namespace or platform, label_selector=selector)
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
    make_platform(unique_name, ns, storage=VERIFY)

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
    # In the platform's namespace, as the checklist runs it, never the operator's: owned by the
    # platform (garbage collection backs up cleanup).
    assert writer["metadata"]["namespace"] == ns
    assert [o["name"] for o in writer["metadata"]["ownerReferences"]] == [unique_name]
    assert kube.list("v1", "Pod", OPERATOR_NAMESPACE, label_selector=SELECTOR) == []
    assert kube.list("v1", "PersistentVolumeClaim", OPERATOR_NAMESPACE, label_selector=SELECTOR) == []
    assert pvcs[0]["spec"]["storageClassName"] == UNPLAYED
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
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert cond["reason"] == "StorageClassFound" and "proves nothing" in cond["message"]
    assert "storageVerification" not in outcome.status["recorded"]


def test_verify_off_and_on_again_runs_a_new_test(kube: Kube, make_platform: Any, unique_name: str) -> None:
    """The forgotten result must also leave the live status, or turning verify back on would
    find the old success. (Needs status writes to remove keys nested in status.recorded.)"""
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage=VERIFY)
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
    make_platform(unique_name, ns, storage=VERIFY)
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
    make_platform(unique_name, ns, storage=VERIFY)
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
    make_platform(unique_name, ns, storage=VERIFY)
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
    body = make_platform(unique_name, ns, storage=VERIFY)
    before = kube.counter.snapshot()[1]
    result = run_step(step.STEP, kube, body, dry_run=True)
    assert kube.counter.snapshot()[1] == before
    assert result.conditions[0].status == "True"
    assert "does not run in a dry run" in result.conditions[0].message
    assert verify_objects(kube, unique_name) == ([], [])


def test_cleanup_on_deletion_removes_a_running_test(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage=VERIFY)
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
    make_platform(unique_name, ns, storage=VERIFY)

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
        kube.delete("v1", "Pod", pod["metadata"]["name"], ns)
    assert verify_objects(kube, unique_name)[1] == []
    reconcile_once(kube, unique_name)
    pvcs, pods = verify_objects(kube, unique_name)
    assert [p["metadata"]["labels"][manifests.ROLE_LABEL] for p in pods] == ["read"], "no second writer"

    # The reader succeeded: the result goes onto the PVC; the status write is lost again. A success
    # on the PVC is not believed (the tenant may write there): the same test reads the marker back
    # once more with a new reader; it does not write again.
    set_phase(kube, pods[0], "Succeeded")
    before = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    reconcile_once(kube, unique_name)
    lose_status(kube, unique_name, before)
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("Unknown", "VerificationPending"), cond
    assert "reads it back" in cond["message"]
    pvcs, pods = verify_objects(kube, unique_name)
    assert [p["metadata"]["labels"][manifests.ROLE_LABEL] for p in pods] == ["read"], "no second writer"
    assert pvcs[0]["metadata"]["uid"] == uids[0]
    set_phase(kube, pods[0], "Succeeded")
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("True", "Verified"), cond
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) == ([], [])
    memory = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    assert (str(memory["attempt"]), memory["result"], memory["cleanedUp"]) == (attempt, "Succeeded", True)


def test_objects_of_an_unrecorded_older_test_are_deleted(kube: Kube, make_platform: Any, unique_name: str) -> None:
    """Objects of a test nobody recorded (another attempt, e.g. killed before its status write and
    superseded) are found by their labels and deleted; the recorded test goes on."""
    ns = unique_name
    create_namespace(kube, ns)
    body = make_platform(unique_name, ns, storage=VERIFY)
    reconcile_once(kube, unique_name)
    attempt = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]["attempt"]
    platform = TenantPlatform.from_body(get_platform(kube, unique_name))
    ctx = StepContext(platform=platform, kube=kube, settings=Settings(), now=datetime.now(UTC))
    stray = manifests.render_pvc(platform_name=unique_name, namespace=ns, attempt=12345, storage_class="other-class")
    kube.create(stamp(stray, ctx, manifests.COMPONENT))
    assert len(verify_objects(kube, unique_name)[0]) == 2
    reconcile_once(kube, unique_name)
    pvcs, pods = verify_objects(kube, unique_name)
    assert [p["metadata"]["name"] for p in pvcs] == [manifests.pvc_name(unique_name, attempt)]
    assert len(pods) == 1 and body["metadata"]["name"] == unique_name


# ---- on by default, and proven as on a real cluster ---------------------------------------------


def converge_storage(kube: Kube, name: str, *, passes: int = 20) -> dict[str, Any]:
    """Reconcile until StorageReady leaves VerificationPending (the played kubelet runs the pods)."""
    cond: dict[str, Any] = {}
    for _ in range(passes):
        cond = condition(reconcile_once(kube, name).status, constants.STORAGE_READY)
        if cond["reason"] != "VerificationPending":
            return cond
        time.sleep(0.3)
    return cond


def test_by_default_the_class_is_proven_in_the_platforms_namespace(
    kube: Kube, make_platform: Any, unique_name: str
) -> None:
    """No storage spec at all: the CRD's default turns the write test on; the seeded class is
    StorageClassFound no longer, but Verified once a pod wrote and another read back, there."""
    ns = unique_name
    create_namespace(kube, ns)
    body = make_platform(unique_name, ns)
    assert body["spec"]["storage"]["verify"] is True
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.STORAGE_READY)
    assert (cond["status"], cond["reason"]) == ("Unknown", "VerificationPending")
    assert condition(outcome.status, constants.READY)["status"] != "True"
    assert f"in namespace {ns}" in cond["message"]
    cond = converge_storage(kube, unique_name)
    assert (cond["status"], cond["reason"]) == ("True", "Verified"), cond
    assert "read it back" in cond["message"]
    reconcile_once(kube, unique_name)
    assert verify_objects(kube, unique_name) == ([], [])
    memory = get_platform(kube, unique_name)["status"]["recorded"]["storageVerification"]
    assert (memory["result"], memory["namespace"], memory["cleanedUp"]) == ("Succeeded", ns, True)


def test_a_verdict_from_the_operators_namespace_does_not_stand(
    kube: Kube, make_platform: Any, unique_name: str
) -> None:
    """A success recorded before the test moved (no namespace in the memory: the operator's own)
    proves nothing about the platform's namespace: a new test runs there."""
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage=VERIFY)
    old = {
        "storageClassName": UNPLAYED,
        "attempt": 1700000000,
        "result": "Succeeded",
        "startedAt": "2023-11-14T22:13:20Z",
        "finishedAt": "2023-11-14T22:14:20Z",
        "message": "Write test passed.",
        "cleanedUp": True,
    }
    lose_status(kube, unique_name, old)
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.STORAGE_READY)["reason"] == "VerificationPending"
    assert len(verify_objects(kube, unique_name)[1]) == 1


# ---- the tenant's namespace: what the tenant writes there never makes StorageReady True ----------


@pytest.fixture
def tenant_platform(kube: Kube, make_platform: Any, unique_name: str, control_plane: ControlPlane, tmp_path: Any):
    """A platform with the write test running on ``unplayed``, after one full pass (the installer
    identity exists), and a client as that identity: ``admin`` in the namespace, as the tenant."""
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns, storage=VERIFY)
    reconcile_once(kube, unique_name)
    installer = get_platform(kube, unique_name)["spec"]["installer"]["serviceAccountName"]
    token, _ = kube.request_token(ns, installer, expiration_seconds=600)
    tenant = Kube.from_kubeconfig(str(control_plane.kubeconfig_for_token(token, tmp_path / "tenant.kubeconfig")))
    return unique_name, ns, tenant


def storage_ready(kube: Kube, name: str) -> dict[str, Any]:
    return condition(reconcile_once(kube, name).status, constants.STORAGE_READY)


def test_a_tenant_reader_pod_of_its_own_never_verifies(kube: Kube, tenant_platform: Any) -> None:
    """The tenant replaces our reader with a pod of its own under the same name and labels (any
    command, here another image), and a kubelet runs it to Succeeded: the test fails, saying so."""
    name, ns, tenant = tenant_platform
    set_phase(kube, verify_objects(kube, name)[1][0], "Succeeded")
    assert storage_ready(kube, name)["reason"] == "VerificationPending"
    (reader,) = verify_objects(kube, name)[1]
    tenant.delete("v1", "Pod", reader["metadata"]["name"], ns)
    wait_for(lambda: not verify_objects(kube, name)[1], "our reader to go")
    forged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": reader["metadata"]["name"], "namespace": ns, "labels": reader["metadata"]["labels"]},
        "spec": {**reader["spec"], "containers": [{**reader["spec"]["containers"][0], "image": "example.com/exit-0"}]},
    }
    for key in ("nodeName", "serviceAccountName", "serviceAccount"):
        forged["spec"].pop(key, None)
    # Even the owner (the tenant may name it, though not block its deletion).
    owners = [{**o, "blockOwnerDeletion": False} for o in reader["metadata"]["ownerReferences"]]
    forged["metadata"]["ownerReferences"] = owners
    tenant.create(forged)
    set_phase(kube, tenant.get("v1", "Pod", reader["metadata"]["name"], ns) or {}, "Succeeded")
    cond = storage_ready(kube, name)
    assert (cond["status"], cond["reason"]) == ("False", "VerificationFailed"), cond
    assert "is not as the operator created it (spec.containers[0].image differs)" in cond["message"]


def test_a_success_the_tenant_notes_on_our_pvc_is_not_believed(kube: Kube, tenant_platform: Any) -> None:
    """The tenant writes a result onto our PVC (and deletes the pods): the status still says the
    test runs, so it goes on; never Verified without a reader of ours reading the marker back."""
    name, ns, tenant = tenant_platform
    (pvc,), (writer,) = verify_objects(kube, name)
    notes = manifests.result_annotations("Succeeded", "2026-01-01T00:00:00Z", "Write test passed.")
    notes[manifests.WRITTEN_ANNOTATION] = "true"
    patch = {"metadata": {"annotations": notes}}
    tenant.merge_patch("v1", "PersistentVolumeClaim", pvc["metadata"]["name"], patch, namespace=ns)
    tenant.delete("v1", "Pod", writer["metadata"]["name"], ns)
    wait_for(lambda: not verify_objects(kube, name)[1], "the writer to go")
    for _ in range(3):
        cond = storage_ready(kube, name)
        assert cond["status"] != "True", cond
    # Our reader runs; the volume has no marker (nobody wrote one): it fails, as it should.
    (reader,) = verify_objects(kube, name)[1]
    assert reader["metadata"]["labels"][manifests.ROLE_LABEL] == "read"
    set_phase(kube, reader, "Failed")
    assert storage_ready(kube, name)["reason"] == "VerificationFailed"


def test_a_test_the_tenant_makes_up_is_not_adopted_as_a_success(kube: Kube, tenant_platform: Any) -> None:
    """The tenant makes a whole test of its own, newer than ours and claiming success, then the
    status is lost: it may be adopted as running (the operator cannot tell whose it is), never as
    passed; what it runs is judged like our own."""
    name, ns, tenant = tenant_platform
    attempt = int(time.time()) + 3600
    fake = manifests.render_pvc(
        platform_name=name, namespace=ns, attempt=attempt, storage_class=UNPLAYED, started_at="2026-01-01T00:00:00Z"
    )
    labels = verify_objects(kube, name)[0][0]["metadata"]["labels"]
    fake["metadata"]["labels"] = {**labels, manifests.ATTEMPT_LABEL: str(attempt)}
    fake["metadata"]["annotations"].update(
        manifests.result_annotations("Succeeded", "2026-01-01T00:01:00Z", "Write test passed.")
    )
    tenant.create(fake)
    lose_status(kube, name, None)
    for _ in range(3):
        cond = storage_ready(kube, name)
        assert cond["status"] != "True", cond
