"""The operator process with its read cache, under deploy/ RBAC: a child deleted by hand is
recreated from its watch event, with a drift interval far longer than the test; with the opt-in
grant to list and watch every Secret, so is our edge Secret."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from tests.e2e.conftest import POLL
from tests.e2e.test_operator import delete_and_wait, ready, sample

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
