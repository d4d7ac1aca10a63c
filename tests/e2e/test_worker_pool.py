"""Regression: platform loops once held a kopf worker thread each, so with more platforms than
threads the rest never reconciled (found by the 50-platform benchmark). Here an operator with 2
kopf workers and 2 reconcile workers must bring 5 platforms to Ready.

In a module of its own: the operator here must be the only one running.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import POLL
from tests.e2e.test_operator import explain, ready, sample

from tenant_platform.api import constants
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import start_operator
from tenant_platform.testing.wait import wait_for


def test_more_platforms_than_worker_threads(
    crd: Kube, control_plane: ControlPlane, tmp_path: Path, unique_name: str
) -> None:
    running = start_operator(
        control_plane,
        crd,
        tmp_path,
        drift_interval=30,
        extra_env={"TENANT_PLATFORM_KOPF_WORKERS": "2", "TENANT_PLATFORM_RECONCILE_WORKERS": "2"},
    )
    names = [f"{unique_name[:40]}-{i}" for i in range(5)]
    try:
        for name in names:
            crd.apply(sample(name, name, additionalNamespaces=[]))
        for name in names:
            wait_for(
                lambda n=name: ready(crd, n),
                f"{name} Ready",
                180,
                interval=POLL,
                context=lambda n=name: explain(crd, n, running),
            )
    finally:
        for name in names:
            crd.delete(constants.API_VERSION, constants.KIND, name)
        for name in names:
            wait_for(
                lambda n=name: crd.get(constants.API_VERSION, constants.KIND, n) is None,
                f"{name} deleted",
                90,
                interval=POLL,
            )
        running.stop()
