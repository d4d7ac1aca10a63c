"""Could each GPU node take a pod asking for this GPU request now, and if not, why (pure)?

What `tenant-platform fit` answers, from the same facts and arithmetic the gpu step reports in
``status.gpu``: each GPU node's HAMi capacity (``capacities``: the node register, cordon and lock
annotations and the HAMi pods placed there, concerns/gpu/capacity.py ``node_capacity``, which the
step's ``verdict.node_capacities`` calls too), then HAMi's per-card fit (concerns/gpu/fit.py
``node_fit``, whose whole-card and any-share cases give ``status.gpu.nodes[].fit``).

The first reason a node cannot take the pod, in this order (the order a pod meets them):
``refused`` (the caller's reason the API server refuses the pod before any node is considered,
e.g. the tenant's GPU share), no HAMi register, an unparseable register, no cards, a
NoSchedule/NoExecute taint a GPU pod is not given a toleration for (concerns/gpu/health.py
``blocking_taints``, as GPUReady's note), no allocatable count resource (HAMi v2.8+ treats the
devices as unhealthy), a stale node lock (HAMi binds nothing there until it expires), then the
cards: ``request.cards`` distinct cards must fit, each judged by HAMi's checks in HAMi's order.
An active node lock is a note (HAMi is binding another pod; this one waits its turn).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tenant_platform.concerns.gpu import health
from tenant_platform.concerns.gpu.capacity import NodeCapacity, node_capacity, quantity_int
from tenant_platform.concerns.gpu.facts import GpuFacts
from tenant_platform.concerns.gpu.fit import GpuRequest, node_fit
from tenant_platform.formats.hami.locks import PodLookup
from tenant_platform.formats.hami.names import CORDON, LOCK, REGISTER


def capacities(
    facts: GpuFacts, *, now: datetime, lock_timeout: timedelta, owner: PodLookup | None = None
) -> tuple[NodeCapacity, ...]:
    """HAMi's capacity of every GPU node of ``facts`` (``owner``: how a lock's pod is found;
    default ``facts.pod``)."""
    return tuple(
        node_capacity(
            name,
            register=facts.annotation(name, REGISTER),
            lock=facts.annotation(name, LOCK),
            cordon=facts.annotation(name, CORDON),
            pods=facts.pods_by_node.get(name, ()),
            now=now,
            lock_timeout=lock_timeout,
            owner=owner or facts.pod,
        )
        for name in facts.gpu_nodes
    )


@dataclass(frozen=True)
class NodeAnswer:
    """Whether one GPU node could take the pod now; ``reason``: the first reason it cannot."""

    node: str
    fits: bool
    reason: str | None = None
    cards: tuple[str, ...] = ()
    """The cards the request fits (HAMi would use the first ``request.cards`` it picks of them)."""
    card_reasons: Mapping[str, str] = field(default_factory=dict)
    """Card UUID -> why the request does not fit that card."""
    notes: tuple[str, ...] = ()


def _cards_reason(request: GpuRequest, fitting: int, reasons: Mapping[str, str]) -> str:
    needed = max(1, request.cards)
    first = next(iter(reasons.items()), None)
    why = f" ({first[0]}: {first[1]})" if first is not None else ""
    if fitting == 0:
        return f"no card can take it{why}"
    return f"needs {needed} cards, {fitting} can take it{why}"


def node_answer(
    facts: GpuFacts, capacity: NodeCapacity, request: GpuRequest, *, refused: str | None = None
) -> NodeAnswer:
    """One node's answer (see the module docstring for the order of the reasons)."""
    node = facts.nodes[capacity.name]
    notes: tuple[str, ...] = ()
    lock = capacity.lock
    if lock is not None and not lock.stale:
        notes = (f"HAMi's node lock is held ({lock.phrase()}): the pod waits until that binding is done",)
    fit = node_fit(capacity, request) if capacity.cards else None
    cards = fit.cards if fit is not None else ()
    card_reasons = dict(fit.reasons) if fit is not None else {}
    count = facts.names.count
    taints = health.blocking_taints(node.taints, count)
    reason: str | None = None
    if refused is not None:
        reason = refused
    elif not capacity.registered:
        reason = "HAMi registers no devices on it (no node-nvidia-register annotation)"
    elif capacity.unparseable is not None:
        reason = f"its HAMi register annotation cannot be read: {capacity.unparseable}"
    elif not capacity.cards:
        reason = "its HAMi register lists no cards"
    elif taints:
        reason = f"taint {taints[0]}: a GPU pod is not given a toleration for it"
    elif quantity_int(node.allocatable.get(count)) <= 0:
        reason = f"it advertises no allocatable {count}, so HAMi treats its devices as unhealthy"
    elif lock is not None and lock.stale:
        reason = f"HAMi's node lock is {lock.state} ({lock.phrase()}): no pod binds there until it expires"
    elif fit is not None and not fit.fits:
        reason = _cards_reason(request, len(fit.cards), fit.reasons)
    return NodeAnswer(capacity.name, reason is None, reason, cards, card_reasons, notes)


def answers(
    facts: GpuFacts, found: tuple[NodeCapacity, ...], request: GpuRequest, *, refused: str | None = None
) -> list[NodeAnswer]:
    """Every GPU node's answer, in name order."""
    return [node_answer(facts, capacity, request, refused=refused) for capacity in sorted(found, key=lambda c: c.name)]
