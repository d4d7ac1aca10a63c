"""The operator's RBAC and its fence (deploy/base/rbac.yaml), checked as the operator's own service
account against the real API server: what RBAC refuses (SubjectAccessReviews), what it must allow,
and what the fence policies refuse when the operator's identity actually tries it.

Attempts that would change something are server-side dry runs where the fence must judge them
(admission runs for dry runs too); pod creation is the exception, since dry-run pods are allowed
by design, so those attempts are real and cleaned up. docs/security.md explains every rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from tests.support import find_condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests, step
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA, REPO
from tenant_platform.testing.wait import wait_for

USER = f"system:serviceaccount:{OPERATOR_NAMESPACE}:{OPERATOR_SA}"
GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{OPERATOR_NAMESPACE}", "system:authenticated"]
OURS = {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE}
FENCES = [
    "tenant-platform-operator-node-guard",
    "tenant-platform-operator-namespaces-fence",
    "tenant-platform-operator-writes-fence",
    "tenant-platform-operator-grant-only-fence",
]


@pytest.fixture(scope="module")
def platform_ns(crd: Kube, as_operator: Kube) -> Iterator[str]:
    """A namespace labelled as a platform's (as the namespaces step leaves it), fences in effect."""
    name = "rbac-tenant"
    crd.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {**OURS, constants.LABEL_PLATFORM: "rbac"}},
        }
    )
    wait_for(lambda: crd.get("v1", "ServiceAccount", "default", name), f"ServiceAccount {name}/default")
    probes = [
        lambda: attempt(as_operator, "PATCH", as_operator.path("v1", "Namespace", "kube-system"), LABEL_PATCH),
        lambda: attempt(as_operator, "POST", as_operator.path("v1", "ConfigMap", namespace="kube-system"), cm("x")),
        lambda: attempt(as_operator, "POST", as_operator.path("v1", "Endpoints", namespace=name), endpoints()),
    ]
    for probe in probes:
        wait_for(lambda probe=probe: probe() is not None, "the fence to take effect", 30, interval=0.5)  # type: ignore[misc]
    yield name
    crd.delete("v1", "Namespace", name)


LABEL_PATCH = {"metadata": {"labels": {"tenancy.dev/tenant-platform": "mine"}}}


def attempt(kube: Kube, method: str, path: str, body: Any = None, *, dry_run: bool = True) -> str | None:
    """Make one request; None when the API server accepted it, else its refusal (403/422 message)."""
    content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
    query = {"dryRun": "All"} if dry_run else {}
    try:
        kube.request(method, path, body=body, query=query, content_type=content_type)
    except (errors.Forbidden, errors.Invalid) as exc:
        return exc.message or str(exc)
    return None


def quota(name: str, labels: dict[str, str] | None = None) -> Obj:
    """A ResourceQuota on HAMi's count resource (the GPU share's kind)."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
    }


def certificate(name: str, labels: dict[str, str] | None = None) -> Obj:
    """A cert-manager Certificate as the edgecert step writes one (issuer CertManager)."""
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"secretName": name, "dnsNames": ["rbac.example.com"], "issuerRef": {"name": "letsencrypt"}},
    }


def certificates(namespace: str, name: str = "") -> str:
    """The path of a namespace's Certificates (or one of them), without discovery."""
    return f"/apis/cert-manager.io/v1/namespaces/{namespace}/certificates" + (f"/{name}" if name else "")


# A stand-in for cert-manager's Certificate CRD (the kind served, any spec): the fence, not
# cert-manager, is under test here; tests/integration/test_certmanager.py runs the real one.
CERTIFICATE_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "certificates.cert-manager.io"},
    "spec": {
        "group": "cert-manager.io",
        "scope": "Namespaced",
        "names": {
            "kind": "Certificate",
            "listKind": "CertificateList",
            "plural": "certificates",
            "singular": "certificate",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def certificate_crd(crd: Kube, platform_ns: str) -> Iterator[None]:
    """cert-manager.io/v1 Certificate served (the stand-in, removed again: test_certmanager.py starts
    without it), with an admin's Certificate and one of ours in istio-system."""
    created = not crd.served("cert-manager.io/v1", "Certificate")
    if created:
        crd.create(CERTIFICATE_CRD)
        wait_for(lambda: crd.served("cert-manager.io/v1", "Certificate"), "cert-manager.io/v1 Certificate served")
    made = [certificate("admins"), certificate("ours", OURS)]
    for body in made:
        body["metadata"]["namespace"] = "istio-system"
        wait_for(
            lambda body=body: attempt(crd, "POST", certificates("istio-system"), body, dry_run=False) is None,  # type: ignore[misc]
            f"Certificate {body['metadata']['name']}",
        )
    try:
        yield
    finally:
        for body in made:
            crd.request("DELETE", certificates("istio-system", body["metadata"]["name"]))
        if created:
            crd.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", CERTIFICATE_CRD["metadata"]["name"])
            wait_for(lambda: not crd.served("cert-manager.io/v1", "Certificate"), "the Certificate CRD gone", 60)


def cm(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}}


def secret(name: str, type_: str = "Opaque", labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": labels or {}}
    if type_ == "kubernetes.io/service-account-token":
        meta["annotations"] = {"kubernetes.io/service-account.name": "default"}
    return {"apiVersion": "v1", "kind": "Secret", "type": type_, "metadata": meta}


def endpoints() -> Obj:
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "x"}}


def binding(cluster_role: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"to-{cluster_role}", "labels": labels or {}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}],
    }


def token_request() -> Obj:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}


def pvc(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}},
    }


def pod(
    name: str, *, automount: bool = False, volumes: list[Obj] | None = None, labels: dict[str, str] | None = None
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "automountServiceAccountToken": automount,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
            "volumes": volumes or [],
        },
    }


def sar(
    kube: Kube, verb: str, resource: str, *, group: str = "", namespace: str = "", name: str = "", sub: str = ""
) -> bool:
    attrs: Obj = {"verb": verb, "resource": resource, "group": group}
    for key_, value in (("namespace", namespace), ("name", name), ("subresource", sub)):
        if value:
            attrs[key_] = value
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": USER, "groups": GROUPS, "resourceAttributes": attrs},
    }
    result = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(result.get("status", {}).get("allowed"))


RBAC = "rbac.authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
CERT_MANAGER = "cert-manager.io"

# (what, verb, resource, group, namespace, name, subresource): RBAC must say no.
MUST_BE_NO = [
    ("list secrets cluster-wide", "list", "secrets", "", "", "", ""),
    ("watch secrets cluster-wide", "watch", "secrets", "", "", "", ""),
    ("list secrets in kube-system", "list", "secrets", "", "kube-system", "", ""),
    ("list secrets in its own namespace", "list", "secrets", "", OPERATOR_NAMESPACE, "", ""),
    ("exec into pods", "create", "pods", "", "kube-system", "", "exec"),
    ("read pod logs", "get", "pods", "", "kube-system", "", "log"),
    # Deleting pods and writing PVCs anywhere but a platform namespace: RBAC grants them cluster-wide
    # (the storage write test runs in each platform's namespace, known only at runtime); the
    # writes-fence refuses them (test_fences_refuse, test_storage_test_pods_and_pvcs_only_ours).
    ("write a PVC's status (the binder's)", "patch", "persistentvolumeclaims", "", "kube-system", "", "status"),
    ("deletecollection PVCs", "deletecollection", "persistentvolumeclaims", "", "rbac-tenant", "", ""),
    ("update PVCs (only merge patches)", "update", "persistentvolumeclaims", "", "rbac-tenant", "", ""),
    ("bind cluster-admin", "bind", "clusterroles", RBAC, "", "cluster-admin", ""),
    ("bind edit", "bind", "clusterroles", RBAC, "", "edit", ""),
    ("escalate a ClusterRole", "escalate", "clusterroles", RBAC, "", "admin", ""),
    ("create ClusterRoles", "create", "clusterroles", RBAC, "", "", ""),
    ("create ClusterRoleBindings", "create", "clusterrolebindings", RBAC, "", "", ""),
    ("impersonate users", "impersonate", "users", "", "", "", ""),
    ("impersonate service accounts", "impersonate", "serviceaccounts", "", "kube-system", "", ""),
    ("create Deployments in kube-system", "create", "deployments", "apps", "kube-system", "", ""),
    ("patch Deployments in kube-system", "patch", "deployments", "apps", "kube-system", "", ""),
    ("create DaemonSets", "create", "daemonsets", "apps", "kube-system", "", ""),
    ("delete nodes", "delete", "nodes", "", "", "", ""),
    ("update node status", "patch", "nodes", "", "", "", "status"),
    ("create CSRs", "create", "certificatesigningrequests", "certificates.k8s.io", "", "", ""),
    ("approve CSRs", "update", "certificatesigningrequests", "certificates.k8s.io", "", "", "approval"),
    ("create webhooks", "create", "validatingwebhookconfigurations", ADMISSION, "", "", ""),
    ("create mutating webhooks", "create", "mutatingwebhookconfigurations", ADMISSION, "", "", ""),
    ("change CRDs", "update", "customresourcedefinitions", "apiextensions.k8s.io", "", "", ""),
    ("watch mutating webhooks", "watch", "mutatingwebhookconfigurations", ADMISSION, "", "", ""),
    ("post events in kube-system", "create", "events", "", "kube-system", "", ""),
    ("post events cluster-wide", "create", "events", "", "", "", ""),
    ("post events in its own namespace", "create", "events", "", OPERATOR_NAMESPACE, "", ""),
    ("post events in a tenant namespace", "create", "events", "", "rbac-tenant", "", ""),
    ("post events.k8s.io events in kube-system", "create", "events", "events.k8s.io", "kube-system", "", ""),
    ("patch events in kube-system", "patch", "events", "", "kube-system", "", ""),
    ("delete events in default", "delete", "events", "", "default", "", ""),
    ("write a quota's status (the quota controller's)", "patch", "resourcequotas", "", "rbac-tenant", "", "status"),
    ("update ResourceQuotas (only SSA patches)", "update", "resourcequotas", "", "rbac-tenant", "", ""),
    ("anything", "*", "*", "*", "", "", ""),
    # cert-manager (edgeCertificate.issuer CertManager): the Certificate only, never issuers or requests.
    ("watch Certificates", "watch", "certificates", CERT_MANAGER, "istio-system", "", ""),
    ("update Certificates (only SSA patches)", "update", "certificates", CERT_MANAGER, "istio-system", "", ""),
    ("write a Certificate's status", "patch", "certificates", CERT_MANAGER, "istio-system", "", "status"),
    ("create CertificateRequests", "create", "certificaterequests", CERT_MANAGER, "istio-system", "", ""),
    ("read an Issuer", "get", "issuers", CERT_MANAGER, "istio-system", "", ""),
    ("create ClusterIssuers", "create", "clusterissuers", CERT_MANAGER, "", "", ""),
    # The fences (and any policy or binding but the shared pod guard's) are out of reach: RBAC is
    # all that protects these kinds (docs/security.md, "One shared pod guard").
    *[
        (f"{verb} {kind} {name}", verb, kind, ADMISSION, "", name, "")
        for verb in ("delete", "patch", "update")
        for kind in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
        for name in (*FENCES, "some-other-policy", "tenant-platform-demo-pod-guard")
    ],
    # Nothing deletes the shared pod guard (it stays for every platform; an admin removes it
    # when uninstalling), so not even its own names may be deleted.
    *[
        (f"delete {kind} {name}", "delete", kind, ADMISSION, "", name, "")
        for kind in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
        for name in manifests.SHARED_NAMES + manifests.RETAINED_NAMES
    ],
    ("delete every policy", "delete", "validatingadmissionpolicies", ADMISSION, "", "", ""),
    ("deletecollection policies", "deletecollection", "validatingadmissionpolicies", ADMISSION, "", "", ""),
    ("patch any binding", "patch", "validatingadmissionpolicybindings", ADMISSION, "", "", ""),
]

# What the steps need: RBAC must say yes (the fence judges the writes).
MUST_BE_YES = [
    ("read a named Secret (edge certificate, pull secret, S3)", "get", "secrets", "", "istio-system", "edge", ""),
    ("dry-run pods in a tenant namespace", "create", "pods", "", "rbac-tenant", "", ""),
    ("storage test PVC in a platform namespace", "create", "persistentvolumeclaims", "", "rbac-tenant", "", ""),
    ("note the storage test on its PVC", "patch", "persistentvolumeclaims", "", "rbac-tenant", "", ""),
    ("delete storage test pods in a platform namespace", "delete", "pods", "", "rbac-tenant", "", ""),
    ("bind admin for the installer", "bind", "clusterroles", RBAC, "", "admin", ""),
    ("mint the installer's token", "create", "serviceaccounts", "", "rbac-tenant", "", "token"),
    ("edit the Corefile", "update", "configmaps", "", "kube-system", "coredns", ""),
    ("label GPU nodes", "patch", "nodes", "", "", "", ""),
    ("events about TenantPlatforms (in default)", "create", "events", "", "default", "", ""),
    ("events.k8s.io events (in default)", "create", "events", "events.k8s.io", "default", "", ""),
    ("read kube-public/cluster-info (installer server)", "get", "configmaps", "", "kube-public", "cluster-info", ""),
    ("write TenantPlatform status", "patch", "tenantplatforms", constants.GROUP, "", "x", "status"),
    ("SubjectAccessReviews", "create", "subjectaccessreviews", "authorization.k8s.io", "", "", ""),
    ("apply the GPU share quota", "patch", "resourcequotas", "", "rbac-tenant", "", ""),
    ("prune GPU share quotas", "delete", "resourcequotas", "", "rbac-tenant", "", ""),
    ("list GPU share quotas for pruning", "list", "resourcequotas", "", "", "", ""),
    ("apply the edge Certificate", "patch", "certificates", CERT_MANAGER, "istio-system", "", ""),
    ("create the edge Certificate", "create", "certificates", CERT_MANAGER, "istio-system", "", ""),
    ("read the edge Certificate", "get", "certificates", CERT_MANAGER, "istio-system", "edge", ""),
    ("prune edge Certificates", "list", "certificates", CERT_MANAGER, "istio-system", "", ""),
    ("delete the edge Certificate", "delete", "certificates", CERT_MANAGER, "istio-system", "edge", ""),
    (
        "list CertificateRequests (why issuance waits)",
        "list",
        "certificaterequests",
        CERT_MANAGER,
        "istio-system",
        "",
        "",
    ),
    # The shared pod guard, by name only (create cannot be narrowed by name).
    *[
        (f"{verb} {kind} {name}", verb, kind, ADMISSION, "", name, "")
        for verb in ("patch", "update", "get")
        for kind in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
        for name in manifests.SHARED_NAMES + manifests.RETAINED_NAMES
    ],
    ("create policies", "create", "validatingadmissionpolicies", ADMISSION, "", "", ""),
    ("list bindings", "list", "validatingadmissionpolicybindings", ADMISSION, "", "", ""),
    # The read cache's GPU health scopes (main.cache_scopes): DaemonSets anywhere, RuntimeClasses,
    # HAMi's Deployments.
    ("watch DaemonSets (GPU device plugins)", "watch", "daemonsets", "apps", "", "", ""),
    ("watch RuntimeClasses (NVIDIA)", "watch", "runtimeclasses", "node.k8s.io", "", "", ""),
    ("watch Deployments in kube-system (HAMi)", "watch", "deployments", "apps", "kube-system", "", ""),
]


@pytest.mark.parametrize("row", MUST_BE_NO, ids=[r[0] for r in MUST_BE_NO])
def test_rbac_says_no(as_operator: Kube, crd: Kube, row: tuple[str, str, str, str, str, str, str]) -> None:
    what, verb, resource, group, ns, name, sub = row
    assert not sar(crd, verb, resource, group=group, namespace=ns, name=name, sub=sub), what


@pytest.mark.parametrize("row", MUST_BE_YES, ids=[r[0] for r in MUST_BE_YES])
def test_rbac_says_yes(as_operator: Kube, crd: Kube, row: tuple[str, str, str, str, str, str, str]) -> None:
    what, verb, resource, group, ns, name, sub = row
    assert sar(crd, verb, resource, group=group, namespace=ns, name=name, sub=sub), what


def test_cluster_info_is_granted_by_name_in_kube_public(as_operator: Kube) -> None:
    """The kube-public Role, as the operator sees its own rules there: get on cluster-info only
    (kubeadm clusters also let anyone read it; elsewhere this Role is what allows it)."""
    review = as_operator.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "kube-public"},
        },
    )
    rules = review["status"]["resourceRules"]
    assert {
        "verbs": ["get"],
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": ["cluster-info"],
    } in rules
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "base" / "rbac.yaml").read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "kube-public"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cluster-info"], "verbs": ["get"]}
    ]


def test_the_operator_can_list_no_secret(as_operator: Kube) -> None:
    with pytest.raises(errors.Forbidden):
        as_operator.list("v1", "Secret")
    with pytest.raises(errors.Forbidden):
        as_operator.list("v1", "Secret", "kube-system")


@pytest.fixture(scope="module")
def foreign(crd: Kube, platform_ns: str) -> Iterator[None]:
    """Objects an admin made (not ours): a ConfigMap in kube-system, a Secret and a RoleBinding in
    the platform namespace, a RoleBinding in kube-system."""
    made = [
        ("v1", "ConfigMap", "not-coredns", "kube-system", cm("not-coredns")),
        ("v1", "Secret", "admins", platform_ns, secret("admins")),
        (f"{RBAC}/v1", "RoleBinding", "to-admin", "kube-system", binding("admin")),
        (f"{RBAC}/v1", "RoleBinding", "admins", platform_ns, {**binding("view"), "metadata": {"name": "admins"}}),
    ]
    for _, _, _, ns, body in made:
        crd.apply({**body, "metadata": {**body["metadata"], "namespace": ns}})
    yield
    for api_version, kind, name, ns, _ in made:
        crd.delete(api_version, kind, name, ns)


def fence_cases(k: Kube, ns: str) -> list[tuple[str, str, str, Any, str]]:
    """(what, method, path, body, expected refusal fragment): each must be refused by a fence."""
    p = k.path
    return [
        ("label kube-system", "PATCH", p("v1", "Namespace", "kube-system"), LABEL_PATCH, "may not change namespace"),
        ("delete its own namespace", "DELETE", p("v1", "Namespace", OPERATOR_NAMESPACE), None, "may not change"),
        # The built-in lifecycle admission refuses this one first.
        ("delete default", "DELETE", p("v1", "Namespace", "default"), None, "may not"),
        (
            "create kube-public/cluster-info (RBAC's get by name there grants no write)",
            "POST",
            p("v1", "ConfigMap", namespace="kube-public"),
            cm("cluster-info"),
            "may not write ConfigMap kube-public/cluster-info",
        ),
        (
            "patch a kube-system ConfigMap other than CoreDNS's",
            "PATCH",
            p("v1", "ConfigMap", "not-coredns", "kube-system"),
            {"data": {"x": "y"}},
            "may not write ConfigMap kube-system/not-coredns",
        ),
        (
            "create a ConfigMap labelled ours in kube-system",
            "POST",
            p("v1", "ConfigMap", namespace="kube-system"),
            cm("fake", OURS),
            "may not write ConfigMap",
        ),
        (
            "delete CoreDNS's ConfigMap",
            "DELETE",
            p("v1", "ConfigMap", "coredns", "kube-system"),
            None,
            "may not write ConfigMap kube-system/coredns",
        ),
        (
            "patch an admin's Secret",
            "PATCH",
            p("v1", "Secret", "admins", ns),
            {"metadata": {"labels": OURS}},
            "only its own Opaque or TLS Secrets",
        ),
        ("delete an admin's Secret", "DELETE", p("v1", "Secret", "admins", ns), None, "only its own"),
        (
            "create a service-account token Secret",
            "POST",
            p("v1", "Secret", namespace=ns),
            secret("tok", "kubernetes.io/service-account-token", OURS),
            "only its own Opaque or TLS Secrets",
        ),
        (
            "create a bootstrap token in kube-system",
            "POST",
            p("v1", "Secret", namespace="kube-system"),
            secret("bootstrap-token-abcdef", "bootstrap.kubernetes.io/token", OURS),
            "only its own Opaque or TLS Secrets",
        ),
        (
            "bind admin in kube-system",
            "POST",
            p(f"{RBAC}/v1", "RoleBinding", namespace="kube-system"),
            binding("admin", OURS),
            "only of its own, in a platform namespace",
        ),
        (
            "change an admin's RoleBinding in kube-system",
            "PATCH",
            p(f"{RBAC}/v1", "RoleBinding", "to-admin", "kube-system"),
            {"metadata": {"labels": {"x": "y"}}},
            "only of its own",
        ),
        (
            "delete an admin's RoleBinding in a platform namespace",
            "DELETE",
            p(f"{RBAC}/v1", "RoleBinding", "admins", ns),
            None,
            "only of its own",
        ),
        (
            "create a ServiceAccount in kube-system",
            "POST",
            p("v1", "ServiceAccount", namespace="kube-system"),
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x", "labels": OURS}},
            "only of its own",
        ),
        (
            "mint a token for a kube-system ServiceAccount",
            "POST",
            p("v1", "ServiceAccount", "default", "kube-system", "token"),
            token_request(),
            "may not request tokens in namespace kube-system",
        ),
        (
            "mint a token for itself",
            "POST",
            p("v1", "ServiceAccount", OPERATOR_SA, OPERATOR_NAMESPACE, "token"),
            token_request(),
            "may not request tokens",
        ),
        (
            "create a ResourceQuota in kube-system",
            "POST",
            p("v1", "ResourceQuota", namespace="kube-system"),
            quota("x", OURS),
            "only of its own, in a platform namespace",
        ),
        (
            "create a ResourceQuota not labelled ours in a platform namespace",
            "POST",
            p("v1", "ResourceQuota", namespace=ns),
            quota("x"),
            "only of its own",
        ),
        (
            "create a PVC in kube-system",
            "POST",
            p("v1", "PersistentVolumeClaim", namespace="kube-system"),
            pvc("x", OURS),
            "only its own PersistentVolumeClaims, in a platform namespace",
        ),
        (
            "create a PVC in its own namespace (the storage test moved to the platform's)",
            "POST",
            p("v1", "PersistentVolumeClaim", namespace=OPERATOR_NAMESPACE),
            pvc("x", OURS),
            "only its own PersistentVolumeClaims",
        ),
        (
            "create a PVC not labelled ours in a platform namespace",
            "POST",
            p("v1", "PersistentVolumeClaim", namespace=ns),
            pvc("x"),
            "only its own PersistentVolumeClaims",
        ),
        # cert-manager Certificates (issuer CertManager): only ours, never in default, kube-* or
        # the operator's own namespace (cert-manager would write the Secret it names, anyone's).
        (
            "create a Certificate not labelled ours",
            "POST",
            certificates("istio-system"),
            certificate("x"),
            "may write only its own Certificates",
        ),
        (
            "create a Certificate labelled ours in kube-system",
            "POST",
            certificates("kube-system"),
            certificate("x", OURS),
            "may write only its own Certificates, outside default, kube-* and its own namespace",
        ),
        (
            "create a Certificate labelled ours in default",
            "POST",
            certificates("default"),
            certificate("x", OURS),
            "may write only its own Certificates",
        ),
        (
            "create a Certificate labelled ours in its own namespace",
            "POST",
            certificates(OPERATOR_NAMESPACE),
            certificate("x", OURS),
            "may write only its own Certificates",
        ),
        (
            "label an admin's Certificate ours",
            "PATCH",
            certificates("istio-system", "admins"),
            {"metadata": {"labels": OURS}},
            "may write only its own Certificates",
        ),
        (
            "delete an admin's Certificate",
            "DELETE",
            certificates("istio-system", "admins"),
            None,
            "may write only its own Certificates",
        ),
        ("write Endpoints", "POST", p("v1", "Endpoints", namespace=ns), endpoints(), "only to grant it"),
        (
            "create a VirtualService",
            "POST",
            f"/apis/networking.istio.io/v1/namespaces/{ns}/virtualservices",
            {
                "apiVersion": "networking.istio.io/v1",
                "kind": "VirtualService",
                "metadata": {"name": "x"},
                "spec": {"hosts": ["x"]},
            },
            "only to grant it",
        ),
    ]


def test_fences_refuse(as_operator: Kube, platform_ns: str, foreign: None, certificate_crd: None) -> None:
    failures = []
    for what, method, path, body, fragment in fence_cases(as_operator, platform_ns):
        refusal = attempt(as_operator, method, path, body)
        if refusal is None or fragment not in refusal:
            failures.append(f"{what}: {refusal or 'ALLOWED'}")
    assert not failures, "\n".join(failures)


def test_rbac_refuses_binding_cluster_admin_even_where_the_fence_would_allow(
    as_operator: Kube, platform_ns: str
) -> None:
    path = as_operator.path(f"{RBAC}/v1", "RoleBinding", namespace=platform_ns)
    refusal = attempt(as_operator, "POST", path, binding("cluster-admin", OURS))
    assert refusal is not None and "cluster-admin" in refusal


def test_fences_allow_what_the_steps_do(as_operator: Kube, platform_ns: str, certificate_crd: None) -> None:
    """Dry runs of each write the steps make, as the operator: all accepted."""
    p = as_operator.path
    ns = platform_ns
    allowed = [
        ("values ConfigMap", "POST", p("v1", "ConfigMap", namespace=ns), cm("values", OURS)),
        ("Corefile edit", "PATCH", p("v1", "ConfigMap", "coredns", "kube-system"), {"data": {"x": "y"}}),
        ("coredns-custom", "POST", p("v1", "ConfigMap", namespace="kube-system"), cm("coredns-custom")),
        ("kubeconfig Secret", "POST", p("v1", "Secret", namespace=ns), secret("kc", "Opaque", OURS)),
        (
            "edge certificate",
            "POST",
            p("v1", "Secret", namespace="istio-system"),
            secret("edge", "kubernetes.io/tls", OURS),
        ),
        ("installer binding", "POST", p(f"{RBAC}/v1", "RoleBinding", namespace=ns), binding("admin", OURS)),
        ("installer token", "POST", p("v1", "ServiceAccount", "default", ns, "token"), token_request()),
        ("GPU share quota", "POST", p("v1", "ResourceQuota", namespace=ns), quota("tenant-platform-gpu-share", OURS)),
        ("edge Certificate", "POST", certificates("istio-system"), certificate("edge", OURS)),
        ("edge Certificate in a tenant's gateway namespace", "POST", certificates(ns), certificate("edge", OURS)),
        (
            "edge Certificate changed",
            "PATCH",
            certificates("istio-system", "ours"),
            {"spec": {"dnsNames": ["y.example"]}},
        ),
        ("edge Certificate pruned", "DELETE", certificates("istio-system", "ours"), None),
        ("mesh probe pod (dry run)", "POST", p("v1", "Pod", namespace=ns), pod("probe", automount=True)),
        ("a dry-run pod anywhere", "POST", p("v1", "Pod", namespace="kube-system"), pod("probe")),
        ("storage test PVC", "POST", p("v1", "PersistentVolumeClaim", namespace=ns), pvc("x", OURS)),
    ]
    failures = []
    for what, method, path, body in allowed:
        if what == "edge certificate":
            body["data"] = {"tls.crt": "", "tls.key": ""}
        refusal = attempt(as_operator, method, path, body)
        if refusal is not None:
            failures.append(f"{what}: {refusal}")
    assert not failures, "\n".join(failures)


CLAIM = {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "x"}}]}


@pytest.mark.parametrize(
    ("namespace", "spec", "refused"),
    [
        pytest.param("kube-system", {}, True, id="kube-system"),
        pytest.param("kube-system", {**CLAIM, "labels": OURS}, True, id="kube-system, as the storage test"),
        pytest.param("rbac-tenant", {}, True, id="tenant namespace"),
        pytest.param("rbac-tenant", CLAIM, True, id="tenant namespace, a PVC volume, not ours"),
        pytest.param("rbac-tenant", {"automount": True, "labels": OURS}, True, id="ours with a token"),
        pytest.param(
            "rbac-tenant",
            {"volumes": [{"name": "s", "secret": {"secretName": "x"}}], "labels": OURS},
            True,
            id="ours mounting a Secret",
        ),
        pytest.param(
            OPERATOR_NAMESPACE, {**CLAIM, "labels": OURS}, True, id="own namespace (the test moved to the platform's)"
        ),
        pytest.param("rbac-tenant", {**CLAIM, "labels": OURS}, False, id="platform namespace as the storage test"),
    ],
)
def test_real_pods_only_as_the_storage_test(  # noqa: PLR0917 (fixtures and parameters)
    as_operator: Kube,
    crd: Kube,
    platform_ns: str,
    unique_name: str,
    namespace: str,
    spec: dict[str, Any],
    refused: bool,
) -> None:
    body = pod(unique_name, **spec)
    refusal = attempt(as_operator, "POST", as_operator.path("v1", "Pod", namespace=namespace), body, dry_run=False)
    try:
        if refused:
            assert refusal is not None and "may create pods only as server-side dry runs" in refusal
        else:
            assert refusal is None
    finally:
        crd.delete("v1", "Pod", unique_name, namespace)


def test_storage_test_pods_and_pvcs_only_ours(as_operator: Kube, crd: Kube, platform_ns: str, unique_name: str) -> None:
    """For real, as the operator: it deletes pods and PVCs only where they are ours in a platform
    namespace (RBAC grants both cluster-wide; the writes-fence narrows them)."""
    made: list[tuple[str, str, str]] = []
    try:
        for kind, body, ns in (
            ("Pod", pod(unique_name), "kube-system"),
            ("Pod", pod(unique_name), platform_ns),
            ("PersistentVolumeClaim", pvc(unique_name), "kube-system"),
            ("PersistentVolumeClaim", pvc(unique_name), platform_ns),
        ):
            crd.create({**body, "metadata": {**body["metadata"], "namespace": ns}})
            made.append((kind, unique_name, ns))
        for kind, name, ns in made:
            refusal = attempt(as_operator, "DELETE", as_operator.path("v1", kind, name, ns), dry_run=False)
            assert refusal is not None and "only its own" in refusal, (kind, ns, refusal)
        # Labelled ours (by anyone): the operator may delete it (the storage test's cleanup).
        crd.merge_patch("v1", "Pod", unique_name, {"metadata": {"labels": OURS}}, namespace=platform_ns)
        ours = as_operator.path("v1", "Pod", unique_name, platform_ns)
        assert attempt(as_operator, "DELETE", ours, dry_run=False) is None
    finally:
        for kind, name, ns in made:
            crd.delete("v1", kind, name, ns)


def test_the_operator_cannot_change_or_delete_a_fence(as_operator: Kube, crd: Kube) -> None:
    """The API server exempts ValidatingAdmissionPolicy(Binding) writes from API-based admission
    policies (k8s.io/apiserver pkg/admission/plugin/policy/generic/plugin.go: "admission config
    resources are skipped by API-based policies"), so RBAC alone protects the fences: the operator
    changes only the shared pod guard's four names. Tried for real (dry runs) as its identity."""
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        for name in FENCES:
            path = as_operator.path(f"{ADMISSION}/v1", kind, name)
            refusal = attempt(as_operator, "DELETE", path)
            assert refusal is not None and "forbidden" in refusal.lower(), (kind, name, refusal)
            refusal = attempt(as_operator, "PATCH", path, {"spec": {"validationActions": ["Audit"]}})
            assert refusal is not None and "forbidden" in refusal.lower(), (kind, name, refusal)
        # The shared pod guard's own objects: allowed (the step repairs drift of them).
        for obj in step.shared_objects():
            crd.apply(obj)
        name = manifests.SHARED_NAMES[0]
        assert attempt(as_operator, "PATCH", as_operator.path(f"{ADMISSION}/v1", kind, name), {}) is None


def test_no_pod_guard_name_is_a_fence_name() -> None:
    """The pod guard's names are fixed and none is a fence's (RBAC names them one by one)."""
    assert not set(manifests.SHARED_NAMES + manifests.RETAINED_NAMES) & set(FENCES)
    rules = [d for d in yaml.safe_load_all((REPO / "deploy" / "base" / "rbac.yaml").read_text()) if d]
    role = next(d for d in rules if d["kind"] == "ClusterRole")
    named = [r for r in role["rules"] if "validatingadmissionpolicies" in r["resources"]]
    writes = {v for r in named for v in r["verbs"]} & {"patch", "update", "delete", "deletecollection"}
    assert writes
    for rule in named:
        if set(rule["verbs"]) & {"patch", "update", "delete", "deletecollection"}:
            assert sorted(rule["resourceNames"]) == sorted(manifests.SHARED_NAMES + manifests.RETAINED_NAMES), rule


def test_only_the_operator_writes_the_pod_guards_parameter() -> None:
    """The shared pod guard reads each platform's status.podGuard: of the roles deploy/ ships, only
    the operator's may write tenantplatforms/status (the API roles read it)."""
    writers = set()
    for file in ("rbac.yaml", "api-roles.yaml"):
        for doc in yaml.safe_load_all((REPO / "deploy" / "base" / file).read_text()):
            if not doc or doc["kind"] not in ("ClusterRole", "Role"):
                continue
            for rule in doc.get("rules") or []:
                if "tenantplatforms/status" in rule.get("resources", []) and set(rule["verbs"]) - {
                    "get",
                    "list",
                    "watch",
                }:
                    writers.add(doc["metadata"]["name"])
    assert writers == {"tenant-platform-operator"}


def test_deploy_ships_every_fence_with_a_binding() -> None:
    docs = [d for d in yaml.safe_load_all((REPO / "deploy" / "base" / "rbac.yaml").read_text()) if d]
    policies = {d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    bound = {d["spec"]["policyName"] for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert policies == bound == set(FENCES)
    chart = (REPO / "deploy" / "helm" / "tenant-platform" / "templates" / "rbac.yaml").read_text()
    assert all(chart.count(f"name: {f}") == 2 for f in FENCES)
    rules = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "escalate" not in rule["verbs"] and "impersonate" not in rule["verbs"]
        if "secrets" in rule["resources"]:
            assert not {"list", "watch"} & set(rule["verbs"])


def test_a_full_pass_as_the_operator_prunes_the_kubeconfig_secret_by_name(
    as_operator: Kube, crd: Kube, make_platform: Any, unique_name: str
) -> None:
    """Reconcile as the operator's identity (the installer's kubeconfig Secret on, then renamed):
    the identity is written, and the old Secret is pruned by name without listing Secrets."""
    settings = Settings(operator_namespace=OPERATOR_NAMESPACE)
    make_platform(unique_name, unique_name, installer={"kubeconfigSecret": {"enabled": True}})

    def once() -> reconcile.Outcome:
        body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        return reconcile.run(body, kube=as_operator, settings=settings, now=datetime.now(UTC))

    def installer_ready() -> bool:
        found = find_condition(once().status, constants.INSTALLER_READY)
        return found is not None and found["status"] == "True"

    wait_for(installer_ready, "InstallerReady as the operator", 30, interval=1)

    def guard_ready() -> bool:
        found = find_condition(once().status, constants.POD_GUARD_READY)
        return found is not None and found["status"] == "True"

    # The pod guard under the narrowed RBAC: the shared objects applied (or found), the
    # parameter written to status, staged enforcement promoted.
    wait_for(guard_ready, "PodGuardReady as the operator", 60, interval=1)
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
    assert body["status"]["podGuard"]["enforcement"] == "Deny"
    assert body["status"]["podGuard"]["namespaces"] == [unique_name]
    old = "platform-installer-kubeconfig"
    assert crd.get("v1", "Secret", old, unique_name) is not None
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"spec": {"installer": {"kubeconfigSecret": {"enabled": True, "name": "renamed"}}}},
    )
    wait_for(installer_ready, "InstallerReady after the rename", 30, interval=1)
    assert crd.get("v1", "Secret", "renamed", unique_name) is not None
    assert crd.get("v1", "Secret", old, unique_name) is None


def test_the_fence_lets_the_operator_adopt_only_a_config_map_opted_in_for_its_platform(
    as_operator: Kube, crd: Kube, platform_ns: str
) -> None:
    """The trust ConfigMap's takeover (docs/migration.md): an UPDATE that puts our labels on a
    hand-made ConfigMap passes the fence only when the admin's annotation lists the platform that
    the new labels and the namespace's claim name."""
    made = {
        "hand-none": None,
        "hand-other": "someone-else",
        "hand-ours": "x, rbac",
    }
    for name, adopt in made.items():
        meta: Obj = {"name": name, "namespace": platform_ns}
        if adopt:
            meta["annotations"] = {constants.ANNOTATION_ADOPTABLE: adopt}
        crd.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}})
    try:

        def claim(name: str, platform: str) -> str | None:
            labels = {**OURS, constants.LABEL_PLATFORM: platform}
            path = as_operator.path("v1", "ConfigMap", name, platform_ns)
            return attempt(as_operator, "PATCH", path, {"metadata": {"labels": labels}})

        assert claim("hand-ours", "rbac") is None
        for name, platform in (("hand-none", "rbac"), ("hand-other", "rbac"), ("hand-ours", "x")):
            refusal = claim(name, platform)
            assert refusal is not None and "may not write ConfigMap" in refusal, (name, platform, refusal)
    finally:
        for name in made:
            crd.delete("v1", "ConfigMap", name, platform_ns)
