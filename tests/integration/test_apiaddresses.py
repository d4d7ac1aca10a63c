"""Kubernetes API addresses: recorded from the real `kubernetes` Service and EndpointSlices, and
kept current (status and the install values) when an EndpointSlice changes.

Runs on its own control plane: the API server runs with --endpoint-reconciler-type=none, so no
EndpointSlice exists until this module creates one, and changing the cluster-wide `default/kubernetes`
slices here cannot disturb other tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from facts_support import create_platform, get_platform, install_crd, kube_for, reconcile_once, run_step

from tenant_platform import preflight
from tenant_platform.concerns.apiaddresses import step
from tenant_platform.concerns.installvalues import manifests
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import FIRST_SERVICE_IP, ControlPlane

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def kube() -> Iterator[Kube]:
    with ControlPlane(controller_manager=False) as cp:
        install_crd(cp)
        yield kube_for(cp)


def endpoint_slice(name: str, endpoints: list[tuple[list[str], bool]], *, family: str = "IPv4") -> dict:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": family,
        "endpoints": [{"addresses": addrs, "conditions": {"ready": ready}} for addrs, ready in endpoints],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
    }


def values_of(kube: Kube, name: str) -> dict:
    body = get_platform(kube, name)
    cm = kube.get("v1", "ConfigMap", f"{name}-install-values", body["spec"]["namespace"])
    assert cm is not None
    return yaml.safe_load(cm["data"][manifests.VALUES_KEY])


def test_addresses_recorded_and_kept_current(kube: Kube) -> None:
    name = "api-addresses"
    create_platform(kube, name, "api-addresses")
    service = kube.get("v1", "Service", "kubernetes", "default")
    assert service is not None
    secure_port = service["spec"]["ports"][0]["targetPort"]

    # No EndpointSlice: the service address is recorded, the endpoints are empty with a warning.
    result = run_step(step.STEP, kube, get_platform(kube, name))
    assert result.conditions == []
    assert result.recorded["kubernetesAPI"] == {
        "serviceCIDRs": [f"{FIRST_SERVICE_IP}/32"],
        "endpointCIDRs": [],
        "servicePorts": [443],
        "endpointPorts": [secure_port],
    }
    check = result.status["checks"][step.CHECK_NAME]
    assert check["result"] == "Warn" and "EndpointSlice" in check["message"]
    reconcile_once(kube, name)
    assert get_platform(kube, name)["status"]["recorded"]["kubernetesAPI"]["endpointCIDRs"] == []
    assert values_of(kube, name)["kubernetesAPI"]["endpointCIDRs"] == []

    # Two API servers, one not ready: both recorded, the not-ready one noted.
    kube.create(endpoint_slice("kubernetes-a", [(["192.0.2.11"], True), (["192.0.2.10"], False)]))
    result = run_step(step.STEP, kube, get_platform(kube, name))
    assert result.recorded["kubernetesAPI"]["endpointCIDRs"] == ["192.0.2.10/32", "192.0.2.11/32"]
    assert result.recorded["kubernetesAPI"]["endpointPorts"] == [6443]
    assert result.status["checks"][step.CHECK_NAME] == {
        "result": "Pass",
        "message": "Recorded although not ready: 192.0.2.10/32.",
    }
    reconcile_once(kube, name)
    status = get_platform(kube, name)["status"]
    assert status["recorded"]["kubernetesAPI"]["endpointCIDRs"] == ["192.0.2.10/32", "192.0.2.11/32"]
    assert values_of(kube, name)["kubernetesAPI"] == status["recorded"]["kubernetesAPI"]

    # A control-plane node is replaced: the slice changes, the next pass updates status and values.
    live = kube.get("discovery.k8s.io/v1", "EndpointSlice", "kubernetes-a", "default")
    assert live is not None
    live["endpoints"] = [{"addresses": ["192.0.2.12"], "conditions": {"ready": True}}]
    kube.replace(live)
    kube.create(endpoint_slice("kubernetes-v6", [(["2001:db8::10"], True)], family="IPv6"))
    reconcile_once(kube, name)
    status = get_platform(kube, name)["status"]
    expected = ["192.0.2.12/32", "2001:db8::10/128"]
    assert status["recorded"]["kubernetesAPI"]["endpointCIDRs"] == expected
    assert values_of(kube, name)["kubernetesAPI"]["endpointCIDRs"] == expected
    # `tenant-platform facts` prints the same document as the ConfigMap holds.
    cm = kube.get("v1", "ConfigMap", f"{name}-install-values", "api-addresses")
    assert cm is not None
    assert preflight.facts_document(kube, name) == cm["data"][manifests.VALUES_KEY]
