"""Test doubles for HAMi's pod view (hami.allocations.PodLike) and for a snapshot node
(hami.labels.NodeLike), shared by the unit tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HamiPod:
    """A PodLike for tests."""

    namespace: str = "ml"
    name: str = "p"
    phase: str = "Pending"
    bind_phase: str = "allocating"
    allocated: str = ""
    init_containers: int = 0
    app_containers: int = 1
    init_exit_codes: tuple[int | None, ...] = ()


Pod = HamiPod


def no_owner(namespace: str, name: str) -> None:
    """A pod-owner lookup that finds none."""
    return None


@dataclass(frozen=True)
class HamiNode:
    """A NodeLike for tests (what observe's snapshot keeps of a Node)."""

    name: str
    uid: str = "uid-1"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    label_managers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    label_holders: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    runtime_handlers: tuple[str, ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()
