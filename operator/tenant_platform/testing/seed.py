"""Seed a bare control plane with what a real target cluster already has before the operator runs.

``seed_cluster`` creates: namespace istio-system; minimal Istio CRDs (data/istio-crds.yaml, ours,
not Istio's); an istiod Deployment and the istio-ingressgateway Service; the stock kubeadm CoreDNS
ConfigMap, Deployment and kube-dns Service in kube-system; a default StorageClass ``local-path``;
three HAMi GPU nodes and one CPU node. Namespace ``kamiwaza`` is deliberately absent: the operator
creates it.

Every object is created if absent and left alone if present (409 AlreadyExists is ignored), so it
is safe to run on every test session or demo start. Nothing runs: there is no kubelet, scheduler or
workload controller, so Deployments never get pods and Nodes keep the status written here.

The ``*_manifest`` factories return plain dicts that tests reuse to make more nodes and pods.
"""

from __future__ import annotations

import datetime
import importlib.resources
import json
import os
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import kubernetes.client
import kubernetes.config
import yaml

Obj = dict[str, Any]

ISTIO_NAMESPACE: Final = "istio-system"
ISTIOD_IMAGE: Final = "docker.io/istio/pilot:1.28.0"
COREDNS_IMAGE: Final = "registry.k8s.io/coredns/coredns:v1.13.1"
STORAGE_CLASS: Final = "local-path"
DEFAULT_STORAGE_CLASS_ANNOTATION: Final = "storageclass.kubernetes.io/is-default-class"

HAMI_REGISTER_ANNOTATION: Final = "hami.io/node-nvidia-register"
HAMI_HANDSHAKE_ANNOTATION: Final = "hami.io/node-handshake"
GPU_RESOURCE: Final = "nvidia.com/gpu"
GPU_PRESENT_LABEL: Final = "nvidia.com/gpu.present"
# HAMi's deviceSplitCount default: each card is advertised as this many nvidia.com/gpu slots.
DEFAULT_SPLIT_COUNT: Final = 10
_NOT_READY_TAINT: Final = "node.kubernetes.io/not-ready"
# Fixed namespace for the card UUIDs, so a node's cards keep their ids across runs.
_UUID_NAMESPACE: Final = uuid.UUID("6b1f3e1c-5a52-4d0e-9d4e-2f0f6c7a8b90")

# kubeadm's Corefile for dnsDomain cluster.local and the host's resolv.conf as upstream.
STOCK_COREFILE: Final = """\
.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
"""


@dataclass(frozen=True)
class GpuNode:
    """One seeded GPU node: ``cards`` cards of ``model`` with ``mem_mib`` MiB each."""

    name: str
    cards: int
    model: str
    mem_mib: int
    gpu_present_label: bool = True


# Memory per card as NVML reports it (the L40S figure is HAMi's own protocol example).
DEFAULT_GPU_NODES: Final = (
    GpuNode("gpu-node-1", 8, "NVIDIA H200", 143771),
    GpuNode("gpu-node-2", 4, "NVIDIA A100-SXM4-80GB", 81920),
    GpuNode("gpu-node-3", 2, "NVIDIA L40S", 49140, gpu_present_label=False),
)
DEFAULT_CPU_NODES: Final = ("cpu-node-1",)


# -- factories (pure) ---------------------------------------------------------------------------


def hami_device_uuid(node_name: str, index: int) -> str:
    """A stable, NVML-shaped card UUID (``GPU-xxxxxxxx-...``) for card ``index`` of a node."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node_name}/{index}')}"


def hami_register_annotation(
    node_name: str,
    *,
    cards: int,
    model: str,
    mem_mib: int,
    unhealthy: Collection[int] = (),
    split_count: int = DEFAULT_SPLIT_COUNT,
) -> str:
    """The ``hami.io/node-nvidia-register`` value in HAMi's v2.8+ JSON format (as v2.10 writes it).

    Go's omitempty drops zero values: card 0 has no ``index``, NUMA node 0 has no ``numa``, and an
    unhealthy card has no ``health`` (missing means unhealthy). The first half of the cards sits
    on NUMA node 0, the rest on node 1.
    """
    devices = []
    for index in range(cards):
        device: Obj = {"id": hami_device_uuid(node_name, index)}
        if index:
            device["index"] = index
        device |= {"count": split_count, "devmem": mem_mib, "devcore": 100, "type": model}
        if numa := (1 if cards > 1 and index >= cards // 2 else 0):
            device["numa"] = numa
        device["mode"] = "hami-core"
        if index not in unhealthy:
            device["health"] = True
        devices.append(device)
    return json.dumps(devices, separators=(",", ":"))


def _now(now: datetime.datetime | None) -> datetime.datetime:
    return (now or datetime.datetime.now(datetime.UTC)).replace(microsecond=0)


def _timestamp(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready_conditions(now: datetime.datetime) -> list[Obj]:
    stamp = _timestamp(now)
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory"),
        ("DiskPressure", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "KubeletHasSufficientPID"),
    ]
    conditions: list[Obj] = [
        {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": "seeded by tenant_platform.testing",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
        for kind, reason in pressure
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    return conditions


def node_manifest(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "128Gi",
    pods: str = "110",
    extra_capacity: Mapping[str, str] | None = None,
    extra_allocatable: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    address: str = "10.1.0.1",
    now: datetime.datetime | None = None,
) -> Obj:
    """A Node as a kubelet would register it, with ``status`` (kept by the API on create).

    Ready=True; ``extra_allocatable`` defaults to ``extra_capacity``.
    """
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "1Ti"}
    capacity |= dict(extra_capacity or {})
    allocatable = dict(capacity)
    allocatable |= dict(extra_allocatable if extra_allocatable is not None else extra_capacity or {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
            "annotations": dict(annotations or {}),
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": _ready_conditions(_now(now)),
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": uuid.uuid5(_UUID_NAMESPACE, name).hex,
                "systemUUID": str(uuid.uuid5(_UUID_NAMESPACE, f"system/{name}")),
                "bootID": str(uuid.uuid5(_UUID_NAMESPACE, f"boot/{name}")),
                "kernelVersion": "6.8.0-87-generic",
                "osImage": "Ubuntu 24.04.3 LTS",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": "v1.36.3",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def gpu_node_manifest(
    name: str,
    cards: int,
    model: str,
    mem_mib: int,
    *,
    unhealthy: Collection[int] = (),
    gpu_present_label: bool = True,
    split_count: int = DEFAULT_SPLIT_COUNT,
    cpu: str = "96",
    memory: str = "1Ti",
    address: str = "10.1.0.1",
    now: datetime.datetime | None = None,
) -> Obj:
    """A GPU node as HAMi's device plugin leaves it.

    Capacity ``nvidia.com/gpu`` = cards x split_count; allocatable counts healthy cards only, as
    the device plugin does. Annotations: the register list and a handshake stamp. Label
    ``gpu=on`` (the device plugin's nodeSelector), and ``nvidia.com/gpu.present=true`` when
    ``gpu_present_label`` (NFD or the NVIDIA chart set it; a pure HAMi cluster does not).
    """
    moment = _now(now)
    labels: dict[str, str] = {}
    if gpu_present_label:
        labels[GPU_PRESENT_LABEL] = "true"
    healthy = cards - len({index for index in unhealthy if 0 <= index < cards})
    return node_manifest(
        name,
        cpu=cpu,
        memory=memory,
        extra_capacity={GPU_RESOURCE: str(cards * split_count)},
        extra_allocatable={GPU_RESOURCE: str(healthy * split_count)},
        labels=labels,
        annotations={
            HAMI_REGISTER_ANNOTATION: hami_register_annotation(
                name,
                cards=cards,
                model=model,
                mem_mib=mem_mib,
                unhealthy=unhealthy,
                split_count=split_count,
            ),
            HAMI_HANDSHAKE_ANNOTATION: f"Requesting_{moment:%Y-%m-%d %H:%M:%S}",
        },
        address=address,
        now=moment,
    )


def hami_devices_annotation(devices: Sequence[tuple[str, int, int]]) -> str:
    """Encode one container's cards, ``(uuid, mem_mib, cores)`` each, as HAMi's pod annotations do."""
    return "".join(f"{card},NVIDIA,{mem},{cores}:" for card, mem, cores in devices) + ";"


def gpu_pod_manifest(
    name: str,
    *,
    namespace: str,
    node_name: str,
    devices: Sequence[tuple[str, int, int]],
    bind_phase: str = "success",
    image: str = "registry.k8s.io/pause:3.10.1",
    labels: Mapping[str, str] | None = None,
    now: datetime.datetime | None = None,
) -> Obj:
    """A one-container pod that HAMi placed on ``node_name`` with ``devices`` ``(uuid, MiB, cores)``.

    Bound at create (``spec.nodeName``; no scheduler runs). Annotations follow HAMi's Filter and
    Bind; with ``bind_phase="success"`` the device plugin has consumed ``...-to-allocate``.
    Limits ask for ``len(devices)`` cards with the first device's memory and cores.
    """
    stamp = str(int(_now(now).timestamp()))
    allocated = hami_devices_annotation(devices)
    limits = {GPU_RESOURCE: str(len(devices))}
    if devices:
        limits |= {"nvidia.com/gpumem": str(devices[0][1]), "nvidia.com/gpucores": str(devices[0][2])}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": {
                "hami.io/vgpu-node": node_name,
                "hami.io/vgpu-time": stamp,
                "hami.io/vgpu-devices-allocated": allocated,
                "hami.io/vgpu-devices-to-allocate": ";" if bind_phase == "success" else allocated,
                "hami.io/bind-phase": bind_phase,
                "hami.io/bind-time": stamp,
            },
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "main", "image": image, "resources": {"limits": limits}}],
        },
    }


def istio_crds() -> list[Obj]:
    """Our minimal Istio CRDs from ``data/istio-crds.yaml``."""
    text = importlib.resources.files("tenant_platform").joinpath("data/istio-crds.yaml").read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _deployment(
    name: str, namespace: str, *, labels: Mapping[str, str], container: Obj, volumes: Sequence[Obj] = ()
) -> Obj:
    pod_spec: Obj = {"containers": [container]}
    if volumes:
        pod_spec["volumes"] = list(volumes)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def cluster_manifests() -> list[Obj]:
    """Everything ``seed_cluster`` creates except CRDs and nodes, in creation order."""
    istiod_labels = {"app": "istiod", "istio": "pilot"}
    dns_labels = {"k8s-app": "kube-dns"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ISTIO_NAMESPACE}},
        _deployment(
            "istiod",
            ISTIO_NAMESPACE,
            labels=istiod_labels,
            container={
                "name": "discovery",
                "image": ISTIOD_IMAGE,
                "args": ["discovery", "--monitoringAddr=:15014", "--log_output_level=default:info"],
                "ports": [
                    {"containerPort": 8080, "protocol": "TCP"},
                    {"containerPort": 15010, "protocol": "TCP"},
                    {"containerPort": 15017, "protocol": "TCP"},
                ],
            },
        ),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "istio-ingressgateway",
                "namespace": ISTIO_NAMESPACE,
                "labels": {"app": "istio-ingressgateway", "istio": "ingressgateway"},
            },
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": "istio-ingressgateway", "istio": "ingressgateway"},
                "ports": [
                    {"name": "http2", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                    {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": "kube-system"},
            "data": {"Corefile": STOCK_COREFILE},
        },
        _deployment(
            "coredns",
            "kube-system",
            labels=dns_labels,
            container={
                "name": "coredns",
                "image": COREDNS_IMAGE,
                "args": ["-conf", "/etc/coredns/Corefile"],
                "ports": [
                    {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"},
                    {"name": "metrics", "containerPort": 9153, "protocol": "TCP"},
                ],
                "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True}],
            },
            volumes=[
                {
                    "name": "config-volume",
                    "configMap": {"name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]},
                }
            ],
        ),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "kube-dns",
                "namespace": "kube-system",
                "labels": {**dns_labels, "kubernetes.io/name": "CoreDNS"},
            },
            "spec": {
                "selector": dict(dns_labels),
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
                    {"name": "metrics", "port": 9153, "protocol": "TCP"},
                ],
            },
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {DEFAULT_STORAGE_CLASS_ANNOTATION: "true"},
            },
            "provisioner": "rancher.io/local-path",
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    ]


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
    """Wait until every named CRD reports Established=True; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        crd = request(api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{pending[0]}")
        conditions = crd.get("status", {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            pending.pop(0)
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRDs not Established after {timeout:.0f}s: {', '.join(pending)}")
        time.sleep(0.1)


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
