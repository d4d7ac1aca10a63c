"""An informer's relist after a watch gap reports what changed during the gap (kube/informer.py).

The gap clears ``synced`` before the relist; the listeners (a child's platform woken, CRD
discovery dropped, review answers dropped) must still hear of every object that changed, or a
change made while the watch was down would wait for the drift timer.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support import create_namespace

from tenant_platform.kube.client import Kube
from tenant_platform.kube.informer import Informer, Scope

pytestmark = pytest.mark.cluster


def test_a_relist_after_a_gap_reports_what_changed_meanwhile(crd: Kube, unique_name: str) -> None:
    create_namespace(crd, unique_name)
    try:
        crd.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "namespace": unique_name}})
        crd.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gone", "namespace": unique_name}})
        heard: list[tuple[str, str | None, str | None]] = []

        def listen(event: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
            heard.append((event, old and old["metadata"]["name"], new and new["metadata"]["name"]))

        informer = Informer(crd, Scope("v1", "ConfigMap", namespace=unique_name, role="child"), listener=listen)
        informer.list_once()
        assert heard == []  # the first listing is no news
        # A watch gap (410 or three failures): not synced until the relist; meanwhile, changes.
        informer.synced.clear()
        crd.delete("v1", "ConfigMap", "gone", unique_name)
        crd.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new", "namespace": unique_name}})
        informer.list_once()
        assert sorted(heard, key=str) == sorted([("RELISTED", "gone", None), ("RELISTED", None, "new")], key=str)
        assert informer.synced.is_set()
        assert informer.get(unique_name, "new") is not None and informer.get(unique_name, "gone") is None
    finally:
        crd.delete("v1", "Namespace", unique_name)
