"""Reads from an informer's store (kube/informer.py): copies made outside the lock, and the
read-only ``shared`` listing the TenantPlatform guards use (no copy of N bodies per pass)."""

from __future__ import annotations

import copy
import json
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


def event_object(name: str, rv: str) -> dict[str, Any]:
    # Built from JSON text, as a watch event or a write's response is: no string shared between two.
    obj = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "resourceVersion": rv,
            "labels": {"tenancy.dev/x": "on"},
            "managedFields": [{"manager": "m"}],
        },
        "data": {"key": "value"},
        "status": {"long": "x" * (informer_module.SHORT + 1)},
    }
    text = json.dumps(obj)
    return cast(dict[str, Any], json.loads(text))


def test_held_objects_share_their_keys_and_short_values_and_equal_what_was_sent() -> None:
    """Memory per held object (docs/performance.md): keys and short strings are one object each."""
    informer = Informer(cast(Any, None), Scope("v1", "ConfigMap", namespace="ns"))
    sent = [event_object("a", "1"), event_object("b", "2")]
    informer._apply("ADDED", sent[0])
    informer.remember(sent[1])
    a, b = informer.items("ns", {}, shared=True)
    key_a = next(k for k in a["metadata"]["labels"])
    key_b = next(k for k in b["metadata"]["labels"])
    assert key_a is key_b
    assert a["data"]["key"] is b["data"]["key"] and a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["status"]["long"] == b["status"]["long"] and a["status"]["long"] is not b["status"]["long"]
    for held_obj, original in zip((a, b), sent, strict=True):
        assert "managedFields" not in held_obj["metadata"]
        assert "managedFields" in original["metadata"]  # what the caller passed is not changed
        assert held_obj is not original
        expected = copy.deepcopy(original)
        del expected["metadata"]["managedFields"]
        assert held_obj == {**expected, "apiVersion": "v1", "kind": "ConfigMap"}
