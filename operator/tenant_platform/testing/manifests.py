"""Node and pod manifests as a kubelet and HAMi leave them, for seeding and for tests (pure).

``node_manifest`` is a Ready node with ``status``; ``gpu_node_manifest`` adds what HAMi's device
plugin writes (``nvidia.com/gpu`` capacity, the register and handshake annotations);
``gpu_pod_manifest`` is a pod HAMi placed on a node, with its allocation annotations. Card UUIDs
are stable per node and index. HAMi's names come from ``tenant_platform.formats.hami.names``. Each call
returns a fresh dict.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from tenant_platform.formats.hami import names

Obj = dict[str, Any]

_GPU_PRESENT_LABEL: Final = names.GPU_PRESENT_LABELS[0]  # nvidia.com/gpu.present
# HAMi's deviceSplitCount default: each card is advertised as this many nvidia.com/gpu slots.
DEFAULT_SPLIT_COUNT: Final = 10
_ANNOTATION_HANDSHAKE: Final = names.PREFIX + names.HANDSHAKE
# Fixed namespace for the card UUIDs, so a node's cards keep their ids across runs.
_UUID_NAMESPACE: Final = uuid.UUID("6b1f3e1c-5a52-4d0e-9d4e-2f0f6c7a8b90")


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
    ``nvidia.com/gpu.present=true`` when ``gpu_present_label`` (NFD or the NVIDIA chart set it; a
    pure HAMi cluster does not).
    """
    moment = _now(now)
    labels: dict[str, str] = {}
    if gpu_present_label:
        labels[_GPU_PRESENT_LABEL] = "true"
    healthy = cards - len({index for index in unhealthy if 0 <= index < cards})
    return node_manifest(
        name,
        cpu=cpu,
        memory=memory,
        extra_capacity={names.DEFAULT_NAMES.count: str(cards * split_count)},
        extra_allocatable={names.DEFAULT_NAMES.count: str(healthy * split_count)},
        labels=labels,
        annotations={
            names.ANNOTATION_REGISTER: hami_register_annotation(
                name,
                cards=cards,
                model=model,
                mem_mib=mem_mib,
                unhealthy=unhealthy,
                split_count=split_count,
            ),
            _ANNOTATION_HANDSHAKE: f"Requesting_{moment:%Y-%m-%d %H:%M:%S}",
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
    limits = {names.DEFAULT_NAMES.count: str(len(devices))}
    if devices:
        limits |= {names.DEFAULT_NAMES.memory: str(devices[0][1]), names.DEFAULT_NAMES.cores: str(devices[0][2])}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": {
                names.ANNOTATION_POD_NODE: node_name,
                names.PREFIX + "vgpu-time": stamp,
                names.ANNOTATION_POD_ALLOCATED: allocated,
                names.PREFIX + "vgpu-devices-to-allocate": ";" if bind_phase == "success" else allocated,
                names.PREFIX + names.POD_BIND_PHASE: bind_phase,
                names.PREFIX + "bind-time": stamp,
            },
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "main", "image": image, "resources": {"limits": limits}}],
        },
    }
