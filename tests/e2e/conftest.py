"""The operator as a separate process, under the RBAC in deploy/base/rbac.yaml (see
tenant_platform.testing.operator), for the e2e tests of this folder only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tenant_platform.kube.client import Kube
from tenant_platform.testing import wait
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import RunningOperator, start_operator

DRIFT_INTERVAL = 4
T = TypeVar("T")


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
    predicate: Callable[[], T],
    *,
    timeout: float = 90,
    interval: float = 0.5,
    what: str = "condition",
    context: Callable[[], Any] | None = None,
) -> T:
    """The shared wait_for (tenant_platform.testing.wait) with the e2e defaults: an operator
    process reacts within seconds, the drift interval is a few seconds."""
    return wait.wait_for(predicate, what, timeout, interval=interval, context=context)
