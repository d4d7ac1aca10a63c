"""GPUReady: label GPU nodes for HAMi and report HAMi's shareable GPU capacity.

One pass (framework/contract.py): ``gather`` (reads: the watched snapshot, HAMi's resource names
and health; the label plan, concerns/gpu/labels.py ``plan_labels``, which reads the other
TenantPlatforms only when a node's plan needs them; HAMi's capacity per node) -> ``evaluate``
(pure, concerns/gpu/verdict.py: GPUReady, status.gpu, recorded, as if every planned label write
succeeds) -> ``apply`` (the label writes, concerns/gpu/labelwrites.py; when the API server
answered otherwise than planned, a conflict it revealed, a node gone, the same pure evaluate on
what the writes achieved; an API error condition when a label write failed; the Prometheus
gauges). No second round: what the writes achieved is known from their answers.

Reads the watched snapshot (observe.cluster), never lists pods per reconcile. ``ctx.observed`` is
the snapshot (or a ClusterView, or an object/mapping holding one under ``gpu``/``cluster``);
without one (``check``, a bare ``reconcile.run``) the step loads it once from the API.

Node labels
    A node is a GPU node when it advertises the HAMi count resource (``nvidia.com/gpu`` unless
    HAMi's ConfigMap renames it), carries an NVIDIA feature-discovery label or a HAMi register
    annotation, lists an NVIDIA runtime handler, or is selected by an NVIDIA RuntimeClass's
    nodeSelector or ``spec.gpu.nodeSelector`` (concerns/gpu/facts.py, concerns/gpu/health.py). The platform's
    ``spec.gpu.nodeLabels.labels`` go on those nodes with server-side apply under one field
    manager per label key and value, shared by every platform wanting that value
    (``tenant-platform-operator/labels/<key>=<value>``), so a node carries a handful of our
    managers however many platforms there are (docs/gpu.md). The plan (concerns/gpu/labels.py, pure)
    knows who wants what from the other TenantPlatforms' specs (``read_wanters``, from the watch)
    and their GPU nodes as of their last pass (``SCOPES``); it applies what this platform wants,
    lets go of what no live platform wants, reports a key held with another value a live platform
    wants as Conflict (neither overwrites), and hands earlier versions' per-platform managers
    over. ``nvidia.com/*``, ``feature.node.kubernetes.io/*`` and other reserved prefixes are
    never written; no-op resyncs write nothing.

Health (reads: concerns/gpu/healthreads.py; judged by concerns/gpu/health.py): taints on GPU nodes, two
device plugins on a node, HAMi's scheduler and device plugin readiness, and a dry-run GPU pod in
the tenant namespace (HAMi's mutating webhook reachable; its verdict kept while its inputs are
unchanged, for at most ``Settings.webhook_probe_interval``).

Capacity (concerns/gpu/capacity.py does the arithmetic): per GPU node cards, models, slots, memory,
cores, unhealthy cards and the node lock; totals; a printer-column summary; recorded gpuNodes;
per-node and per-model gauges. Resource names come from HAMi's ``hami-scheduler-device``
ConfigMap in ``spec.gpu.hami.configMapNamespace`` when it exists.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pydantic

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gpu import capacity, health, nodelocks
from tenant_platform.concerns.gpu.facts import detect
from tenant_platform.concerns.gpu.health import HealthFacts, Selector
from tenant_platform.concerns.gpu.healthreads import read_health, read_selectors
from tenant_platform.concerns.gpu.labels import LabelOutcome, LabelPlan, Others, Wanter, plan_labels, value_manager
from tenant_platform.concerns.gpu.labelwrites import LabelWrites, apply_labels
from tenant_platform.concerns.gpu.verdict import GpuFacts, evaluate, node_capacities, wanted_labels
from tenant_platform.core.verdict import Verdict
from tenant_platform.formats.hami import config, names
from tenant_platform.formats.hami.names import ResourceNames
from tenant_platform.framework.base import CleanupResult, StepContext, api_error_condition
from tenant_platform.framework.contract import Action, Given
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.observe import reflector
from tenant_platform.observe.cluster import ClusterSnapshot, ClusterView, NodeInfo

COMPONENT: Final = "gpu"
# How soon to retry after a label write failed (seconds).
FAILED_REQUEUE: Final = 30.0


# -- gather ---------------------------------------------------------------------------------------


def snapshot_view(ctx: StepContext) -> ClusterView:
    """The ClusterView this pass works from (see the module docstring for accepted shapes).

    Never waits: a watched snapshot whose first listing is still running gives a view that says
    so (``synced`` False), and the verdict asks for another pass soon instead of holding one of
    the few reconcile workers (concerns/gpu/verdict.py).
    """
    observed = ctx.observed
    candidates: list[Any] = [observed, getattr(observed, "gpu", None), getattr(observed, "cluster", None)]
    if isinstance(observed, Mapping):
        candidates += [observed.get("gpu"), observed.get("cluster")]
    for candidate in candidates:
        if isinstance(candidate, ClusterView):
            return candidate
        if isinstance(candidate, ClusterSnapshot):
            return candidate.view()
    ctx.logger.debug("no GPU snapshot was passed in; listing nodes and pods once")
    return reflector.load_from_api(ctx.kube).view()


def read_resource_names(kube: Kube, namespace: str) -> tuple[ResourceNames, str]:
    """(names, source) from HAMi's ConfigMap; defaults when it is absent, unreadable or malformed."""
    where = f"ConfigMap {namespace}/{names.CONFIG_MAP}"
    try:
        config_map = kube.get("v1", "ConfigMap", names.CONFIG_MAP, namespace)
    except errors.KubeError as exc:
        return names.DEFAULT_NAMES, f"defaults ({where} unreadable: {exc.reason})"
    if config_map is None:
        return names.DEFAULT_NAMES, "defaults"
    text = (config_map.get("data") or {}).get(names.CONFIG_KEY)
    if text is None:
        return names.DEFAULT_NAMES, f"defaults ({where} has no {names.CONFIG_KEY})"
    try:
        return config.resource_names_from_config(text), where
    except names.HamiParseError as exc:
        return names.DEFAULT_NAMES, f"defaults ({where}: {exc})"


def gather(ctx: StepContext) -> GpuFacts:
    """The snapshot's nodes and HAMi pods, HAMi's resource names, the selectors that mark GPU
    nodes and HAMi's health (reads only: concerns/gpu/healthreads.py)."""
    spec = ctx.platform.spec
    hami = spec.gpu.hami
    view = snapshot_view(ctx)
    if hami.enabled:
        resource_names, source = read_resource_names(ctx.kube, hami.config_map_namespace)
    else:
        resource_names, source = names.DEFAULT_NAMES, "defaults"
    selectors, classes, failed = read_selectors(ctx.kube, health.spec_selector(spec.gpu.node_selector))
    facts = GpuFacts.of_view(
        view,
        names=resource_names,
        names_source=source,
        selectors=selectors,
        health=HealthFacts(runtime_classes=classes, read_errors=(failed,) if failed else ()),
    )
    if not hami.enabled:
        return facts
    found = read_health(
        ctx.kube,
        hami_namespace=hami.config_map_namespace,
        tenant_namespace=spec.namespace,
        count_resource=resource_names.count,
        runtime_classes=classes,
        gpu_nodes=facts.gpu_nodes,
        problems=[failed] if failed else [],
        now=ctx.now,
        probe_interval=ctx.settings.webhook_probe_interval,
    )
    return dataclasses.replace(facts, health=found)


class _WantedLabels:
    """Each TenantPlatform's wanted labels, parsed once per spec generation (a pass that needs the
    other platforms would otherwise parse every one of them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsed: dict[str, tuple[tuple[str, int], dict[str, str]]] = {}

    def labels(self, body: Obj) -> dict[str, str]:
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        version = (str(meta.get("uid") or ""), int(meta.get("generation") or 0))
        with self._lock:
            known = self._parsed.get(name)
        if known is not None and known[0] == version and version[1]:
            return known[1]
        try:
            labels = wanted_labels(TenantPlatform.from_body(body))
        except pydantic.ValidationError:  # another platform's invalid spec: it labels nothing
            labels = {}
        with self._lock:
            self._parsed[name] = (version, labels)
        return labels

    def forget(self, name: str) -> None:
        with self._lock:
            self._parsed.pop(name, None)


_WANTED: Final = _WantedLabels()


def read_wanters(ctx: StepContext) -> list[Wanter] | None:
    """The other live TenantPlatforms preparing this cluster and the labels they want (their GPU
    nodes from their last pass, when there was one); None when they cannot be read."""
    try:
        bodies = ctx.platforms()
    except errors.KubeError as exc:
        ctx.logger.warning("cannot read the TenantPlatforms: no shared node label is let go (%s)", exc.reason)
        return None
    wanters = []
    for body in bodies:
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name or name == ctx.name or meta.get("deletionTimestamp"):
            continue
        labels = _WANTED.labels(body)
        if labels:
            wanters.append(Wanter(name, labels, SCOPES.nodes_of(name)))
    return wanters


# -- report ---------------------------------------------------------------------------------------


MIB: Final = 1024 * 1024


def _used_ratio(used: int, total: int) -> dict[str, float]:
    """``{"cores_used_ratio": used/total}``; nothing when there is no compute to share."""
    return {"cores_used_ratio": used / total} if total > 0 else {}


def _node_metrics(node: capacity.NodeCapacity) -> dict[str, float]:
    """The node's gauges in base units: memory in bytes (HAMi counts MiB), compute as a 0..1 ratio."""
    totals = node.totals()
    return {
        "cards": len(node.cards),
        "unhealthy_cards": len(node.unhealthy),
        "slots": totals.slots_total,
        "slots_used": totals.slots_used,
        "memory_total_bytes": totals.mem_total * MIB,
        "memory_used_bytes": totals.mem_used * MIB,
        "memory_free_bytes": (totals.mem_total - totals.mem_used) * MIB,
        **_used_ratio(totals.cores_used, totals.cores_total),
        "unparseable": float(node.unparseable is not None),
    }


def _model_metrics(capacities: tuple[capacity.NodeCapacity, ...]) -> dict[str, dict[str, float]]:
    """Per model: cards, memory (bytes) and the allocated share of compute, over schedulable cards."""
    cores_total: dict[str, int] = {}
    for node in capacities:
        for state in node.schedulable:
            cores_total[state.card.model] = cores_total.get(state.card.model, 0) + state.card.devcore
    out: dict[str, dict[str, float]] = {}
    for model, rollup in capacity.model_rollup(capacities).items():
        total = cores_total.get(model, 0)
        out[model] = {
            "cards": rollup["cards"],
            "memory_total_bytes": rollup["memory_total_mib"] * MIB,
            "memory_free_bytes": rollup["memory_free_mib"] * MIB,
            **_used_ratio(total - rollup["cores_free_percent"], total),
        }
    return out


def record_metrics(platform: str, capacities: tuple[capacity.NodeCapacity, ...], *, enabled: bool) -> None:
    """The cluster-wide GPU gauges (exported once, whichever platform computed them last)."""
    if not enabled:
        metrics.forget_gpu(platform)
        return
    metrics.record_gpu(
        platform,
        nodes={c.name: _node_metrics(c) for c in capacities},
        models=_model_metrics(capacities),
        # Only a lock HAMi will not take over by itself (its release rules: concerns/gpu/nodelocks.py).
        blocking_locks={c.name: c.lock is not None and nodelocks.blocks(c.lock) for c in capacities},
    )


def expected_outcome(plan: LabelPlan) -> LabelOutcome:
    """What labelling achieves when every write of ``plan`` succeeds as planned."""
    applied: dict[str, dict[str, str]] = {}
    for job in plan.jobs:
        labels = {k: v for _, wanted in sorted(job.apply.items()) for k, v in wanted.items()}
        if labels:
            applied[job.node] = labels
    return LabelOutcome(applied=applied, conflicts=list(plan.conflicts), pending=list(plan.pending))


def failed_writes(verdict: Verdict, writes: LabelWrites) -> Verdict:
    """A failed label write turns GPUReady into an API error (retried soon)."""
    if not writes.errors:
        return verdict
    nodes = ", ".join(n for n, _ in writes.errors[:5])
    condition = api_error_condition(constants.GPU_READY, writes.errors[0][1], f"label GPU node(s) {nodes}")
    requeue_after = verdict.requeue_after
    requeue_after = min(FAILED_REQUEUE, requeue_after if requeue_after is not None else FAILED_REQUEUE)
    return verdict.but(conditions=[condition], failed=True, requeue_after=requeue_after)


# -- what a platform's GPU result depends on (for GPU-only passes) ------------------------------------


@dataclass(frozen=True)
class GpuScope:
    """What one platform's last GPU pass depended on: whether its GPU part is on, its GPU nodes, and
    what made them GPU nodes (HAMi's resource names, the selectors). The operator's GPU refresher
    (``state.OperatorState.wake_gpu``) asks ``depends_on`` before waking a platform for a GPU-only
    pass."""

    enabled: bool
    gpu_nodes: frozenset[str]
    names: ResourceNames
    selectors: tuple[Selector, ...]
    managers: frozenset[tuple[str, str]] = frozenset()
    """(label key, value manager) of the labels it wants."""

    def depends_on(self, platform: str, changed: frozenset[str] | None, node: Callable[[str], NodeInfo | None]) -> bool:
        """True when a change to the ``changed`` nodes (None: any) may change this platform's GPU
        result: a node that was a GPU node, is one now, or carries this platform's labels. A
        HAMi pod counts for the node it is placed on (observe/cluster.py)."""
        if not self.enabled:
            return False  # GPUReady is Disabled whatever the nodes say
        if changed is None or not changed.isdisjoint(self.gpu_nodes):
            return True
        for name in changed:
            info = node(name)
            if info is not None and (
                platform in info.label_managers
                or any(m in info.label_holders.get(k, ()) for k, m in self.managers)
                or detect(info, self.names, self.selectors)
            ):
                return True
        return False


class GpuScopes:
    """Each platform's ``GpuScope`` as of its last pass (process-wide, like the GPU gauges). Equal
    node sets are stored once, so 500 platforms over 5,000 nodes hold one set, not 500."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scopes: dict[str, GpuScope] = {}
        self._sets: dict[frozenset[str], frozenset[str]] = {}

    def remember(self, platform: str, scope: GpuScope) -> None:
        with self._lock:
            shared = self._sets.get(scope.gpu_nodes)
            if shared is None:
                if len(self._sets) >= 16:
                    self._sets.clear()
                shared = self._sets[scope.gpu_nodes] = scope.gpu_nodes
            self._scopes[platform] = dataclasses.replace(scope, gpu_nodes=shared)

    def forget(self, platform: str) -> None:
        with self._lock:
            self._scopes.pop(platform, None)

    def nodes_of(self, platform: str) -> frozenset[str] | None:
        """The platform's GPU nodes as of its last pass; None before its first."""
        with self._lock:
            scope = self._scopes.get(platform)
        return None if scope is None else scope.gpu_nodes

    def depends_on(self, platform: str, changed: frozenset[str] | None, node: Callable[[str], NodeInfo | None]) -> bool:
        """See ``GpuScope.depends_on``; a platform without a pass yet depends on everything."""
        with self._lock:
            scope = self._scopes.get(platform)
        return scope is None or scope.depends_on(platform, changed, node)


SCOPES: Final = GpuScopes()


def scope_of(platform: TenantPlatform, facts: GpuFacts) -> GpuScope:
    spec = platform.spec.gpu
    return GpuScope(
        enabled=spec.node_labels.enabled or spec.hami.enabled,
        gpu_nodes=frozenset(facts.gpu_nodes),
        names=facts.names,
        selectors=facts.selectors,
        managers=frozenset((k, value_manager(k, v)) for k, v in wanted_labels(platform).items()),
    )


# -- the step -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gathered:
    """What one gpu pass read: the GPU facts, the label plan (with the other platforms, read
    only when it needed them) and HAMi's capacity per GPU node."""

    facts: GpuFacts
    plan: LabelPlan
    others: Others
    """The other live platforms (read at most once; a write the API server refuses with a
    conflict may need them)."""
    capacities: tuple[capacity.NodeCapacity, ...] = ()
    outcome: LabelOutcome | None = None
    """What the label writes achieved (apply, when it differs from the plan); None: as planned."""


class GpuStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.GPU_READY,)

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {self.name}", retry_soon=True)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """Nothing to render: labels go on nodes discovered at run time (see ``gather``)."""
        return []

    def gather(self, ctx: StepContext) -> Gathered:
        facts = gather(ctx)
        others = Others(lambda: read_wanters(ctx))  # read only when a node's plan needs them
        plan = plan_labels(
            facts.nodes,
            set(facts.gpu_nodes),
            wanted_labels(ctx.platform),
            platform=ctx.name,
            dry_run=ctx.dry_run,
            others=others,
        )
        return Gathered(facts, plan, others, node_capacities(ctx.platform, facts, now=ctx.now))

    def evaluate(self, given: Given, facts: Gathered) -> Verdict:
        labels = facts.outcome if facts.outcome is not None else expected_outcome(facts.plan)
        decided = evaluate(given.platform, facts.facts, labels=labels, now=given.now, capacities=facts.capacities)
        return decided.verdict

    def apply(self, ctx: StepContext, facts: Gathered, verdict: Verdict) -> Verdict:
        if not ctx.dry_run and facts.facts.synced:
            SCOPES.remember(ctx.name, scope_of(ctx.platform, facts.facts))
        writes = apply_labels(ctx.kube, facts.plan, nodes=facts.facts.nodes, others=facts.others)
        if writes.outcome != expected_outcome(facts.plan):  # the API server answered otherwise
            verdict = self.evaluate(Given.of(ctx), dataclasses.replace(facts, outcome=writes.outcome))
        if not ctx.dry_run:
            record_metrics(ctx.name, facts.capacities, enabled=ctx.platform.spec.gpu.hami.enabled)
        return failed_writes(verdict, writes)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Let go of every node label no other live platform wants (and of this platform's
        per-platform manager from earlier versions); labels others still want stay."""
        metrics.forget_gpu(ctx.name)
        SCOPES.forget(ctx.name)
        _WANTED.forget(ctx.name)
        others = read_wanters(ctx)
        if others is None:
            return CleanupResult(done=False, message="could not read the TenantPlatforms to release GPU node labels")
        snapshot = ClusterSnapshot()
        snapshot.replace_all(ctx.kube.list("v1", "Node"), ())
        nodes = snapshot.view().nodes
        plan = plan_labels(nodes, (), {}, platform=ctx.name, dry_run=ctx.dry_run, others=others)
        if ctx.dry_run:
            if not plan.pending:
                return CleanupResult(done=True)
            return CleanupResult(done=True, message=f"would release GPU node labels on {len(plan.pending)} node(s)")
        if not plan.jobs:
            return CleanupResult(done=True)
        writes = apply_labels(ctx.kube, plan, nodes=nodes, others=others)
        if writes.errors:
            problems = "; ".join(f"node {n}: {e.message or e}" for n, e in writes.errors[:5])
            return CleanupResult(done=False, message=f"could not release GPU node labels: {problems}")
        return CleanupResult(done=True, message=f"released GPU node labels on {len(plan.jobs)} node(s)")


STEP = GpuStep()
