"""The operator as a separate process, under the RBAC in deploy/base/rbac.yaml (see
tenant_platform.testing.operator), for the e2e tests of this folder only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests import support

from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import RunningOperator, start_operator

DRIFT_INTERVAL = 4


@pytest.fixture(scope="module")
def operator(
    crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningOperator]:
    running = start_operator(control_plane, crd, tmp_path_factory.mktemp("operator"), drift_interval=DRIFT_INTERVAL)
    try:
        yield running
    finally:
        running.stop()


def wait_for(
    predicate: Any, *, timeout: float = 90, interval: float = 0.5, what: str = "condition", context: Any = None
) -> Any:
    """tests.support.wait_for with the e2e defaults (an operator process reacts in seconds)."""
    return support.wait_for(predicate, what, timeout, interval=interval, context=context)
