"""The write gate's path reading (kube/client.namespace_of): which namespace a request writes into.

Only namespaced object paths name one; a Namespace object itself, cluster-scoped kinds and
reviews do not (the namespaces step polices its own Namespace writes)."""

from __future__ import annotations

import pytest

from tenant_platform.kube.client import namespace_of

ROWS = {
    "/api/v1/namespaces/team-a/configmaps/x": "team-a",
    "/api/v1/namespaces/team-a/configmaps": "team-a",
    "/api/v1/namespaces/team-a/serviceaccounts/sa/token": "team-a",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/b": "team-a",
    "/apis/networking.istio.io/v1/namespaces/istio-system/gateways/g": "istio-system",
    "/api/v1/namespaces/team%2Da/secrets/x": "team-a",
    "/api/v1/namespaces/team-a": None,
    "/api/v1/namespaces": None,
    "/api/v1/nodes/n1": None,
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/p": None,
    "/apis/authorization.k8s.io/v1/subjectaccessreviews": None,
}


@pytest.mark.parametrize(("path", "namespace"), ROWS.items(), ids=ROWS.keys())
def test_namespace_of(path: str, namespace: str | None) -> None:
    assert namespace_of(path) == namespace
