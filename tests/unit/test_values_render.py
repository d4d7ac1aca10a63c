"""The install values document: every recorded fact, stable text, same result from status."""

from __future__ import annotations

import json

import pydantic
import pytest
import yaml

from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.installvalues import manifests

RECORDED = {
    "domain": "kamiwaza.example.com",
    "storageClassName": "local-path",
    "storageVolumeBindingMode": "WaitForFirstConsumer",
    "kubernetesAPI": {
        "serviceCIDRs": ["10.0.0.1/32"],
        "endpointCIDRs": ["192.0.2.10/32", "192.0.2.11/32"],
        "servicePorts": [443],
        "endpointPorts": [6443],
    },
    "gateway": {
        "name": "kamiwaza-gateway",
        "namespace": "istio-system",
        "selector": {"istio": "ingressgateway", "app": "gw"},
        "serviceAccountName": "istio-ingressgateway",
        "serviceHost": "istio-ingressgateway.istio-system.svc.cluster.local",
        "meshNamespace": "istio-system",
        "management": "Managed",
    },
    "sidecarStyle": "Native",
    "edgeCertificate": {
        "secretName": "kamiwaza-tls",
        "namespace": "istio-system",
        "issuerMode": "SelfSigned",
        "selfSigned": True,
        "notAfter": "2027-01-01T00:00:00Z",
        "dnsNames": ["kamiwaza.example.com"],
    },
    "imagePullSecrets": ["kamiwaza-pull", "mirror-pull"],
    "objectStore": {"mode": "Builtin"},
    "gpuNodes": [{"name": "gpu-1", "model": "NVIDIA H200", "cards": 8}],
    "somethingNew": {"b": 1, "a": 2},
}
FACTS = Recorded.parse(RECORDED)


def test_every_recorded_fact_is_in_the_document() -> None:
    doc = yaml.safe_load(manifests.render_values(platform_name="tp", namespace="kamiwaza", recorded=FACTS))
    for key, value in RECORDED.items():
        assert doc[key] == value, key
    assert doc["namespace"] == "kamiwaza"
    assert doc["global"] == {"imagePullSecrets": [{"name": "kamiwaza-pull"}, {"name": "mirror-pull"}]}


def test_known_facts_come_first_in_a_fixed_order_then_the_rest_alphabetically() -> None:
    doc = manifests.values_document(namespace="kamiwaza", recorded=FACTS)
    keys = list(doc)
    assert keys[:3] == ["domain", "namespace", "storageClassName"]
    assert keys.index("kubernetesAPI") < keys.index("gateway") < keys.index("gpuNodes") < keys.index("somethingNew")
    assert keys[-1] == "global"


def test_text_is_the_same_whatever_the_key_order_of_nested_mappings() -> None:
    # The API server returns status with sorted keys; a reconcile pass builds them in insertion order.
    roundtrip = json.loads(json.dumps(RECORDED, sort_keys=True))
    reordered = dict(reversed(list(roundtrip.items())))
    a = manifests.render_values(platform_name="tp", namespace="kamiwaza", recorded=FACTS)
    b = manifests.render_values(platform_name="tp", namespace="kamiwaza", recorded=Recorded.parse(reordered))
    assert a == b
    assert a.startswith("# Install values recorded by tenant-platform-operator for TenantPlatform tp.\n")


def test_empty_facts_still_give_a_valid_document() -> None:
    doc = yaml.safe_load(
        manifests.render_values(platform_name="tp", namespace="ns", recorded=Recorded.parse({"domain": "a.example"}))
    )
    assert doc == {"domain": "a.example", "namespace": "ns", "global": {"imagePullSecrets": []}}


def test_namespace_comes_from_the_spec_not_from_recorded() -> None:
    doc = manifests.values_document(
        namespace="right", recorded=Recorded.parse({"namespace": "wrong", "global": {"x": 1}})
    )
    assert doc["namespace"] == "right"
    assert doc["global"] == {"imagePullSecrets": []}


def test_config_map_shape() -> None:
    cm = manifests.render_config_map(
        platform_name="tp", namespace="kamiwaza", config_map_name="tp-install-values", recorded=FACTS
    )
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"] == {"name": "tp-install-values", "namespace": "kamiwaza"}
    assert list(cm["data"]) == [manifests.VALUES_KEY]
    assert cm["data"][manifests.VALUES_KEY] == manifests.render_values(
        platform_name="tp", namespace="kamiwaza", recorded=FACTS
    )


def test_user_strings_cannot_break_out_of_the_yaml() -> None:
    tricky = {"domain": "a.example", "gpuNodes": [{"name": "n", "model": "x: y\n- z # comment", "cards": 1}]}
    doc = yaml.safe_load(manifests.render_values(platform_name="tp", namespace="ns", recorded=Recorded.parse(tricky)))
    assert doc["gpuNodes"][0]["model"] == "x: y\n- z # comment"


# ---- the typed hand-off: parsing never loses or changes a fact -----------------------------------

FULL = {
    **RECORDED,
    "storageVerification": {
        "storageClassName": "local-path",
        "attempt": 1767225600,
        "result": "Succeeded",
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:01:00Z",
        "message": "Write test passed.",
        "cleanedUp": True,
    },
    "objectStore": {
        "mode": "S3",
        "endpoint": "https://s3.example.com",
        "bucket": "b",
        "region": "",
        "credentialsSecret": "s3-creds",
    },
    "installer": {"serviceAccountName": "installer", "namespace": "kamiwaza", "kubeconfigSecret": "installer-kc"},
    "gateway": {**RECORDED["gateway"], "management": "Managed"},  # type: ignore[dict-item]
    "edgeCertificate": {
        "secretName": "edge",
        "namespace": "istio-system",
        "issuerMode": "SelfSigned",
        "selfSigned": True,
        "notBefore": "2026-01-01T00:00:00Z",
        "notAfter": "2027-01-01T00:00:00Z",
        "dnsNames": ["kamiwaza.example.com", "*.kamiwaza.example.com"],
        "subject": "CN=kamiwaza.example.com",
        "issuer": "CN=kamiwaza.example.com",
        "publiclyTrusted": False,
        "trustConfigMap": "tp-edge-trust",
    },
    "dns": {"management": "CoreDNS", "distribution": "kubeadm", "mode": "corefile", "configMap": "kube-system/coredns"},
    "gpuResourceNames": {
        "count": "nvidia.com/gpu",
        "memory": "nvidia.com/gpumem",
        "memoryPercentage": "nvidia.com/gpumem-percentage",
        "cores": "nvidia.com/gpucores",
        "priority": "nvidia.com/priority",
    },
}


@pytest.mark.parametrize(
    "recorded", [RECORDED, FULL, {"domain": "a.example"}, {}], ids=["sample", "full", "domain", "empty"]
)
def test_parsing_the_recorded_facts_gives_them_back_unchanged(recorded: dict) -> None:
    facts = Recorded.parse(recorded)
    assert facts.dump() == recorded
    assert manifests.values_document(namespace="ns", recorded=facts) == manifests.values_document(
        namespace="ns", recorded=Recorded.parse(json.loads(json.dumps(recorded, sort_keys=True)))
    )


def test_the_hand_off_reads_typed_facts() -> None:
    facts = Recorded.parse(FULL)
    assert facts.storage_verification is not None and facts.storage_verification.attempt == 1767225600
    assert facts.kubernetes_api is not None and facts.kubernetes_api.endpoint_ports == [6443]
    assert facts.object_store is not None and facts.object_store.credentials_secret == "s3-creds"
    assert facts.gpu_nodes is not None and facts.gpu_nodes[0].cards == 8
    assert facts.pull_secret_names == ["kamiwaza-pull", "mirror-pull"]


@pytest.mark.parametrize(
    "broken",
    [
        {"imagePullSecrets": "one"},
        {"kubernetesAPI": {"serviceCIDRs": []}},
        {"objectStore": {"mode": "Elsewhere"}},
        {"gpuNodes": [{"model": "no name"}]},
    ],
    ids=["names not a list", "addresses incomplete", "unknown mode", "node without name"],
)
def test_a_malformed_fact_is_refused(broken: dict) -> None:
    with pytest.raises(pydantic.ValidationError):
        Recorded.parse(broken)
