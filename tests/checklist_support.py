"""The checklist's objects as an admin makes them by hand, and the guard prober of the takeover tests.

Shared by the integration and e2e tests of a cluster prepared by hand (test_takeover.py,
test_guard_lifetime.py, tests/e2e/test_hand_prepared.py):

- ``by_hand``: create an object as ``kubectl apply`` does (field manager
  ``kubectl-client-side-apply``), so nothing of it is ours;
- the checklist's names (docs/migration.md uses them): namespaces ``kamiwaza`` and ``kamiwaza-extensions``, the guard
  ``kamiwaza-tenant-pod-guard``/``kamiwaza-tenant-exec-guard``;
- ``admin_by_hand``: the checklist's grant of ``admin`` to the installer in a namespace;
- ``checklist_guard``: its two ValidatingAdmissionPolicies and bindings (``[Deny, Audit]``,
  ``matchResources.namespaceSelector`` on the namespaces' names);
- ``Prober``: a thread submitting a hostPID pod (server-side dry run) and an exec into
  ``istio-init`` in a loop, recording which policy denied each and every request that got through.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tenant_platform.api.models import DEFAULT_PROXY_REPOSITORIES
from tenant_platform.concerns.podguard import manifests
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

VAP = "admissionregistration.k8s.io/v1"
CHECKLIST_NAMESPACES = ("kamiwaza", "kamiwaza-extensions")
CHECKLIST_GUARD = ("kamiwaza-tenant-pod-guard", "kamiwaza-tenant-exec-guard")
HAND = "kubectl-client-side-apply"


def by_hand(kube: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` created as an admin's ``kubectl apply`` creates it (its own field manager)."""
    path = kube.path(obj["apiVersion"], obj["kind"], namespace=obj["metadata"].get("namespace"))
    return kube.request("POST", path, body=obj, query={"fieldManager": HAND})


def admin_by_hand(kube: Kube, namespace: str, service_account: str, sa_namespace: str) -> dict[str, Any]:
    """The installer (``service_account`` of ``sa_namespace``) made ``admin`` in ``namespace`` by hand,
    as the checklist grants it in the extensions namespace."""
    return kube.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{service_account}-admin-by-hand", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": sa_namespace}],
        }
    )


def checklist_guard(kube: Kube, namespaces: tuple[str, ...] = CHECKLIST_NAMESPACES) -> None:
    """The checklist's two policies (the baseline and the istio-init exception: our rules, with
    nothing namespace-specific in the policy) and their bindings, scoped by the bindings'
    ``matchResources.namespaceSelector`` on the namespaces' names, ``[Deny, Audit]``; created as an
    admin's ``kubectl apply`` creates them."""
    literal = manifests.GuardParam(namespaces, "Deny", tuple(DEFAULT_PROXY_REPOSITORIES))
    for policy, name in (
        (manifests.render_pod_guard_policy("Deny", literal, "checklist"), CHECKLIST_GUARD[0]),
        (manifests.render_exec_guard_policy("Deny", literal, "checklist"), CHECKLIST_GUARD[1]),
    ):
        policy["metadata"] = {"name": name}
        policy["spec"]["matchConstraints"].pop("namespaceSelector")
        policy["spec"]["matchConditions"] = [c for c in policy["spec"]["matchConditions"] if c["name"] != "guarded"]
        binding = {
            "apiVersion": VAP,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny", "Audit"],
                "matchResources": {
                    "namespaceSelector": {
                        "matchExpressions": [
                            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}
                        ]
                    }
                },
            },
        }
        by_hand(kube, policy)
        by_hand(kube, binding)


def violating_pod(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "gap-probe-", "namespace": namespace},
        "spec": {"hostPID": True, "containers": [{"name": "app", "image": "registry.example.com/app:1"}]},
    }


class Prober(threading.Thread):
    """Submits a hostPID pod (server-side dry run) and an exec into istio-init in a loop, as the
    cluster admin (the guards bind every requester), and records who denied each."""

    def __init__(self, kube: Kube, namespaces: list[str]) -> None:
        super().__init__(daemon=True)
        self.kube, self.namespaces = kube, namespaces
        self.stop = threading.Event()
        self.denied_by: list[str] = []
        self.gaps: list[str] = []
        self.trace: list[str] = []  # every answer in order: the policy that denied, or GAP

    def _denial(self, exc: errors.KubeError) -> str | None:
        message = exc.message or ""
        if "ValidatingAdmissionPolicy '" in message:
            return message.split("ValidatingAdmissionPolicy '", 1)[1].split("'", 1)[0]
        return None

    def run(self) -> None:
        while not self.stop.is_set():
            for ns in self.namespaces:
                try:
                    self.kube.create(violating_pod(ns), dry_run=True)
                    self.gaps.append(f"a hostPID pod was admitted in {ns}")
                except errors.KubeError as exc:
                    who = self._denial(exc)
                    (self.denied_by if who else self.gaps).append(who or f"pod in {ns}: {exc}")
                    self.trace.append(f"pod {ns} {who or 'GAP'}")
                path = f"/api/v1/namespaces/{ns}/pods/gap-probe/exec?container=istio-init&command=sh"
                try:
                    self.kube.request("POST", path)
                    self.gaps.append(f"exec into istio-init got through in {ns}")
                except errors.KubeError as exc:
                    who = self._denial(exc)
                    (self.denied_by if who else self.gaps).append(who or f"exec in {ns}: {exc}")
                    self.trace.append(f"exec {ns} {who or 'GAP'}")
            time.sleep(0.01)


def wait_for_denial(prober: Prober, policy: str, exec_policy: str | None = None) -> None:
    """Until the API server denies a violating pod with ``policy`` (and, given ``exec_policy``, an
    exec into istio-init with that one): admission policies load asynchronously, each on its own."""

    def denied() -> bool:
        try:
            prober.kube.create(violating_pod(prober.namespaces[0]), dry_run=True)
        except errors.KubeError as exc:
            if policy not in (exc.message or ""):
                return False
        else:
            return False
        if exec_policy is None:
            return True
        path = f"/api/v1/namespaces/{prober.namespaces[0]}/pods/gap-probe/exec?container=istio-init&command=sh"
        try:
            prober.kube.request("POST", path)
        except errors.KubeError as exc:
            return exec_policy in (exc.message or "")
        return False

    wait_for(denied, f"{policy} in effect", 30, interval=0.2)


def summary(trace: list[str]) -> list[str]:
    """The prober's answers in order, a run of the same answer (namespaces aside) as one entry."""
    out: list[tuple[str, int]] = []
    for item in trace:
        kind, _, who = item.split(" ", 2)
        key = f"{kind} {who}"
        if out and out[-1][0] == key:
            out[-1] = (key, out[-1][1] + 1)
        else:
            out.append((key, 1))
    return [f"{key} x{count}" for key, count in out]
