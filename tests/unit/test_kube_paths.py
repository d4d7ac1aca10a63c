"""kube.client.Kube.path: every name, namespace and subresource is exactly one path segment."""

from __future__ import annotations

import kubernetes.client
import pytest

from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, path_segment


@pytest.fixture(scope="module")
def kube() -> Kube:
    return Kube(kubernetes.client.ApiClient(kubernetes.client.Configuration()))


@pytest.mark.parametrize(
    ("args", "path"),
    [
        pytest.param(
            ("v1", "ConfigMap", "coredns", "kube-system"),
            "/api/v1/namespaces/kube-system/configmaps/coredns",
            id="plain",
        ),
        pytest.param(("v1", "Node", "n1", "ignored"), "/api/v1/nodes/n1", id="cluster-scoped ignores namespace"),
        pytest.param(("v1", "Pod", None, None), "/api/v1/pods", id="list across namespaces"),
        pytest.param(("v1", "Pod", None, "t"), "/api/v1/namespaces/t/pods", id="list in a namespace"),
        pytest.param(
            ("rbac.authorization.k8s.io/v1", "ClusterRole", "system:aggregate-to-admin"),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aaggregate-to-admin",
            id="colon quoted",
        ),
        pytest.param(
            ("v1", "ConfigMap", "x/../../secrets/y", "t"),
            "/api/v1/namespaces/t/configmaps/x%2F..%2F..%2Fsecrets%2Fy",
            id="slashes in a name stay in the segment",
        ),
        pytest.param(
            ("v1", "ConfigMap", "a?b#c d%", "t"), "/api/v1/namespaces/t/configmaps/a%3Fb%23c%20d%25", id="query chars"
        ),
        pytest.param(
            ("v1", "ServiceAccount", "sa", "t", "token"),
            "/api/v1/namespaces/t/serviceaccounts/sa/token",
            id="subresource",
        ),
        pytest.param(
            ("v1", "ServiceAccount", "sa", "t", "token/../x"),
            "/api/v1/namespaces/t/serviceaccounts/sa/token%2F..%2Fx",
            id="subresource quoted",
        ),
    ],
)
def test_paths(kube: Kube, args: tuple[str | None, ...], path: str) -> None:
    assert kube.path(*args) == path  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "namespace",
    [
        pytest.param("kube-system/secrets/x?", id="the hostile namespace of issue 12"),
        pytest.param("kube-system/secrets/x#", id="fragment"),
        pytest.param("..", id="dot-dot"),
        pytest.param("Kube-System", id="upper case"),
        pytest.param("a" * 64, id="too long"),
        pytest.param("kube-system%2Fsecrets", id="pre-encoded"),
    ],
)
def test_a_namespace_that_cannot_exist_never_builds_a_path(kube: Kube, namespace: str) -> None:
    with pytest.raises(errors.Invalid, match="not a DNS-1123 label"):
        kube.path("v1", "ConfigMap", "hami-scheduler-device", namespace)


@pytest.mark.parametrize("name", ["", ".", ".."])
def test_names_that_walk_or_vanish_are_refused(kube: Kube, name: str) -> None:
    with pytest.raises(errors.Invalid, match="cannot be part of a request path"):
        kube.path("v1", "Secret", name, "t")
    with pytest.raises(errors.Invalid):
        kube.path("v1", "ServiceAccount", "sa", "t", name)


def test_path_segment_quotes_everything_but_unreserved() -> None:
    assert path_segment("a-b.c_d~e") == "a-b.c_d~e"
    assert path_segment("/?#%& ") == "%2F%3F%23%25%26%20"
