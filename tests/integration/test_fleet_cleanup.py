"""Deleting a TenantPlatform with spec.target removes, in the target, everything it wrote there.

Locally garbage collection removes the Gateway and the self-signed certificate Secret through
their ownerReference; in a target cluster nothing owns them, so cleanup deletes them by our
labels (docs/fleet.md). Real control planes: the session's management cluster and a tenant
kube-apiserver (with its controller manager, so namespaces are finalized) over its etcd.

After the deletion, every kind any step writes is LISTed in the tenant: nothing of the deleted
platform remains; a hand-made Gateway, Secret, ConfigMap and policy labelled like ours (but not
managed by us) stay, and so does everything of a second platform on the same tenant. A deletion
interrupted between requests (an admission policy in the tenant refuses one delete) resumes on the
next attempt from what the objects' labels say. A target not reached at deletion blocks it, then
gives up after the deadline with an event naming what may be left. A hand-made policy carrying
our pod guard's exact name (but not our labels) survives cleanup.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fleet_support import SETTINGS, admin, passes, put_secret, tenant_servers
from tests.checklist_support import admin_by_hand
from tests.support import condition, shared_label_holders

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.tenants import TenantAPIServer
from tenant_platform.testing.wait import wait_for

SECRETS_NS = "fleetgc-secrets"
ADMISSION = "admissionregistration.k8s.io/v1"
GATEWAY = ("networking.istio.io/v1", "Gateway")
# Every kind any step writes (namespaced ones are listed in all namespaces).
WRITTEN_KINDS = [
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    GATEWAY,
    (ADMISSION, "ValidatingAdmissionPolicy"),
    (ADMISSION, "ValidatingAdmissionPolicyBinding"),
    ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"),
]


@pytest.fixture(scope="module")
def tenant(seeded: ControlPlane, crd: Kube) -> Iterator[TenantAPIServer]:
    with tenant_servers(seeded, crd, ("gc-lab",), secrets_namespace=SECRETS_NS, controller_manager=True) as started:
        yield started["gc-lab"]


def ours(kube: Kube, platform: str) -> list[str]:
    """Every object of any written kind carrying our managed-by and this platform's label."""
    selector = f"{constants.LABEL_MANAGED_BY}={constants.MANAGED_BY_VALUE},{constants.LABEL_PLATFORM}={platform}"
    found = []
    for api_version, kind in WRITTEN_KINDS:
        for obj in kube.list(api_version, kind, label_selector=selector):
            meta = obj["metadata"]
            found.append(f"{kind} {meta.get('namespace') or '-'}/{meta['name']}")
    return found


def labelled(kube: Kube) -> list[str]:
    """Nodes on which our shared value manager holds ``gpu=on`` (both platforms want it)."""
    manager = "tenant-platform-operator/labels/gpu=on"
    return sorted(node for node, managers in shared_label_holders(kube).items() if manager in managers)


def corefile(kube: Kube) -> str:
    cm = kube.get("v1", "ConfigMap", "coredns", "kube-system")
    assert cm is not None
    return str(cm["data"]["Corefile"])


def allow_pods_policy(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A ValidatingAdmissionPolicy on pod creates that allows everything, named and labelled as given."""
    return {
        "apiVersion": ADMISSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "validations": [{"expression": "true"}],
        },
    }


def hand_made(kube: Kube, platform: str, suffix: str) -> list[tuple[str, str, str, str]]:
    """A Gateway, a Secret, a ConfigMap and a policy labelled with the platform and a component,
    but not managed by us, with names like ours. Returns their keys."""
    labels = {constants.LABEL_PLATFORM: platform, constants.LABEL_COMPONENT: "gateway"}
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": GATEWAY[0],
            "kind": GATEWAY[1],
            "metadata": {"name": f"kamiwaza-gateway-{suffix}", "namespace": "istio-system", "labels": labels},
            "spec": {"selector": {"istio": "ingressgateway"}, "servers": []},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": f"kamiwaza-edge-tls-{suffix}",
                "namespace": "istio-system",
                "labels": {**labels, constants.LABEL_COMPONENT: "edgecert"},
            },
            "data": {"x": "eA=="},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{platform}-install-values-{suffix}",
                "namespace": "istio-system",
                "labels": {**labels, constants.LABEL_COMPONENT: "installvalues"},
            },
            "data": {"x": "y"},
        },
        allow_pods_policy(f"tenant-platform-{platform}-{suffix}", {**labels, constants.LABEL_COMPONENT: "podguard"}),
    ]
    keys = []
    for obj in objs:
        kube.create(obj)
        meta = obj["metadata"]
        keys.append((obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace") or ""))
    return keys


def refuse_gateway_deletes(kube: Kube, name: str) -> None:
    """An admission policy in the tenant that refuses every Gateway DELETE (a crash stand-in)."""
    kube.create(
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["networking.istio.io"],
                            "apiVersions": ["*"],
                            "operations": ["DELETE"],
                            "resources": ["gateways"],
                        }
                    ]
                },
                "validations": [{"expression": "false", "message": "gateway deletes refused by the test"}],
            },
        }
    )
    kube.create(
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        }
    )


def test_deleting_a_target_platform_leaves_nothing_of_it_in_the_target(
    crd: Kube, make_platform: Any, unique_name: str, tenant: TenantAPIServer
) -> None:
    kube = admin(tenant)
    put_secret(crd, SECRETS_NS, "gc-lab-kubeconfig", {"value": tenant.kubeconfig_bytes()})
    target = {"clusterAPI": {"namespace": SECRETS_NS, "cluster": "gc-lab"}}
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    make_platform(
        first,
        first,
        target=target,
        deletionPolicy="Delete",
        installer={"kubeconfigSecret": {"enabled": True}},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{first}-tls"},
        gateway={"name": f"{first}-gw"},
    )
    make_platform(
        second,
        second,
        target=target,
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{second}-tls"},
        gateway={"name": f"{second}-gw"},
    )

    def prepared(name: str) -> dict[str, Any] | None:
        status = passes(crd, name)
        ready = (constants.NAMESPACES_READY, constants.EDGE_CERTIFICATE_READY)
        return status if all(condition(status, t)["status"] == "True" for t in ready) else None

    for name in (first, second):
        status = wait_for(lambda name=name: prepared(name), timeout=60, what=f"{name} prepared in the tenant")
        assert condition(status, constants.TARGET_REACHABLE)["status"] == "True"
    # What the first platform wrote in the tenant: outside its namespace (the Gateway, the
    # certificate Secret, the pod guard), inside it, the Corefile rewrite and GPU node labels.
    before = ours(kube, first)
    for expected in (f"Gateway istio-system/{first}-gw", f"Secret istio-system/{first}-tls", f"Namespace -/{first}"):
        assert expected in before, before
    assert any(o.startswith("ValidatingAdmissionPolicy ") for o in before), before
    assert any(o.startswith("ServiceAccount ") for o in before), before
    gateway = kube.get(*GATEWAY, f"{first}-gw", "istio-system")
    assert gateway is not None and not gateway["metadata"].get("ownerReferences")
    assert f"{first}.example.com" in corefile(kube)
    labelled_before = labelled(kube)
    assert labelled_before, "the gpu step labelled no node in the tenant"
    decoys = hand_made(kube, first, "hand")
    others = ours(kube, second)

    # An interrupted deletion: the tenant refuses Gateway deletes. Cleanup does what it can,
    # blocks, and keeps no progress anywhere but in the objects.
    refuse_gateway_deletes(kube, f"{unique_name}-refuse")
    body = crd.get(constants.API_VERSION, constants.KIND, first)
    assert body is not None

    decoy_gateway = kube.path(*GATEWAY, decoys[0][2], "istio-system")

    def in_effect() -> bool:
        try:
            kube.request("DELETE", decoy_gateway, query={"dryRun": "All"})
        except errors.KubeError as exc:
            return "gateway deletes refused" in str(exc.message)
        return False

    wait_for(in_effect, timeout=30, what="the refusing policy in effect")
    blocked = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
    assert not blocked.finished, blocked
    assert "gateway" in blocked.message, blocked.message
    assert kube.get(*GATEWAY, f"{first}-gw", "istio-system") is not None
    assert kube.get("v1", "Secret", f"{first}-tls", "istio-system") is None  # done before the crash
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        kube.delete(ADMISSION, kind, f"{unique_name}-refuse")

    def finished() -> Any:
        outcome = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
        return outcome if outcome.finished else None

    assert wait_for(finished, timeout=30, what="cleanup resumes").finished
    # Idempotent: once more, nothing to do, still finished.
    again = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
    assert again.finished and not again.gave_up

    wait_for(lambda: kube.get("v1", "Namespace", first) is None, timeout=60, what="namespace finalized")
    assert ours(kube, first) == []
    assert f"{first}.example.com" not in corefile(kube)
    # Hand-made look-alikes and the other platform's objects stay, untouched.
    for api_version, kind, name, namespace in decoys:
        assert kube.get(api_version, kind, name, namespace or None) is not None, (kind, name)
    assert ours(kube, second) == others
    assert f"{second}.example.com" in corefile(kube)
    assert labelled(kube) == labelled_before  # the second platform still wants gpu=on: kept
    # Nothing of either platform in the management cluster.
    assert crd.get(*GATEWAY, f"{first}-gw", "istio-system") is None
    assert crd.get(*GATEWAY, f"{second}-gw", "istio-system") is None


def test_local_cleanup_deletes_the_gateway_and_certificate_too(
    crd: Kube, make_platform: Any, unique_name: str, seeded: ControlPlane, as_operator: Kube
) -> None:
    """Belt and braces: locally the explicit delete runs as well (garbage collection would follow
    the ownerReference only after the platform is gone, and not at all once it was stripped)."""
    make_platform(
        unique_name,
        unique_name,
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls"},
        gateway={"name": f"{unique_name}-gw"},
    )
    wait_for(
        lambda: (
            crd.get("v1", "Secret", f"{unique_name}-tls", "istio-system") is not None
            or (passes(crd, unique_name) and None)
        ),
        timeout=60,
        what="certificate issued",
    )
    gateway = crd.get(*GATEWAY, f"{unique_name}-gw", "istio-system")
    assert gateway is not None and gateway["metadata"].get("ownerReferences")
    # Someone strips the ownerReference: garbage collection would no longer remove it.
    crd.merge_patch(*GATEWAY, f"{unique_name}-gw", {"metadata": {"ownerReferences": None}}, namespace="istio-system")
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
    assert body is not None
    # As the operator's own ServiceAccount under deploy/base/rbac.yaml (RBAC and the fences).
    outcome = reconcile.cleanup(body, kube=as_operator, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
    assert outcome.finished, outcome.message
    assert crd.get(*GATEWAY, f"{unique_name}-gw", "istio-system") is None
    assert crd.get("v1", "Secret", f"{unique_name}-tls", "istio-system") is None


def test_unreachable_target_blocks_deletion_then_gives_up_naming_what_is_left(
    crd: Kube, make_platform: Any, unique_name: str
) -> None:
    # A tenant that never answers: an https server on a loopback port nobody listens on.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kubeconfig = (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    ).encode()
    put_secret(crd, SECRETS_NS, f"{unique_name}-kc", {"value": kubeconfig})
    make_platform(
        unique_name,
        unique_name,
        target={"kubeconfigSecret": {"namespace": SECRETS_NS, "name": f"{unique_name}-kc"}},
        edgeCertificate={"issuer": "SelfSigned"},
    )
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
    assert body is not None
    started = datetime.now(UTC)
    body["metadata"]["deletionTimestamp"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    # Within the deadline: blocked, Ready False DeletionBlocked says why; the finalizer stays.
    blocked = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=started + timedelta(seconds=5))
    assert not blocked.finished and not blocked.gave_up
    ready = condition(blocked.status or {}, constants.READY)
    assert (ready["status"], ready["reason"]) == ("False", "DeletionBlocked"), ready
    assert "target" in ready["message"]
    # Past it: released, with a warning event naming the cluster and what may be left there.
    late = started + timedelta(seconds=reconcile.DELETION_DEADLINE_SECONDS + 1)
    gave_up = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=late, write_status=False)
    assert gave_up.finished and gave_up.gave_up
    ((kind, reason, message),) = gave_up.events
    assert (kind, reason) == ("Warning", "DeletionBlocked")
    assert f"https://127.0.0.1:{port}" in message or "the target cluster" in message
    for named in (
        f"namespaces {unique_name}",
        "Gateway istio-system/kamiwaza-gateway",
        "Secret istio-system/kamiwaza-edge-tls",
        f"tenant-platform-{unique_name}",
        f"CoreDNS rewrite of {unique_name}.example.com",
    ):
        assert named in message, (named, message)


def test_cleanup_leaves_a_hand_made_policy_with_our_exact_name(crd: Kube, make_platform: Any, unique_name: str) -> None:
    """The pod guard's per-platform names (those rendered in a target cluster) are known, but a
    policy of that name without our labels is not ours (and locally cleanup deletes no policy)."""
    make_platform(unique_name, unique_name)
    names = manifests.guard_names("Deny", unique_name)
    policy = allow_pods_policy(names.pod_guard, {constants.LABEL_PLATFORM: unique_name})
    crd.create(policy)
    try:
        body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        assert body is not None
        outcome = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
        assert outcome.finished, outcome.message
        assert crd.get(ADMISSION, "ValidatingAdmissionPolicy", names.pod_guard) is not None
    finally:
        crd.delete(ADMISSION, "ValidatingAdmissionPolicy", names.pod_guard)


def refused(kube: Kube, namespace: str, privileged: bool) -> str | None:
    """Why a server-side dry run of a hostPath (or privileged) pod in ``namespace`` was refused
    (None: admitted)."""
    container: dict[str, Any] = {"name": "app", "image": "registry.example.com/app:1"}
    spec: dict[str, Any] = {"containers": [container]}
    if privileged:
        container["securityContext"] = {"privileged": True}
    else:
        spec["volumes"] = [{"name": "host", "hostPath": {"path": "/"}}]
        container["volumeMounts"] = [{"name": "host", "mountPath": "/host"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "retain-", "namespace": namespace}}
    try:
        kube.create({**pod, "spec": spec}, dry_run=True)
    except errors.KubeError as exc:
        return exc.message or str(exc)
    return None


def test_a_retained_target_platform_leaves_its_namespaces_guarded_in_the_target(
    crd: Kube, make_platform: Any, unique_name: str, tenant: TenantAPIServer, tmp_path: Path
) -> None:
    """Under ``deletionPolicy: Retain`` the namespaces, and the installer's ``admin`` there, stay in
    the target; so does the guard: the retained guard in the target, proven by its canary before
    the platform's own policies go. Asked as the installer with its own token in the target, no
    pod that could take over a node is admitted in any kept namespace."""
    kube = admin(tenant)
    put_secret(crd, SECRETS_NS, "gc-lab-kubeconfig", {"value": tenant.kubeconfig_bytes()})
    target = {"clusterAPI": {"namespace": SECRETS_NS, "cluster": "gc-lab"}}
    primary, extra = unique_name, f"{unique_name}-ext"
    make_platform(
        unique_name,
        primary,
        target=target,
        additionalNamespaces=[extra],
        deletionPolicy="Retain",
        podGuard={"enforcement": "Deny"},
    )
    own = manifests.guard_names("Deny", unique_name).pod_guard
    try:
        wait_for(
            lambda: condition(passes(crd, unique_name), constants.INSTALLER_READY)["status"] == "True",
            timeout=60,
            what="the installer in the tenant",
        )
        sa = "platform-installer"
        token, _ = kube.request_token(primary, sa, expiration_seconds=3600)
        path = tmp_path / "installer.kubeconfig"
        path.write_bytes(tenant.kubeconfig_for_token(token))
        installer = Kube.from_kubeconfig(str(path))
        wait_for(lambda: own in (refused(installer, primary, False) or ""), timeout=30, what="its guard in the tenant")

        body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        assert body is not None
        outcome = reconcile.cleanup(body, kube=crd, settings=SETTINGS, now=datetime.now(UTC), write_status=False)
        assert outcome.finished and not outcome.gave_up, outcome.message
        assert "retained" in outcome.results["podguard"].message, outcome.results["podguard"]

        # The platform's own policies are gone from the target; its namespaces and the installer's
        # admin binding stay, and the retained guard refuses, from the first moment.
        for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
            for name in manifests.all_names(unique_name):
                assert kube.get(ADMISSION, kind, name) is None, (kind, name)
        assert kube.get("rbac.authorization.k8s.io/v1", "RoleBinding", f"{sa}-admin", primary) is not None
        retained = manifests.retained_names("Deny").pod_guard

        def kept_guarded(by: str) -> bool:
            """Every kept namespace marked, and no node-takeover pod admitted there, as the
            installer nor (by a guard, not RBAC) as the tenant's admin; ``by``: the policy that
            refuses (the platform's own may still be loaded for a moment after its deletion)."""
            for ns in (primary, extra):
                for privileged in (False, True):
                    why = refused(installer, ns, privileged)
                    assert why is not None, f"the installer created a node-takeover pod in kept namespace {ns}"
                    by_guard = refused(kube, ns, privileged)
                    assert by_guard is not None and "ValidatingAdmissionPolicy" in by_guard, (ns, by_guard)
                    if by not in by_guard:
                        return False
                live = kube.get("v1", "Namespace", ns)
                assert live is not None and live["status"]["phase"] == "Active", ns
                assert (live["metadata"].get("labels") or {}).get(manifests.RETAINED_LABEL) == "Deny", ns
            return True

        kept_guarded(by="ValidatingAdmissionPolicy")
        wait_for(lambda: kept_guarded(by=retained), timeout=30, what="the retained guard alone refuses")
        assert retained in (refused(installer, primary, True) or "")
        plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "plain-", "namespace": primary}}
        installer.create({**plain, "spec": {"containers": [{"name": "a", "image": "r.example.com/a:1"}]}}, dry_run=True)
    finally:
        for ns in (primary, extra):
            with contextlib.suppress(errors.KubeError):
                kube.delete("v1", "Namespace", ns)


def test_a_namespace_a_target_platform_drops_keeps_the_guard_in_the_target(
    crd: Kube, make_platform: Any, unique_name: str, tenant: TenantAPIServer, tmp_path: Path
) -> None:
    """Dropped from ``additionalNamespaces`` while the platform lives, a namespace of the target is
    released there and keeps the guard it had, as the retained guard, before the platform's own
    policies stop naming it. The installer holds ``admin`` there by hand (as the checklist grants
    it in ``kamiwaza-extensions``); asked with its own token in the target, it is refused."""
    kube = admin(tenant)
    put_secret(crd, SECRETS_NS, "gc-lab-kubeconfig", {"value": tenant.kubeconfig_bytes()})
    target = {"clusterAPI": {"namespace": SECRETS_NS, "cluster": "gc-lab"}}
    primary, extra = unique_name, f"{unique_name}-ext"
    make_platform(unique_name, primary, target=target, additionalNamespaces=[extra], podGuard={"enforcement": "Deny"})
    own = manifests.guard_names("Deny", unique_name).pod_guard
    try:
        wait_for(
            lambda: condition(passes(crd, unique_name), constants.INSTALLER_READY)["status"] == "True",
            timeout=60,
            what="the installer in the tenant",
        )
        sa = "platform-installer"
        admin_by_hand(kube, extra, sa, primary)
        token, _ = kube.request_token(primary, sa, expiration_seconds=3600)
        path = tmp_path / "installer.kubeconfig"
        path.write_bytes(tenant.kubeconfig_for_token(token))
        installer = Kube.from_kubeconfig(str(path))
        wait_for(lambda: own in (refused(installer, extra, False) or ""), timeout=30, what="its guard in extra")

        crd.merge_patch(constants.API_VERSION, constants.KIND, unique_name, {"spec": {"additionalNamespaces": []}})
        passes(crd, unique_name)
        retained = manifests.retained_names("Deny").pod_guard

        def retained_refuses() -> bool:
            """No node-takeover pod admitted as the installer, at any moment; True once the
            retained guard is the one refusing (the narrowed own policy loads asynchronously)."""
            found = [refused(installer, extra, privileged) for privileged in (False, True)]
            assert all(why is not None for why in found), found
            return all(retained in str(why) for why in found)

        retained_refuses()
        wait_for(retained_refuses, timeout=30, what="the retained guard refuses in the dropped namespace")
        live = kube.get("v1", "Namespace", extra)
        assert live is not None and live["status"]["phase"] == "Active"
        labels = live["metadata"].get("labels") or {}
        assert labels.get(manifests.RETAINED_LABEL) == "Deny" and constants.LABEL_PLATFORM not in labels, labels
        # The platform's own policies no longer name it; its own namespace stays guarded by them.
        policy = kube.get(ADMISSION, "ValidatingAdmissionPolicy", own)
        assert policy is not None and extra not in str(policy["spec"]), policy["spec"]
        assert own in (refused(installer, primary, False) or "")
    finally:
        for ns in (primary, extra):
            with contextlib.suppress(errors.KubeError):
                kube.delete("v1", "Namespace", ns)
