"""Reads from an informer's store (kube/informer.py): copies made outside the lock, and the
read-only ``shared`` listing the TenantPlatform guards use (no copy of N bodies per pass)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tenant_platform.kube import informer as informer_module
from tenant_platform.kube.informer import Informer, Scope


def held(n: int) -> Informer:
    informer = Informer(cast(Any, None), Scope("v1", "ConfigMap", namespace="ns"))
    for i in range(n):
        obj = {"metadata": {"name": f"cm-{i}", "namespace": "ns", "resourceVersion": str(i + 1)}, "data": {"k": "v"}}
        informer._apply("ADDED", obj)
    return informer


def test_shared_items_are_the_held_objects_and_plain_items_are_copies() -> None:
    informer = held(3)
    shared = informer.items("ns", {}, shared=True)
    assert [o["metadata"]["name"] for o in shared] == ["cm-0", "cm-1", "cm-2"]
    assert all(a is b for a, b in zip(shared, informer.items("ns", {}, shared=True), strict=True))
    copies = informer.items("ns", {})
    assert copies == shared and all(a is not b for a, b in zip(copies, shared, strict=True))
    copies[0]["data"]["k"] = "changed"  # a caller changing its copy changes nothing held
    assert informer.items("ns", {}, shared=True)[0]["data"] == {"k": "v"}


@pytest.mark.parametrize("read", ["items", "get"])
def test_copies_are_made_with_the_lock_released(read: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One reader copying many objects must not hold up the watch thread and every other reader."""
    informer = held(2)
    locked: list[bool] = []

    def deepcopy(obj: Any) -> Any:
        locked.append(informer._lock.locked())
        return copy.deepcopy(obj)

    monkeypatch.setattr(informer_module, "copy", SimpleNamespace(deepcopy=deepcopy))
    found = informer.items("ns", {}) if read == "items" else informer.get("ns", "cm-1")
    assert found and locked == [False]
