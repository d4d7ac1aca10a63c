"""The GPUReady decision: pure ``evaluate`` (facts + spec -> condition, status.gpu, recorded).

``evaluate`` takes what the gpu step gathered (the snapshot's nodes and HAMi pods, HAMi's
resource names) and what labelling achieved this pass, and decides:

- per GPU node HAMi capacity (``capacity.node_capacity``), when ``spec.gpu.hami.enabled``;
- GPUReady (``gpu_condition``): every problem is named in the message and the most urgent one
  gives the reason (conflict, pending labels, unparseable, no devices, no allocatable GPUs,
  unhealthy cards, stale lock); no problem: ``GPUNodesReady`` or ``NoGPUNodes``;
- ``status.gpu`` (at most MAX_LISTED_NODES nodes, problem nodes first; totals cover all) and the
  recorded ``gpuNodes`` (at most MAX_RECORDED_NODES and RECORDED_BUDGET bytes) and ``gpuResourceNames``;
- when to look again: when an active node lock expires (no watch event marks that moment), and
  soon while the snapshot's first listing is incomplete or the snapshot is stale.

Until that first listing is complete (``facts.synced``) the pass does not wait: it keeps the
previous GPUReady, ``status.gpu`` and recorded GPU facts (for up to STALE_AFTER, then reports
``SnapshotNotSynced``), and asks for another pass in UNSYNCED_REQUEUE seconds; a lock owner not
seen yet counts as still binding. A snapshot that stopped being current more than STALE_AFTER ago
(a watch failing, a relist that does not finish) turns GPUReady Unknown with ``SnapshotStale``.

Everything that reaches status is bounded whatever the annotations say: at most
MAX_LISTED_NODES nodes and NODES_BUDGET bytes of them in ``status.gpu.nodes``, at most five
ignored pods per node (hami/capacity.py), notes of at most 200 characters, at most eight models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.api.status.gpu import (
    GpuLabelsStatus,
    GpuNodeRecord,
    GpuNodeStatus,
    GpuRecorded,
    GpuStatus,
    GpuTotal,
    ResourceNamesSource,
    ResourceNamesStatus,
)
from tenant_platform.hami.allocations import PodLike
from tenant_platform.hami.capacity import (
    NodeCapacity,
    is_gpu_node,
    node_capacity,
    quantity_int,
    summary_line,
    total_status,
)
from tenant_platform.hami.freshness import (
    STALE_AFTER,
    STALE_REQUEUE,
    UNSYNCED_REQUEUE,
    since_phrase,
    unsynced,
)
from tenant_platform.hami.labels import LabelOutcome, NodeLike, labelled_nodes, spec_labels
from tenant_platform.hami.locks import PodLookup, lock_expires_in
from tenant_platform.hami.names import (
    ANNOTATION_LOCK,
    ANNOTATION_POD_ALLOCATED,
    ANNOTATION_REGISTER,
    CORDON,
    DEFAULT_NAMES,
    GFD_COUNT_LABEL,
    GFD_PRODUCT_LABEL,
    LOCK,
    REGISTER,
    ResourceNames,
    hami_annotation,
)
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition
from tenant_platform.status.verdict import Verdict

# status.gpu.nodes lists at most this many nodes (problem nodes first); totals and metrics cover
# all. Keeps the status object small on big clusters (a node entry is ~400 bytes).
MAX_LISTED_NODES: Final = 500
# ... and at most this many bytes of node entries (JSON), whatever the annotations hold.
NODES_BUDGET: Final = 256 * 1024
MAX_RECORDED_NODES: Final = 1000
# ... and about this many bytes of them (the install-values ConfigMap carries them too).
RECORDED_BUDGET: Final = 128 * 1024


@dataclass(frozen=True)
class GpuFacts:
    """What the gpu step read: the snapshot's nodes and HAMi pods, and HAMi's resource names."""

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

    @cached_property
    def gpu_nodes(self) -> list[str]:
        """GPU capacity, NVIDIA feature-discovery labels, or a HAMi register annotation."""
        return sorted(
            node.name
            for node in self.nodes.values()
            if is_gpu_node(
                labels=node.labels,
                annotations=node.annotations,
                capacity=node.capacity,
                count_resource=self.names.count,
            )
        )

    def annotation(self, node: str, suffix: str) -> str | None:
        found = hami_annotation(self.nodes[node].annotations, suffix)
        return found[1] if found else None


@dataclass(frozen=True)
class GpuVerdict:
    """The Verdict (condition, status.gpu, recorded, requeue) and the capacities metrics show."""

    verdict: Verdict
    capacities: tuple[NodeCapacity, ...] = ()


@dataclass(frozen=True)
class _UnknownPod:
    """Stands in for a lock owner not seen yet: the lock counts as active until we know."""

    namespace: str
    name: str
    phase: str = "Pending"
    bind_phase: str = "allocating"
    allocated: str = ""
    init_containers: int = 0
    app_containers: int = 0
    init_exit_codes: tuple[int | None, ...] = ()


def _owner(facts: GpuFacts) -> PodLookup:
    if facts.synced:
        return facts.pod

    def lookup(namespace: str, name: str) -> PodLike | None:
        return facts.pod(namespace, name) or _UnknownPod(namespace, name)

    return lookup


def wanted_labels(platform: TenantPlatform) -> dict[str, str]:
    """The labels this platform puts on GPU nodes (none when labelling is turned off)."""
    spec = platform.spec.gpu.node_labels
    return spec_labels(spec.labels) if spec.enabled else {}


def evaluate(platform: TenantPlatform, facts: GpuFacts, *, labels: LabelOutcome, now: datetime) -> GpuVerdict:
    """GPUReady, status.gpu and the recorded GPU facts from what was gathered and labelled."""
    spec = platform.spec.gpu
    gpu_nodes = facts.gpu_nodes
    wanted = wanted_labels(platform)
    labelled = labelled_nodes(facts.nodes, gpu_nodes, spec_labels(spec.node_labels.labels), labels.applied)
    timeout = parse_duration(spec.hami.node_lock_timeout)
    capacities: list[NodeCapacity] = []
    allocatable: dict[str, int] = {}
    if spec.hami.enabled:
        owner = _owner(facts)
        for name in gpu_nodes:
            capacities.append(
                node_capacity(
                    name,
                    register=facts.annotation(name, REGISTER),
                    lock=facts.annotation(name, LOCK),
                    cordon=facts.annotation(name, CORDON),
                    pods=facts.pods_by_node.get(name, ()),
                    now=now,
                    lock_timeout=timeout,
                    owner=owner,
                )
            )
            allocatable[name] = quantity_int(facts.nodes[name].allocatable.get(facts.names.count))
    condition = gpu_condition(
        Findings(
            labels_enabled=spec.node_labels.enabled,
            hami_enabled=spec.hami.enabled,
            gpu_nodes=len(gpu_nodes),
            conflicts=labels.conflicts,
            pending=labels.pending,
            nodes=capacities,
            labelled=labelled,
            allocatable=allocatable,
            count_resource=facts.names.count,
        )
    )
    status = status_section(platform, facts, capacities=capacities, labelled=labelled, wanted=wanted)
    recorded = recorded_facts(facts, capacities=capacities, names=facts.names if spec.hami.enabled else None)
    requeues = [
        expiry + 1.0
        for expiry in (lock_expires_in(c.lock, now=now, timeout=timeout) for c in capacities if c.lock is not None)
        if expiry is not None
    ]
    sections: dict[str, Any] = {"gpu": status.dump()}
    recorded_dump = recorded.dump()
    stale_for = (now - facts.stale_since).total_seconds() if facts.stale_since is not None else 0.0
    if not facts.synced:
        requeues.append(UNSYNCED_REQUEUE)
        condition, sections, recorded_dump = unsynced(
            platform.status or {},
            since=since_phrase(facts.stale_since, facts.stale_why),
            sections=sections,
            recorded=recorded_dump,
            stale_for=stale_for,
        )
    elif stale_for > STALE_AFTER:
        requeues.append(STALE_REQUEUE)
        condition = conditions.unknown(
            constants.GPU_READY,
            reasons.GPU.SNAPSHOT_STALE,
            f"The watched GPU snapshot has not been current since {since_phrase(facts.stale_since, facts.stale_why)}; "
            "what follows may be "
            f"out of date: {condition.message}",
        )
    verdict = Verdict(
        conditions=[condition],
        recorded=recorded_dump,
        sections=sections,
        progressing=not facts.synced,
        requeue_after=min(requeues) if requeues else None,
    )
    return GpuVerdict(verdict, tuple(capacities))


# -- status.gpu and recorded ---------------------------------------------------------------------


def is_problem(node: NodeCapacity, *, labelled: bool) -> bool:
    """Listed first when status.gpu.nodes is capped."""
    return bool(
        node.unparseable is not None
        or node.unhealthy
        or (node.lock is not None and node.lock.stale)
        or (labelled and not node.registered)
    )


def listed(
    capacities: Sequence[NodeCapacity], labelled: frozenset[str], limit: int, budget: int = NODES_BUDGET
) -> list[GpuNodeStatus]:
    """At most ``limit`` node entries and ``budget`` bytes of them, problem nodes first, in name order."""
    ranked = sorted(capacities, key=lambda c: (not is_problem(c, labelled=c.name in labelled), c.name))
    chosen: list[GpuNodeStatus] = []
    used = 0
    for capacity in ranked[:limit]:
        entry = capacity.to_status(labelled=capacity.name in labelled)
        used += len(json.dumps(entry.dump(), separators=(",", ":")))
        if used > budget:
            break
        chosen.append(entry)
    return sorted(chosen, key=lambda e: e.name)


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
) -> GpuStatus:
    """``status.gpu``: per node (capped), totals, the printer-column summary, labels, names."""
    spec = platform.spec.gpu
    if not spec.node_labels.enabled and not spec.hami.enabled:
        return GpuStatus(summary="disabled")
    gpu_nodes = facts.gpu_nodes
    names: ResourceNamesSource | None = None
    if spec.hami.enabled:
        count = len(capacities)
        entries = listed(capacities, labelled, MAX_LISTED_NODES)
        ignored = sum(c.ignored_count for c in capacities)
        total = total_status(capacities)
        summary = summary_line(total)
        names = ResourceNamesSource(**_resource_names(facts.names).model_dump(), source=facts.names_source)
    else:
        count = len(gpu_nodes)
        entries = [GpuNodeStatus(name=n, labelled=n in labelled) for n in gpu_nodes[:MAX_LISTED_NODES]]
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


# -- GPUReady -------------------------------------------------------------------------------------


@dataclass
class Findings:
    """Everything GPUReady is decided from (``evaluate`` builds it from the facts)."""

    labels_enabled: bool
    hami_enabled: bool
    gpu_nodes: int
    conflicts: list[str] = field(default_factory=list)
    """Sentences naming node, key and the other TenantPlatform."""
    pending: list[str] = field(default_factory=list)
    """Dry run: label changes that would be made, e.g. ``gpu-1: add gpu=on``."""
    nodes: Sequence[NodeCapacity] = ()
    labelled: frozenset[str] = frozenset()
    allocatable: Mapping[str, int] = field(default_factory=dict)
    """Node -> allocatable count of ``count_resource``."""
    count_resource: str = DEFAULT_NAMES.count


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def gpu_condition(findings: Findings) -> Condition:
    """GPUReady from the findings. Every problem is named in the message; the reason is the
    most urgent one (conflict, pending labels, unparseable, no devices, no allocatable GPUs,
    unhealthy cards, stale lock)."""
    type_ = constants.GPU_READY
    if not findings.labels_enabled and not findings.hami_enabled:
        return conditions.true(
            type_,
            reasons.Common.DISABLED,
            "GPU node labels and HAMi reporting are both turned off (spec.gpu.nodeLabels.enabled, "
            "spec.gpu.hami.enabled).",
        )
    problems: list[tuple[reasons.GPU | reasons.Common, str]] = []
    if findings.conflicts:
        problems.append(
            (
                reasons.Common.CONFLICT,
                " ".join(findings.conflicts)
                + " Neither platform overwrites the other: make spec.gpu.nodeLabels.labels agree.",
            )
        )
    if findings.pending:
        problems.append(
            (reasons.GPU.LABELS_PENDING, f"Would change GPU node labels: {_names(findings.pending, 10)} (dry run).")
        )
    if findings.hami_enabled:
        problems.extend(_hami_problems(findings))
    if problems:
        message = " ".join(message for _, message in problems)
        return conditions.false(type_, problems[0][0], message + _ignored_sentence(findings.nodes))
    if findings.gpu_nodes == 0:
        return conditions.true(
            type_,
            reasons.GPU.NO_GPU_NODES,
            "No GPU nodes found (no nvidia.com/gpu capacity, NVIDIA feature-discovery label or HAMi "
            "register annotation); GPUs are optional.",
        )
    message = f"{findings.gpu_nodes} GPU node(s)"
    if findings.labels_enabled:
        message += f", {len(findings.labelled)} labelled"
    if findings.hami_enabled:
        message += f"; HAMi reports {summary_line(total_status(findings.nodes))}"
    message += "." + _ignored_sentence(findings.nodes)
    return conditions.true(type_, reasons.GPU.READY, message)


def _ignored_sentence(nodes: Sequence[NodeCapacity]) -> str:
    """`` N pod(s) ignored ...``: pods skipped for a malformed allocation annotation (bounded)."""
    count = sum(n.ignored_count for n in nodes)
    if not count:
        return ""
    first = next(n.ignored_pods[0] for n in nodes if n.ignored_pods)
    return (
        f" {count} HAMi pod(s) ignored for a malformed {ANNOTATION_POD_ALLOCATED} annotation "
        f"(status.gpu.nodes[].ignoredPods), e.g. {first}."
    )


def _hami_problems(findings: Findings) -> list[tuple[reasons.GPU | reasons.Common, str]]:
    out: list[tuple[reasons.GPU | reasons.Common, str]] = []
    unparseable = [f"{n.name} ({n.unparseable})" for n in findings.nodes if n.unparseable is not None]
    if unparseable:
        out.append(
            (
                reasons.GPU.UNPARSEABLE,
                f"HAMi's register annotation cannot be parsed on node(s) {_names(unparseable)}; HAMi cannot "
                "schedule there either: check the device plugin version on those nodes.",
            )
        )
    silent = [n.name for n in findings.nodes if n.name in findings.labelled and not n.registered]
    if silent:
        out.append(
            (
                reasons.GPU.NO_DEVICES,
                f"Labelled GPU node(s) {_names(silent)} register no devices with HAMi (no "
                f"{ANNOTATION_REGISTER} annotation): check that HAMi's device plugin runs there "
                "(its DaemonSet selects the labels) and that the NVIDIA driver works.",
            )
        )
    empty = [n.name for n in findings.nodes if n.registered and n.unparseable is None and not n.cards]
    if empty:
        out.append((reasons.GPU.NO_DEVICES, f"Node(s) {_names(empty)} register an empty device list with HAMi."))
    no_alloc = [
        n.name
        for n in findings.nodes
        if n.registered and n.unparseable is None and n.cards and findings.allocatable.get(n.name, 0) <= 0
    ]
    if no_alloc:
        out.append(
            (
                reasons.GPU.NO_ALLOCATABLE,
                f"Node(s) {_names(no_alloc)} register cards with HAMi but advertise no allocatable "
                f"{findings.count_resource}, so HAMi's scheduler treats their devices as unhealthy: check "
                "the device plugin pod on each.",
            )
        )
    unhealthy = [f"{n.name} ({len(n.unhealthy)} of {len(n.cards)})" for n in findings.nodes if n.unhealthy]
    if unhealthy:
        out.append(
            (
                reasons.GPU.UNHEALTHY,
                f"Unhealthy GPU cards on node(s) {_names(unhealthy)}: HAMi places nothing on them; check "
                "the driver (nvidia-smi) and the device plugin logs.",
            )
        )
    stale = [
        f"{n.name} ({n.lock.state}: {n.lock.phrase()})" for n in findings.nodes if n.lock is not None and n.lock.stale
    ]
    if stale:
        out.append(
            (
                reasons.GPU.STALE_LOCK,
                f"Stale HAMi node lock on node(s) {_names(stale)}: new GPU pods cannot bind there until it "
                f"expires; remove the {ANNOTATION_LOCK} annotation from the node if its pod is done.",
            )
        )
    return out
