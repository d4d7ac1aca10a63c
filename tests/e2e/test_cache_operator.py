"""The operator process with its read cache, under deploy/ RBAC: a child deleted by hand is
recreated from its watch event, with a drift interval far longer than the test; with the opt-in
grant to list and watch every Secret, so is our edge Secret; and status.gpuShare follows the
quota controller (our ResourceQuota's status event wakes the platform)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.conftest import POLL
from tests.e2e.test_operator import delete_and_wait, ready, sample

from tenant_platform.api import constants
from tenant_platform.kube.cache import RBAC_SETTLE_SECONDS
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import REPO, RunningOperator, apply_file, start_operator
from tenant_platform.testing.wait import wait_for

RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture(scope="module")
def slow_drift_operator(
    crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningOperator]:
    running = start_operator(control_plane, crd, tmp_path_factory.mktemp("operator"), drift_interval=3600)
    try:
        yield running
    finally:
        running.stop()


def test_child_deleted_by_hand_is_recreated_from_the_watch_event(
    crd: Kube, slow_drift_operator: RunningOperator, unique_name: str
) -> None:
    crd.apply(sample(unique_name, unique_name))
    try:
        wait_for(lambda: ready(crd, unique_name), "Ready", 120, interval=POLL)
        crd.delete(RBAC, "RoleBinding", "installer-admin", unique_name)
        # The drift timer is an hour away: only the child's watch event can bring it back.
        wait_for(
            lambda: crd.get(RBAC, "RoleBinding", "installer-admin", unique_name),
            "the RoleBinding recreated",
            60,
            interval=POLL,
        )
    finally:
        delete_and_wait(crd, unique_name)


def test_with_every_secret_watchable_a_deleted_edge_secret_is_reissued_from_the_watch_event(
    crd: Kube, slow_drift_operator: RunningOperator, unique_name: str
) -> None:
    """With deploy/components/watch-secrets granted (the chart's rbac.watchSecrets), the operator
    process (main.cached_client) watches Secrets cluster-wide: our edge Secret deleted by hand is
    issued again from the watch event, with the drift timer an hour away."""
    grant = REPO / "deploy" / "components" / "watch-secrets" / "rbac.yaml"
    apply_file(crd, grant)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    secret = f"{unique_name}-edge-tls"
    body = sample(unique_name, unique_name)  # a self-signed edge certificate (deploy/samples)
    crd.apply(body)
    try:
        wait_for(lambda: ready(crd, unique_name), "Ready", 120, interval=POLL)
        wait_for(
            lambda: "watching Secrets cluster-wide" in slow_drift_operator.log(),
            "the cluster-wide Secret informers started",
            30,
            interval=POLL,
        )
        namespace = body["spec"]["gateway"]["namespace"]
        first = crd.get("v1", "Secret", secret, namespace)
        assert first is not None
        time.sleep(2)  # the informers' first listing
        crd.delete("v1", "Secret", secret, namespace)
        wait_for(
            lambda: (
                (crd.get("v1", "Secret", secret, namespace) or {}).get("metadata", {}).get("uid")
                not in (None, first["metadata"]["uid"])
            ),
            "the edge Secret issued again",
            60,
            interval=POLL,
        )
    finally:
        delete_and_wait(crd, unique_name)
        crd.delete(RBAC, "ClusterRoleBinding", "tenant-platform-operator-watch-secrets")
        crd.delete(RBAC, "ClusterRole", "tenant-platform-operator-watch-secrets")


def quiet(kube: Kube, name: str, seconds: float = 4.0) -> None:
    """Wait until the platform has settled: its resourceVersion unchanged for ``seconds`` (the
    passes that follow Ready, e.g. the quick retry while the quota controller computes, are over)."""
    seen: list[str] = []

    def settled() -> bool:
        body = kube.get(constants.API_VERSION, constants.KIND, name) or {}
        seen.append(str(body.get("metadata", {}).get("resourceVersion")))
        window = int(seconds / POLL)
        return len(seen) > window and len(set(seen[-window - 1 :])) == 1

    wait_for(settled, f"{name} to settle", 60, interval=POLL)


def test_gpu_share_status_follows_the_quota_from_its_watch_event(
    crd: Kube, slow_drift_operator: RunningOperator, unique_name: str
) -> None:
    """A pod using the share changes our quota's status.used (quota admission writes it); that
    event wakes the platform, so status.gpuShare follows within seconds, the drift timer an hour away."""
    body = sample(unique_name, unique_name)
    body["spec"]["gpu"]["share"] = {"cards": 2}
    crd.apply(body)

    def gpu_used() -> int | None:
        platform = crd.get(constants.API_VERSION, constants.KIND, unique_name) or {}
        resources = ((platform.get("status") or {}).get("gpuShare") or {}).get("resources") or []
        return next((int(r["used"]) for r in resources if r["resource"] == "nvidia.com/gpu"), None)

    try:
        wait_for(lambda: ready(crd, unique_name), "Ready", 120, interval=POLL)
        wait_for(lambda: gpu_used() == 0, "status.gpuShare with nothing used", 30, interval=POLL)
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train", "namespace": unique_name},
            "spec": {
                "containers": [
                    {
                        "name": "train",
                        "image": "registry.example.com/train:1",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ]
            },
        }
        quiet(crd, unique_name)
        crd.create(pod)
        # Nothing else brings a pass now: the platform is settled (no quick retry) and its drift
        # timer is an hour away; only the quota's watch event can.
        wait_for(lambda: gpu_used() == 1, "status.gpuShare to count the pod", 15, interval=POLL)
        # The pod gone: the quota controller gives its share back, and the status follows again.
        crd.delete("v1", "Pod", "train", unique_name)
        wait_for(lambda: gpu_used() == 0, "status.gpuShare to release the pod", 30, interval=POLL)
    finally:
        delete_and_wait(crd, unique_name)
