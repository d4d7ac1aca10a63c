"""Updates against the real API server: once the guard denies, a pod admitted before it can still
be relabelled (metadata-only updates are not checked), but a change to its spec is judged, an
image change that makes istio-init a look-alike included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from podguard_support import (
    DENY,
    NOT_ALLOWED_IMAGE,
    WARN,
    classic,
    context,
    fresh,
    guard_denies,
    guard_warns,
    make_namespace,
    pod,
)

from tenant_platform.api import constants
from tenant_platform.concerns.podguard.step import STEP
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster


def test_updates_are_checked_only_when_the_spec_changes(
    crd: Kube, make_platform: Callable[..., dict[str, Any]], unique_name: str
) -> None:
    make_namespace(crd, unique_name, claimed_by=unique_name)
    body = make_platform(unique_name, unique_name, podGuard={"enforcement": "Warn"})
    reconcile_step(STEP, context(crd, body))
    wait_for(
        lambda: guard_warns(crd, unique_name, WARN.pod_guard),
        "the guard to warn",
        60,
        interval=0.2,
    )
    crd.create(pod("old", unique_name, volumes=[{"name": "host", "hostPath": {"path": "/var/log"}}]))
    crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"podGuard": {"enforcement": "Deny"}}})
    reconcile_step(STEP, context(crd, fresh(crd, unique_name)))
    wait_for(lambda: guard_denies(crd, unique_name, DENY.pod_guard), "the guard to deny", 60, interval=0.2)

    # Metadata-only updates of a pod admitted before the guard still work.
    crd.merge_patch("v1", "Pod", "old", {"metadata": {"labels": {"tier": "legacy"}}}, namespace=unique_name)
    # A spec change is checked.
    with pytest.raises(errors.Forbidden) as caught:
        crd.json_patch(
            "v1",
            "Pod",
            "old",
            [{"op": "replace", "path": "/spec/containers/0/image", "value": "registry.example.com/app:2"}],
            namespace=unique_name,
        )
    assert "hostPath volumes are not allowed: host" in caught.value.message
    # An image change that makes istio-init a look-alike is checked too.
    crd.create(classic("meshed", unique_name))
    live = crd.get("v1", "Pod", "meshed", unique_name)
    assert live is not None
    live["spec"]["initContainers"][0]["image"] = "docker.io/istio/proxyv2-evil:1.28.0"
    with pytest.raises(errors.Forbidden) as caught:
        crd.replace(live)
    assert NOT_ALLOWED_IMAGE in caught.value.message
    assert STEP.cleanup(context(crd, body)).done
    crd.delete("v1", "Namespace", unique_name)
