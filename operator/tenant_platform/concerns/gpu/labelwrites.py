"""Writing GPU node labels: server-side applies under the shared value managers (concerns/gpu/labels.py).

Each job of the plan is one node: one apply per label it sets, under that label value's field
manager (``value_manager``: ``tenant-platform-operator/labels/<key>=<value>``), on a minimal Node
``{apiVersion, kind, metadata: {name, uid, labels}}``, then one empty apply per manager it lets go
(which removes the keys only that manager owned). Nodes are written in parallel (LABEL_WRITERS
threads).

- Not forced at first: when a manager of ours holds the key with another value that a live
  platform wants, the API server answers 409; that key is dropped from the job and reported as a
  conflict (neither platform overwrites the other). A conflict only with a person, another tool
  or a holder of ours nobody wants any more is drift: the apply is repeated with force.
- The node's uid is a precondition: an apply to a Node that no longer exists would otherwise
  CREATE an empty Node (given create RBAC); with the uid the API server answers 409 (gone) or 422
  (re-created), and the node is left to the watch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

from tenant_platform.concerns.gpu.labels import (
    LABEL_MANAGER_PREFIX,
    VALUE_MANAGER_PREFIX,
    LabelJob,
    LabelOutcome,
    LabelPlan,
    NodeLike,
    Others,
    Wanter,
    conflict_sentence,
    held_value,
)
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj

LABEL_WRITERS: Final = 8
_APPLY_ATTEMPTS: Final = 2
_CONFLICT_MANAGER = re.compile(r'conflicts? with "([^"]+)"')
_LABEL_FIELD: Final = ".metadata.labels."


def apply_node_labels(
    kube: Kube, node: str, labels: Mapping[str, str], *, manager: str, force: bool, uid: str = ""
) -> Obj:
    """Server-side apply ``labels`` as the whole label intent of ``manager`` on ``node``.

    An empty ``labels`` releases every key only this manager owned. ``uid`` is a precondition
    (see the module docstring).
    """
    meta: Obj = {"name": node}
    if uid:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(sorted(labels.items()))
    return kube.apply({"apiVersion": "v1", "kind": "Node", "metadata": meta}, force=force, field_manager=manager)


def conflicting_managers(exc: errors.KubeError) -> dict[str, set[str]]:
    """Label key -> field managers an SSA 409 names (empty for any other conflict)."""
    out: dict[str, set[str]] = {}
    for cause in (exc.body.get("details") or {}).get("causes") or ():
        path = str(cause.get("field") or "")
        match = _CONFLICT_MANAGER.search(str(cause.get("message") or ""))
        if path.startswith(_LABEL_FIELD) and match:
            out.setdefault(path[len(_LABEL_FIELD) :], set()).add(match.group(1))
    return out


def node_gone(exc: errors.KubeError) -> bool:
    """The uid precondition failed: the node was deleted (409) or re-created (422)."""
    return isinstance(exc, errors.NotFound) or (
        isinstance(exc, errors.Conflict | errors.Invalid)
        and "uid" in (exc.message or "")
        and not conflicting_managers(exc)
    )


def platforms_holding(key: str, managers: set[str], others: Others) -> list[str] | None:
    """The live platforms a 409's ``managers`` hold ``key`` for: [] when only people, tools or
    stale holders of ours; None when a manager of ours holds it and the platforms are not known."""
    held: set[str] = set()
    for manager in managers:
        if not manager.startswith(LABEL_MANAGER_PREFIX):
            continue  # a person or another tool
        wanters = others.get()
        if wanters is None:
            return None
        if manager.startswith(VALUE_MANAGER_PREFIX):
            value = held_value(manager, key)
            held |= {w.platform for w in wanters if value is None or w.labels.get(key) == value}
        elif manager[len(LABEL_MANAGER_PREFIX) :] in {w.platform for w in wanters}:
            held.add(manager[len(LABEL_MANAGER_PREFIX) :])
    return sorted(held)


@dataclass
class _NodeResult:
    node: str
    applied: dict[str, str] = field(default_factory=dict)
    conflicts: list[tuple[str, str, list[str]]] = field(default_factory=list)
    """(key, value wanted, the platforms holding it)."""
    error: errors.KubeError | None = None
    gone: bool = False


def _apply_label(
    kube: Kube, job: LabelJob, labels: Mapping[str, str], result: _NodeResult, *, manager: str,
    others: Others,
) -> None:  # fmt: skip
    """One value manager's apply: not forced; forced over anyone but a live platform's holder."""
    force = False
    for _ in range(_APPLY_ATTEMPTS):
        try:
            apply_node_labels(kube, job.node, labels, manager=manager, force=force, uid=job.uid)
            result.applied.update(labels)
            return
        except errors.KubeError as exc:
            if node_gone(exc):
                result.gone = True  # the watch will tell the snapshot; a re-created node is a new node
                return
            by_key = conflicting_managers(exc) if isinstance(exc, errors.Conflict) else {}
            if not by_key or force:
                result.error = exc
                return
            for key, managers in sorted(by_key.items()):
                holding = platforms_holding(key, managers, others)
                if holding is None or holding:
                    result.conflicts.append((key, labels.get(key, ""), holding or []))
                    return
            force = True  # only people, other tools or stale holders of ours: repair the drift


def _write(kube: Kube, job: LabelJob, others: Others) -> _NodeResult:
    """The job's applies, then its releases (skipped when an apply failed: nothing is let go
    before what replaces it is in place)."""
    result = _NodeResult(job.node)
    for manager, labels in sorted(job.apply.items()):
        _apply_label(kube, job, labels, result, manager=manager, others=others)
        if result.gone or result.error is not None:
            return result
    for manager in job.release:
        try:
            apply_node_labels(kube, job.node, {}, manager=manager, force=True, uid=job.uid)
        except errors.KubeError as exc:
            if node_gone(exc):
                result.gone = True
            else:
                result.error = exc
            return result
    return result


@dataclass
class LabelWrites:
    """What labelling achieved, and the nodes whose apply failed (with the API error)."""

    outcome: LabelOutcome
    errors: list[tuple[str, errors.KubeError]] = field(default_factory=list)


def apply_labels(
    kube: Kube,
    plan: LabelPlan,
    *,
    nodes: Mapping[str, NodeLike],
    others: Others | Sequence[Wanter] | None = (),
) -> LabelWrites:
    """Write every job of ``plan``; conflicts the API server reveals join the plan's."""
    if not isinstance(others, Others):
        others = Others.of(others)
    writes = LabelWrites(LabelOutcome(conflicts=list(plan.conflicts), pending=list(plan.pending)))
    if not plan.jobs:
        return writes
    if len(plan.jobs) == 1:
        results = [_write(kube, plan.jobs[0], others)]
    else:
        workers = min(LABEL_WRITERS, len(plan.jobs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpu-labels") as pool:
            results = list(pool.map(lambda job: _write(kube, job, others), plan.jobs))
    for result in results:
        if result.applied:
            writes.outcome.applied[result.node] = result.applied
        for key, value, holding in result.conflicts:
            writes.outcome.conflicts.append(
                conflict_sentence(nodes.get(result.node), name=result.node, key=key, value=value, others=holding)
            )
        if result.error is not None:
            writes.errors.append((result.node, result.error))
    return writes
