"""deploy/base/rbac.yaml's node guard: RBAC lets the operator patch nodes; the admission policy
shipped beside it narrows that to non-reserved labels. Checked as the operator's own service
account (a TokenRequest token), against the real API server."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import manifests
from tenant_platform.testing.operator import REPO
from tenant_platform.testing.wait import wait_for


@pytest.fixture
def node(crd: Kube, unique_name: str) -> Any:
    manifest = manifests.node_manifest(unique_name)
    manifest["metadata"].setdefault("labels", {})["nvidia.com/gpu.present"] = "true"
    crd.create(manifest)
    yield unique_name
    crd.delete("v1", "Node", unique_name)


def apply_labels(kube: Kube, node: str, labels: dict[str, str], manager: str = "tenant-platform-operator/t") -> None:
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}}
    kube.request(
        "PATCH",
        kube.path("v1", "Node", node),
        body=json.dumps(body),
        query={"fieldManager": manager, "force": "true"},
        content_type="application/apply-patch+yaml",
    )


def wait_for_policy(as_operator: Kube, node: str) -> None:
    """Policies take effect within a second or two of creation: probe until one is denied."""
    attempts = itertools.count(1)

    def denied() -> bool:
        # NB: a new value each time: re-setting the same value is no change at all
        label = {"nvidia.com/probe": str(next(attempts))}
        try:
            as_operator.merge_patch("v1", "Node", node, {"metadata": {"labels": label}})
        except (errors.Invalid, errors.Forbidden):
            return True
        return False

    wait_for(denied, "the node guard to take effect", 30, interval=0.5)


def test_operator_may_set_its_labels(as_operator: Kube, node: str, crd: Kube) -> None:
    wait_for_policy(as_operator, node)
    apply_labels(as_operator, node, {"gpu": "on"})
    assert crd.get("v1", "Node", node)["metadata"]["labels"]["gpu"] == "on"  # type: ignore[index]
    apply_labels(as_operator, node, {})  # and release them
    assert "gpu" not in crd.get("v1", "Node", node)["metadata"]["labels"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param({"metadata": {"labels": {"nvidia.com/gpu.present": None}}}, "reserved node labels", id="nvidia"),
        pytest.param(
            {"metadata": {"labels": {"feature.node.kubernetes.io/pci-10de.present": "true"}}},
            "reserved node labels",
            id="nfd",
        ),
        pytest.param(
            {"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}, "reserved node labels", id="role"
        ),
        pytest.param({"spec": {"unschedulable": True}}, "only labels", id="cordon"),
        pytest.param({"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}, "only labels", id="taint"),
        pytest.param(
            {"metadata": {"annotations": {"hami.io/mutex.lock": None, "x": "y"}}}, "only labels", id="annotation"
        ),
    ],
)
def test_operator_may_not_touch_anything_else(
    as_operator: Kube, node: str, patch: dict[str, Any], message: str
) -> None:
    wait_for_policy(as_operator, node)
    with pytest.raises((errors.Invalid, errors.Forbidden)) as caught:
        as_operator.merge_patch("v1", "Node", node, patch)
    assert message in caught.value.message


def test_operator_may_not_delete_nodes(as_operator: Kube, node: str) -> None:
    with pytest.raises(errors.Forbidden):
        as_operator.delete("v1", "Node", node)


def test_admins_are_not_restricted(crd: Kube, node: str) -> None:
    crd.merge_patch("v1", "Node", node, {"metadata": {"labels": {"nvidia.com/gpu.present": None}}})
    assert "nvidia.com/gpu.present" not in (crd.get("v1", "Node", node)["metadata"].get("labels") or {})  # type: ignore[index]


def test_rbac_file_ships_the_guard() -> None:
    text = (REPO / "deploy" / "base" / "rbac.yaml").read_text()
    assert "tenant-platform-operator-node-guard" in text
    assert (
        Path(REPO / "deploy" / "helm" / "tenant-platform" / "templates" / "rbac.yaml")
        .read_text()
        .count("tenant-platform-operator-node-guard")
        >= 2
    )
