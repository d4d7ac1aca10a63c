"""GPU node detection and HAMi capacity: per node, per model and in total.

``node_capacity`` counts what the HAMi pods placed on a node hold on each registered card, the
way HAMi's scheduler does: every pod with ``hami.io/vgpu-node`` that is not Succeeded or Failed,
its ``vgpu-devices-allocated`` decoded (bind phase not required), UUIDs not in the register
ignored. Memory, cores and slots count schedulable cards only (healthy and not cordoned). A
malformed register makes the node ``unparseable``; a malformed pod annotation skips that pod,
which is named in the node's ``ignored_pods`` (at most MAX_IGNORED_LISTED, each note at most
MAX_NOTE_CHARS; ``ignored_count`` counts them all). Nothing in here raises for any annotation
value: an unexpected error in one node's or pod's arithmetic is reported on that node too.

A pass recomputes every GPU node, so ``node_capacity`` keeps each node's last result
(``CapacityCache``, bounded in bytes): while a node's register and cordon values and the pods on it
are equal to last time, it returns the same ``NodeCapacity`` (only the node lock, which depends on
the time and the lock owner, is judged again). A ``NodeCapacity`` also computes its derived values
(totals, schedulable cards, models, fit) once. Results are the same as without the cache.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter, OrderedDict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

from tenant_platform.api.status.gpu import Amount, GpuNodeStatus, GpuTotal, NodeLockStatus, SlotCount
from tenant_platform.concerns.gpu.fit import CardState, free_fit
from tenant_platform.formats.hami.allocations import PodLike, parse_pod_devices, pod_card_usage
from tenant_platform.formats.hami.bounds import CAPACITY_CACHE_BYTES, MAX_NOTE_CHARS, shorten
from tenant_platform.formats.hami.locks import NodeLock, PodLookup, lock_state
from tenant_platform.formats.hami.names import (
    DEFAULT_NAMES,
    GPU_PRESENT_LABELS,
    REGISTER,
    TERMINATED_PHASES,
    HamiParseError,
    hami_annotation,
)
from tenant_platform.formats.hami.register import parse_cordon, parse_register

if TYPE_CHECKING:
    from tenant_platform.api.status.gpu import GpuFit

# A node lists at most this many ignored pods (ignored_count counts them all).
MAX_IGNORED_LISTED: Final = 5
# Models listed per node and in total; the rest are counted under OTHER_MODELS.
MAX_MODELS: Final = 8
OTHER_MODELS: Final = "(other models)"


def _top_models(counts: Counter[str]) -> dict[str, int]:
    """At most MAX_MODELS models by count (then name); the rest summed under OTHER_MODELS."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = dict(ranked[:MAX_MODELS])
    rest = sum(n for _, n in ranked[MAX_MODELS:])
    if rest:
        shown[OTHER_MODELS] = shown.get(OTHER_MODELS, 0) + rest
    return dict(sorted(shown.items()))


def note(text: str) -> str:
    """A note that may reach status: at most MAX_NOTE_CHARS printable characters."""
    return shorten(text, MAX_NOTE_CHARS)


@dataclass(frozen=True)
class NodeCapacity:
    """One node's HAMi capacity. Memory, cores and slots count schedulable cards only.

    Derived values are computed once per instance (``cached_property``; the fields never change).
    """

    name: str
    registered: bool
    cards: tuple[CardState, ...] = ()
    pods: int = 0
    lock: NodeLock | None = None
    unparseable: str | None = None
    ignored_pods: tuple[str, ...] = ()
    """The first MAX_IGNORED_LISTED pods skipped for a malformed annotation, with why."""
    ignored_count: int = 0
    register_format: str = ""

    @cached_property
    def schedulable(self) -> tuple[CardState, ...]:
        return tuple(c for c in self.cards if c.schedulable)

    @cached_property
    def unhealthy(self) -> tuple[CardState, ...]:
        return tuple(c for c in self.cards if not c.card.healthy)

    @cached_property
    def cordoned(self) -> tuple[CardState, ...]:
        return tuple(c for c in self.cards if c.cordoned)

    @cached_property
    def model_counts(self) -> Counter[str]:
        """Cards per model (all cards; ``models`` is the bounded form). Do not modify."""
        return Counter(c.card.model for c in self.cards)

    @cached_property
    def models(self) -> dict[str, int]:
        return _top_models(self.model_counts)

    @cached_property
    def main_model(self) -> str:
        counts = self.model_counts
        if not counts:
            return ""
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    @cached_property
    def model_sums(self) -> dict[str, tuple[int, int, int, int]]:
        """Per model: cards, and over schedulable cards memory total and free (MiB) and cores free
        (%) (what ``model_rollup`` adds up). Do not modify."""
        out: dict[str, tuple[int, int, int, int]] = {}
        for state in self.cards:
            cards, total, free, cores = out.get(state.card.model, (0, 0, 0, 0))
            if state.schedulable:
                total, free, cores = total + state.card.devmem, free + state.free_mem, cores + state.free_cores
            out[state.card.model] = (cards + 1, total, free, cores)
        return out

    @cached_property
    def _totals(self) -> Totals:
        totals = Totals()
        for state in self.schedulable:
            totals.add(state)
        return totals

    def totals(self) -> Totals:
        """Totals of the schedulable cards (a copy: the caller may change it)."""
        return dataclasses.replace(self._totals)

    @cached_property
    def fit(self) -> GpuFit:
        """``concerns/gpu/fit.py free_fit`` of this node."""
        return free_fit(self)

    def to_status(self, *, labelled: bool) -> GpuNodeStatus:
        totals = self._totals
        return GpuNodeStatus(
            name=self.name,
            labelled=labelled,
            registered=self.registered,
            cards=len(self.cards),
            models=self.models,
            slots=totals.slots(),
            memory_mib=totals.memory(),
            cores_percent=totals.cores(),
            unhealthy_cards=len(self.unhealthy),
            pods=self.pods,
            lock=self.lock.to_status() if self.lock else NodeLockStatus(held=False),
            cordoned_cards=len(self.cordoned) or None,
            unparseable=self.unparseable,
            ignored_pods=list(self.ignored_pods) or None,
            ignored_pod_count=self.ignored_count or None,
        )


@dataclass
class Totals:
    """Memory (MiB), cores (percent) and sharing slots of schedulable cards: total and used."""

    mem_total: int = 0
    mem_used: int = 0
    cores_total: int = 0
    cores_used: int = 0
    slots_total: int = 0
    slots_used: int = 0

    def add(self, state: CardState) -> None:
        self.mem_total += state.card.devmem
        self.mem_used += state.used_mem
        self.cores_total += state.card.devcore
        self.cores_used += state.used_cores
        self.slots_total += state.card.count
        self.slots_used += state.used_slots

    def merge(self, other: Totals) -> None:
        self.mem_total += other.mem_total
        self.mem_used += other.mem_used
        self.cores_total += other.cores_total
        self.cores_used += other.cores_used
        self.slots_total += other.slots_total
        self.slots_used += other.slots_used

    def slots(self) -> SlotCount:
        return SlotCount(total=self.slots_total, used=self.slots_used)

    def memory(self) -> Amount:
        return Amount(total=self.mem_total, used=self.mem_used, free=self.mem_total - self.mem_used)

    def cores(self) -> Amount:
        return Amount(total=self.cores_total, used=self.cores_used, free=self.cores_total - self.cores_used)


def node_capacity(
    name: str,
    *,
    register: str | None,
    pods: Iterable[PodLike],
    now: datetime,
    lock_timeout: timedelta,
    owner: PodLookup,
    lock: str | None = None,
    cordon: str | None = None,
    cache: CapacityCache | None = None,
) -> NodeCapacity:
    """Compute one node's capacity from its annotations and the HAMi pods placed on it.

    ``register`` None: the node registers no devices. A malformed register makes the node
    ``unparseable`` (no cards, the reason kept); a malformed pod annotation skips that pod only.
    Pods that are Succeeded or Failed, and UUIDs not in the register, are ignored, as HAMi does.
    The result without the lock comes from ``cache`` (default: the process's ``CACHE``) while
    the node's register, cordon and pods equal those it was computed from.
    """
    try:
        node_lock = lock_state(lock, now=now, timeout=lock_timeout, owner=owner) if lock is not None else None
    except Exception as exc:  # never let one node's lock break the GPU step
        node_lock = NodeLock(None, "", "", "malformed", note(f"unexpected error: {exc!r}"))
    if register is None:
        return NodeCapacity(name, registered=False, lock=node_lock)
    placed = tuple(pods)
    store = CACHE if cache is None else cache
    base = store.get(name, register, cordon, placed)
    if base is None:
        base = _unlocked_capacity(name, register=register, cordon=cordon, pods=placed)
        store.put(name, register, cordon, placed, base)
    return base if node_lock is None else dataclasses.replace(base, lock=node_lock)


def _unlocked_capacity(name: str, *, register: str, cordon: str | None, pods: Iterable[PodLike]) -> NodeCapacity:
    """``node_capacity`` without the node lock (what CapacityCache keeps)."""
    try:
        parsed = parse_register(register)
    except HamiParseError as exc:
        return NodeCapacity(name, registered=True, unparseable=note(str(exc)))
    except Exception as exc:  # a parser bug must not take every platform's GPU status with it
        return NodeCapacity(name, registered=True, unparseable=note(f"unexpected error: {exc!r}"))
    cordoned = parse_cordon(cordon)
    used: dict[str, list[int]] = {card.id: [0, 0, 0] for card in parsed.cards}
    count = 0
    ignored: list[str] = []
    for pod in pods:
        if pod.phase in TERMINATED_PHASES:
            continue
        try:
            containers = parse_pod_devices(pod.allocated)
            usage = pod_card_usage(
                containers,
                init_containers=pod.init_containers,
                app_containers=pod.app_containers,
                init_exit_codes=pod.init_exit_codes,
            )
        except Exception as exc:  # HamiParseError, or anything else: skip this pod only
            reason = str(exc) if isinstance(exc, HamiParseError) else f"unexpected error: {exc!r}"
            ignored.append(note(f"{pod.namespace}/{pod.name}: {reason}"))
            continue
        count += 1
        for uuid, use in usage.items():
            slot = used.get(uuid)
            if slot is None:
                continue  # not a card of this node: HAMi ignores it too
            slot[0] += use.mem_mib
            slot[1] += use.cores
            slot[2] += use.slots
    states = tuple(
        CardState(card, card.id in cordoned, used[card.id][0], used[card.id][1], used[card.id][2])
        for card in parsed.cards
    )
    return NodeCapacity(
        name,
        registered=True,
        cards=states,
        pods=count,
        ignored_pods=tuple(sorted(ignored)[:MAX_IGNORED_LISTED]),
        ignored_count=len(ignored),
        register_format=parsed.format,
    )


@dataclass(frozen=True, slots=True)
class _Entry:
    register: str
    cordon: str | None
    pods: tuple[PodLike, ...]
    capacity: NodeCapacity
    size: int


class CapacityCache:
    """Each node's last lock-free ``NodeCapacity`` by node name, reused while the node's register
    and cordon values and its pods (compared by equality: the snapshot's unchanged ``PodInfo``
    objects compare by identity first) are equal to those it was computed from. Least recently
    used out first; bounded in bytes (an estimate per entry and card, plus the pods' allocation
    values), and ``retain`` drops the nodes no longer in the snapshot, so no entry keeps a deleted
    node's values alive. Thread-safe.
    """

    # Measured (tracemalloc): about 2.6 KB per node with 8 cards, derived values included.
    ENTRY_COST: Final = 1024
    CARD_COST: Final = 192

    def __init__(self, max_bytes: int = CAPACITY_CACHE_BYTES) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str, register: str, cordon: str | None, pods: tuple[PodLike, ...]) -> NodeCapacity | None:
        with self._lock:
            entry = self._entries.get(name)
            if entry is not None and entry.register == register and entry.cordon == cordon and entry.pods == pods:
                self._entries.move_to_end(name)
                self.hits += 1
                return entry.capacity
            self.misses += 1
            return None

    def put(
        self, name: str, register: str, cordon: str | None, pods: tuple[PodLike, ...], capacity: NodeCapacity
    ) -> None:
        # The entry's own objects, and the pods' allocation values: the snapshot holds those too while
        # the pods exist, but an entry keeps them alive until its node is computed again (``retain``
        # drops the entries of nodes that are gone), so large hostile values make an entry expensive.
        size = self.ENTRY_COST + self.CARD_COST * len(capacity.cards) + sum(8 + len(p.allocated) for p in pods)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(name, None)
            if old is not None:
                self.bytes -= old.size
            self._entries[name] = _Entry(register, cordon, pods, capacity, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self.bytes -= dropped.size

    def retain(self, nodes: Container[str]) -> int:
        """Drop the entries of nodes not in ``nodes`` (the snapshot's); how many were dropped."""
        with self._lock:
            gone = [name for name in self._entries if name not in nodes]
            for name in gone:
                self.bytes -= self._entries.pop(name).size
            return len(gone)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


CACHE: Final = CapacityCache()
"""The process's per-node capacity cache (``CACHE.clear()``, ``CACHE.hits``)."""


def total_status(nodes: Sequence[NodeCapacity]) -> GpuTotal:
    """The cluster roll-up: nodes, cards, models, memory, cores, slots, unhealthy cards."""
    totals = Totals()
    models: Counter[str] = Counter()
    unhealthy = 0
    cards = 0
    for node in nodes:
        totals.merge(node._totals)
        models.update(node.model_counts)
        unhealthy += len(node.unhealthy)
        cards += len(node.cards)
    return GpuTotal(
        nodes=len(nodes),
        cards=cards,
        models=_top_models(models),
        slots=totals.slots(),
        memory_mib=totals.memory(),
        cores_percent=totals.cores(),
        unhealthy_cards=unhealthy,
    )


def model_rollup(nodes: Sequence[NodeCapacity]) -> dict[str, dict[str, int]]:
    """Per model: cards, memory total/free (MiB), cores free (%), over schedulable cards."""
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        for model, (cards, total, free, cores) in node.model_sums.items():
            entry = out.setdefault(
                model, {"cards": 0, "memory_total_mib": 0, "memory_free_mib": 0, "cores_free_percent": 0}
            )
            entry["cards"] += cards
            entry["memory_total_mib"] += total
            entry["memory_free_mib"] += free
            entry["cores_free_percent"] += cores
    ranked = sorted(out.items(), key=lambda kv: (-kv[1]["cards"], kv[0]))
    kept = dict(ranked[:MAX_MODELS])
    for _, rest in ranked[MAX_MODELS:]:  # bounded metric label values, as in status
        other = kept.setdefault(OTHER_MODELS, dict.fromkeys(rest, 0))
        for key, value in rest.items():
            other[key] += value
    return dict(sorted(kept.items()))


def summary_line(total: GpuTotal) -> str:
    """The GPUs printer column: ``<cards> cards / <free> MiB free``."""
    free = total.memory_mib.free if total.memory_mib is not None else 0
    return f"{total.cards or 0} cards / {free} MiB free"


# -- GPU node detection -------------------------------------------------------------------------


# Suffixes quantity_int accepts, longest first.
_MULTIPLIERS: Final = tuple(
    sorted(
        {"k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}.items(),
        key=lambda kv: -len(kv[0]),
    )
)


def quantity_int(value: Any) -> int:
    """An integer quantity such as ``8`` or ``2k``; 0 for anything else (never raises)."""
    text = str(value or "").strip()
    if len(text) > 20 or not text.isascii():  # "²".isdigit() is True, int("²") raises
        return 0
    if text.isdigit():
        return int(text)
    for suffix, factor in _MULTIPLIERS:
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    return 0


def advertised_by(
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    capacity: Mapping[str, Any],
    count_resource: str = DEFAULT_NAMES.count,
) -> list[str]:
    """What the node itself advertises: ``capacity`` (of the count resource), ``label`` (NVIDIA
    feature discovery), ``register`` (HAMi's register annotation)."""
    found = []
    if quantity_int(capacity.get(count_resource)) > 0:
        found.append("capacity")
    if any(labels.get(key, "").lower() == "true" for key in GPU_PRESENT_LABELS):
        found.append("label")
    if hami_annotation(annotations, REGISTER) is not None:
        found.append("register")
    return found


def is_gpu_node(
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    capacity: Mapping[str, Any],
    count_resource: str = DEFAULT_NAMES.count,
) -> bool:
    """GPU capacity, NVIDIA feature-discovery labels, or a HAMi register annotation."""
    return bool(advertised_by(labels=labels, annotations=annotations, capacity=capacity, count_resource=count_resource))
