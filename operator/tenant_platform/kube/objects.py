"""Plain-dict helpers for Kubernetes objects: the intent hash and "is the live object already
what we want" (used to skip writes that would change nothing)."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from tenant_platform.api import constants

Obj = dict[str, Any]


def intent_hash(obj: Obj) -> str:
    """A stable hash of an object's intent (without our own hash annotation)."""
    clean = copy.deepcopy(obj)
    annotations = clean.get("metadata", {}).get("annotations") or {}
    annotations.pop(constants.ANNOTATION_APPLIED_HASH, None)
    return hashlib.sha256(json.dumps(clean, sort_keys=True).encode()).hexdigest()[:16]


def is_subset(desired: Any, live: Any) -> bool:
    """True when every field in ``desired`` has the same value in ``live``.

    Lists compare element-wise and must have the same length (SSA treats most lists as atomic,
    and a longer live list means drift we want to repair).
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        return all(k in live and is_subset(v, live[k]) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return False
        return all(is_subset(d, x) for d, x in zip(desired, live, strict=True))
    return bool(desired == live)
