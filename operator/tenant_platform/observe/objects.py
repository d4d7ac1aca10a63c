"""What the GPU snapshot keeps of a Node or a Pod (observe/cluster.py stores them).

Only what the GPU step needs, never whole bodies; every HAMi annotation value kept is bounded
(formats/hami/bounds.py: a longer one becomes a short marker the parsers reject), and a pod "placed" on
a node name no Node can have is not kept. Every Node is kept (a label selector in the spec or
on an ``nvidia`` RuntimeClass may make any node a GPU node), with at most MAX_RUNTIME_HANDLERS
runtime handler names and MAX_TAINTS NoSchedule/NoExecute taints, each shortened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from tenant_platform.core.identities import LABEL_MANAGER_PREFIX, VALUE_MANAGER_PREFIX
from tenant_platform.formats.hami import bounds, names

# The longest Node name the API server accepts (a DNS subdomain).
MAX_NODE_NAME: Final = 253
# Runtime handlers (status.runtimeHandlers) and taints kept per node, each name at most 63/120 chars.
MAX_RUNTIME_HANDLERS: Final = 16
MAX_TAINTS: Final = 8
# Taint effects that keep pods away (PreferNoSchedule only prefers).
BLOCKING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    """HAMi annotations only (either prefix)."""
    capacity: Mapping[str, str]
    """Extended resources only (names with a '/')."""
    allocatable: Mapping[str, str]
    label_managers: Mapping[str, frozenset[str]]
    """Platform name -> label keys its per-platform field manager (earlier versions) owns."""
    runtime_handlers: tuple[str, ...] = ()
    """Names in status.runtimeHandlers (at most MAX_RUNTIME_HANDLERS)."""
    taints: tuple[tuple[str, str, str], ...] = ()
    """(key, value, effect) of NoSchedule/NoExecute taints (at most MAX_TAINTS)."""
    label_holders: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Label key -> our value managers (concerns/gpu/labels.py ``value_manager``) that own it on this node, sorted."""


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    node: str
    phase: str
    bind_phase: str
    allocated: str
    init_containers: int
    app_containers: int
    init_exit_codes: tuple[int | None, ...]


def _annotation(annotations: Mapping[str, Any], suffix: str) -> str | None:
    found = names.hami_annotation(annotations, suffix)
    return bounds.bounded(str(found[1])) if found is not None else None


def _label_managers(
    managed_fields: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, frozenset[str]], dict[str, tuple[str, ...]]]:
    """(platform -> keys its earlier per-platform manager owns, key -> our value managers owning it)."""
    owned: dict[str, set[str]] = {}
    holders: dict[str, set[str]] = {}
    for entry in managed_fields or ():
        manager = str(entry.get("manager") or "")
        if not manager.startswith(LABEL_MANAGER_PREFIX) or entry.get("operation") != "Apply":
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        keys = {key[2:] for key in fields if key.startswith("f:")}
        if not keys:
            continue
        if manager.startswith(VALUE_MANAGER_PREFIX):
            for key in keys:
                holders.setdefault(key, set()).add(manager)
            continue
        platform = manager[len(LABEL_MANAGER_PREFIX) :]
        if "/" not in platform:  # a TenantPlatform name has none
            owned.setdefault(platform, set()).update(keys)
    return (
        {platform: frozenset(keys) for platform, keys in sorted(owned.items())},
        {key: tuple(sorted(managers)) for key, managers in sorted(holders.items())},
    )


def _extended(resources: Mapping[str, Any] | None) -> dict[str, str]:
    return {key: str(value) for key, value in sorted((resources or {}).items()) if "/" in key}


def _runtime_handlers(status: Mapping[str, Any]) -> tuple[str, ...]:
    found = []
    for entry in status.get("runtimeHandlers") or ():
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if isinstance(name, str) and name:
            found.append(bounds.shorten(name, 63))
    # NVIDIA's handlers first, so a node with many handlers still shows them.
    return tuple(sorted(set(found), key=lambda n: (not n.startswith("nvidia"), n))[:MAX_RUNTIME_HANDLERS])


def _taints(spec: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    found = []
    for taint in spec.get("taints") or ():
        if not isinstance(taint, Mapping) or taint.get("effect") not in BLOCKING_EFFECTS:
            continue
        key = bounds.shorten(str(taint.get("key") or ""), 120)
        found.append((key, bounds.shorten(str(taint.get("value") or ""), 63), str(taint["effect"])))
    return tuple(sorted(set(found))[:MAX_TAINTS])


def node_info(body: Mapping[str, Any]) -> NodeInfo:
    """What we keep of a Node body (every node: a label selector may make any node a GPU node)."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    raw_labels = meta.get("labels") or {}
    raw_annotations = meta.get("annotations") or {}
    capacity = _extended(status.get("capacity"))
    managers, holders = _label_managers(meta.get("managedFields") or ())
    annotations = {k: bounds.bounded(str(v)) for k, v in sorted(raw_annotations.items()) if k in names.NODE_ANNOTATIONS}
    labels = {
        k: str(v)
        for k, v in sorted(raw_labels.items())
        if k in names.KEPT_VENDOR_LABELS or not k.startswith(names.VENDOR_LABEL_PREFIXES)
    }
    return NodeInfo(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        labels=MappingProxyType(labels),
        annotations=MappingProxyType(annotations),
        capacity=MappingProxyType(capacity),
        allocatable=MappingProxyType(_extended(status.get("allocatable"))),
        label_managers=MappingProxyType(managers),
        runtime_handlers=_runtime_handlers(status),
        taints=_taints(body.get("spec") or {}),
        label_holders=MappingProxyType(holders),
    )


def pod_info(body: Mapping[str, Any]) -> PodInfo | None:
    """What we keep of a Pod body, or None when HAMi has not placed it or it has terminated."""
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    node = _annotation(annotations, names.POD_NODE)
    status = body.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    if not node or len(node) > MAX_NODE_NAME or phase in names.TERMINATED_PHASES:
        return None  # not placed, ended, or "placed" on a node no Node can be
    spec = body.get("spec") or {}
    exit_codes: list[int | None] = []
    for container in status.get("initContainerStatuses") or ():
        terminated = (container.get("state") or {}).get("terminated")
        code = terminated.get("exitCode", -1) if terminated else None
        exit_codes.append(code if isinstance(code, int) or code is None else -1)
    return PodInfo(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        node=node,
        phase=phase,
        bind_phase=bounds.shorten(_annotation(annotations, names.POD_BIND_PHASE) or "", 64),
        allocated=_annotation(annotations, names.POD_ALLOCATED) or "",
        init_containers=len(spec.get("initContainers") or ()),
        app_containers=len(spec.get("containers") or ()),
        init_exit_codes=tuple(exit_codes),
    )
