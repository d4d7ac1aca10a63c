"""The CRD rejects bad input at apply time, and the API's message names the field.

Every case is applied to the real kube-apiserver: the schema, its defaults and the CEL rules are
evaluated there, not here.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.support import create_namespace, platform_body
from tests.unit.test_domains import TABLE as DOMAINS

from tenant_platform.api import constants, domains
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube


def _create(kube: Kube, body: dict[str, Any]) -> None:
    try:
        kube.create(body)
    finally:
        kube.delete(constants.API_VERSION, constants.KIND, body["metadata"]["name"])


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"domain": "Kamiwaza.Example.com"}, "spec.domain", id="uppercase domain"),
        pytest.param({"domain": "kamiwaza_example.com"}, "spec.domain", id="underscore in domain"),
        pytest.param({"podGuard": {"enforcement": "Audit"}}, "spec.podGuard.enforcement", id="unknown enforcement"),
        pytest.param({"deletionPolicy": "Orphan"}, "spec.deletionPolicy", id="unknown deletion policy"),
        pytest.param({"namespace": "Kamiwaza"}, "spec.namespace", id="namespace not a DNS label"),
        pytest.param({"namespace": "kube-system"}, "system namespace", id="system namespace"),
        pytest.param(
            {"additionalNamespaces": ["{ns}"]}, "additionalNamespaces must not repeat", id="additional repeats primary"
        ),
        pytest.param({"additionalNamespaces": ["x", "x"]}, "spec.additionalNamespaces", id="duplicate additional"),
        pytest.param({"objectStore": {"mode": "S3"}}, "objectStore.s3 is required", id="S3 without settings"),
        pytest.param(
            {"mesh": {"injection": {"mode": "Revision"}}}, "mesh.injection.revision is required", id="revision missing"
        ),
        pytest.param(
            {"gpu": {"nodeLabels": {"labels": {"nvidia.com/gpu.present": "true"}}}},
            "spec.gpu.nodeLabels.labels",
            id="gpu label in nvidia namespace",
        ),
        pytest.param(
            {"installer": {"kubeconfigSecret": {"tokenTTL": "1 day"}}},
            "spec.installer.kubeconfigSecret.tokenTTL",
            id="bad duration",
        ),
        pytest.param(
            {"podGuard": {"proxyImageRepositories": []}}, "spec.podGuard.proxyImageRepositories", id="no proxy repos"
        ),
        pytest.param(
            {"installer": {"subjects": [{"kind": "ServiceAccount", "name": "ci"}]}},
            "namespace is required for kind ServiceAccount",
            id="service account subject without namespace",
        ),
        # Every name the spec carries is a DNS-1123 name: nothing else can reach a request path.
        pytest.param(
            {"gpu": {"hami": {"configMapNamespace": "kube-system/secrets/x?"}}},
            "spec.gpu.hami.configMapNamespace",
            id="hostile hami namespace",
        ),
        pytest.param({"gpu": {"hami": {"configMapNamespace": ""}}}, "spec.gpu.hami.configMapNamespace", id="empty"),
        pytest.param(
            {"installer": {"kubeconfigSecret": {"name": "../x"}}},
            "spec.installer.kubeconfigSecret.name",
            id="kubeconfig secret name",
        ),
        pytest.param(
            {"installer": {"subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "kube-system/x"}]}},
            "spec.installer.subjects[0].namespace",
            id="subject namespace",
        ),
        pytest.param(
            {"gateway": {"serviceAccountName": "a/b"}}, "spec.gateway.serviceAccountName", id="gateway service account"
        ),
        pytest.param(
            {"edgeCertificate": {"trustConfigMapName": "Trust"}},
            "spec.edgeCertificate.trustConfigMapName",
            id="trust configmap",
        ),
        pytest.param({"storage": {"storageClassName": "x y"}}, "spec.storage.storageClassName", id="storage class"),
        pytest.param(
            {"installValues": {"configMapName": "values?x"}}, "spec.installValues.configMapName", id="values configmap"
        ),
        pytest.param(
            {
                "objectStore": {
                    "mode": "S3",
                    "s3": {"endpoint": "https://s3", "bucket": "b42", "credentialsSecret": {"name": "../../x"}},
                }
            },
            "spec.objectStore.s3.credentialsSecret.name",
            id="s3 credentials secret",
        ),
    ],
)
def test_invalid_spec_rejected_naming_the_field(
    crd: Kube, unique_name: str, spec: dict[str, Any], expected: str
) -> None:
    body = platform_body(unique_name, unique_name)
    overrides = {k: v for k, v in spec.items()}
    if overrides.get("additionalNamespaces") == ["{ns}"]:
        overrides["additionalNamespaces"] = [unique_name]
    body["spec"].update(overrides)
    with pytest.raises(errors.Invalid) as caught:
        _create(crd, body)
    assert expected in caught.value.message, caught.value.message


@pytest.mark.parametrize("missing", ["namespace", "domain"])
def test_required_fields(crd: Kube, unique_name: str, missing: str) -> None:
    body = platform_body(unique_name, unique_name)
    del body["spec"][missing]
    with pytest.raises(errors.Invalid) as caught:
        _create(crd, body)
    assert f"spec.{missing}: Required value" in caught.value.message


def test_namespace_is_immutable(make_platform: Any, crd: Kube, unique_name: str) -> None:
    make_platform(unique_name, unique_name)
    with pytest.raises(errors.Invalid) as caught:
        crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"namespace": "elsewhere"}})
    assert "spec.namespace" in caught.value.message
    assert "immutable" in caught.value.message


def test_defaults_filled_by_the_api_server(make_platform: Any, unique_name: str) -> None:
    obj = make_platform(unique_name, unique_name)
    spec = obj["spec"]
    assert spec["deletionPolicy"] == "Retain"
    assert spec["podGuard"]["enforcement"] == "Staged"
    assert spec["podGuard"]["proxyImageRepositories"] == [
        "registry.istio.io/release/proxyv2",
        "docker.io/istio/proxyv2",
        "ghcr.io/kamiwaza-internal/containers/images/istio/proxyv2",
    ]
    assert spec["gpu"]["nodeLabels"]["labels"] == {"gpu": "on"}
    assert spec["gateway"]["selector"] == {"istio": "ingressgateway"}
    assert spec["edgeCertificate"]["renewBefore"] == "720h"


def test_short_name_and_printer_columns(crd: Kube, control_plane: Any, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name)
    out = control_plane.kubectl("get", "tp", unique_name).stdout
    header = out.splitlines()[0].split()
    assert header == ["NAME", "READY", "REASON", "DOMAIN", "GPUS", "AGE"]
    assert f"{unique_name}.example.com" in out


@pytest.mark.parametrize(("domain", "kind"), DOMAINS, ids=[d for d, _ in DOMAINS])
def test_reserved_domains_are_rejected_as_api_domains_says(
    crd: Kube, unique_name: str, domain: str, kind: str | None
) -> None:
    """The CRD's CEL on spec.domain and api/domains.reserved agree on every row of the unit table."""
    body = platform_body(unique_name, unique_name)
    body["spec"]["domain"] = domain
    assert (domains.reserved(domain) is not None) == (kind is not None)
    if kind is None:
        _create(crd, body)
        return
    with pytest.raises(errors.Invalid) as caught:
        _create(crd, body)
    assert "spec.domain" in caught.value.message, caught.value.message


def test_a_hostile_name_never_reaches_another_resource(crd: Kube, unique_name: str) -> None:
    """A namespace or name carrying path syntax is one quoted segment or refused, never another path.

    Before quoting, namespace ``<ns>/secrets/x?`` turned a ConfigMap GET into a GET of Secret x.
    """
    create_namespace(crd, unique_name)
    try:
        crd.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "x", "namespace": unique_name},
                "stringData": {"token": "s3cr3t"},
            }
        )
        hostile = f"{unique_name}/secrets/x?"
        before = crd.counter.snapshot()
        with pytest.raises(errors.Invalid, match="not a DNS-1123 label"):
            crd.get("v1", "ConfigMap", "hami-scheduler-device", hostile)
        assert crd.counter.snapshot() == before  # refused before any request
        # Quoted, the same text in a name is one segment: the API server looks for a ConfigMap of
        # that name, and the Secret stays out of reach (as it does for a path-walking name).
        for name in ("x/../../secrets/x", "../secrets/x", "x?", "x#"):
            assert crd.get("v1", "ConfigMap", name, unique_name) is None, name
        with pytest.raises(errors.Invalid):
            crd.get("v1", "ConfigMap", "..", unique_name)
        # The unquoted path the old client built did reach the Secret: the proof the test can fail.
        raw = crd.request("GET", f"/api/v1/namespaces/{hostile}/configmaps/hami-scheduler-device")
        assert raw["kind"] == "Secret" and raw["metadata"]["name"] == "x"
    finally:
        crd.delete("v1", "Namespace", unique_name)
