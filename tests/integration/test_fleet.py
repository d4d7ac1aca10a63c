"""spec.target on real control planes: the session's management cluster and two tenant
kube-apiservers sharing its etcd under their own prefixes (testing/tenants.py, as Kamaji shares a
datastore), each seeded like a fresh cluster, each with its own PKI.

Each TenantPlatform prepares its own tenant (namespaces, pod guard policies, Corefile) and writes
nothing in the management cluster but its status; an unreachable tenant, an identity without
rights, a bad token, a kubeconfig asking to run a command, a version floor above the target's, and
a rotated Secret are each seen in TargetReachable on the next pass, without a restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from fleet_support import SETTINGS, admin, passes, put_secret, tenant_servers
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.target import step
from tenant_platform.kube import errors, remote
from tenant_platform.kube.client import Kube
from tenant_platform.targetwatch import TargetSnapshots
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.manifests import gpu_node_manifest
from tenant_platform.testing.tenants import TenantAPIServer
from tenant_platform.testing.wait import wait_for

SECRETS_NS = "fleet-secrets"


@pytest.fixture(scope="module")
def tenants(seeded: ControlPlane, crd: Kube) -> Iterator[dict[str, TenantAPIServer]]:
    with tenant_servers(seeded, crd, ("lab-a", "lab-b"), secrets_namespace=SECRETS_NS) as started:
        yield started


def corefile(kube: Kube) -> str:
    cm = kube.get("v1", "ConfigMap", "coredns", "kube-system")
    assert cm is not None
    return str(cm["data"]["Corefile"])


def test_each_platform_prepares_its_own_tenant(
    crd: Kube, make_platform: Any, unique_name: str, tenants: dict[str, TenantAPIServer]
) -> None:
    a, b = tenants["lab-a"], tenants["lab-b"]
    # Cluster API's convention for one, Kamaji's for the other.
    put_secret(crd, SECRETS_NS, "lab-a-kubeconfig", {"value": a.kubeconfig_bytes()})
    put_secret(
        crd, SECRETS_NS, "lab-b-admin-kubeconfig", {"admin.conf": b.kubeconfig_bytes(), "super-admin.conf": b"unused"}
    )
    ns_a, ns_b = f"{unique_name}-a", f"{unique_name}-b"
    make_platform(f"{unique_name}-a", ns_a, target={"clusterAPI": {"namespace": SECRETS_NS, "cluster": "lab-a"}})
    make_platform(f"{unique_name}-b", ns_b, target={"kamaji": {"namespace": SECRETS_NS, "tenantControlPlane": "lab-b"}})
    for name, tenant, namespace in ((f"{unique_name}-a", a, ns_a), (f"{unique_name}-b", b, ns_b)):
        status = passes(crd, name)
        reached = condition(status, constants.TARGET_REACHABLE)
        assert (reached["status"], reached["reason"]) == ("True", "Reachable"), reached
        kube = admin(tenant)
        kube_system = kube.get("v1", "Namespace", "kube-system")
        assert kube_system is not None
        assert status["recorded"]["target"] == {
            "secret": f"{SECRETS_NS}/{tenant.name}{'-kubeconfig' if tenant is a else '-admin-kubeconfig'}",
            "server": tenant.server,
            "version": kube.server_version()[2],
            "clusterUid": kube_system["metadata"]["uid"],
        }
        assert condition(status, constants.NAMESPACES_READY)["status"] == "True", condition(
            status, constants.NAMESPACES_READY
        )
        assert condition(status, constants.DNS_READY)["status"] == "True", condition(status, constants.DNS_READY)
        assert condition(status, constants.POD_GUARD_READY)["reason"] != "APIError", condition(
            status, constants.POD_GUARD_READY
        )
        # In the tenant: the namespace, the Corefile rewrite, the pod guard policies; no ownerReference
        # to a TenantPlatform that does not exist there.
        ns = kube.get("v1", "Namespace", namespace)
        assert ns is not None and ns["metadata"]["labels"][constants.LABEL_PLATFORM] == name
        assert f"{name}.example.com" in corefile(kube)
        selector = f"{constants.LABEL_PLATFORM}={name}"
        policies = kube.list("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", label_selector=selector)
        assert policies, "no pod guard policy in the tenant"
        # The TenantPlatform does not live there: the platform's own policies, its parameter inlined.
        assert all("paramKind" not in p["spec"] for p in policies)
        assert all(
            f'request.namespace in ["{namespace}"]' in p["spec"]["matchConditions"][0]["expression"] for p in policies
        )
        for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
            for obj in kube.list("admissionregistration.k8s.io/v1", kind, label_selector=selector):
                assert not obj["metadata"].get("ownerReferences"), obj["metadata"]
        # Not in the management cluster, nor in the other tenant.
        other = admin(b if tenant is a else a)
        for elsewhere in (crd, other):
            assert elsewhere.get("v1", "Namespace", namespace) is None
            assert f"{name}.example.com" not in corefile(elsewhere)
            assert not elsewhere.list(
                "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", label_selector=selector
            )
    # Deletion cleans up in the tenant, and only there. Its namespace stays (Retain), guarded by the
    # retained guard, which a canary pod proves first; the pod needs the namespace's "default"
    # ServiceAccount, which these tenants (no controller manager) do not create by themselves.
    admin(a).create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns_a}})
    body = crd.get(constants.API_VERSION, constants.KIND, f"{unique_name}-a")
    assert body is not None
    outcome = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC))
    assert outcome.finished, outcome.message
    assert f"{unique_name}-a.example.com" not in corefile(admin(a))
    assert f"{unique_name}-b.example.com" in corefile(admin(b))


def test_unreachable_tenant_keeps_the_last_verdict(
    crd: Kube, make_platform: Any, unique_name: str, tenants: dict[str, TenantAPIServer]
) -> None:
    b = tenants["lab-b"]
    put_secret(crd, SECRETS_NS, f"{unique_name}-kc", {"value": b.kubeconfig_bytes()})
    target = {"kubeconfigSecret": {"namespace": SECRETS_NS, "name": f"{unique_name}-kc"}}
    make_platform(unique_name, unique_name, target=target)
    before = passes(crd, unique_name)
    assert condition(before, constants.TARGET_REACHABLE)["status"] == "True"
    b.stop()
    try:
        status = passes(crd, unique_name)
        reached = condition(status, constants.TARGET_REACHABLE)
        assert (reached["status"], reached["reason"]) == ("False", "Unreachable"), reached
        assert b.server in reached["message"]
        ready = condition(status, constants.READY)
        assert ready["status"] == "False" and "TargetReachable" in ready["message"], ready
        # What the last pass that reached the target said is kept (no step ran).
        assert condition(status, constants.NAMESPACES_READY) == condition(before, constants.NAMESPACES_READY)
        assert status["recorded"] == before["recorded"]
        # Cleanup cannot run in a cluster it does not reach: the deletion waits (and says why).
        body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        assert body is not None
        blocked = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
        assert not blocked.finished and "did not answer" in blocked.message
    finally:
        b.start()
    assert condition(passes(crd, unique_name), constants.TARGET_REACHABLE)["status"] == "True"


def token_for(kube: Kube, namespace: str, account: str) -> str:
    if kube.get("v1", "Namespace", namespace) is None:
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if kube.get("v1", "ServiceAccount", account, namespace) is None:
        kube.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}}
        )
    return kube.request_token(namespace, account, expiration_seconds=600)[0]


def test_identity_without_rights_bad_token_and_rotation(
    crd: Kube, make_platform: Any, unique_name: str, tenants: dict[str, TenantAPIServer]
) -> None:
    a = tenants["lab-a"]
    tenant = admin(a)
    nobody = token_for(tenant, "fleet-idents", "nobody")
    secret = f"{unique_name}-kc"
    put_secret(crd, SECRETS_NS, secret, {"value": a.kubeconfig_for_token(nobody)})
    make_platform(unique_name, unique_name, target={"kubeconfigSecret": {"namespace": SECRETS_NS, "name": secret}})

    status = passes(crd, unique_name)
    reached = condition(status, constants.TARGET_REACHABLE)
    assert (reached["status"], reached["reason"]) == ("False", "Unauthorized"), reached
    assert "(403)" in reached["message"]
    assert tenant.get("v1", "Namespace", unique_name) is None  # nothing was attempted

    # A token the tenant did not issue (another tenant's): 401.
    foreign = token_for(admin(tenants["lab-b"]), "fleet-idents", "nobody")
    put_secret(crd, SECRETS_NS, secret, {"value": a.kubeconfig_for_token(foreign)})
    reached = condition(passes(crd, unique_name), constants.TARGET_REACHABLE)
    assert (reached["reason"], "(401)" in reached["message"]) == ("Unauthorized", True), reached

    # Rotation to the admin identity: used on the very next pass, no restart.
    put_secret(crd, SECRETS_NS, secret, {"value": a.kubeconfig_bytes()})
    status = passes(crd, unique_name)
    assert condition(status, constants.TARGET_REACHABLE)["status"] == "True"
    assert tenant.get("v1", "Namespace", unique_name) is not None

    # Rotation to another cluster's kubeconfig behind the same Secret: the recorded identity says so.
    uid_a = status["recorded"]["target"]["clusterUid"]
    put_secret(crd, SECRETS_NS, secret, {"value": tenants["lab-b"].kubeconfig_bytes()})
    moved = passes(crd, unique_name)
    assert moved["recorded"]["target"]["clusterUid"] != uid_a
    assert moved["recorded"]["target"]["server"] == tenants["lab-b"].server


def test_secret_key_kubeconfig_and_version_refusals(
    crd: Kube, make_platform: Any, unique_name: str, tenants: dict[str, TenantAPIServer], tmp_path: Path
) -> None:
    a = tenants["lab-a"]
    secret = f"{unique_name}-kc"
    make_platform(unique_name, unique_name, target={"kubeconfigSecret": {"namespace": SECRETS_NS, "name": secret}})
    assert condition(passes(crd, unique_name), constants.TARGET_REACHABLE)["reason"] == "SecretNotFound"

    put_secret(crd, SECRETS_NS, secret, {"other": b"x"})
    reached = condition(passes(crd, unique_name), constants.TARGET_REACHABLE)
    assert reached["reason"] == "KeyMissing" and "other" in reached["message"]

    # The Secret's writer asks the operator to run a command: refused, never run.
    marker = tmp_path / "ran"
    doc = yaml.safe_load(a.kubeconfig_bytes())
    doc["users"] = [
        {
            "name": "user",
            "user": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "/bin/sh",
                    "args": ["-c", f"touch {marker}"],
                }
            },
        }
    ]
    put_secret(crd, SECRETS_NS, secret, {"value": yaml.safe_dump(doc).encode()})
    reached = condition(passes(crd, unique_name), constants.TARGET_REACHABLE)
    assert reached["reason"] == "InvalidKubeconfig" and "exec" in reached["message"], reached
    assert not marker.exists()
    # ... or to send the operator's own files to a server of its choice.
    doc["users"] = [{"name": "user", "user": {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}]
    put_secret(crd, SECRETS_NS, secret, {"value": yaml.safe_dump(doc).encode()})
    assert condition(passes(crd, unique_name), constants.TARGET_REACHABLE)["reason"] == "InvalidKubeconfig"

    # The version floor, judged against the real server's /version.
    put_secret(crd, SECRETS_NS, secret, {"value": a.kubeconfig_bytes()})
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
    assert body is not None
    platform = TenantPlatform.from_body(body)
    too_old = step.connect(platform, crd, minimum=(1, 999))
    assert too_old.kube is None and too_old.verdict.condition.reason == "VersionTooOld"
    assert admin(a).server_version()[2] in too_old.verdict.condition.message
    assert step.connect(platform, crd).reachable


def test_target_cannot_be_added_changed_or_removed(crd: Kube, make_platform: Any, unique_name: str) -> None:
    make_platform(unique_name, unique_name, target={"clusterAPI": {"namespace": SECRETS_NS, "cluster": "lab-a"}})
    for patch in (
        {"spec": {"target": {"clusterAPI": {"namespace": SECRETS_NS, "cluster": "lab-b"}}}},
        {"spec": {"target": None}},
    ):
        with pytest.raises(errors.Invalid, match="target"):
            crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, patch)
    with pytest.raises(errors.Invalid, match="exactly one"):
        crd.create(
            {
                "apiVersion": constants.API_VERSION,
                "kind": constants.KIND,
                "metadata": {"name": f"{unique_name}-two"},
                "spec": {
                    "namespace": f"{unique_name}-two",
                    "domain": f"{unique_name}-two.example.com",
                    "target": {
                        "clusterAPI": {"namespace": SECRETS_NS, "cluster": "lab-a"},
                        "kamaji": {"namespace": SECRETS_NS, "tenantControlPlane": "lab-b"},
                    },
                },
            }
        )


def test_client_cache_is_keyed_by_secret_version(crd: Kube, tenants: dict[str, TenantAPIServer]) -> None:
    clients = remote.TargetClients()
    data = tenants["lab-a"].kubeconfig_bytes()
    first = clients.get((SECRETS_NS, "x", "value"), "1", data)
    assert clients.get((SECRETS_NS, "x", "value"), "1", data) is first
    assert first.server_version()[0] == 1
    second = clients.get((SECRETS_NS, "x", "value"), "2", data)
    assert second is not first and clients.built == 2


def test_one_snapshot_per_target_started_rotated_and_stopped(
    crd: Kube, tenants: dict[str, TenantAPIServer], unique_name: str
) -> None:
    woken: list[str] = []
    snapshots = TargetSnapshots(wake=woken.append, debounce=0.1, limit=1, watch_timeout=30)
    a, b = tenants["lab-a"], tenants["lab-b"]
    clients = remote.TargetClients()
    key_a, key_b = (SECRETS_NS, "a", "value"), (SECRETS_NS, "b", "value")
    kube_a = clients.get(key_a, "1", a.kubeconfig_bytes())
    try:
        snap = snapshots.snapshot("p1", key_a, "1", kube_a)
        assert snap is not None and snap.wait_synced(30)
        tenant_nodes = {n["metadata"]["name"] for n in admin(a).list("v1", "Node")}
        assert set(snap.view().nodes) <= tenant_nodes and snap.view().nodes  # the tenant's GPU nodes
        assert snapshots.snapshot("p2", key_a, "1", kube_a) is snap  # shared by platforms on one target
        # Over the limit: a second target is read per pass (None), bounded.
        assert snapshots.snapshot("p3", key_b, "1", clients.get(key_b, "1", b.kubeconfig_bytes())) is None
        # A change in the tenant wakes the platforms on that target only.
        node = f"{unique_name}-gpu"
        admin(a).create(gpu_node_manifest(node, 2, "NVIDIA-A100", 40960))
        wait_for(lambda: node in snap.view().nodes and {"p1", "p2"} <= set(woken), "the node and the wakeups", 30)
        assert "p3" not in woken
        admin(a).delete("v1", "Node", node)
        # Rotation: a new Secret version, a new watch with the new client.
        rotated = snapshots.snapshot("p1", key_a, "2", clients.get(key_a, "2", a.kubeconfig_bytes()))
        assert rotated is not snap and rotated is not None
        # The last platform gone: the watch stops.
        snapshots.release("p1")
        snapshots.release("p2")
        assert snapshots.watched() == {}
    finally:
        snapshots.stop_all()
