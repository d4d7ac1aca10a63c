"""The one status writer: every path that changes a TenantPlatform's status goes through here.

``reconcile.run`` (a pass, an invalid spec, a paused platform) and ``reconcile.cleanup`` (a
blocked deletion) build the whole new status and call ``write``; it sends one JSON merge patch of
the status subresource with exactly the difference, and nothing at all when nothing changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tenant_platform.api import constants
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.kube.client import Kube

Transition = tuple[str, str, str]
"""(condition type, new status, reason) of a condition whose status changed."""


def with_conditions(
    old_status: dict[str, Any], updates: Iterable[Condition], *, now: datetime, generation: int
) -> dict[str, Any]:
    """``old_status`` with ``updates`` set on its conditions (ordered); every other key kept."""
    new_conditions: list[dict[str, Any]] = list(old_status.get("conditions") or [])
    for cond in updates:
        new_conditions = conditions.set_condition(new_conditions, cond, now=now, generation=generation)
    return {**old_status, "conditions": conditions.order(new_conditions)}


def transitions(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[Transition]:
    """(type, status, reason) for each condition whose status changed."""
    out = []
    for cond in new:
        before = conditions.get(old, cond["type"])
        if before is None or before.get("status") != cond.get("status"):
            out.append((cond["type"], cond["status"], cond.get("reason", "")))
    return out


def write(kube: Kube, name: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Merge-patch status when it changed; keys that disappeared, at any depth, are removed."""
    if new == old:
        return False
    patch = merge_patch_for(old, new)
    kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"status": patch}, subresource="status")
    return True


def merge_patch_for(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) turning ``old`` into ``new``: null for removed keys, recursing
    into objects present in both, new values otherwise (lists are replaced whole)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            if value != before:
                patch[key] = merge_patch_for(before, value)
        elif value != before or key not in old:
            patch[key] = value
    return patch


def publish(kube: Kube, name: str, sections: dict[str, Any]) -> None:
    """Write ``sections`` of a TenantPlatform's status now, before the pass ends (a step's
    ``Verdict.publish``: the pod guard's parameter, which the API server reads from the status).
    One merge patch of the status subresource; raises KubeError."""
    kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"status": sections}, subresource="status")
