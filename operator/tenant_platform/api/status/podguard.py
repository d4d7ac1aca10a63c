"""Typed status of the pod guard step: the ``status.podGuard`` section (it records no facts)."""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel

InEffect = Literal["Deny", "Warn", "None"]
Requested = Literal["Deny", "Warn", "Staged"]


class PodGuardStatus(StatusModel):
    """``status.podGuard``: the enforcement in effect and, for Staged, what the last check found."""

    enforcement: InEffect
    """What both bindings carry now: Deny, Warn, or None (absent, or they disagree)."""
    requested: Requested
    """``spec.podGuard.enforcement``."""
    pods_that_would_be_denied: int | None = None
    """Staged only: existing pods the guard would deny."""
    examples: tuple[str, ...] | None = None
    """Staged only: at most five "namespace/pod: reason"."""
    pods_not_checked: int | None = None
    """Staged only, when some re-submissions failed."""
