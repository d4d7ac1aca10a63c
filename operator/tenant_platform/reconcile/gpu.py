"""GPUReady: label GPU nodes for HAMi and report HAMi's shareable GPU capacity.

Reads the watched snapshot (observe.cluster), never lists pods per reconcile. ``ctx.observed`` is
the snapshot (or a ClusterView, or an object/mapping holding one under ``gpu``/``cluster``);
without one (``check``, a bare ``reconcile.run``) the step loads it once from the API.

Node labels
    A node is a GPU node when it advertises the HAMi count resource (``nvidia.com/gpu`` unless
    HAMi's ConfigMap renames it), carries an NVIDIA feature-discovery label, or a HAMi register
    annotation. Each platform applies ``spec.gpu.nodeLabels.labels`` to those nodes with
    server-side apply under its OWN field manager, ``tenant-platform-operator/<platform>``, whose
    intent is a minimal Node: ``{apiVersion, kind, metadata: {name, labels}}``. So:
    - SSA records exactly which label keys each platform owns, on the node itself
      (managedFields). That is the bookkeeping: it survives a lost status, a restored backup and
      a re-created TenantPlatform, and cannot drift from what the API server enforces.
    - Applying a smaller intent removes only the keys that platform alone owned: a key another
      platform (same value) or a person also set stays. Deleting one platform therefore never
      strips a label another platform still wants.
    - Applies are not forced at first. When another platform's manager holds a key with another
      value, the API server answers 409: that key is dropped from our intent and reported as
      Conflict (neither overwrites; the platform holding the label keeps it). A conflict only
      with a person or another tool (e.g. ``kubectl label gpu=off``) is drift: we apply again
      with force. The snapshot pre-checks known conflicts, so a standing conflict costs no write.
    - ``nvidia.com/*``, ``feature.node.kubernetes.io/*`` and other reserved prefixes are never
      written (the CRD rejects them; this module skips them too).
    - No-op resyncs write nothing: a node whose owned keys and live values already match is
      skipped.

Capacity (status/hami.py does the arithmetic): per GPU node cards, models, slots, memory,
cores, unhealthy cards and the node lock; totals; a printer-column summary; recorded gpuNodes;
per-node and per-model gauges. Resource names come from HAMi's ``hami-scheduler-device``
ConfigMap in ``spec.gpu.hami.configMapNamespace`` when it exists.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.observe import cluster
from tenant_platform.observe.cluster import ClusterSnapshot, ClusterView, NodeInfo
from tenant_platform.reconcile.base import CleanupResult, StepContext, StepResult, api_error_condition
from tenant_platform.status import hami

COMPONENT: Final = "gpu"
CONFIG_MAP: Final = "hami-scheduler-device"
CONFIG_KEY: Final = "device-config.yaml"
# status.gpu.nodes lists at most this many nodes (problem nodes first); totals and metrics cover
# all. Keeps the status object small on big clusters (a node entry is ~400 bytes).
MAX_LISTED_NODES: Final = 500
MAX_RECORDED_NODES: Final = 1000
LABEL_WRITERS: Final = 8
# How long a pass waits for the watched snapshot's first listing (operator start).
SYNC_WAIT: Final = 120.0
_APPLY_ATTEMPTS: Final = 3
_CONFLICT_MANAGER = re.compile(r'conflicts? with "([^"]+)"')
_LABEL_FIELD: Final = ".metadata.labels."


def label_manager(platform: str) -> str:
    return cluster.label_manager(platform)


# -- snapshot -------------------------------------------------------------------------------------


def snapshot_view(ctx: StepContext) -> ClusterView:
    """The ClusterView this pass works from (see the module docstring for accepted shapes).

    A watched snapshot whose first listing is still running is waited for (SYNC_WAIT seconds).
    """
    observed = ctx.observed
    candidates: list[Any] = [observed, getattr(observed, "gpu", None), getattr(observed, "cluster", None)]
    if isinstance(observed, Mapping):
        candidates += [observed.get("gpu"), observed.get("cluster")]
    for candidate in candidates:
        if isinstance(candidate, ClusterView):
            return candidate
        if isinstance(candidate, ClusterSnapshot):
            if not candidate.wait_synced(SYNC_WAIT):
                ctx.logger.warning("the GPU snapshot is still listing after %ss; using what it has", SYNC_WAIT)
            return candidate.view()
    ctx.logger.debug("no GPU snapshot was passed in; listing nodes and pods once")
    return cluster.load_from_api(ctx.kube).view()


# -- labels ---------------------------------------------------------------------------------------


def apply_node_labels(
    kube: Kube, node: str, labels: Mapping[str, str], *, manager: str, force: bool, uid: str = ""
) -> Obj:
    """Server-side apply ``labels`` as the whole label intent of ``manager`` on ``node``.

    An empty ``labels`` releases every key only this manager owned. ``uid`` is a precondition:
    NB: an apply to a Node that no longer exists would otherwise CREATE an empty Node (given
    create RBAC); with the uid the API server answers 409 (gone) or 422 (re-created) instead.
    """
    meta: Obj = {"name": node}
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    body = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    return kube.request(
        "PATCH",
        kube.path("v1", "Node", node),
        body=json.dumps(body),
        query={"fieldManager": manager, "force": "true" if force else "false"},
        content_type="application/apply-patch+yaml",
    )


def conflicting_managers(exc: errors.KubeError) -> dict[str, set[str]]:
    """Label key -> field managers an SSA 409 names (empty for any other conflict)."""
    out: dict[str, set[str]] = {}
    for cause in (exc.body.get("details") or {}).get("causes") or ():
        path = str(cause.get("field") or "")
        match = _CONFLICT_MANAGER.search(str(cause.get("message") or ""))
        if path.startswith(_LABEL_FIELD) and match:
            out.setdefault(path[len(_LABEL_FIELD) :], set()).add(match.group(1))
    return out


@dataclass
class _NodeResult:
    node: str
    applied: dict[str, str] | None = None
    conflicts: list[tuple[str, list[str]]] = field(default_factory=list)
    error: errors.KubeError | None = None


def _node_gone(exc: errors.KubeError) -> bool:
    """The uid precondition failed: the node was deleted (409) or re-created (422)."""
    return isinstance(exc, errors.NotFound) or (
        isinstance(exc, errors.Conflict | errors.Invalid)
        and "uid" in (exc.message or "")
        and not conflicting_managers(exc)
    )


def _apply_one(kube: Kube, node: NodeInfo, intent: dict[str, str], platform: str) -> _NodeResult:
    """Apply without force; drop keys another platform holds; force over anyone else."""
    manager = label_manager(platform)
    result = _NodeResult(node.name)
    force = False
    for attempt in range(_APPLY_ATTEMPTS):
        try:
            apply_node_labels(kube, node.name, intent, manager=manager, force=force, uid=node.uid)
            result.applied = intent
            return result
        except errors.KubeError as exc:
            if _node_gone(exc):
                return result  # the watch will tell the snapshot; a re-created node is a new node
            if not isinstance(exc, errors.Conflict):
                result.error = exc
                return result
            by_key = conflicting_managers(exc)
            if not by_key or attempt == _APPLY_ATTEMPTS - 1:
                result.error = exc
                return result
            platform_held = {
                key: sorted(
                    m[len(cluster.LABEL_MANAGER_PREFIX) :]
                    for m in managers
                    if m.startswith(cluster.LABEL_MANAGER_PREFIX) and m != manager
                )
                for key, managers in by_key.items()
            }
            platform_held = {key: others for key, others in platform_held.items() if others}
            if platform_held:
                for key, others in sorted(platform_held.items()):
                    intent = {k: v for k, v in intent.items() if k != key}
                    result.conflicts.append((key, others))
            else:
                force = True  # only people or other tools: repair the drift
    return result


@dataclass
class LabelOutcome:
    applied: dict[str, dict[str, str]] = field(default_factory=dict)
    """Node -> the label intent applied this pass (writes only)."""
    conflicts: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    errors: list[tuple[str, errors.KubeError]] = field(default_factory=list)


def _conflict_sentence(node: NodeInfo | None, *, name: str, key: str, value: str, others: list[str]) -> str:
    live = node.labels.get(key) if node else None
    holder = ", ".join(f"TenantPlatform {o}" for o in others)
    held = f"{key}={live}" if live is not None else key
    return f"Node {name}: label {held} is held by {holder}; this platform wants {key}={value}."


def reconcile_labels(
    ctx: StepContext, view: ClusterView, gpu_nodes: set[str], wanted: Mapping[str, str]
) -> LabelOutcome:
    """Bring every snapshot node's labels under this platform's manager to the wanted state."""
    platform = ctx.name
    outcome = LabelOutcome()
    jobs: list[tuple[NodeInfo, dict[str, str]]] = []
    for name in sorted(view.nodes):
        node = view.nodes[name]
        target = dict(wanted) if name in gpu_nodes else {}
        owned = node.label_managers.get(platform, frozenset())
        intent: dict[str, str] = {}
        for key, value in sorted(target.items()):
            others = sorted(p for p, keys in node.label_managers.items() if p != platform and key in keys)
            live = node.labels.get(key)
            if others and live is not None and live != value:
                outcome.conflicts.append(_conflict_sentence(node, name=name, key=key, value=value, others=others))
                continue
            intent[key] = value
        if set(owned) == set(intent) and all(node.labels.get(k) == v for k, v in intent.items()):
            continue
        if ctx.dry_run:
            changes = [f"set {k}={v}" for k, v in intent.items() if node.labels.get(k) != v]
            changes += [f"release {k}" for k in sorted(set(owned) - set(intent))]
            if changes:
                outcome.pending.append(f"{name}: {', '.join(changes)}")
            continue
        jobs.append((node, intent))
    if not jobs:
        return outcome
    if len(jobs) == 1:
        results = [_apply_one(ctx.kube, jobs[0][0], jobs[0][1], platform)]
    else:
        with ThreadPoolExecutor(max_workers=min(LABEL_WRITERS, len(jobs)), thread_name_prefix="gpu-labels") as pool:
            results = list(pool.map(lambda job: _apply_one(ctx.kube, job[0], job[1], platform), jobs))
    for result in results:
        if result.applied is not None:
            outcome.applied[result.node] = result.applied
        for key, others in result.conflicts:
            outcome.conflicts.append(
                _conflict_sentence(
                    view.nodes.get(result.node), name=result.node, key=key, value=wanted.get(key, ""), others=others
                )
            )
        if result.error is not None:
            outcome.errors.append((result.node, result.error))
    return outcome


# -- resource names -------------------------------------------------------------------------------


def read_resource_names(kube: Kube, namespace: str) -> tuple[hami.ResourceNames, str]:
    """(names, source) from HAMi's ConfigMap; defaults when it is absent, unreadable or malformed."""
    where = f"ConfigMap {namespace}/{CONFIG_MAP}"
    try:
        config_map = kube.get("v1", "ConfigMap", CONFIG_MAP, namespace)
    except errors.KubeError as exc:
        return hami.DEFAULT_NAMES, f"defaults ({where} unreadable: {exc.reason})"
    if config_map is None:
        return hami.DEFAULT_NAMES, "defaults"
    text = (config_map.get("data") or {}).get(CONFIG_KEY)
    if text is None:
        return hami.DEFAULT_NAMES, f"defaults ({where} has no {CONFIG_KEY})"
    try:
        return hami.resource_names_from_config(text), where
    except hami.HamiParseError as exc:
        return hami.DEFAULT_NAMES, f"defaults ({where}: {exc})"


# -- the step -------------------------------------------------------------------------------------


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


def _owner_or_unknown(view: ClusterView) -> Callable[[str, str], hami.PodLike | None]:
    def lookup(namespace: str, name: str) -> hami.PodLike | None:
        return view.pod(namespace, name) or _UnknownPod(namespace, name)

    return lookup


def _annotation(node: NodeInfo, suffix: str) -> str | None:
    found = hami.hami_annotation(node.annotations, suffix)
    return found[1] if found else None


def _node_metrics(capacity: hami.NodeCapacity) -> dict[str, float]:
    totals = capacity.totals()
    return {
        "cards": len(capacity.cards),
        "unhealthy_cards": len(capacity.unhealthy),
        "slots_total": totals.slots_total,
        "slots_used": totals.slots_used,
        "memory_total_mib": totals.mem_total,
        "memory_used_mib": totals.mem_used,
        "memory_free_mib": totals.mem_total - totals.mem_used,
        "cores_total_percent": totals.cores_total,
        "cores_used_percent": totals.cores_used,
        "cores_free_percent": totals.cores_total - totals.cores_used,
        "unparseable": float(capacity.unparseable is not None),
    }


def _is_problem(entry: Mapping[str, Any]) -> bool:
    return bool(
        entry.get("unparseable")
        or entry.get("unhealthyCards")
        or (entry.get("lock") or {}).get("stale")
        or (entry.get("labelled") and entry.get("registered") is False)
    )


def _listed(entries: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    if len(entries) <= limit:
        return entries
    chosen = sorted(entries, key=lambda e: (not _is_problem(e), e["name"]))[:limit]
    return sorted(chosen, key=lambda e: str(e["name"]))


class GpuStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.GPU_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """Nothing to render: labels go on nodes discovered at run time (see ``reconcile``)."""
        return []

    def reconcile(self, ctx: StepContext) -> StepResult:
        spec = ctx.platform.spec.gpu
        labels_enabled = spec.node_labels.enabled
        hami_enabled = spec.hami.enabled
        view = snapshot_view(ctx)
        if hami_enabled:
            names, names_source = read_resource_names(ctx.kube, spec.hami.config_map_namespace)
        else:
            names, names_source = hami.DEFAULT_NAMES, "defaults"
        gpu_nodes = sorted(
            node.name
            for node in view.nodes.values()
            if hami.is_gpu_node(
                labels=node.labels, annotations=node.annotations, capacity=node.capacity, count_resource=names.count
            )
        )
        spec_labels = {k: v for k, v in spec.node_labels.labels.items() if not hami.forbidden_label(k)}
        wanted = spec_labels if labels_enabled else {}
        labels = reconcile_labels(ctx, view, set(gpu_nodes), wanted)

        labelled = set()
        for name in gpu_nodes:
            effective = {**view.nodes[name].labels, **labels.applied.get(name, {})}
            if spec_labels and all(effective.get(k) == v for k, v in spec_labels.items()):
                labelled.add(name)

        capacities: list[hami.NodeCapacity] = []
        allocatable: dict[str, int] = {}
        timeout = parse_duration(spec.hami.node_lock_timeout)
        # Before the first complete listing a missing lock owner may just not be seen yet.
        owner = view.pod if view.synced else _owner_or_unknown(view)
        if hami_enabled:
            for name in gpu_nodes:
                node = view.nodes[name]
                capacities.append(
                    hami.node_capacity(
                        name,
                        register=_annotation(node, hami.REGISTER),
                        lock=_annotation(node, hami.LOCK),
                        cordon=_annotation(node, hami.CORDON),
                        pods=view.pods_by_node.get(name, ()),
                        now=ctx.now,
                        lock_timeout=timeout,
                        owner=owner,
                    )
                )
                allocatable[name] = hami.quantity_int(node.allocatable.get(names.count))

        findings = hami.Findings(
            labels_enabled=labels_enabled,
            hami_enabled=hami_enabled,
            gpu_nodes=len(gpu_nodes),
            conflicts=labels.conflicts,
            pending=labels.pending,
            nodes=capacities,
            labelled=frozenset(labelled),
            allocatable=allocatable,
            count_resource=names.count,
            lock_timeout=timeout,
        )
        condition = hami.gpu_condition(findings)
        failed = False
        if labels.errors:
            failed = True
            first = labels.errors[0][1]
            nodes = ", ".join(n for n, _ in labels.errors[:5])
            condition = api_error_condition(constants.GPU_READY, first, f"label GPU node(s) {nodes}")

        status = self._status(
            ctx,
            gpu_nodes=gpu_nodes,
            capacities=capacities,
            labelled=labelled,
            wanted=wanted,
            names=names,
            names_source=names_source,
        )
        recorded = self._recorded(
            view, gpu_nodes=gpu_nodes, capacities=capacities, names=names if hami_enabled else None
        )
        if not ctx.dry_run:
            self._record_metrics(ctx.name, capacities, enabled=hami_enabled)
        expiries = [
            hami.lock_expires_in(c.lock, now=ctx.now, timeout=timeout) for c in capacities if c.lock is not None
        ]
        pending_expiry = [e for e in expiries if e is not None]
        requeues = [e + 1.0 for e in pending_expiry]
        if failed:
            requeues.append(30.0)
        if not view.synced:
            requeues.append(5.0)
        return StepResult(
            conditions=[condition],
            recorded=recorded,
            status={"gpu": status},
            failed=failed,
            progressing=not view.synced,
            requeue_after=min(requeues) if requeues else None,
        )

    @staticmethod
    def _status(
        ctx: StepContext,
        *,
        gpu_nodes: list[str],
        capacities: list[hami.NodeCapacity],
        labelled: set[str],
        wanted: Mapping[str, str],
        names: hami.ResourceNames,
        names_source: str,
    ) -> dict[str, Any]:
        spec = ctx.platform.spec.gpu
        if not spec.node_labels.enabled and not spec.hami.enabled:
            return {"summary": "disabled"}
        if spec.hami.enabled:
            entries = [c.to_status(labelled=c.name in labelled) for c in capacities]
            total = hami.total_status(capacities)
            summary = hami.summary_line(total)
        else:
            entries = [{"name": n, "labelled": n in labelled} for n in gpu_nodes]
            total = {"nodes": len(gpu_nodes)}
            summary = f"{len(gpu_nodes)} GPU nodes"
        out: dict[str, Any] = {
            "nodes": _listed(entries, MAX_LISTED_NODES),
            "total": total,
            "summary": summary,
            "labels": {"wanted": dict(sorted(wanted.items())), "labelledNodes": len(labelled)},
        }
        if len(entries) > MAX_LISTED_NODES:
            out["nodesOmitted"] = len(entries) - MAX_LISTED_NODES
        if spec.hami.enabled:
            out["resourceNames"] = {**names.to_status(), "source": names_source}
        return out

    @staticmethod
    def _recorded(
        view: ClusterView,
        *,
        gpu_nodes: list[str],
        capacities: list[hami.NodeCapacity],
        names: hami.ResourceNames | None,
    ) -> dict[str, Any]:
        by_name = {c.name: c for c in capacities}
        records = []
        for name in gpu_nodes[:MAX_RECORDED_NODES]:
            capacity = by_name.get(name)
            if capacity is not None and capacity.cards:
                records.append({"name": name, "model": capacity.main_model, "cards": len(capacity.cards)})
                continue
            labels = view.nodes[name].labels
            records.append(
                {
                    "name": name,
                    "model": labels.get(hami.GFD_PRODUCT_LABEL, ""),
                    "cards": hami.quantity_int(labels.get(hami.GFD_COUNT_LABEL)),
                }
            )
        recorded: dict[str, Any] = {"gpuNodes": records}
        if names is not None:
            recorded["gpuResourceNames"] = names.to_status()
        return recorded

    @staticmethod
    def _record_metrics(platform: str, capacities: list[hami.NodeCapacity], *, enabled: bool) -> None:
        if not enabled:
            metrics.forget_gpu(platform)
            return
        metrics.record_gpu(
            platform,
            nodes={c.name: _node_metrics(c) for c in capacities},
            models={model: {k: float(v) for k, v in m.items()} for model, m in hami.model_rollup(capacities).items()},
            stale_locks={c.name: bool(c.lock is not None and c.lock.stale) for c in capacities},
        )

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Release every node label this platform's field manager owns (others' stay)."""
        metrics.forget_gpu(ctx.name)
        nodes = ctx.kube.list("v1", "Node")
        snapshot = ClusterSnapshot()
        snapshot.replace_all(nodes, ())
        owned = sorted(
            (n for n in snapshot.view().nodes.values() if ctx.name in n.label_managers), key=lambda n: n.name
        )
        if not owned:
            return CleanupResult(done=True)
        if ctx.dry_run:
            return CleanupResult(done=True, message=f"would remove GPU node labels from {len(owned)} node(s)")
        problems = []
        for node in owned:
            try:
                apply_node_labels(ctx.kube, node.name, {}, manager=label_manager(ctx.name), force=True, uid=node.uid)
            except errors.KubeError as exc:
                if not _node_gone(exc):
                    problems.append(f"node {node.name}: {exc.message or exc}")
        if problems:
            return CleanupResult(done=False, message="could not remove GPU node labels: " + "; ".join(problems[:5]))
        return CleanupResult(done=True, message=f"removed GPU node labels from {len(owned)} node(s)")


STEP = GpuStep()
