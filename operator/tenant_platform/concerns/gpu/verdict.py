"""The GPUReady decision: pure ``evaluate`` (facts + spec -> condition, status.gpu, recorded).

``evaluate`` takes what the gpu step gathered (the snapshot's nodes and HAMi pods, HAMi's
resource names) and what labelling achieved this pass, and decides:

- per GPU node HAMi capacity (``capacity.node_capacity``), when ``spec.gpu.hami.enabled``;
- GPUReady (``gpu_condition``, the chain ``GPU_READY``): every problem (``GPU_PROBLEMS``) is
  named in the message and the most urgent one gives the reason (conflict, pending labels,
  unparseable, no devices, no allocatable GPUs, unhealthy cards, a malformed node lock); no problem:
  ``GPUNodesReady``, ``GPUNodesTainted`` or ``NoGPUNodes``;
- ``status.gpu`` (at most MAX_LISTED_NODES nodes, problem nodes first; totals cover all) and the
  recorded ``gpuNodes`` (at most MAX_RECORDED_NODES and RECORDED_BUDGET bytes) and ``gpuResourceNames``;
- when to look again: when an active, dangling or leaked node lock expires (no watch event marks
  that moment), and soon while the snapshot's first listing is incomplete or the snapshot is stale.

Until that first listing is complete (``facts.synced``) the pass does not wait: it keeps the
previous GPUReady, ``status.gpu`` and recorded GPU facts (for up to STALE_AFTER, then reports
``SnapshotNotSynced``), and asks for another pass in UNSYNCED_REQUEUE seconds; a lock owner not
seen yet counts as still binding. A snapshot that stopped being current more than STALE_AFTER ago
(a watch failing, a relist that does not finish) turns GPUReady Unknown with ``SnapshotStale``.
Both are the chain ``SNAPSHOT_CHECKS``, run on the report the snapshot gives as it is.

Everything that reaches status is bounded whatever the annotations say: at most
MAX_LISTED_NODES nodes and NODES_BUDGET bytes of them in ``status.gpu.nodes``, at most five
ignored pods per node (concerns/gpu/capacity.py), notes of at most 200 characters, at most eight models.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.api.status.gpu import GpuTotal
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.gpu import health, nodefit, nodelocks
from tenant_platform.concerns.gpu.capacity import CACHE as CAPACITY_CACHE
from tenant_platform.concerns.gpu.capacity import NodeCapacity, quantity_int, summary_line, total_status
from tenant_platform.concerns.gpu.facts import GpuFacts
from tenant_platform.concerns.gpu.freshness import STALE_AFTER, STALE_REQUEUE, UNSYNCED_REQUEUE, since_phrase, unsynced
from tenant_platform.concerns.gpu.gpustatus import (
    MAX_LISTED_NODES,
    MAX_RECORDED_NODES,
    NODES_BUDGET,
    RECORDED_BUDGET,
    NodeExtras,
    is_problem,
    listed,
    recorded_facts,
    status_section,
)
from tenant_platform.concerns.gpu.labels import LabelOutcome, labelled_nodes, spec_labels
from tenant_platform.core import conditions
from tenant_platform.core.checks import Chain, Check
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict
from tenant_platform.formats.hami.allocations import PodLike
from tenant_platform.formats.hami.locks import PodLookup
from tenant_platform.formats.hami.names import (
    ANNOTATION_LOCK,
    ANNOTATION_POD_ALLOCATED,
    ANNOTATION_REGISTER,
    DEFAULT_NAMES,
)

__all__ = [
    "MAX_LISTED_NODES",
    "MAX_RECORDED_NODES",
    "NODES_BUDGET",
    "RECORDED_BUDGET",
    "Findings",
    "GpuFacts",
    "GpuVerdict",
    "evaluate",
    "gpu_condition",
    "is_problem",
    "listed",
    "wanted_labels",
]


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


def node_capacities(platform: TenantPlatform, facts: GpuFacts, *, now: datetime) -> tuple[NodeCapacity, ...]:
    """HAMi's capacity of each GPU node (none unless ``spec.gpu.hami.enabled``), from the
    snapshot's annotations and pods; the capacity cache forgets the nodes that are gone."""
    spec = platform.spec.gpu
    if not spec.hami.enabled:
        return ()
    found = nodefit.capacities(
        facts, now=now, lock_timeout=parse_duration(spec.hami.node_lock_timeout), owner=_owner(facts)
    )
    CAPACITY_CACHE.retain(facts.nodes)  # forget the capacity of nodes that are gone
    return found


def evaluate(
    platform: TenantPlatform,
    facts: GpuFacts,
    *,
    labels: LabelOutcome,
    now: datetime,
    capacities: Sequence[NodeCapacity] | None = None,
) -> GpuVerdict:
    """GPUReady, status.gpu and the recorded GPU facts from what was gathered and labelled: the
    report the snapshot gives (GPUReady from the ``GPU_READY`` chain), unless ``SNAPSHOT_CHECKS``
    find the snapshot not current enough to give it as it is.

    ``capacities``: ``node_capacities(platform, facts, now=now)`` when the caller has them already."""
    if capacities is None:
        capacities = node_capacities(platform, facts, now=now)
    capacities = tuple(capacities)
    as_listed = _as_listed(platform, facts, labels=labels, now=now, capacities=capacities)
    found = SNAPSHOT_CHECKS.first(Snapshot(facts, platform.status or {}, now, as_listed))
    report = found.value if found is not None else as_listed
    return GpuVerdict(report.verdict(), capacities)


@dataclass(frozen=True)
class GpuReport:
    """What a pass reports: GPUReady, the status sections, the recorded GPU facts, when to look again."""

    condition: Condition
    sections: dict[str, Any]
    recorded: dict[str, Any]
    requeues: tuple[float, ...] = ()
    """Every moment (seconds from now) something changes unseen; the verdict requeues at the first."""
    progressing: bool = False

    def verdict(self) -> Verdict:
        return Verdict(
            conditions=[self.condition],
            recorded=Recorded.fragment(self.recorded),
            sections=self.sections,
            progressing=self.progressing,
            requeue_after=min(self.requeues) if self.requeues else None,
        )


def _as_listed(
    platform: TenantPlatform,
    facts: GpuFacts,
    *,
    labels: LabelOutcome,
    now: datetime,
    capacities: Sequence[NodeCapacity],
) -> GpuReport:
    """The report as the snapshot lists the GPU nodes (whether or not it is current)."""
    spec = platform.spec.gpu
    gpu_nodes = facts.gpu_nodes
    labelled = labelled_nodes(facts.nodes, gpu_nodes, spec_labels(spec.node_labels.labels), labels.applied)
    allocatable: dict[str, int] = {}
    if spec.hami.enabled:
        allocatable = {name: quantity_int(facts.nodes[name].allocatable.get(facts.names.count)) for name in gpu_nodes}
    total = total_status(capacities)
    extras, health_problems, notes, all_tainted, health_section = _health(facts, capacities, enabled=spec.hami.enabled)
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
            health_problems=health_problems,
            notes=notes,
            all_tainted=all_tainted,
            total=total,
            webhook=facts.health.webhook,
            schedulers=tuple(f"{w.kind} {w.ref}" for w in facts.health.role("scheduler")),
            lock_timeout=parse_duration(spec.hami.node_lock_timeout),
        )
    )
    status = status_section(
        platform,
        facts,
        capacities=capacities,
        labelled=labelled,
        wanted=wanted_labels(platform),
        extras=extras,
        health=health_section,
        total=total,
    )
    recorded = recorded_facts(facts, capacities=capacities, names=facts.names if spec.hami.enabled else None)
    timeout = parse_duration(spec.hami.node_lock_timeout)
    return GpuReport(condition, {"gpu": status.dump()}, recorded.dump(), _lock_expiries(capacities, now, timeout))


def _lock_expiries(capacities: Sequence[NodeCapacity], now: datetime, timeout: timedelta) -> tuple[float, ...]:
    """When each active, dangling or leaked node lock expires (a second after; no watch event marks
    that moment, and what HAMi does with the lock changes then: concerns/gpu/nodelocks.py)."""
    return tuple(
        expiry + 1.0
        for expiry in (
            nodelocks.turns_expired_in(c.lock, now=now, timeout=timeout) for c in capacities if c.lock is not None
        )
        if expiry is not None
    )


# -- how current the snapshot is ------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """What the freshness checks look at: how current the snapshot is, the previous status, and
    the report the snapshot gives as it is."""

    facts: GpuFacts
    previous: Mapping[str, Any]
    """The platform's status as the last pass left it."""
    now: datetime
    as_listed: GpuReport

    @property
    def stale_for(self) -> float:
        """Seconds since the snapshot stopped being current (0: it is)."""
        since = self.facts.stale_since
        return (self.now - since).total_seconds() if since is not None else 0.0

    @property
    def since(self) -> str:
        return since_phrase(self.facts.stale_since, self.facts.stale_why)


def first_listing_incomplete(snapshot: Snapshot) -> GpuReport | None:
    """Before the first complete listing: keep the previous report (concerns/gpu/freshness.py
    ``unsynced``) and look again in UNSYNCED_REQUEUE seconds."""
    if snapshot.facts.synced:
        return None
    report = snapshot.as_listed
    condition, sections, recorded = unsynced(
        snapshot.previous,
        since=snapshot.since,
        sections=report.sections,
        recorded=report.recorded,
        stale_for=snapshot.stale_for,
    )
    return GpuReport(condition, sections, recorded, (*report.requeues, UNSYNCED_REQUEUE), progressing=True)


def snapshot_stale(snapshot: Snapshot) -> GpuReport | None:
    """Not current for more than STALE_AFTER: GPUReady Unknown, saying what follows may be out of
    date; look again in STALE_REQUEUE seconds."""
    if snapshot.stale_for <= STALE_AFTER:
        return None
    report = snapshot.as_listed
    condition = conditions.unknown(
        constants.GPU_READY,
        reasons.GPU.SNAPSHOT_STALE,
        f"The watched GPU snapshot has not been current since {snapshot.since}; what follows may be "
        f"out of date: {report.condition.message}",
    )
    return dataclasses.replace(report, condition=condition, requeues=(*report.requeues, STALE_REQUEUE))


SNAPSHOT_CHECKS: Final = Chain[Snapshot, GpuReport](
    Check("first listing incomplete", first_listing_incomplete),
    Check("snapshot stale", snapshot_stale),
)
"""When the snapshot is not current enough to report as it is, in order: the first finding is the
report; none: the report stands as listed."""


@lru_cache(maxsize=1024)
def _extras(detected_by: tuple[str, ...], taints: tuple[tuple[str, str, str], ...], conflict: str | None) -> NodeExtras:
    """One node's NodeExtras (shared: most nodes have the same detection sources and no taints)."""
    return NodeExtras(
        detected_by=detected_by,
        taints=tuple(health.taint_phrase(t) for t in health.chosen_taints(taints)),
        device_plugin_conflict=conflict,
    )


def _health(
    facts: GpuFacts, capacities: Sequence[NodeCapacity], *, enabled: bool
) -> tuple[dict[str, NodeExtras], list[health.Problem], list[str], bool, Any]:
    """Per node extras, health problems, notes, whether every GPU node is tainted, status.gpu.health."""
    gpu_nodes = facts.gpu_nodes
    count = facts.names.count
    tainted = {
        n: found
        for n in gpu_nodes
        if (taints := facts.nodes[n].taints) and (found := health.blocking_taints(taints, count))
    }
    split: dict[str, str] = {}
    for capacity in capacities:
        why = health.split_count_conflict(
            [s.card for s in capacity.cards], quantity_int(facts.nodes[capacity.name].capacity.get(count))
        )
        if why is not None:
            split[capacity.name] = f"{count} {why}"
    conflicting = health.conflicts(facts.health, split, gpu_nodes) if enabled else {}
    problems = health.problems(facts.health, conflicting, gpu_nodes=len(gpu_nodes)) if enabled else []
    notes = health.notes(facts.health, tainted=tainted, gpu_nodes=len(gpu_nodes), hami_enabled=enabled)
    extras = {n: _extras(facts.detections[n], tuple(facts.nodes[n].taints), conflicting.get(n)) for n in gpu_nodes}
    detected = Counter(s for d in facts.detections.values() for s in d)
    section = health.health_status(
        facts.health,
        detected={s: detected[s] for s in health.SOURCES},
        conflicting=conflicting,
        tainted=len(tainted),
        notes=notes,
    )
    return extras, problems, notes, bool(gpu_nodes) and len(tainted) == len(gpu_nodes), section


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
    health_problems: Sequence[health.Problem] = ()
    """Webhook, HAMi workloads, device-plugin conflicts (concerns/gpu/health.py ``problems``)."""
    notes: Sequence[str] = ()
    """Sentences that do not fail GPUReady (concerns/gpu/health.py ``notes``)."""
    all_tainted: bool = False
    """Every GPU node carries a NoSchedule/NoExecute taint a GPU pod is not given a toleration for."""
    total: GpuTotal | None = None
    """``total_status(nodes)`` when the caller has it already (computed here otherwise)."""
    webhook: health.WebhookProbe | None = None
    """What the dry-run GPU pod showed (None: no dry run this pass)."""
    schedulers: tuple[str, ...] = ()
    """HAMi's scheduler Deployments found in HAMi's namespace (``Deployment <ns>/<name>``)."""
    lock_timeout: timedelta = timedelta(minutes=5)
    """``spec.gpu.hami.nodeLockTimeout``: when HAMi takes a left-behind node lock over."""


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def gpu_condition(findings: Findings) -> Condition:
    """GPUReady from the findings (``GPU_READY``). Every problem is named in the message; the
    reason is the most urgent one (conflict, pending labels, the webhook not in the path, unreachable
    webhook, HAMi's scheduler or device plugin not ready, two device plugins, unparseable, no devices,
    no allocatable GPUs, unhealthy cards, a malformed node lock). Left-behind node locks are named with
    what HAMi does with them (concerns/gpu/nodelocks.py) and never fail GPUReady. Notes (taints,
    HAMi workloads not found, ...) follow, at most three.
    No problem: ``GPUNodesReady``, ``GPUNodesTainted`` (every GPU node tainted) or ``NoGPUNodes``."""
    found = GPU_READY.first(findings)
    assert found is not None  # nodes_ready always finds
    return found.value


def _notes(findings: Findings) -> str:
    return "".join(" " + n for n in findings.notes[:3])


def turned_off(findings: Findings) -> Condition | None:
    """Neither labelling nor HAMi reporting is on: nothing to decide."""
    if findings.labels_enabled or findings.hami_enabled:
        return None
    return conditions.true(
        constants.GPU_READY,
        reasons.Common.DISABLED,
        "GPU node labels and HAMi reporting are both turned off (spec.gpu.nodeLabels.enabled, spec.gpu.hami.enabled).",
    )


def problems_found(findings: Findings) -> Condition | None:
    """Every problem ``GPU_PROBLEMS`` finds, named in order; the first gives the reason."""
    problems = [problem for found in GPU_PROBLEMS.every(findings) for problem in found.value]
    if not problems:
        return None
    message = " ".join(message for _, message in problems)
    return conditions.false(
        constants.GPU_READY,
        problems[0][0],
        message + _ignored_sentence(findings.nodes) + _locks_sentence(findings) + _notes(findings),
    )


def no_gpu_nodes(findings: Findings) -> Condition | None:
    """No GPU node at all: fine, GPUs are optional."""
    if findings.gpu_nodes != 0:
        return None
    return conditions.true(
        constants.GPU_READY,
        reasons.GPU.NO_GPU_NODES,
        "No GPU nodes found (no nvidia.com/gpu capacity, NVIDIA feature-discovery label, HAMi "
        "register annotation, NVIDIA runtime handler, NVIDIA RuntimeClass or spec.gpu.nodeSelector match); "
        "GPUs are optional." + _notes(findings),
    )


def _ready_message(findings: Findings) -> str:
    """How many GPU nodes, labelled, and what HAMi reports."""
    message = f"{findings.gpu_nodes} GPU node(s)"
    if findings.labels_enabled:
        message += f", {len(findings.labelled)} labelled"
    if findings.hami_enabled:
        total = findings.total if findings.total is not None else total_status(findings.nodes)
        message += f"; HAMi reports {summary_line(total)}"
    return message + "." + _ignored_sentence(findings.nodes) + _locks_sentence(findings) + _notes(findings)


def every_node_tainted(findings: Findings) -> Condition | None:
    """Every GPU node carries a taint a GPU pod is not given a toleration for."""
    if not findings.all_tainted:
        return None
    return conditions.true(constants.GPU_READY, reasons.GPU.TAINTED, _ready_message(findings))


def nodes_ready(findings: Findings) -> Condition | None:
    """Nothing else found: the GPU nodes are ready."""
    return conditions.true(constants.GPU_READY, reasons.GPU.READY, _ready_message(findings))


GPU_READY: Final = Chain[Findings, Condition](
    Check("GPU reporting turned off", turned_off),
    Check("problems found", problems_found),
    Check("no GPU nodes", no_gpu_nodes),
    Check("every GPU node tainted", every_node_tainted),
    Check("GPU nodes ready", nodes_ready),
)
"""GPUReady, in order: the first check that finds gives the condition (the last always does)."""


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


def _locks_sentence(findings: Findings) -> str:
    """`` Node lock(s) left behind ...``: expired, dangling and leaked locks, each with what HAMi's
    next bind does with it (concerns/gpu/nodelocks.py); nothing to remove."""
    left = [
        f"{n.name} ({n.lock.state}: {n.lock.phrase()}; {nodelocks.outlook(n.lock, timeout=findings.lock_timeout)})"
        for n in _hami_nodes(findings)
        if n.lock is not None and nodelocks.left_behind(n.lock)
    ]
    if not left:
        return ""
    return f" Node lock(s) left behind that HAMi releases by itself, nothing to remove: {_names(left, 3)}."


# -- the problems GPUReady names, in order (the first gives the reason) ---------------------------

GpuProblem = tuple[reasons.GPU | reasons.Common, str]


def label_conflicts(findings: Findings) -> list[GpuProblem] | None:
    """A key another platform holds with another value (neither overwrites)."""
    if not findings.conflicts:
        return None
    return [
        (
            reasons.Common.CONFLICT,
            " ".join(findings.conflicts)
            + " Neither platform overwrites the other: make spec.gpu.nodeLabels.labels agree.",
        )
    ]


def labels_pending(findings: Findings) -> list[GpuProblem] | None:
    """A dry run: the label changes a pass would make."""
    if not findings.pending:
        return None
    return [(reasons.GPU.LABELS_PENDING, f"Would change GPU node labels: {_names(findings.pending, 10)} (dry run).")]


def webhook_not_in_path(findings: Findings) -> list[GpuProblem] | None:
    """HAMi's scheduler is deployed, yet the dry-run GPU pod came back unmutated: GPU pods there go
    to the default scheduler, past HAMi. Whatever the webhook's failurePolicy: with HAMi's chart
    default (Ignore) an unreachable webhook lets the pod through unmutated (Fail rejects it:
    ``WebhookUnreachable``)."""
    probe = findings.webhook
    if (
        not findings.hami_enabled
        or not findings.gpu_nodes
        or not findings.schedulers
        or probe is None
        or probe.outcome != "unmutated"
    ):
        return None
    return [
        (
            reasons.GPU.WEBHOOK_NOT_IN_PATH,
            f"A dry-run GPU pod in namespace {probe.namespace}{probe.when} came back unmutated (schedulerName "
            f"{probe.scheduler_name or health.DEFAULT_SCHEDULER}) although HAMi's scheduler is deployed "
            f"({_names(list(findings.schedulers), 2)}): HAMi's webhook is not in the path, so GPU pods there go to "
            "the default scheduler, past HAMi's sharing and accounting. HAMi's chart installs the webhook with "
            "failurePolicy: Ignore, so an API server that cannot reach it (no endpoints, a hosted control plane "
            "without a path to the cluster network) admits pods unmutated; so do a namespace or pod labelled "
            "hami.io/webhook=ignore and admissionWebhook.enabled=false. Check the webhook's Service and pods and "
            "the control plane's path to them (konnectivity).",
        )
    ]


def hami_health(findings: Findings) -> list[GpuProblem] | None:
    """Webhook, HAMi workloads, device-plugin conflicts (concerns/gpu/health.py ``problems``)."""
    return list(findings.health_problems) or None


def register_unparseable(findings: Findings) -> list[GpuProblem] | None:
    unparseable = [f"{n.name} ({n.unparseable})" for n in _hami_nodes(findings) if n.unparseable is not None]
    if not unparseable:
        return None
    return [
        (
            reasons.GPU.UNPARSEABLE,
            f"HAMi's register annotation cannot be parsed on node(s) {_names(unparseable)}; HAMi cannot "
            "schedule there either: check the device plugin version on those nodes.",
        )
    ]


def labelled_but_silent(findings: Findings) -> list[GpuProblem] | None:
    silent = [n.name for n in _hami_nodes(findings) if n.name in findings.labelled and not n.registered]
    if not silent:
        return None
    return [
        (
            reasons.GPU.NO_DEVICES,
            f"Labelled GPU node(s) {_names(silent)} register no devices with HAMi (no "
            f"{ANNOTATION_REGISTER} annotation): check that HAMi's device plugin runs there "
            "(its DaemonSet selects the labels) and that the NVIDIA driver works.",
        )
    ]


def empty_device_list(findings: Findings) -> list[GpuProblem] | None:
    empty = [n.name for n in _hami_nodes(findings) if n.registered and n.unparseable is None and not n.cards]
    if not empty:
        return None
    return [(reasons.GPU.NO_DEVICES, f"Node(s) {_names(empty)} register an empty device list with HAMi.")]


def nothing_allocatable(findings: Findings) -> list[GpuProblem] | None:
    no_alloc = [
        n.name
        for n in _hami_nodes(findings)
        if n.registered and n.unparseable is None and n.cards and findings.allocatable.get(n.name, 0) <= 0
    ]
    if not no_alloc:
        return None
    return [
        (
            reasons.GPU.NO_ALLOCATABLE,
            f"Node(s) {_names(no_alloc)} register cards with HAMi but advertise no allocatable "
            f"{findings.count_resource}, so HAMi's scheduler treats their devices as unhealthy: check "
            "the device plugin pod on each.",
        )
    ]


def unhealthy_cards(findings: Findings) -> list[GpuProblem] | None:
    unhealthy = [f"{n.name} ({len(n.unhealthy)} of {len(n.cards)})" for n in _hami_nodes(findings) if n.unhealthy]
    if not unhealthy:
        return None
    return [
        (
            reasons.GPU.UNHEALTHY,
            f"Unhealthy GPU cards on node(s) {_names(unhealthy)}: HAMi places nothing on them; check "
            "the driver (nvidia-smi) and the device plugin logs.",
        )
    ]


def malformed_node_lock(findings: Findings) -> list[GpuProblem] | None:
    """A node lock HAMi will not take over by itself (concerns/gpu/nodelocks.py ``blocks``): every
    bind on the node fails until it is removed. Expired, dangling and leaked locks are no problem:
    HAMi takes them over (``_locks_sentence`` names them)."""
    blocking = [n for n in _hami_nodes(findings) if n.lock is not None and nodelocks.blocks(n.lock)]
    if not blocking:
        return None
    listed = [f"{n.name} ({n.lock.reason})" for n in blocking if n.lock is not None]
    where = f"node {blocking[0].name}" if len(blocking) == 1 else f"nodes {_names([n.name for n in blocking])}"
    return [
        (
            reasons.GPU.MALFORMED_LOCK,
            f"A HAMi node lock that HAMi will not take over on node(s) {_names(listed)}: binding a GPU pod there "
            "fails until the lock is removed (HAMi takes over only a lock it can read that expired or whose pod "
            f"is gone); remove the {ANNOTATION_LOCK} annotation from {where}.",
        )
    ]


def _hami_nodes(findings: Findings) -> Sequence[NodeCapacity]:
    """The nodes HAMi's checks look at: none unless HAMi reporting is on."""
    return findings.nodes if findings.hami_enabled else ()


GPU_PROBLEMS: Final = Chain[Findings, list[GpuProblem]](
    Check("label conflict", label_conflicts),
    Check("labels pending", labels_pending),
    Check("webhook not in the path", webhook_not_in_path),
    Check("HAMi health", hami_health),
    Check("register unparseable", register_unparseable),
    Check("labelled node registers no devices", labelled_but_silent),
    Check("empty device list", empty_device_list),
    Check("nothing allocatable", nothing_allocatable),
    Check("unhealthy cards", unhealthy_cards),
    Check("malformed node lock", malformed_node_lock),
)
"""Every problem GPUReady names, in this order; the first one found gives the reason."""
