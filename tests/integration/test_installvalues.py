"""The install hand-off ConfigMap against the real API server: it matches status, follows fact
changes, writes nothing on a no-op pass, moves with its configured name, and `facts` prints the
same document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from facts_support import create_namespace, dockerconfigjson, get_platform, patch_spec, reconcile_once
from tests.support import condition

from tenant_platform import preflight, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.installvalues import manifests, step
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext
from tenant_platform.kube.client import Kube
from tenant_platform.testing.steps import reconcile_step


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


def config_map(kube: Kube, name: str, namespace: str) -> dict[str, Any] | None:
    return kube.get("v1", "ConfigMap", name, namespace)


def values_text(kube: Kube, name: str, namespace: str) -> str:
    cm = config_map(kube, name, namespace)
    assert cm is not None, f"ConfigMap {namespace}/{name} missing"
    return str(cm["data"][manifests.VALUES_KEY])


def test_values_match_status_and_follow_fact_changes(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns)
    cm_name = f"{unique_name}-install-values"

    reconcile_once(kube, unique_name)
    body = get_platform(kube, unique_name)
    status = body["status"]
    assert status["installValues"] == {"configMap": cm_name}
    cm = config_map(kube, cm_name, ns)
    assert cm is not None
    labels = cm["metadata"]["labels"]
    assert labels[constants.LABEL_COMPONENT] == "installvalues"
    assert labels[constants.LABEL_PLATFORM] == unique_name
    # Inside the platform's namespace: no owner reference; deletionPolicy decides its fate.
    assert "ownerReferences" not in cm["metadata"]

    # Every recorded fact is in the values, exactly as in status.
    doc = yaml.safe_load(cm["data"][manifests.VALUES_KEY])
    for key, value in status["recorded"].items():
        assert doc[key] == value, key
    assert doc["namespace"] == ns
    assert doc["storageClassName"] == "local-path"
    assert doc["kubernetesAPI"]["serviceCIDRs"] == ["10.0.0.1/32"]
    assert doc["objectStore"] == {"mode": "Builtin"}
    # `tenant-platform facts` renders the same text from the live status.
    assert preflight.facts_document(kube, unique_name) == cm["data"][manifests.VALUES_KEY]

    # A fact changes (a pull secret is added): the next pass updates the ConfigMap.
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pull", "namespace": ns},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": dockerconfigjson({"registry.example.com": {"auth": "eDp5"}})},
    }
    kube.create(secret)
    patch_spec(kube, unique_name, {"imagePullSecrets": ["pull"]})
    outcome = reconcile_once(kube, unique_name)
    assert condition(outcome.status, constants.PULL_SECRETS_READY)["status"] == "True"
    doc = yaml.safe_load(values_text(kube, cm_name, ns))
    assert doc["imagePullSecrets"] == ["pull"]
    assert doc["global"]["imagePullSecrets"] == [{"name": "pull"}]
    assert preflight.facts_document(kube, unique_name) == values_text(kube, cm_name, ns)


def test_no_op_pass_writes_nothing(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns)
    reconcile_once(kube, unique_name)
    body = get_platform(kube, unique_name)
    recorded = Recorded.parse(body["status"]["recorded"])
    ctx = StepContext(
        platform=TenantPlatform.from_body(body),
        kube=kube,
        settings=Settings(),
        now=datetime.now(UTC),
        recorded=recorded,
    )
    before = kube.counter.snapshot()[1]
    result = reconcile_step(step.STEP, ctx)
    assert kube.counter.snapshot()[1] == before, "a no-op pass must not write the ConfigMap"
    assert result.status == {"installValues": {"configMap": f"{unique_name}-install-values"}}

    # Drift (someone edits the ConfigMap) is repaired on the next pass.
    cm_name = f"{unique_name}-install-values"
    good = values_text(kube, cm_name, ns)
    kube.merge_patch("v1", "ConfigMap", cm_name, {"data": {"values.yaml": "edited: by hand\n"}}, namespace=ns)
    reconcile_step(step.STEP, ctx)
    assert values_text(kube, cm_name, ns) == good


def test_renaming_moves_the_config_map(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns)
    reconcile_once(kube, unique_name)
    assert config_map(kube, f"{unique_name}-install-values", ns) is not None

    patch_spec(kube, unique_name, {"installValues": {"configMapName": "platform-values"}})
    reconcile_once(kube, unique_name)
    assert get_platform(kube, unique_name)["status"]["installValues"] == {"configMap": "platform-values"}
    assert config_map(kube, "platform-values", ns) is not None
    assert config_map(kube, f"{unique_name}-install-values", ns) is None  # pruned


def test_dry_run_writes_no_config_map(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    make_platform(unique_name, ns)
    outcome = reconcile.run(
        get_platform(kube, unique_name),
        kube=kube,
        settings=Settings(),
        now=datetime.now(UTC),
        dry_run=True,
        write_status=False,
    )
    assert outcome.results["installvalues"].status == {"installValues": {"configMap": f"{unique_name}-install-values"}}
    assert config_map(kube, f"{unique_name}-install-values", ns) is None
