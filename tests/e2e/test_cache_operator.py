"""The operator process with its read cache, under deploy/ RBAC: a child deleted by hand is
recreated from its watch event, with a drift interval far longer than the test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.e2e.conftest import wait_for
from tests.e2e.test_operator import delete_and_wait, ready, sample

from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import RunningOperator, start_operator

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
        wait_for(lambda: ready(crd, unique_name), timeout=120, what="Ready")
        crd.delete(RBAC, "RoleBinding", "installer-admin", unique_name)
        # The drift timer is an hour away: only the child's watch event can bring it back.
        wait_for(
            lambda: crd.get(RBAC, "RoleBinding", "installer-admin", unique_name),
            timeout=60,
            what="the RoleBinding recreated",
        )
    finally:
        delete_and_wait(crd, unique_name)
