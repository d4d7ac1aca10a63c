"""Test doubles for HAMi's pod view (hami.allocations.PodLike), shared by the unit tests."""

from __future__ import annotations

from dataclasses import dataclass


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
