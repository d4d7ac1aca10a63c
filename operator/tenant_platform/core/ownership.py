"""How messages name the owner of an object we found but may not touch (pure)."""

from __future__ import annotations

from typing import Any

from tenant_platform.api import constants


def owner_phrase(owner: str | None) -> str:
    """ "TenantPlatform <name>" for an object another platform owns by our labels, else someone else."""
    return f"TenantPlatform {owner}" if owner else "someone else (it lacks our labels)"


def belongs_to(what: str, owner: str | None) -> str:
    """ "<what> belongs to <owner phrase>", the start of every ownership-conflict sentence."""
    return f"{what} belongs to {owner_phrase(owner)}"


def adoptable_by(obj: dict[str, Any] | None) -> list[str]:
    """The platforms an admin opted ``obj`` in for, with ``tenancy.dev/adoptable-by`` (a name, or
    several separated by commas, for a shared object such as the CoreDNS ConfigMap)."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    value = str(annotations.get(constants.ANNOTATION_ADOPTABLE) or "")
    return [name.strip() for name in value.split(",") if name.strip()]


def adoptable(obj: dict[str, Any] | None, owner: str, platform: str) -> bool:
    """An object without anyone's labels (``owner`` "") that an admin opted in for ``platform``
    (docs/migration.md). Another platform's object is never adopted, whatever its annotations say."""
    return obj is not None and not owner and platform in adoptable_by(obj)
