"""Which GPU node labels a platform applies, given who already holds which key (pure planning).

Each platform owns its node labels through its own server-side-apply field manager; a snapshot
node tells which label keys each platform's manager owns (``label_managers``). For every node in
the snapshot the plan is this platform's whole label intent: ``spec.gpu.nodeLabels.labels`` on
GPU nodes, nothing elsewhere (which releases keys only this platform owned). A key another
platform holds with another value is left out and reported as a conflict; a node whose owned
keys and live values already match needs no write; a dry run reports the changes instead.
Writing the plan (and the conflicts only the API server can reveal) is reconcile/gpu_labels.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tenant_platform.hami.names import forbidden_label


class NodeLike(Protocol):
    """What the GPU step reads of a node (observe's NodeInfo satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...
    @property
    def capacity(self) -> Mapping[str, str]: ...
    @property
    def allocatable(self) -> Mapping[str, str]: ...
    @property
    def label_managers(self) -> Mapping[str, frozenset[str]]: ...
    @property
    def runtime_handlers(self) -> tuple[str, ...]: ...
    @property
    def taints(self) -> tuple[tuple[str, str, str], ...]: ...


@dataclass(frozen=True)
class LabelJob:
    """One node's label intent to apply (its uid is the apply's precondition)."""

    node: str
    uid: str
    intent: Mapping[str, str]


@dataclass
class LabelPlan:
    jobs: list[LabelJob] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Sentences naming node, key and the other TenantPlatform (known from the snapshot)."""
    pending: list[str] = field(default_factory=list)
    """Dry run: label changes that would be made, e.g. ``gpu-1: set gpu=on``."""


@dataclass
class LabelOutcome:
    """What labelling achieved this pass (the plan, plus what the API server answered)."""

    applied: dict[str, dict[str, str]] = field(default_factory=dict)
    """Node -> the label intent applied this pass (writes only)."""
    conflicts: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)


def spec_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``spec.gpu.nodeLabels.labels`` without reserved keys (the CRD rejects them too)."""
    return {k: v for k, v in labels.items() if not forbidden_label(k)}


def conflict_sentence(node: NodeLike | None, *, name: str, key: str, value: str, others: Collection[str]) -> str:
    live = node.labels.get(key) if node else None
    holder = ", ".join(f"TenantPlatform {o}" for o in others)
    held = f"{key}={live}" if live is not None else key
    return f"Node {name}: label {held} is held by {holder}; this platform wants {key}={value}."


def plan_labels(
    nodes: Mapping[str, NodeLike],
    gpu_nodes: Collection[str],
    wanted: Mapping[str, str],
    *,
    platform: str,
    dry_run: bool,
) -> LabelPlan:
    """This platform's label intent for every snapshot node, minus what needs no write."""
    plan = LabelPlan()
    for name in sorted(nodes):
        node = nodes[name]
        target = dict(wanted) if name in gpu_nodes else {}
        owned = node.label_managers.get(platform, frozenset())
        intent: dict[str, str] = {}
        for key, value in sorted(target.items()):
            others = sorted(p for p, keys in node.label_managers.items() if p != platform and key in keys)
            live = node.labels.get(key)
            if others and live is not None and live != value:
                plan.conflicts.append(conflict_sentence(node, name=name, key=key, value=value, others=others))
                continue
            intent[key] = value
        if set(owned) == set(intent) and all(node.labels.get(k) == v for k, v in intent.items()):
            continue
        if dry_run:
            changes = [f"set {k}={v}" for k, v in intent.items() if node.labels.get(k) != v]
            changes += [f"release {k}" for k in sorted(set(owned) - set(intent))]
            if changes:
                plan.pending.append(f"{name}: {', '.join(changes)}")
            continue
        plan.jobs.append(LabelJob(name, node.uid, intent))
    return plan


def labelled_nodes(
    nodes: Mapping[str, NodeLike],
    gpu_nodes: Collection[str],
    labels: Mapping[str, str],
    applied: Mapping[str, Mapping[str, str]],
) -> frozenset[str]:
    """GPU nodes that carry every spec label (live, or as applied this pass)."""
    labelled = set()
    for name in gpu_nodes:
        effective = {**nodes[name].labels, **applied.get(name, {})}
        if labels and all(effective.get(k) == v for k, v in labels.items()):
            labelled.add(name)
    return frozenset(labelled)
