"""The install values document: every recorded fact, stable text, same result from status."""

from __future__ import annotations

import json

import yaml

from tenant_platform.render import values

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
    },
    "sidecarStyle": "Native",
    "edgeCertificate": {"selfSigned": True, "notAfter": "2027-01-01T00:00:00Z", "dnsNames": ["kamiwaza.example.com"]},
    "imagePullSecrets": ["kamiwaza-pull", "mirror-pull"],
    "objectStore": {"mode": "Builtin"},
    "gpuNodes": [{"name": "gpu-1", "model": "NVIDIA H200", "cards": 8}],
    "somethingNew": {"b": 1, "a": 2},
}


def test_every_recorded_fact_is_in_the_document() -> None:
    doc = yaml.safe_load(values.render_values(platform_name="tp", namespace="kamiwaza", recorded=RECORDED))
    for key, value in RECORDED.items():
        assert doc[key] == value, key
    assert doc["namespace"] == "kamiwaza"
    assert doc["global"] == {"imagePullSecrets": [{"name": "kamiwaza-pull"}, {"name": "mirror-pull"}]}


def test_known_facts_come_first_in_a_fixed_order_then_the_rest_alphabetically() -> None:
    doc = values.values_document(namespace="kamiwaza", recorded=RECORDED)
    keys = list(doc)
    assert keys[:3] == ["domain", "namespace", "storageClassName"]
    assert keys.index("kubernetesAPI") < keys.index("gateway") < keys.index("gpuNodes") < keys.index("somethingNew")
    assert keys[-1] == "global"


def test_text_is_the_same_whatever_the_key_order_of_nested_mappings() -> None:
    # The API server returns status with sorted keys; a reconcile pass builds them in insertion order.
    roundtrip = json.loads(json.dumps(RECORDED, sort_keys=True))
    reordered = dict(reversed(list(roundtrip.items())))
    a = values.render_values(platform_name="tp", namespace="kamiwaza", recorded=RECORDED)
    b = values.render_values(platform_name="tp", namespace="kamiwaza", recorded=reordered)
    assert a == b
    assert a.startswith("# Install values recorded by tenant-platform-operator for TenantPlatform tp.\n")


def test_empty_facts_still_give_a_valid_document() -> None:
    doc = yaml.safe_load(values.render_values(platform_name="tp", namespace="ns", recorded={"domain": "a.example"}))
    assert doc == {"domain": "a.example", "namespace": "ns", "global": {"imagePullSecrets": []}}


def test_namespace_comes_from_the_spec_not_from_recorded() -> None:
    doc = values.values_document(namespace="right", recorded={"namespace": "wrong", "global": {"x": 1}})
    assert doc["namespace"] == "right"
    assert doc["global"] == {"imagePullSecrets": []}


def test_config_map_shape() -> None:
    cm = values.render_config_map(
        platform_name="tp", namespace="kamiwaza", config_map_name="tp-install-values", recorded=RECORDED
    )
    assert cm["apiVersion"] == "v1" and cm["kind"] == "ConfigMap"
    assert cm["metadata"] == {"name": "tp-install-values", "namespace": "kamiwaza"}
    assert list(cm["data"]) == [values.VALUES_KEY]
    assert cm["data"][values.VALUES_KEY] == values.render_values(
        platform_name="tp", namespace="kamiwaza", recorded=RECORDED
    )


def test_user_strings_cannot_break_out_of_the_yaml() -> None:
    tricky = {"domain": "a.example", "gpuNodes": [{"name": "n", "model": "x: y\n- z # comment"}]}
    doc = yaml.safe_load(values.render_values(platform_name="tp", namespace="ns", recorded=tricky))
    assert doc["gpuNodes"][0]["model"] == "x: y\n- z # comment"
