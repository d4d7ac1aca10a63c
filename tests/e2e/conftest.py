"""The operator as a separate process, under the RBAC in deploy/base/rbac.yaml (see
tenant_platform.testing.operator), for the e2e tests of this folder only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import RunningOperator, start_operator

DRIFT_INTERVAL = 4
POLL = 0.5
"""How often the e2e tests poll (tenant_platform.testing.wait.wait_for's interval): an operator
process reacts within seconds, the drift interval is a few seconds."""


@pytest.fixture(scope="module")
def operator(
    crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningOperator]:
    running = start_operator(control_plane, crd, tmp_path_factory.mktemp("operator"), drift_interval=DRIFT_INTERVAL)
    try:
        yield running
    finally:
        running.stop()
