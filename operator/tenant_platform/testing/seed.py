"""Seed a bare control plane with what a real target cluster already has before the operator runs.

``seed_cluster`` creates: minimal Istio CRDs (data/istio-crds.yaml, ours, not Istio's); what
data/seed/cluster.yaml lists (namespace istio-system, an istiod Deployment and the
istio-ingressgateway Service; the stock kubeadm CoreDNS ConfigMap, Deployment and kube-dns Service
in kube-system; a default StorageClass ``local-path``); and the nodes of data/seed/nodes.yaml
(three HAMi GPU nodes and one CPU node, built by ``testing.manifests``). Namespace ``kamiwaza`` is
deliberately absent: the operator creates it.

Every object is created if absent and left alone if present (409 AlreadyExists is ignored), so it
is safe to run on every test session or demo start. Nothing runs: there is no kubelet, scheduler or
workload controller, so Deployments never get pods and Nodes keep the status written here. The
raw API helpers here (``request``, ``object_path``, ``api_client_from_kubeconfig``) serve tests
too.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import kubernetes.client
import kubernetes.config
import yaml

from tenant_platform.testing.manifests import gpu_node_manifest, node_manifest
from tenant_platform.testing.wait import wait_for

Obj = dict[str, Any]

ISTIO_NAMESPACE: Final = "istio-system"
_NOT_READY_TAINT: Final = "node.kubernetes.io/not-ready"


def _data(name: str) -> list[Any]:
    """The documents of ``data/<name>``, parsed afresh (callers may change them)."""
    text = importlib.resources.files("tenant_platform").joinpath("data", name).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


@dataclass(frozen=True)
class GpuNode:
    """One seeded GPU node: ``cards`` cards of ``model`` with ``mem_mib`` MiB each."""

    name: str
    cards: int
    model: str
    mem_mib: int
    gpu_present_label: bool = True


def _nodes() -> tuple[tuple[GpuNode, ...], tuple[str, ...]]:
    (nodes,) = _data("seed/nodes.yaml")
    gpu = tuple(
        GpuNode(node["name"], node["cards"], node["model"], node["memMiB"], node["gpuPresentLabel"])
        for node in nodes["gpuNodes"]
    )
    return gpu, tuple(nodes["cpuNodes"])


DEFAULT_GPU_NODES, DEFAULT_CPU_NODES = _nodes()


def istio_crds() -> list[Obj]:
    """Our minimal Istio CRDs from ``data/istio-crds.yaml``."""
    return _data("istio-crds.yaml")


def cluster_manifests() -> list[Obj]:
    """Everything ``seed_cluster`` creates except CRDs and nodes, in creation order."""
    return _data("seed/cluster.yaml")


# kubeadm's Corefile for dnsDomain cluster.local and the host's resolv.conf as upstream.
STOCK_COREFILE: Final[str] = next(
    obj["data"]["Corefile"]
    for obj in cluster_manifests()
    if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "coredns"
)


def seed_nodes() -> list[Obj]:
    """The default GPU and CPU nodes."""
    nodes = [
        gpu_node_manifest(
            node.name,
            node.cards,
            node.model,
            node.mem_mib,
            gpu_present_label=node.gpu_present_label,
            address=f"10.1.0.{index}",
        )
        for index, node in enumerate(DEFAULT_GPU_NODES, start=11)
    ]
    nodes += [node_manifest(name, address=f"10.1.0.{index}") for index, name in enumerate(DEFAULT_CPU_NODES, start=21)]
    return nodes


# -- API I/O ------------------------------------------------------------------------------------

_PLURALS: Final = {
    "Namespace": "namespaces",
    "Node": "nodes",
    "Service": "services",
    "ConfigMap": "configmaps",
    "Deployment": "deployments",
    "StorageClass": "storageclasses",
    "CustomResourceDefinition": "customresourcedefinitions",
    "Pod": "pods",
}


def object_path(obj: Obj, *, name: bool = True) -> str:
    """REST path of a built-in or CRD object (collection path when ``name`` is False)."""
    api_version = str(obj["apiVersion"])
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    meta = obj["metadata"]
    namespace = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    path = f"{prefix}{namespace}/{_PLURALS[obj['kind']]}"
    return f"{path}/{meta['name']}" if name else path


def request(
    api: kubernetes.client.ApiClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
) -> Obj:
    """One raw API call; returns the decoded JSON. Raises kubernetes.client.ApiException on HTTP errors."""
    method_, url, headers, body_, post = api.param_serialize(
        method,
        path,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method_, url, headers, body_, post, _request_timeout=30)
    raw = response.read()  # type: ignore[no-untyped-call]
    if not 200 <= int(response.status) < 300:
        raise kubernetes.client.ApiException(
            status=int(response.status), reason=response.reason, body=(raw or b"").decode(errors="replace")
        )
    decoded: Obj = json.loads(raw) if raw else {}
    return decoded


def create_or_ignore(api: kubernetes.client.ApiClient, obj: Obj) -> bool:
    """Create ``obj``; False when it already exists (then it is left as it is)."""
    try:
        request(api, "POST", object_path(obj, name=False), body=obj)
    except kubernetes.client.ApiException as error:
        if error.status == 409:
            return False
        raise
    return True


def mark_node_ready(api: kubernetes.client.ApiClient, name: str) -> None:
    """Drop the not-ready taint that admission (TaintNodesByCondition) adds to every new node.

    NB: the node-lifecycle controller would remove it once Ready=True, but it is not run here
    because it would also taint and evict everything on nodes without a kubelet heartbeat.
    """
    node = request(api, "GET", f"/api/v1/nodes/{name}")
    taints = node.get("spec", {}).get("taints") or []
    kept = [taint for taint in taints if taint.get("key") != _NOT_READY_TAINT]
    if len(kept) == len(taints):
        return
    patch = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
        {"op": "replace", "path": "/spec/taints", "value": kept},
    ]
    request(api, "PATCH", f"/api/v1/nodes/{name}", body=patch, content_type="application/json-patch+json")


def wait_established(api: kubernetes.client.ApiClient, names: Sequence[str], *, timeout: float = 60) -> None:
    """Wait until every named CRD reports Established=True (``wait.WaitTimeout`` otherwise)."""

    def established(name: str) -> bool:
        crd = request(api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = crd.get("status", {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    for name in names:
        wait_for(functools.partial(established, name), f"CRD {name} to be Established", timeout)


def api_client_from_kubeconfig(path: str | os.PathLike[str]) -> kubernetes.client.ApiClient:
    """An ApiClient for the kubeconfig at ``path`` (its current context); close it when done."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=os.fspath(path), client_configuration=configuration
    )
    return kubernetes.client.ApiClient(configuration)


def seed_cluster(api_client_or_kubeconfig: kubernetes.client.ApiClient | str | os.PathLike[str]) -> None:
    """Create the seeded cluster (see the module docstring); idempotent.

    Accepts an ApiClient or the path of a kubeconfig (an admin one: it creates nodes and CRDs).
    """
    if isinstance(api_client_or_kubeconfig, kubernetes.client.ApiClient):
        _seed(api_client_or_kubeconfig)
        return
    api = api_client_from_kubeconfig(api_client_or_kubeconfig)
    try:
        _seed(api)
    finally:
        api.close()  # type: ignore[no-untyped-call]


def _seed(api: kubernetes.client.ApiClient) -> None:
    crds = istio_crds()
    for crd in crds:
        create_or_ignore(api, crd)
    for obj in cluster_manifests():
        create_or_ignore(api, obj)
    for node in seed_nodes():
        create_or_ignore(api, node)
        mark_node_ready(api, node["metadata"]["name"])
    wait_established(api, [crd["metadata"]["name"] for crd in crds])
