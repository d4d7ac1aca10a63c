"""GPU discovery and HAMi health against the real API server (concerns/gpu/health.py, concerns/gpu/healthreads.py).

- Discovery without anything HAMi writes: a node listing an ``nvidia`` runtime handler, a node an
  NVIDIA RuntimeClass's nodeSelector selects, a node ``spec.gpu.nodeSelector`` selects: all three
  are labelled (the pure-HAMi deadlock: HAMi's device plugin runs only on labelled nodes).
- HAMi's scheduler Deployment and device-plugin DaemonSet not ready, and two GPU device-plugin
  DaemonSets with a pod each on the same node. The test control plane runs no deployment or
  daemonset controller, so the test does their part: it writes the workloads' status through the
  status subresource and creates each DaemonSet's pod bound to the node (owned by the DaemonSet,
  labelled with its selector), as those controllers would.
- HAMi's webhook unreachable: a MutatingWebhookConfiguration for GPU pods in the test's namespace
  pointing at a Service with no endpoints, ``failurePolicy: Fail``; the API server itself calls it
  during the dry run. Its verdict is kept while HAMi's workloads and the tenant namespace are
  unchanged (no dry run per pass); a change of the namespace checks again, and an interval of 0
  (``Settings.webhook_probe_interval``) checks on every pass.
- HAMi's webhook as its chart installs it, ``failurePolicy: Ignore``, unreachable, with HAMi's
  scheduler deployed: the dry-run pod is admitted unmutated, and GPUReady is ``WebhookNotInPath``.
- The mock-device lab (HAMi's mock device plugin next to HAMi's, a count gate of 1 for one card):
  no ``DevicePluginConflict``; NVIDIA's device plugin on the same node is one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support import platform, sole_condition

from tenant_platform.api import reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gpu import step
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, StepResult
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.observe import cluster
from tenant_platform.testing import manifests
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

PAUSE = "registry.k8s.io/pause:3.10.1"
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


@pytest.fixture(scope="module")
def kube(control_plane: ControlPlane) -> Kube:
    return Kube.from_kubeconfig(str(control_plane.kubeconfig_path))


class World:
    """One test's nodes, namespaces and cluster-scoped objects; all removed at teardown."""

    def __init__(self, kube: Kube, prefix: str) -> None:
        self.kube = kube
        self.prefix = prefix
        self.cleanup: list[tuple[str, str, str, str | None]] = []

    def track(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        self.cleanup.append((api_version, kind, name, namespace))

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
        self.track("v1", "Namespace", name)
        return name

    def node(self, suffix: str, *, labels: dict[str, str] | None = None, handlers: list[str] | None = None) -> str:
        name = f"{self.prefix}-{suffix}"
        body = manifests.node_manifest(name, labels={"test": self.prefix, **(labels or {})})
        self.kube.request("POST", "/api/v1/nodes", body=body, query={"fieldManager": "kubelet"})
        self.track("v1", "Node", name)
        if handlers:
            status = {"runtimeHandlers": [{"name": h, "features": {}} for h in handlers]}
            self.kube.merge_patch("v1", "Node", name, {"status": status}, subresource="status")
        return name

    def hami_node(self, suffix: str, *, count: str, extra: dict[str, str] | None = None) -> str:
        """A node HAMi registers one card on (split 10, as v2.10 writes it), advertising ``count``
        of ``nvidia.com/gpu`` (and ``extra`` resources) as its device plugins would."""
        name = f"{self.prefix}-{suffix}"
        register = json.dumps(
            [{"id": f"GPU-{name}", "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "health": True}]
        )
        body = manifests.node_manifest(
            name,
            labels={"test": self.prefix},
            annotations={"hami.io/node-nvidia-register": register},
            extra_capacity={"nvidia.com/gpu": count, **(extra or {})},
        )
        self.kube.request("POST", "/api/v1/nodes", body=body, query={"fieldManager": "kubelet"})
        self.track("v1", "Node", name)
        return name

    def labels(self, node: str) -> dict[str, str]:
        live = self.kube.get("v1", "Node", node)
        assert live is not None
        return dict(live["metadata"].get("labels") or {})

    def snapshot(self) -> cluster.ClusterSnapshot:
        nodes = [n for n in self.kube.list("v1", "Node") if n["metadata"]["name"].startswith(self.prefix + "-")]
        snap = cluster.ClusterSnapshot()
        snap.replace_all(nodes, [])
        return snap

    def run(self, platform: TenantPlatform, kube: Kube | None = None, settings: Settings | None = None) -> StepResult:
        ctx = StepContext(
            platform=platform,
            kube=kube or self.kube,
            settings=settings or Settings(),
            now=datetime.now(UTC),
            dry_run=False,
            observed=self.snapshot(),
        )
        return reconcile_step(step.STEP, ctx)

    def teardown(self, platforms: list[TenantPlatform]) -> None:
        for p in platforms:
            ctx = StepContext(
                platform=p, kube=self.kube, settings=Settings(), now=datetime.now(UTC), dry_run=False, observed=None
            )
            step.STEP.cleanup(ctx)
        for api_version, kind, name, namespace in reversed(self.cleanup):
            self.kube.delete(api_version, kind, name, namespace)


@pytest.fixture
def world(kube: Kube, unique_name: str) -> Iterator[tuple[World, list[TenantPlatform]]]:
    w = World(kube, f"{unique_name[:24].rstrip('-')}-{unique_name[-6:]}")
    platforms: list[TenantPlatform] = []
    try:
        yield w, platforms
    finally:
        w.teardown(platforms)


def daemonset(
    name: str, namespace: str, *, image: str, node_selector: dict[str, str], component: str = ""
) -> dict[str, Any]:
    labels = {"app": name}
    meta_labels = {"app.kubernetes.io/component": component} if component else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": node_selector,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "plugin", "image": image}],
                    "volumes": [{"name": "dp", "hostPath": {"path": PLUGIN_DIR}}],
                },
            },
        },
    }


# -- discovery ----------------------------------------------------------------------------------------


def test_gpu_nodes_found_by_runtime_handler_runtime_class_and_spec_selector(
    world: tuple[World, list[TenantPlatform]],
) -> None:
    """Nothing HAMi writes is there yet, and every one of these nodes is still labelled."""
    w, platforms = world
    u = w.prefix
    handler = w.node("handler", handlers=["runc", "nvidia"])
    by_class = w.node("by-class", labels={f"{u}-pool": "gpu"})
    by_spec = w.node("by-spec", labels={f"{u}-tier": "a100"})
    cpu = w.node("cpu", labels={f"{u}-pool": "cpu"}, handlers=["runc"])
    w.kube.create(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": f"{u}-nvidia"},
            "handler": "nvidia",
            "scheduling": {"nodeSelector": {f"{u}-pool": "gpu"}},
        }
    )
    w.track("node.k8s.io/v1", "RuntimeClass", f"{u}-nvidia")
    selector = {"matchExpressions": [{"key": f"{u}-tier", "operator": "In", "values": ["a100", "h100"]}]}
    p = platform(
        f"{u}-p",
        f"{u}-ns",
        uid=str(uuid.uuid4()),
        generation=1,
        gpu={"nodeSelector": selector, "hami": {"enabled": False}},
    )
    platforms.append(p)
    result = w.run(p)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", reasons.GPU.READY), message
    assert "3 GPU node(s), 3 labelled" in message
    for name in (handler, by_class, by_spec):
        assert w.labels(name).get("gpu") == "on", name
    assert "gpu" not in w.labels(cpu)
    entries = {e["name"]: e for e in result.status["gpu"]["nodes"]}
    assert entries[handler]["detectedBy"] == ["runtimeHandler"]
    assert entries[by_class]["detectedBy"] == ["runtimeClass"]
    assert entries[by_spec]["detectedBy"] == ["nodeSelector"]
    assert result.status["gpu"]["health"]["runtimeClasses"] == [f"{u}-nvidia"]


def test_an_empty_node_selector_is_rejected_at_apply_time(crd: Kube, unique_name: str) -> None:
    """An empty selector would select every node: the CRD refuses it, and a bad operator too."""
    for bad in ({}, {"matchExpressions": [{"key": "a", "operator": "In"}]}):
        body = {
            "apiVersion": "tenancy.dev/v1alpha1",
            "kind": "TenantPlatform",
            "metadata": {"name": unique_name[:50]},
            "spec": {"namespace": "x", "domain": "x.example.com", "gpu": {"nodeSelector": bad}},
        }
        with pytest.raises(errors.Invalid, match=r"would select every node|need values"):
            crd.create(body, dry_run=True)


# -- HAMi's workloads and device plugins -----------------------------------------------------------------


def test_hami_not_ready_and_two_device_plugins_on_one_node(world: tuple[World, list[TenantPlatform]]) -> None:
    w, platforms = world
    u = w.prefix
    hami_ns = w.namespace(f"{u}-hami")
    operator_ns = w.namespace(f"{u}-gpu-operator")
    node = w.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    w.kube.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "hami-scheduler",
                "namespace": hami_ns,
                "labels": {"app.kubernetes.io/component": "hami-scheduler"},
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "hami-scheduler"}},
                "template": {
                    "metadata": {"labels": {"app": "hami-scheduler"}},
                    "spec": {"containers": [{"name": "s", "image": PAUSE}]},
                },
            },
        }
    )
    # HAMi's plugin selects the labelled node; NVIDIA's (the GPU operator's) selects it too.
    # DaemonSets are cluster-wide facts for every later test's GPU step: removed after this test.
    w.track("apps/v1", "DaemonSet", "hami-device-plugin", hami_ns)
    w.track("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", operator_ns)
    w.kube.create(
        daemonset(
            "hami-device-plugin",
            hami_ns,
            image="projecthami/hami:v2.6.0",
            node_selector={"test": u, "gpu": "on"},
            component="hami-device-plugin",
        )
    )
    w.kube.create(
        daemonset(
            "nvidia-device-plugin-daemonset",
            operator_ns,
            image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            node_selector={"test": u},
        )
    )
    p = platform(
        f"{u}-p", f"{u}-tenant", uid=str(uuid.uuid4()), generation=1, gpu={"hami": {"configMapNamespace": hami_ns}}
    )
    platforms.append(p)
    result = w.run(p)  # labels the node: HAMi's DaemonSet now selects it
    assert "runs on no node yet" in sole_condition(result)[2]  # no controller has counted it yet
    # What the deployment and daemonset controllers would write: nothing ready (no kubelet).
    w.kube.merge_patch(
        "apps/v1", "Deployment", "hami-scheduler", {"status": {"replicas": 1}}, namespace=hami_ns, subresource="status"
    )
    for name, ns in (("hami-device-plugin", hami_ns), ("nvidia-device-plugin-daemonset", operator_ns)):
        ds = w.kube.get("apps/v1", "DaemonSet", name, ns)
        assert ds is not None
        ready = {"desiredNumberScheduled": 1, "currentNumberScheduled": 1, "numberReady": 0, "numberMisscheduled": 0}
        w.kube.merge_patch("apps/v1", "DaemonSet", name, {"status": ready}, namespace=ns, subresource="status")
        w.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{node[-8:]}",
                    "namespace": ns,
                    "labels": {"app": name},
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": ds["metadata"]["uid"]}
                    ],
                },
                "spec": {"nodeName": node, "containers": [{"name": "plugin", "image": PAUSE}]},
            }
        )
    result = w.run(p)
    status, reason, message = sole_condition(result)
    # The scheduler never becomes ready (no kubelet): the most urgent problem wins the reason,
    # every other one is named in the message.
    assert (status, reason) == ("False", reasons.GPU.HAMI_SCHEDULER_NOT_READY), message
    assert f"Deployment {hami_ns}/hami-scheduler (0/1 ready)" in message
    assert f"DaemonSet {hami_ns}/hami-device-plugin (0/1 ready)" in message
    assert f"Two GPU device plugins on node(s) {node} (device-plugin pods of" in message
    health = result.status["gpu"]["health"]
    assert health["scheduler"] == {
        "name": f"{hami_ns}/hami-scheduler",
        "kind": "Deployment",
        "desired": 1,
        "ready": 0,
    }
    assert health["devicePlugin"]["desired"] == 1
    [entry] = result.status["gpu"]["nodes"]
    assert entry["devicePluginConflict"] == (
        f"device-plugin pods of {operator_ns}/nvidia-device-plugin-daemonset and {hami_ns}/hami-device-plugin"
    )


def test_a_mock_device_with_a_count_gate_of_one_is_no_device_plugin_conflict(
    world: tuple[World, list[TenantPlatform]],
) -> None:
    """The multi-tenant lab's mock (HAMi's chart, ``mockDevicePlugin.enabled``): one fake card in
    the register annotation (split 10) and ``nvidia.com/gpu: 1`` in the node's capacity, the mock's
    health gate (any positive value works). The mock advertises memory and cores, never the count
    resource, so its pod next to HAMi's device plugin is not two plugins advertising one resource,
    and a gate equal to the card count is not NVIDIA's plugin. A real second plugin still is."""
    w, platforms = world
    u = w.prefix
    hami_ns = w.namespace(f"{u}-hami")
    operator_ns = w.namespace(f"{u}-gpu-operator")
    name = w.hami_node(
        "mock",
        count="1",  # the gate, set by hand
        extra={"nvidia.com/gpumem": "24576", "nvidia.com/gpucores": "100", "nvidia.com/gpumem-percentage": "100"},
    )
    w.track("apps/v1", "DaemonSet", "hami-device-plugin", hami_ns)
    w.track("apps/v1", "DaemonSet", "hami-mock-device-plugin", hami_ns)
    w.kube.create(
        daemonset(
            "hami-device-plugin",
            hami_ns,
            image="projecthami/hami:v2.10.0",
            node_selector={"test": u, "gpu": "on"},
            component="hami-device-plugin",
        )
    )
    w.kube.create(
        daemonset(
            "hami-mock-device-plugin",
            hami_ns,
            image="projecthami/mock-device-plugin:1.0.1",
            node_selector={"test": u},
            component="hami-mock-device-plugin",
        )
    )

    def plugin_pod(ds_name: str, namespace: str) -> None:
        ds = w.kube.get("apps/v1", "DaemonSet", ds_name, namespace)
        assert ds is not None
        w.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{ds_name}-{name[-8:]}",
                    "namespace": namespace,
                    "labels": {"app": ds_name},
                    "ownerReferences": [
                        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds_name, "uid": ds["metadata"]["uid"]}
                    ],
                },
                "spec": {"nodeName": name, "containers": [{"name": "plugin", "image": PAUSE}]},
            }
        )

    plugin_pod("hami-device-plugin", hami_ns)
    plugin_pod("hami-mock-device-plugin", hami_ns)
    p = platform(
        f"{u}-p", f"{u}-tenant", uid=str(uuid.uuid4()), generation=1, gpu={"hami": {"configMapNamespace": hami_ns}}
    )
    platforms.append(p)
    result = w.run(p)
    status, reason, message = sole_condition(result)
    assert reason != reasons.GPU.DEVICE_PLUGIN_CONFLICT, message
    assert (status, reason) == ("True", reasons.GPU.READY), message
    [entry] = result.status["gpu"]["nodes"]
    assert "devicePluginConflict" not in entry
    assert "devicePluginConflicts" not in result.status["gpu"]["health"]

    # NVIDIA's device plugin on the same node really advertises the count resource: a conflict.
    w.track("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", operator_ns)
    w.kube.create(
        daemonset(
            "nvidia-device-plugin-daemonset",
            operator_ns,
            image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
            node_selector={"test": u},
        )
    )
    plugin_pod("nvidia-device-plugin-daemonset", operator_ns)
    status, reason, message = sole_condition(w.run(p))
    assert (status, reason) == ("False", reasons.GPU.DEVICE_PLUGIN_CONFLICT), message
    assert f"{operator_ns}/nvidia-device-plugin-daemonset and {hami_ns}/hami-device-plugin" in message
    assert "hami-mock-device-plugin" not in message


# -- HAMi's webhook ----------------------------------------------------------------------------------------


def test_unreachable_webhook_fails_gpu_ready_naming_it(world: tuple[World, list[TenantPlatform]]) -> None:
    """A mutating webhook for GPU pods whose Service has no endpoints, failurePolicy Fail: every GPU
    pod in the namespace is rejected, and the dry run shows it on the real API server."""
    w, platforms = world
    u = w.prefix
    tenant = w.namespace(f"{u}-tenant", labels={f"{u}-webhook": "on"})
    hami_ns = w.namespace(f"{u}-hami")
    w.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "hami-scheduler", "namespace": hami_ns},
            "spec": {"ports": [{"port": 443, "targetPort": 9443}], "selector": {"app": "nothing-runs-here"}},
        }
    )
    webhook = f"vgpu.{u}.hami.io"
    w.kube.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": f"{u}-hami-webhook"},
            "webhooks": [
                {
                    "name": webhook,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 3,
                    "namespaceSelector": {"matchLabels": {f"{u}-webhook": "on"}},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                    "clientConfig": {"service": {"name": "hami-scheduler", "namespace": hami_ns, "path": "/webhook"}},
                }
            ],
        }
    )
    w.track("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", f"{u}-hami-webhook")
    w.node("gpu", labels={"nvidia.com/gpu.present": "true"})
    p = platform(f"{u}-p", tenant, uid=str(uuid.uuid4()), generation=1, gpu={"hami": {"configMapNamespace": hami_ns}})
    platforms.append(p)
    result = w.run(p)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("False", reasons.GPU.WEBHOOK_UNREACHABLE), message
    assert f'cannot call webhook "{webhook}"' in message
    assert f"hami-scheduler.{hami_ns}.svc" in message
    probe = result.status["gpu"]["health"]["webhook"]
    assert probe["outcome"] == "unreachable"
    assert probe["webhook"] == webhook
    assert probe["checkedAt"] and f"(dry run at {probe['checkedAt']})" in message

    # Nothing changed: the verdict is kept, no dry run is sent.
    def dry_runs() -> int:
        return w.kube.counter.by_verb.get("POST (dry-run)", 0)

    sent = dry_runs()
    kept = w.run(p)
    assert sole_condition(kept)[:2] == ("False", reasons.GPU.WEBHOOK_UNREACHABLE)
    assert kept.status["gpu"]["health"]["webhook"]["checkedAt"] == probe["checkedAt"]
    assert dry_runs() == sent
    # An input changed (the tenant namespace): checked again, still unreachable.
    w.kube.merge_patch("v1", "Namespace", tenant, {"metadata": {"labels": {f"{u}-touched": "yes"}}})
    again = w.run(p)
    assert sole_condition(again)[:2] == ("False", reasons.GPU.WEBHOOK_UNREACHABLE)
    assert dry_runs() == sent + 1

    # The webhook gone (a MutatingWebhookConfiguration the operator may not watch, so seen at the
    # next interval: here forced with an interval of 0): the dry run passes, and nobody gave the
    # pod HAMi's scheduler (a note).
    w.kube.delete("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", f"{u}-hami-webhook")
    assert sole_condition(w.run(p))[1] == reasons.GPU.WEBHOOK_UNREACHABLE  # the kept verdict
    every_pass = Settings(webhook_probe_interval=0)

    def recovered() -> StepResult | None:
        again = w.run(p, settings=every_pass)
        return again if sole_condition(again)[1] != reasons.GPU.WEBHOOK_UNREACHABLE else None

    after = wait_for(recovered, "the webhook configuration to be gone from the API server's cache", 30)
    assert after.status["gpu"]["health"]["webhook"]["outcome"] == "unmutated"
    assert "No webhook gave the dry-run GPU pod" in sole_condition(after)[2]


def hami_scheduler(namespace: str) -> dict[str, Any]:
    """HAMi's scheduler Deployment as its chart labels it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "hami-scheduler",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/component": "hami-scheduler"},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "hami-scheduler"}},
            "template": {
                "metadata": {"labels": {"app": "hami-scheduler"}},
                "spec": {"containers": [{"name": "s", "image": PAUSE}]},
            },
        },
    }


def test_a_fail_open_webhook_with_hamis_scheduler_deployed_fails_gpu_ready(
    world: tuple[World, list[TenantPlatform]],
) -> None:
    """HAMi's chart default is ``failurePolicy: Ignore``: when the API server cannot reach the
    webhook (the Kamaji lab's failure: a tenant control plane without a path to HAMi's Service),
    GPU pods are admitted unmutated and go to the default scheduler, past HAMi's accounting. With
    HAMi's scheduler deployed (and ready) that is GPUReady False, not a note."""
    w, platforms = world
    u = w.prefix
    tenant = w.namespace(f"{u}-tenant", labels={f"{u}-webhook": "on"})
    hami_ns = w.namespace(f"{u}-hami")
    w.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "hami-scheduler", "namespace": hami_ns},
            "spec": {"ports": [{"port": 443, "targetPort": 9443}], "selector": {"app": "nothing-runs-here"}},
        }
    )
    w.kube.create(hami_scheduler(hami_ns))
    w.kube.merge_patch(
        "apps/v1",
        "Deployment",
        "hami-scheduler",
        {"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}},
        namespace=hami_ns,
        subresource="status",
    )
    webhook = f"vgpu.{u}.hami.io"
    w.kube.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": f"{u}-hami-webhook"},
            "webhooks": [
                {
                    "name": webhook,
                    "admissionReviewVersions": ["v1beta1"],
                    "sideEffects": "None",
                    "failurePolicy": "Ignore",  # HAMi's chart default (scheduler.admissionWebhook.failurePolicy)
                    "matchPolicy": "Equivalent",
                    "timeoutSeconds": 3,
                    "namespaceSelector": {"matchLabels": {f"{u}-webhook": "on"}},
                    "objectSelector": {
                        "matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                            "scope": "*",
                        }
                    ],
                    "clientConfig": {"service": {"name": "hami-scheduler", "namespace": hami_ns, "path": "/webhook"}},
                }
            ],
        }
    )
    w.track("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", f"{u}-hami-webhook")
    w.hami_node("gpu", count="10")  # one card, split 10, as HAMi's device plugin advertises it
    p = platform(f"{u}-p", tenant, uid=str(uuid.uuid4()), generation=1, gpu={"hami": {"configMapNamespace": hami_ns}})
    platforms.append(p)
    result = w.run(p)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("False", reasons.GPU.WEBHOOK_NOT_IN_PATH), message
    assert f"namespace {tenant}" in message
    assert f"Deployment {hami_ns}/hami-scheduler" in message
    assert "failurePolicy: Ignore" in message
    probe = result.status["gpu"]["health"]["webhook"]
    assert probe["outcome"] == "unmutated"
    assert probe["schedulerName"] == "default-scheduler"
    # Nothing was stored by the dry run.
    assert w.kube.list("v1", "Pod", tenant) == []

    # The same with failurePolicy Fail is WebhookUnreachable (the pod is rejected, not let through):
    # whatever the policy, GPUReady is False.
    live = w.kube.get("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", f"{u}-hami-webhook")
    assert live is not None
    live["webhooks"][0]["failurePolicy"] = "Fail"
    w.kube.replace(live)
    every_pass = Settings(webhook_probe_interval=0)

    def rejected() -> StepResult | None:
        again = w.run(p, settings=every_pass)
        return again if sole_condition(again)[1] == reasons.GPU.WEBHOOK_UNREACHABLE else None

    failed = wait_for(rejected, "the webhook's failurePolicy Fail to reach the API server's cache", 30)
    assert sole_condition(failed)[0] == "False"


# -- as the operator's own identity ------------------------------------------------------------------------


def test_the_operator_identity_may_do_every_read_and_the_dry_run(
    world: tuple[World, list[TenantPlatform]], as_operator: Kube
) -> None:
    """Under the shipped RBAC and writes-fence: RuntimeClasses, HAMi's Deployments, every DaemonSet
    and the dry-run GPU pod in a platform namespace all succeed (no "Could not" note, the dry run
    judged), and nothing is stored."""
    w, platforms = world
    u = w.prefix
    tenant = w.namespace(f"{u}-tenant", labels={"tenancy.dev/tenant-platform": f"{u}-p"})
    hami_ns = w.namespace(f"{u}-hami")
    w.node("gpu", handlers=["nvidia"])
    p = platform(f"{u}-p", tenant, uid=str(uuid.uuid4()), generation=1, gpu={"hami": {"configMapNamespace": hami_ns}})
    platforms.append(p)
    result = w.run(p, kube=as_operator)
    health = result.status["gpu"]["health"]
    assert not any(n.startswith("Could not") for n in health.get("notes", [])), health
    assert health["webhook"]["outcome"] == "unmutated", health
    assert w.kube.list("v1", "Pod", tenant) == []
