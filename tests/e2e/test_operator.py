"""End to end: the operator process, under deploy/ RBAC, against the real local API server.

create -> Ready (observedGeneration current) -> drift repaired -> conflict -> delete (Retain and
Delete) -> cleaned up; and no secret material in its logs.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from tests.e2e.conftest import POLL
from tests.support import find_condition

from tenant_platform.api import constants
from tenant_platform.kube.client import Kube
from tenant_platform.testing import manifests
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import RunningOperator
from tenant_platform.testing.wait import wait_for

SAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "samples" / "tenantplatform.yaml"


def sample(name: str, namespace: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"] = {"name": name}
    body["spec"]["namespace"] = namespace
    body["spec"]["additionalNamespaces"] = [f"{namespace}-ext"]
    body["spec"]["domain"] = f"{name}.example.com"
    body["spec"]["installer"]["serviceAccountName"] = "installer"
    body["spec"]["gateway"]["name"] = f"{name}-gateway"
    body["spec"]["edgeCertificate"]["secretName"] = f"{name}-edge-tls"
    body["spec"].update(overrides)
    return body


def ready(kube: Kube, name: str) -> bool:
    body = kube.get(constants.API_VERSION, constants.KIND, name) or {}
    status = body.get("status") or {}
    cond = find_condition(status, "Ready")
    return bool(
        cond and cond["status"] == "True" and status.get("observedGeneration") == body["metadata"]["generation"]
    )


def explain(kube: Kube, name: str, operator: RunningOperator) -> str:
    body = kube.get(constants.API_VERSION, constants.KIND, name) or {}
    return yaml.safe_dump(body.get("status")) + "\n--- operator log tail ---\n" + operator.log()[-4000:]


def delete_and_wait(kube: Kube, name: str) -> None:
    kube.delete(constants.API_VERSION, constants.KIND, name)
    wait_for(
        lambda: kube.get(constants.API_VERSION, constants.KIND, name) is None,
        f"{name} to be deleted",
        90,
        interval=POLL,
    )


def test_sample_reaches_ready_and_repairs_drift(
    operator: RunningOperator, crd: Kube, control_plane: ControlPlane, unique_name: str
) -> None:
    name = ns = unique_name
    crd.apply(sample(name, ns))
    wait_for(
        lambda: ready(crd, name), f"{name} Ready", 120, interval=POLL, context=lambda: explain(crd, name, operator)
    )
    # kubectl wait understands our conditions.
    control_plane.kubectl("wait", "--for=condition=Ready", f"tp/{name}", "--timeout=30s")

    # Drift: a deleted RoleBinding and an edited namespace label come back.
    crd.delete("rbac.authorization.k8s.io/v1", "RoleBinding", "installer-admin", ns)
    crd.merge_patch("v1", "Namespace", ns, {"metadata": {"labels": {"pod-security.kubernetes.io/warn": "privileged"}}})
    wait_for(
        lambda: crd.get("rbac.authorization.k8s.io/v1", "RoleBinding", "installer-admin", ns),
        "RoleBinding restored",
        90,
        interval=POLL,
    )
    wait_for(
        lambda: (
            crd.get("v1", "Namespace", ns)["metadata"]["labels"]["pod-security.kubernetes.io/warn"]  # type: ignore[index]
            == "restricted"
        ),
        "namespace label restored",
        90,
        interval=POLL,
    )

    # Delete with Retain: the namespace and data in it survive; our labels go.
    crd.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep-me", "namespace": ns}})
    delete_and_wait(crd, name)
    live_ns = crd.get("v1", "Namespace", ns)
    assert live_ns is not None and live_ns["status"]["phase"] == "Active"
    assert crd.get("v1", "ConfigMap", "keep-me", ns) is not None
    assert constants.LABEL_PLATFORM not in (live_ns["metadata"].get("labels") or {})

    # Nothing secret in the operator's logs: the installer token and the edge certificate's key.
    log = operator.log()
    assert operator.token not in log
    assert "PRIVATE KEY" not in log


def test_conflicting_platform_changes_nothing(operator: RunningOperator, crd: Kube, unique_name: str) -> None:
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    crd.apply(sample(first, unique_name))
    wait_for(
        lambda: ready(crd, first), f"{first} Ready", 120, interval=POLL, context=lambda: explain(crd, first, operator)
    )
    before = crd.get("v1", "Namespace", unique_name)
    crd.apply(sample(second, unique_name, podSecurity={"warn": "baseline", "audit": "baseline"}))
    got = wait_for(
        lambda: (
            (
                c := find_condition(
                    (crd.get(constants.API_VERSION, constants.KIND, second) or {}).get("status"), "NamespacesReady"
                )
            )
            and c["reason"] == "Conflict"
            and c
        ),
        "Conflict on the second platform",
        90,
        interval=POLL,
    )
    assert first in got["message"]
    after = crd.get("v1", "Namespace", unique_name)
    assert before and after and after["metadata"]["labels"] == before["metadata"]["labels"]
    delete_and_wait(crd, second)
    delete_and_wait(crd, first)


def test_delete_policy_terminates_namespaces(operator: RunningOperator, crd: Kube, unique_name: str) -> None:
    crd.apply(sample(unique_name, unique_name, deletionPolicy="Delete"))
    wait_for(
        lambda: ready(crd, unique_name),
        "Ready",
        120,
        interval=POLL,
        context=lambda: explain(crd, unique_name, operator),
    )
    delete_and_wait(crd, unique_name)
    wait_for(lambda: crd.get("v1", "Namespace", unique_name) is None, "namespace terminated", 90, interval=POLL)
    wait_for(lambda: crd.get("v1", "Namespace", f"{unique_name}-ext") is None, "extra ns terminated", 90, interval=POLL)


def test_installer_kubeconfig_secret_is_usable(operator: RunningOperator, crd: Kube, unique_name: str) -> None:
    crd.apply(sample(unique_name, unique_name))
    secret = wait_for(
        lambda: crd.get("v1", "Secret", "installer-kubeconfig", unique_name), "kubeconfig Secret", 90, interval=POLL
    )
    token = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))["users"][0]["user"]["token"]
    assert token and token not in operator.log()
    delete_and_wait(crd, unique_name)


def _gpu_used(kube: Kube, name: str, node: str) -> int | None:
    body = kube.get(constants.API_VERSION, constants.KIND, name) or {}
    for entry in ((body.get("status") or {}).get("gpu") or {}).get("nodes") or []:
        if entry.get("name") == node:
            return int(entry["memoryMiB"]["used"])
    return None


def test_gpu_labels_and_live_capacity(operator: RunningOperator, crd: Kube, unique_name: str) -> None:
    """Under deploy/ RBAC: seeded GPU nodes get gpu=on, and a new HAMi allocation shows in status
    through the watches and the debounced refresher, without a spec change."""
    crd.apply(sample(unique_name, unique_name))
    wait_for(
        lambda: ready(crd, unique_name),
        "Ready",
        120,
        interval=POLL,
        context=lambda: explain(crd, unique_name, operator),
    )
    node = crd.get("v1", "Node", "gpu-node-1")
    assert node is not None and node["metadata"]["labels"].get("gpu") == "on"
    before = _gpu_used(crd, unique_name, "gpu-node-1")
    assert before is not None
    crd.create(
        manifests.gpu_pod_manifest(
            f"{unique_name}-train",
            namespace=unique_name,
            node_name="gpu-node-1",
            devices=[(manifests.hami_device_uuid("gpu-node-1", 0), 4096, 30)],
        )
    )
    wait_for(
        lambda: _gpu_used(crd, unique_name, "gpu-node-1") == before + 4096,
        "the allocation in status.gpu",
        90,
        interval=POLL,
        context=lambda: explain(crd, unique_name, operator),
    )
    # No kubelet confirms a graceful deletion here, and HAMi counts terminating pods: delete at once.
    crd.request(
        "DELETE",
        crd.path("v1", "Pod", f"{unique_name}-train", unique_name),
        body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
    )
    wait_for(lambda: _gpu_used(crd, unique_name, "gpu-node-1") == before, "the allocation released", 90, interval=POLL)
    delete_and_wait(crd, unique_name)
