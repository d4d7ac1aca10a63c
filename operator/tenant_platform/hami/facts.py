"""What the gpu step gathered for one pass (``GpuFacts``), and which nodes are GPU nodes.

A node is a GPU node when it advertises one (GPU capacity, NVIDIA feature-discovery labels, a
HAMi register annotation: capacity.advertised_by) or when hami/health.py's other sources find it
(an NVIDIA runtime handler, an NVIDIA RuntimeClass's nodeSelector, ``spec.gpu.nodeSelector``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from tenant_platform.hami.allocations import PodLike
from tenant_platform.hami.capacity import advertised_by
from tenant_platform.hami.health import HealthFacts, Selector, detected_by
from tenant_platform.hami.labels import NodeLike
from tenant_platform.hami.locks import PodLookup
from tenant_platform.hami.names import DEFAULT_NAMES, ResourceNames, hami_annotation


def detect(node: NodeLike, names: ResourceNames, selectors: Sequence[Selector]) -> tuple[str, ...]:
    """Every source that makes ``node`` a GPU node (none: it is not one)."""
    advertised = advertised_by(
        labels=node.labels, annotations=node.annotations, capacity=node.capacity, count_resource=names.count
    )
    return detected_by(
        advertised=advertised, labels=node.labels, runtime_handlers=node.runtime_handlers, selectors=tuple(selectors)
    )


@dataclass(frozen=True)
class GpuFacts:
    """What the gpu step read: the snapshot's nodes and HAMi pods, HAMi's resource names, the
    selectors that mark GPU nodes, and HAMi's health (hami/health.py)."""

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

    @cached_property
    def detections(self) -> dict[str, tuple[str, ...]]:
        """GPU node -> every source that makes it one (hami/health.py SOURCES)."""
        out: dict[str, tuple[str, ...]] = {}
        for node in self.nodes.values():
            sources = detect(node, self.names, self.selectors)
            if sources:
                out[node.name] = sources
        return out

    @cached_property
    def gpu_nodes(self) -> list[str]:
        """Every GPU node, by name."""
        return sorted(self.detections)

    def annotation(self, node: str, suffix: str) -> str | None:
        found = hami_annotation(self.nodes[node].annotations, suffix)
        return found[1] if found else None
