"""Version skew on the real API server: this operator reading objects of a NEWER CRD.

The test applies a modified copy of crds/ (one more defaulted field at the top of the spec, one
nested under ``gpu.hami``, and one more ``deletionPolicy`` value), creates a platform through the
API (so the server fills in the new defaults), reconciles it with the current code, then deletes
it, and restores the CRD afterwards. The platform must not be InvalidSpec (Ready's message names
the ignored fields), and deletion must remove the Corefile block, the ``gpu=on`` node labels and
the namespace claim, even when the spec then holds a value this operator cannot parse.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import condition, live_label_wanters, shared_label_holders

from tenant_platform import devmode, metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.formats import corefile
from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

CRD_FILE = Path(__file__).resolve().parents[2] / "crds" / "tenancy.dev_tenantplatforms.yaml"
SETTINGS = Settings()


def newer_crd() -> dict[str, Any]:
    """crds/ plus what a later version might add: defaulted fields and a new enum value."""
    crd = yaml.safe_load(CRD_FILE.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec["newFeature"] = {
        "type": "object",
        "default": {},
        "properties": {"enabled": {"type": "boolean", "default": True}},
    }
    spec["gpu"]["properties"]["hami"]["properties"]["schedulerName"] = {"type": "string", "default": "hami-scheduler"}
    spec["deletionPolicy"]["enum"] = [*spec["deletionPolicy"]["enum"], "Archive"]
    return crd


def established(kube: Kube) -> bool:
    live = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", constants.CRD_NAME) or {}
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (live.get("status") or {}).get("conditions") or []
    )


@pytest.fixture
def newer(crd: Kube) -> Iterator[Kube]:
    """The newer CRD applied (same field manager as the original, so restoring removes the extras)."""
    crd.apply(newer_crd())
    wait_for(lambda: established(crd), "the newer CRD", 60, interval=0.2)
    try:
        yield crd
    finally:
        devmode.install_crd(crd)

        def restored() -> bool:
            live = crd.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", constants.CRD_NAME) or {}
            props = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            return "newFeature" not in props

        wait_for(restored, "the CRD restored", 60, interval=0.2)


@pytest.fixture
def coredns(crd: Kube) -> Iterator[str]:
    """kube-system/coredns as seeded; restored if a failing test leaves a block behind."""
    original = str(crd.get("v1", "ConfigMap", "coredns", "kube-system")["data"]["Corefile"])  # type: ignore[index]
    yield original
    live = crd.get("v1", "ConfigMap", "coredns", "kube-system")
    assert live is not None
    if live["data"]["Corefile"] != original:
        live["data"]["Corefile"] = original
        crd.replace(live)


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


def labelled(kube: Kube) -> list[str]:
    """Nodes on which our shared value manager holds ``gpu=on`` (every platform wanting it shares it)."""
    manager = "tenant-platform-operator/labels/gpu=on"
    return sorted(node for node, managers in shared_label_holders(kube).items() if manager in managers)


def test_a_newer_crd_is_reconciled_and_cleaned_up(newer: Kube, coredns: str, unique_name: str) -> None:
    kube = newer
    name = unique_name
    kube.create(
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "metadata": {"name": name},
            "spec": {"namespace": name, "domain": f"{name}.example.com"},
        }
    )
    try:
        body = fresh(kube, name)
        assert body["spec"]["newFeature"] == {"enabled": True}  # the server filled the new defaults
        assert body["spec"]["gpu"]["hami"]["schedulerName"] == "hami-scheduler"

        reconcile.run(body, kube=kube, settings=SETTINGS, now=datetime.now(UTC))

        status = fresh(kube, name)["status"]
        assert condition(status, "Stalled")["status"] == "False", condition(status, "Stalled")
        assert condition(status, "NamespacesReady")["status"] == "True"
        ready = condition(status, "Ready")
        assert "spec.newFeature" in ready["message"] and "spec.gpu.hami.schedulerName" in ready["message"]
        assert status["observedGeneration"] == 1
        # What cleanup must undo is there.
        text = str(kube.get("v1", "ConfigMap", "coredns", "kube-system")["data"]["Corefile"])  # type: ignore[index]
        assert corefile.block_for(text, name) is not None
        assert labelled(kube), "the GPU nodes carry this platform's labels"
        labels = kube.get("v1", "Namespace", name)["metadata"]["labels"]  # type: ignore[index]
        assert labels[constants.LABEL_PLATFORM] == name

        # The newer version's value this operator cannot parse: run says InvalidSpec ...
        kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"spec": {"deletionPolicy": "Archive"}})
        outcome = reconcile.run(fresh(kube, name), kube=kube, settings=SETTINGS, now=datetime.now(UTC))
        assert condition(outcome.status, "Stalled")["reason"] == "InvalidSpec"

        # ... but deletion still cleans up everything (deletionPolicy falls back to Retain).
        deleting = copy.deepcopy(fresh(kube, name))
        deleting["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        done = reconcile.cleanup(deleting, kube=kube, settings=SETTINGS, now=datetime.now(UTC))
        assert done.finished and not done.gave_up, done.message
        assert list(done.results) == [step.name for step in reversed(reconcile.steps())]
        assert all(result.done for result in done.results.values()), done.results

        text = str(kube.get("v1", "ConfigMap", "coredns", "kube-system")["data"]["Corefile"])  # type: ignore[index]
        assert corefile.block_for(text, name) is None
        assert text == coredns
        if not live_label_wanters(kube, besides=name):  # another test's live platform may still want it
            assert labelled(kube) == []
        namespace = kube.get("v1", "Namespace", name)
        assert namespace is not None and namespace["status"]["phase"] == "Active"  # Retain
        assert constants.LABEL_PLATFORM not in (namespace["metadata"].get("labels") or {})
    finally:
        kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"metadata": {"finalizers": None}})
        kube.delete(constants.API_VERSION, constants.KIND, name)
        metrics.forget_platform(name)
