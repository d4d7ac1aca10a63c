"""``status.gpu`` and the recorded GPU facts, from what ``verdict.evaluate`` decided (pure).

Bounded whatever the cluster holds: at most MAX_LISTED_NODES node entries and NODES_BUDGET bytes
of them (problem nodes first), at most MAX_RECORDED_NODES recorded nodes and RECORDED_BUDGET
bytes. Each node entry also carries what concerns/gpu/health.py found (``NodeExtras``: how it was
detected, its taints, a device-plugin conflict) and its fit (concerns/gpu/fit.py ``free_fit``, kept on
the NodeCapacity). A listed node's entry is built once while its capacity, labelled and extras
stay the same (``EntryMemo``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.gpu import (
    GpuHealthStatus,
    GpuLabelsStatus,
    GpuNodeRecord,
    GpuNodeStatus,
    GpuRecorded,
    GpuStatus,
    GpuTotal,
    ResourceNamesSource,
    ResourceNamesStatus,
)
from tenant_platform.concerns.gpu.capacity import NodeCapacity, quantity_int, summary_line, total_status
from tenant_platform.concerns.gpu.facts import GpuFacts
from tenant_platform.concerns.gpu.fit import total_fit
from tenant_platform.formats.hami.names import GFD_COUNT_LABEL, GFD_PRODUCT_LABEL, ResourceNames

# status.gpu.nodes lists at most this many nodes (problem nodes first); totals and metrics cover
# all. Keeps the status object small on big clusters (a node entry is ~400 bytes).
MAX_LISTED_NODES: Final = 500
# ... and at most this many bytes of node entries (JSON), whatever the annotations hold.
NODES_BUDGET: Final = 256 * 1024
MAX_RECORDED_NODES: Final = 1000
# ... and about this many bytes of them (the install-values ConfigMap carries them too).
RECORDED_BUDGET: Final = 128 * 1024


@dataclass(frozen=True)
class NodeExtras:
    """What a node entry carries besides its capacity."""

    detected_by: tuple[str, ...] = ()
    taints: tuple[str, ...] = ()
    device_plugin_conflict: str | None = None

    def apply(self, entry: GpuNodeStatus, capacity: NodeCapacity | None = None) -> GpuNodeStatus:
        """``entry`` with these extras, and the fit of ``capacity`` when it has cards."""
        return entry.model_copy(
            update={
                "fit": capacity.fit if capacity is not None and capacity.cards else None,
                "detected_by": list(self.detected_by) or None,
                "taints": list(self.taints) or None,
                "device_plugin_conflict": self.device_plugin_conflict,
            }
        )


NO_EXTRAS: Final = NodeExtras()


def is_problem(node: NodeCapacity, *, labelled: bool, flagged: bool = False) -> bool:
    """Listed first when status.gpu.nodes is capped (``flagged``: a health problem of the node)."""
    return bool(
        flagged
        or node.unparseable is not None
        or node.unhealthy
        or (node.lock is not None and node.lock.stale)
        or (labelled and not node.registered)
    )


def listed(
    capacities: Sequence[NodeCapacity],
    labelled: frozenset[str],
    limit: int,
    budget: int = NODES_BUDGET,
    extras: Mapping[str, NodeExtras] | None = None,
) -> list[GpuNodeStatus]:
    """At most ``limit`` node entries and ``budget`` bytes of them, problem nodes first, in name order."""
    more = extras or {}

    def flagged(name: str) -> bool:
        return name in more and more[name].device_plugin_conflict is not None

    ranked = sorted(
        capacities, key=lambda c: (not is_problem(c, labelled=c.name in labelled, flagged=flagged(c.name)), c.name)
    )
    chosen: list[GpuNodeStatus] = []
    used = 0
    for capacity in ranked[:limit]:
        entry, size = ENTRIES.entry(capacity, capacity.name in labelled, more.get(capacity.name, NO_EXTRAS))
        used += size
        if used > budget:
            break
        chosen.append(entry)
    return sorted(chosen, key=lambda e: e.name)


class EntryMemo:
    """A listed node's entry and its JSON size by node name, reused while the node's capacity is
    the same object (concerns/gpu/capacity.py CapacityCache hands out the same one while nothing about the
    node changed; a held lock makes a new one every pass) and labelled and extras are equal. At most
    MAX_ENTRIES (then it starts over). Thread-safe."""

    MAX_ENTRIES: Final = 4 * MAX_LISTED_NODES

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[NodeCapacity, bool, NodeExtras, GpuNodeStatus, int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, capacity: NodeCapacity, labelled: bool, extras: NodeExtras) -> tuple[GpuNodeStatus, int]:
        """(the node's status entry, its JSON size in bytes)."""
        with self._lock:
            found = self._entries.get(capacity.name)
        if found is not None and found[0] is capacity and found[1] == labelled and found[2] == extras:
            return found[3], found[4]
        entry = extras.apply(capacity.to_status(labelled=labelled), capacity)
        size = len(json.dumps(entry.dump(), separators=(",", ":")))
        with self._lock:
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[capacity.name] = (capacity, labelled, extras, entry, size)
        return entry, size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


ENTRIES: Final = EntryMemo()
"""The process's memo of listed node entries (``ENTRIES.clear()``)."""


def _resource_names(names: ResourceNames) -> ResourceNamesStatus:
    return ResourceNamesStatus(
        count=names.count,
        memory=names.memory,
        memory_percentage=names.memory_percentage,
        cores=names.cores,
        priority=names.priority,
    )


def status_section(
    platform: TenantPlatform,
    facts: GpuFacts,
    *,
    capacities: Sequence[NodeCapacity],
    labelled: frozenset[str],
    wanted: Mapping[str, str],
    extras: Mapping[str, NodeExtras] | None = None,
    health: GpuHealthStatus | None = None,
    total: GpuTotal | None = None,
) -> GpuStatus:
    """``status.gpu``: per node (capped), totals, the printer-column summary, labels, names.

    ``total``: ``total_status(capacities)`` when the caller has it already."""
    spec = platform.spec.gpu
    if not spec.node_labels.enabled and not spec.hami.enabled:
        return GpuStatus(summary="disabled")
    gpu_nodes = facts.gpu_nodes
    names: ResourceNamesSource | None = None
    if spec.hami.enabled:
        count = len(capacities)
        entries = listed(capacities, labelled, MAX_LISTED_NODES, extras=extras)
        ignored = sum(c.ignored_count for c in capacities)
        rollup = total if total is not None else total_status(capacities)
        total = rollup.model_copy(update={"fit": total_fit([c.fit for c in capacities])})
        summary = summary_line(total)
        names = ResourceNamesSource(**_resource_names(facts.names).model_dump(), source=facts.names_source)
    else:
        count = len(gpu_nodes)
        more = extras or {}
        entries = [
            more.get(n, NO_EXTRAS).apply(GpuNodeStatus(name=n, labelled=n in labelled))
            for n in gpu_nodes[:MAX_LISTED_NODES]
        ]
        ignored = 0
        total = GpuTotal(nodes=len(gpu_nodes))
        summary = f"{len(gpu_nodes)} GPU nodes"
    return GpuStatus(
        nodes=entries,
        total=total,
        summary=summary,
        labels=GpuLabelsStatus(wanted=dict(sorted(wanted.items())), labelled_nodes=len(labelled)),
        nodes_omitted=count - len(entries) if count > len(entries) else None,
        resource_names=names,
        ignored_pods=ignored or None,
        health=health,
    )


def recorded_facts(facts: GpuFacts, *, capacities: Sequence[NodeCapacity], names: ResourceNames | None) -> GpuRecorded:
    """Per GPU node (at most MAX_RECORDED_NODES, RECORDED_BUDGET bytes) its main model and cards; HAMi's names."""
    by_name = {c.name: c for c in capacities}
    records = []
    used = 0
    for name in facts.gpu_nodes[:MAX_RECORDED_NODES]:
        capacity = by_name.get(name)
        if capacity is not None and capacity.cards:
            record = GpuNodeRecord(name=name, model=capacity.main_model, cards=len(capacity.cards))
        else:
            labels = facts.nodes[name].labels
            record = GpuNodeRecord(
                name=name,
                model=labels.get(GFD_PRODUCT_LABEL, ""),
                cards=quantity_int(labels.get(GFD_COUNT_LABEL)),
            )
        used += len(record.name) + len(record.model) + 40
        if used > RECORDED_BUDGET:
            break
        records.append(record)
    return GpuRecorded(
        gpu_nodes=records,
        gpu_resource_names=_resource_names(names) if names is not None else None,
    )
