"""Would a GPU request fit a card or a node? HAMi's checks, in its order (nvidia device Fit).

healthy, not cordoned, a free sharing slot, memory, then cores: a 100 % cores request needs an
unused card, a 0 % one a card whose cores are not all taken, and more than 100 % is out of range
(newer HAMi rejects it; v2.10 and earlier clamp it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenant_platform.api.status.gpu import GpuFit
from tenant_platform.formats.hami.names import DEFAULT_NAMES, ResourceNames
from tenant_platform.formats.hami.register import Card


@dataclass(frozen=True, slots=True)
class CardState:
    card: Card
    cordoned: bool = False
    used_mem: int = 0
    used_cores: int = 0
    used_slots: int = 0

    @property
    def schedulable(self) -> bool:
        """HAMi places nothing on unhealthy or cordoned cards."""
        return self.card.healthy and not self.cordoned

    @property
    def free_mem(self) -> int:
        return self.card.devmem - self.used_mem

    @property
    def free_cores(self) -> int:
        return self.card.devcore - self.used_cores


class NodeCards(Protocol):
    """What the fit reads of a node (capacity.NodeCapacity): its cards' states."""

    @property
    def cards(self) -> tuple[CardState, ...]: ...


@dataclass(frozen=True)
class GpuRequest:
    """One container's GPU request: ``cards`` cards, each with this memory and these cores.

    ``mem_mib`` wins over ``mem_percent``; neither means the whole card (HAMi's default).
    """

    cards: int = 1
    mem_mib: int | None = None
    mem_percent: int | None = None
    cores: int = 0


def request_from_limits(limits: Mapping[str, Any], names: ResourceNames = DEFAULT_NAMES) -> GpuRequest | None:
    """A container's HAMi request from its resource limits; None when it asks for no GPU.

    A request for memory or cores only implies one card (HAMi's webhook adds it).
    """

    def number(key: str) -> int | None:
        raw = limits.get(key)
        if raw is None:
            return None
        text = str(raw).strip()
        return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None

    count, mem, percent, cores = (
        number(names.count),
        number(names.memory),
        number(names.memory_percentage),
        number(names.cores),
    )
    if count is None and mem is None and percent is None and cores is None:
        return None
    return GpuRequest(cards=count or 1, mem_mib=mem, mem_percent=None if mem is not None else percent, cores=cores or 0)


def card_fit(state: CardState, request: GpuRequest) -> str | None:
    """None when ``request`` fits this card, else why not; HAMi's order of checks (Fit)."""
    card = state.card
    if not card.healthy:
        return "the card is unhealthy"
    if state.cordoned:
        return "the card is cordoned"
    if state.used_slots >= card.count:
        return f"all {card.count} sharing slots are in use"
    if request.mem_mib is not None:
        mem = request.mem_mib
    elif request.mem_percent is not None:
        mem = card.devmem * request.mem_percent // 100
    else:
        mem = card.devmem
    if mem > state.free_mem:
        return f"needs {mem} MiB, {state.free_mem} MiB free"
    if request.cores > 100:
        return f"{request.cores}% cores is out of range (at most 100)"
    if request.cores == 100 and state.used_slots > 0:
        return "an exclusive (100%) cores request needs an unused card"
    if request.cores == 0 and state.used_cores >= card.devcore:
        return "no cores are free"
    if state.used_cores + request.cores > card.devcore:
        return f"needs {request.cores}% cores, {state.free_cores}% free"
    return None


@dataclass(frozen=True)
class Fit:
    fits: bool
    cards: tuple[str, ...] = ()
    """UUIDs of cards the request fits (the first ``request.cards`` of them would be used)."""
    reasons: Mapping[str, str] = field(default_factory=dict)
    """UUID -> why the request does not fit that card."""


def node_fit(node: NodeCards, request: GpuRequest) -> Fit:
    """Whether ``request`` fits on ``node``: it needs ``request.cards`` distinct fitting cards."""
    fitting = []
    reasons = {}
    for state in node.cards:
        why = card_fit(state, request)
        if why is None:
            fitting.append(state.card.id)
        else:
            reasons[state.card.id] = why
    return Fit(len(fitting) >= max(1, request.cards), tuple(fitting), reasons)


# Any memory and any cores on one card (a free slot, cores not all taken), and a whole unused card.
_ANY_SHARE = GpuRequest(mem_mib=0, cores=0)
_WHOLE_CARD = GpuRequest(cores=100)


def free_fit(node: NodeCards) -> GpuFit:
    """The most free memory and cores on one card a request could use, and the fully free cards."""
    usable = [s for s in node.cards if card_fit(s, _ANY_SHARE) is None]
    return GpuFit(
        largest_free_memory_mib=max((s.free_mem for s in usable), default=0),
        largest_free_cores_percent=max((s.free_cores for s in usable), default=0),
        free_cards=sum(1 for s in node.cards if card_fit(s, _WHOLE_CARD) is None),
    )


def total_fit(fits: list[GpuFit]) -> GpuFit:
    """Over all nodes: the largest on any node, and the fully free cards summed."""
    return GpuFit(
        largest_free_memory_mib=max((f.largest_free_memory_mib for f in fits), default=0),
        largest_free_cores_percent=max((f.largest_free_cores_percent for f in fits), default=0),
        free_cards=sum(f.free_cards for f in fits),
    )
