"""What the gpu step gathered for one pass (``GpuFacts``), and which nodes are GPU nodes.

A node is a GPU node when it advertises one (GPU capacity, NVIDIA feature-discovery labels, a
HAMi register annotation: capacity.advertised_by) or when concerns/gpu/health.py's other sources find it
(an NVIDIA runtime handler, an NVIDIA RuntimeClass's nodeSelector, ``spec.gpu.nodeSelector``).

Every pass asks this of every node; ``DETECTIONS`` keeps each node's answer while the node is the
same immutable object (the snapshot replaces a node's ``NodeInfo`` only when something kept of it
changed) and HAMi's resource names and the selectors are equal to last time.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Final

from tenant_platform.concerns.gpu.capacity import advertised_by
from tenant_platform.concerns.gpu.health import HealthFacts, Selector, detected_by
from tenant_platform.concerns.gpu.labels import NodeLike
from tenant_platform.formats.hami.allocations import PodLike
from tenant_platform.formats.hami.locks import PodLookup
from tenant_platform.formats.hami.names import DEFAULT_NAMES, ResourceNames, hami_annotation


def detect(node: NodeLike, names: ResourceNames, selectors: Sequence[Selector]) -> tuple[str, ...]:
    """Every source that makes ``node`` a GPU node (none: it is not one)."""
    advertised = advertised_by(
        labels=node.labels, annotations=node.annotations, capacity=node.capacity, count_resource=names.count
    )
    return detected_by(
        advertised=advertised, labels=node.labels, runtime_handlers=node.runtime_handlers, selectors=tuple(selectors)
    )


def _immutable(node: NodeLike) -> bool:
    """A frozen dataclass (observe's NodeInfo): the same object always says the same."""
    params = getattr(type(node), "__dataclass_params__", None)
    return bool(params is not None and params.frozen)


class DetectionCache:
    """Each node's ``detect`` answer by node name, from the last pass over all nodes; reused while
    the node is the same frozen object and the resource names and selectors are equal. Holds the
    nodes of the last pass only (a deleted node's entry goes with the next pass). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: ResourceNames = DEFAULT_NAMES
        self._selectors: tuple[Selector, ...] = ()
        self._entries: dict[str, tuple[NodeLike, tuple[str, ...]]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def detections(
        self, nodes: Mapping[str, NodeLike], names: ResourceNames, selectors: tuple[Selector, ...]
    ) -> dict[str, tuple[str, ...]]:
        """GPU node -> every source that makes it one, over ``nodes``."""
        with self._lock:
            same = names == self._names and selectors == self._selectors
            previous = self._entries if same else {}
        entries: dict[str, tuple[NodeLike, tuple[str, ...]]] = {}
        out: dict[str, tuple[str, ...]] = {}
        hits = 0
        for node in nodes.values():
            found = previous.get(node.name)
            if found is not None and found[0] is node:
                entries[node.name] = found
                sources = found[1]
                hits += 1
            else:
                sources = detect(node, names, selectors)
                if _immutable(node):
                    entries[node.name] = (node, sources)
            if sources:
                out[node.name] = sources
        with self._lock:
            self._entries, self._names, self._selectors = entries, names, selectors
            self.hits += hits
            self.misses += len(nodes) - hits
        return out

    def clear(self) -> None:
        with self._lock:
            self._entries = {}


DETECTIONS: Final = DetectionCache()
"""The process's detection cache (``DETECTIONS.clear()``)."""


@dataclass(frozen=True)
class GpuFacts:
    """What the gpu step read: the snapshot's nodes and HAMi pods, HAMi's resource names, the
    selectors that mark GPU nodes, and HAMi's health (concerns/gpu/health.py)."""

    nodes: Mapping[str, NodeLike]
    pods_by_node: Mapping[str, Sequence[PodLike]]
    pod: PodLookup
    """Finds a snapshot pod by namespace and name (a node lock's owner)."""
    synced: bool = True
    """The snapshot had a complete listing of nodes and pods."""
    stale_since: datetime | None = None
    """When the snapshot stopped being current (no listing yet, a relist, a failing watch)."""
    stale_why: str = ""
    names: ResourceNames = DEFAULT_NAMES
    names_source: str = "defaults"
    selectors: tuple[Selector, ...] = ()
    """spec.gpu.nodeSelector and the nodeSelectors of NVIDIA RuntimeClasses."""
    health: HealthFacts = field(default_factory=HealthFacts)

    @classmethod
    def of_view(cls, view: Any, **read: Any) -> GpuFacts:
        """From a snapshot view (observe's ClusterView: nodes, HAMi pods, whether it is current)
        and what else the pass ``read`` (names, selectors, health)."""
        return cls(
            nodes=view.nodes,
            pods_by_node=view.pods_by_node,
            pod=view.pod,
            synced=view.synced,
            stale_since=view.stale_since,
            stale_why=view.stale_why,
            **read,
        )

    @cached_property
    def detections(self) -> dict[str, tuple[str, ...]]:
        """GPU node -> every source that makes it one (concerns/gpu/health.py SOURCES)."""
        return DETECTIONS.detections(self.nodes, self.names, tuple(self.selectors))

    @cached_property
    def gpu_nodes(self) -> list[str]:
        """Every GPU node, by name."""
        return sorted(self.detections)

    def annotation(self, node: str, suffix: str) -> str | None:
        found = hami_annotation(self.nodes[node].annotations, suffix)
        return found[1] if found else None
