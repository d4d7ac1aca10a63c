"""Writing GPU node labels: one server-side apply per node under the platform's own field manager.

The plan (hami/labels.py) gives each node's whole label intent. ``apply_labels`` writes it, in
parallel (LABEL_WRITERS threads), with ``Kube.apply(field_manager=tenant-platform-operator/<platform>)``
on a minimal Node ``{apiVersion, kind, metadata: {name, uid, labels}}``:

- not forced at first: when another platform's manager holds a key with another value, the API
  server answers 409, that key is dropped from the intent and reported as a conflict (neither
  platform overwrites the other); a conflict only with a person or another tool is drift, so the
  apply is repeated with force;
- the node's uid is a precondition: an apply to a Node that no longer exists would otherwise
  CREATE an empty Node (given create RBAC); with the uid the API server answers 409 (gone) or 422
  (re-created), and the node is left to the watch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

from tenant_platform.hami.labels import LabelJob, LabelOutcome, LabelPlan, NodeLike, conflict_sentence
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.observe import cluster

LABEL_WRITERS: Final = 8
_APPLY_ATTEMPTS: Final = 3
_CONFLICT_MANAGER = re.compile(r'conflicts? with "([^"]+)"')
_LABEL_FIELD: Final = ".metadata.labels."


def label_manager(platform: str) -> str:
    return cluster.label_manager(platform)


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


@dataclass
class _NodeResult:
    node: str
    applied: dict[str, str] | None = None
    conflicts: list[tuple[str, list[str]]] = field(default_factory=list)
    error: errors.KubeError | None = None


def _platforms_holding(by_key: Mapping[str, set[str]], manager: str) -> dict[str, list[str]]:
    """Label key -> the other platforms whose managers a 409 names (people and tools left out)."""
    prefix = cluster.LABEL_MANAGER_PREFIX
    held = {
        key: sorted(m[len(prefix) :] for m in managers if m.startswith(prefix) and m != manager)
        for key, managers in by_key.items()
    }
    return {key: others for key, others in held.items() if others}


def _apply_one(kube: Kube, job: LabelJob, platform: str) -> _NodeResult:
    """Apply without force; drop keys another platform holds; force over anyone else."""
    manager = label_manager(platform)
    result = _NodeResult(job.node)
    intent = dict(job.intent)
    force = False
    for attempt in range(_APPLY_ATTEMPTS):
        try:
            apply_node_labels(kube, job.node, intent, manager=manager, force=force, uid=job.uid)
            result.applied = intent
            return result
        except errors.KubeError as exc:
            if node_gone(exc):
                return result  # the watch will tell the snapshot; a re-created node is a new node
            if not isinstance(exc, errors.Conflict):
                result.error = exc
                return result
            by_key = conflicting_managers(exc)
            if not by_key or attempt == _APPLY_ATTEMPTS - 1:
                result.error = exc
                return result
            platform_held = _platforms_holding(by_key, manager)
            if platform_held:
                for key, others in sorted(platform_held.items()):
                    intent = {k: v for k, v in intent.items() if k != key}
                    result.conflicts.append((key, others))
            else:
                force = True  # only people or other tools: repair the drift
    return result


@dataclass
class LabelWrites:
    """What labelling achieved, and the nodes whose apply failed (with the API error)."""

    outcome: LabelOutcome
    errors: list[tuple[str, errors.KubeError]] = field(default_factory=list)


def apply_labels(
    kube: Kube, plan: LabelPlan, *, platform: str, nodes: Mapping[str, NodeLike], wanted: Mapping[str, str]
) -> LabelWrites:
    """Write every job of ``plan``; conflicts the API server reveals join the plan's."""
    writes = LabelWrites(LabelOutcome(conflicts=list(plan.conflicts), pending=list(plan.pending)))
    if not plan.jobs:
        return writes
    if len(plan.jobs) == 1:
        results = [_apply_one(kube, plan.jobs[0], platform)]
    else:
        workers = min(LABEL_WRITERS, len(plan.jobs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpu-labels") as pool:
            results = list(pool.map(lambda job: _apply_one(kube, job, platform), plan.jobs))
    for result in results:
        if result.applied is not None:
            writes.outcome.applied[result.node] = result.applied
        for key, others in result.conflicts:
            writes.outcome.conflicts.append(
                conflict_sentence(
                    nodes.get(result.node), name=result.node, key=key, value=wanted.get(key, ""), others=others
                )
            )
        if result.error is not None:
            writes.errors.append((result.node, result.error))
    return writes
