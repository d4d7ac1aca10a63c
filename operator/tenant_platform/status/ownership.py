"""How messages name the owner of an object we found but may not touch (pure)."""

from __future__ import annotations


def owner_phrase(owner: str | None) -> str:
    """ "TenantPlatform <name>" for an object another platform owns by our labels, else someone else."""
    return f"TenantPlatform {owner}" if owner else "someone else (it lacks our labels)"


def belongs_to(what: str, owner: str | None) -> str:
    """ "<what> belongs to <owner phrase>", the start of every ownership-conflict sentence."""
    return f"{what} belongs to {owner_phrase(owner)}"
