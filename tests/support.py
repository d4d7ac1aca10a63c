"""Small helpers shared by the integration and e2e tests."""

from __future__ import annotations

import time
from typing import Any

from tenant_platform.kube.client import Kube


def wait_for(
    predicate: Any, what: str = "condition", timeout: float = 30.0, *, interval: float = 0.1, context: Any = None
) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that.

    On timeout fail naming ``what``, with the last value and ``context()`` (a status, a log tail).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{context()}" if context else ""
            raise AssertionError(f"timed out waiting for {what}; last value: {value!r}{detail}")
        time.sleep(interval)


def create_namespace(kube: Kube, name: str, *, wait_sa: bool = False) -> None:
    """Create a namespace (if missing); with ``wait_sa``, wait for its default ServiceAccount,
    which pods need to be admitted."""
    if kube.get("v1", "Namespace", name) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if wait_sa:
        wait_for(lambda: kube.get("v1", "ServiceAccount", "default", name), f"ServiceAccount {name}/default")
