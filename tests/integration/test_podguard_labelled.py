"""The labelled shared guard (no parameter; docs/performance.md, "A guard without a parameter"),
on a control plane of its own (the shared names are switched here, which the session's other pod
guard tests must not see):

- it judges by the namespace's ``tenancy.dev/pod-guard`` label (Deny refuses, Warn warns, no label
  nothing) and reads istio-init's allowed repositories from the namespace's annotation
  (``namespaceObject``), pod and exec guard alike;
- it does not go stale the way a ConfigMap parameter did: after every binding was deleted and
  re-created (twice), a newly labelled namespace, a label flipped from Warn to Deny and a changed
  annotation take effect within seconds;
- switching the shared names in place from today's guard (TenantPlatform parameters) to the
  labelled one leaves no moment without enforcement: a probe submits a hostPID pod and an exec into
  istio-init throughout, in a Deny namespace (always refused by a guard) and a Warn namespace
  (always warned about);
- namespace ``admin`` cannot write what the guard reads (namespace labels and annotations).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from podguard_support import DEFAULT_REPOSITORIES, context, fresh
from tests.support import sole_condition

from tenant_platform import devmode
from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests, verdict
from tenant_platform.concerns.podguard import step as podguard
from tenant_platform.concerns.podguard.step import STEP
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

VAP = "admissionregistration.k8s.io/v1"
PROXY_REPO = "docker.io/istio/proxyv2"
LABELLED_ONLY = "mirror.example.com:5000/labelled/proxyv2"
DENY = manifests.guard_names("Deny")
WARN = manifests.guard_names("Warn")


@pytest.fixture(scope="module")
def own_kube() -> Iterator[Kube]:
    with ControlPlane(controller_manager=False) as cp:
        kube = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(kube)
        yield kube


def labelled_objects() -> list[dict[str, Any]]:
    objs = manifests.render_labelled()
    for obj in objs:
        obj["metadata"].setdefault("labels", {}).update(podguard.shared_labels())
    return objs


def namespace(kube: Kube, name: str, enforcement: str | None, repositories: str = PROXY_REPO) -> None:
    labels = {constants.LABEL_PLATFORM: name}
    if enforcement:
        labels[manifests.GUARD_LABEL] = enforcement
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {manifests.GUARD_ANNOTATION: repositories},
            },
        }
    )
    kube.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}})


def relabel(kube: Kube, name: str, enforcement: str | None = None, repositories: str | None = None) -> None:
    meta: dict[str, Any] = {}
    if enforcement is not None:
        meta["labels"] = {manifests.GUARD_LABEL: enforcement}
    if repositories is not None:
        meta["annotations"] = {manifests.GUARD_ANNOTATION: repositories}
    kube.merge_patch("v1", "Namespace", name, {"metadata": meta})


def host_pid(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "probe-", "namespace": ns},
        "spec": {"hostPID": True, "containers": [{"name": "app", "image": "registry.example.com/app:1"}]},
    }


def istio_init(ns: str, repository: str) -> dict[str, Any]:
    init = {
        "name": "istio-init",
        "image": f"{repository}:1.28.0",
        "args": ["istio-iptables", "-p", "15001"],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "injected-", "namespace": ns},
        "spec": {
            "automountServiceAccountToken": False,
            "initContainers": [init],
            "containers": [{"name": "app", "image": "registry.example.com/app:1"}],
        },
    }


def judged(kube: Kube, obj: dict[str, Any]) -> str:
    """``denied:<policy>``, ``warned:<policy>`` or ``admitted``."""
    try:
        _, warnings = kube.create_with_warnings(obj, dry_run=True)
    except errors.Forbidden as exc:
        message = exc.message or ""
        if "ValidatingAdmissionPolicy '" in message:
            return "denied:" + message.split("ValidatingAdmissionPolicy '", 1)[1].split("'", 1)[0]
        return f"forbidden:{message}"
    for policy in (WARN.pod_guard, DENY.pod_guard):
        if verdict.guard_warnings(warnings, policy):
            return f"warned:{policy}"
    return "admitted"


def expect(kube: Kube, body: dict[str, Any], want: str, what: str, timeout: float = 10.0) -> None:
    """Until ``body``'s dry run is judged ``want`` (``judged``), at most ``timeout`` seconds."""
    wait_for(lambda: judged(kube, copy.deepcopy(body)) == want, what, timeout, interval=0.1)


def exec_judged(kube: Kube, ns: str) -> str:
    try:
        kube.request("POST", f"/api/v1/namespaces/{ns}/pods/probe/exec?container=istio-init&command=sh")
    except errors.KubeError as exc:
        message = exc.message or ""
        if "ValidatingAdmissionPolicy '" in message:
            return "denied:" + message.split("ValidatingAdmissionPolicy '", 1)[1].split("'", 1)[0]
        return "not-denied-by-a-guard"
    return "admitted"


def test_labelled_guard_judges_by_the_namespace_label(own_kube: Kube) -> None:
    kube = own_kube
    for obj in labelled_objects():
        kube.apply(obj)
    for obj in manifests.render_labelled()[:4]:
        assert "paramKind" not in obj["spec"]
    namespace(kube, "lab-deny", "Deny", f"{PROXY_REPO},{LABELLED_ONLY}")
    namespace(kube, "lab-warn", "Warn")
    namespace(kube, "lab-none", None)
    wait_for(lambda: judged(kube, host_pid("lab-deny")) == f"denied:{DENY.pod_guard}", "Deny to deny", 60, interval=0.2)
    wait_for(lambda: judged(kube, host_pid("lab-warn")) == f"warned:{WARN.pod_guard}", "Warn to warn", 30, interval=0.2)
    assert judged(kube, host_pid("lab-none")) == "admitted"
    # istio-init: from the namespace's annotation only.
    assert judged(kube, istio_init("lab-deny", PROXY_REPO)) == "admitted"
    assert judged(kube, istio_init("lab-deny", LABELLED_ONLY)) == "admitted"
    assert judged(kube, istio_init("lab-deny", "docker.io/istio/proxyv2-evil")) == f"denied:{DENY.pod_guard}"
    assert judged(kube, istio_init("lab-warn", LABELLED_ONLY)) == f"warned:{WARN.pod_guard}"
    # The exec guard too.
    assert exec_judged(kube, "lab-deny") == f"denied:{DENY.exec_guard}"
    assert exec_judged(kube, "lab-none") == "not-denied-by-a-guard"


def test_labelled_guard_is_not_stale_after_its_bindings_are_recreated(own_kube: Kube) -> None:
    kube = own_kube
    for obj in labelled_objects():
        kube.apply(obj)
    namespace(kube, "stale-a", "Deny")
    wait_for(lambda: judged(kube, host_pid("stale-a")) == f"denied:{DENY.pod_guard}", "the guard", 60, interval=0.2)
    bindings = [o for o in labelled_objects() if o["kind"] == manifests.BINDING_KIND]
    for round_ in range(2):
        for binding in bindings:
            kube.delete(VAP, manifests.BINDING_KIND, binding["metadata"]["name"])
        wait_for(lambda: judged(kube, host_pid("stale-a")) == "admitted", "the guard to be unbound", 60, interval=0.2)
        for binding in bindings:
            kube.apply(binding)
        wait_for(lambda: judged(kube, host_pid("stale-a")) == f"denied:{DENY.pod_guard}", "rebound", 60, interval=0.2)
        # Written after the re-creation: seen within seconds (a stale ConfigMap parameter was not
        # seen until the API server restarted).
        new = f"stale-new-{round_}"
        namespace(kube, new, "Deny")
        expect(kube, host_pid(new), f"denied:{DENY.pod_guard}", "a new namespace")
        flip = f"stale-flip-{round_}"
        namespace(kube, flip, "Warn")
        expect(kube, host_pid(flip), f"warned:{WARN.pod_guard}", "Warn")
        relabel(kube, flip, "Deny")
        expect(kube, host_pid(flip), f"denied:{DENY.pod_guard}", "the flip")
        assert judged(kube, istio_init(flip, LABELLED_ONLY)) == f"denied:{DENY.pod_guard}"
        relabel(kube, flip, repositories=f"{PROXY_REPO},{LABELLED_ONLY}")
        expect(kube, istio_init(flip, LABELLED_ONLY), "admitted", "the annotation")


class Prober(threading.Thread):
    """As the cluster admin, in a loop: a hostPID pod and an exec into istio-init in the Deny
    namespace (each must be refused by a guard), a hostPID pod in the Warn namespace (must be
    warned about by a guard, or refused)."""

    def __init__(self, kube: Kube, deny_ns: str, warn_ns: str) -> None:
        super().__init__(daemon=True)
        self.kube, self.deny_ns, self.warn_ns = kube, deny_ns, warn_ns
        self.stop = threading.Event()
        self.seen: list[str] = []
        self.gaps: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            got = judged(self.kube, host_pid(self.deny_ns))
            (self.seen if got.startswith("denied:") else self.gaps).append(f"deny ns pod: {got}")
            got = exec_judged(self.kube, self.deny_ns)
            (self.seen if got.startswith("denied:") else self.gaps).append(f"deny ns exec: {got}")
            got = judged(self.kube, host_pid(self.warn_ns))
            (self.seen if got.startswith(("warned:", "denied:")) else self.gaps).append(f"warn ns pod: {got}")
            time.sleep(0.005)


def add_platform(kube: Kube, name: str, ns: str, enforcement: manifests.Enforcement) -> None:
    kube.create(
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "metadata": {"name": name},
            "spec": {"namespace": ns, "domain": f"{name}.example.com", "podGuard": {"enforcement": enforcement}},
        }
    )
    value = manifests.GuardParam((ns,), enforcement, (PROXY_REPO,))
    kube.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        name,
        {"status": {"podGuard": verdict.param_fields(value)}},
        subresource="status",
    )


def test_switch_from_the_parameter_guard_leaves_no_gap(own_kube: Kube) -> None:
    kube = own_kube
    # Today's guard, with a Deny and a Warn platform, the namespaces not yet labelled.
    for binding in kube.list(VAP, manifests.BINDING_KIND):
        kube.delete(VAP, manifests.BINDING_KIND, binding["metadata"]["name"])
    for obj in manifests.render_parameter_guard():
        obj["metadata"].setdefault("labels", {}).update(podguard.shared_labels())
        kube.apply(obj)
    namespace(kube, "switch-deny", None)
    namespace(kube, "switch-warn", None)
    add_platform(kube, "switch-deny", "switch-deny", "Deny")
    add_platform(kube, "switch-warn", "switch-warn", "Warn")
    wait_for(lambda: judged(kube, host_pid("switch-deny")) == f"denied:{DENY.pod_guard}", "params", 60, interval=0.2)
    wait_for(lambda: judged(kube, host_pid("switch-warn")) == f"warned:{WARN.pod_guard}", "params", 30, interval=0.2)
    assert judged(kube, istio_init("switch-deny", LABELLED_ONLY)) == f"denied:{DENY.pod_guard}"

    prober = Prober(kube, "switch-deny", "switch-warn")
    prober.start()
    try:
        time.sleep(1)
        # 1. the namespaces get the label and the annotation (the old guard does not read them);
        relabel(kube, "switch-deny", "Deny", f"{PROXY_REPO},{LABELLED_ONLY}")
        relabel(kube, "switch-warn", "Warn", f"{PROXY_REPO},{LABELLED_ONLY}")
        time.sleep(1)
        # 2. the shared names re-applied in place, policies before bindings. In between, the new
        # policies (no paramKind) with the old bindings (paramRef) already judge by the label.
        policies = [o for o in labelled_objects() if o["kind"] == manifests.POLICY_KIND]
        for obj in policies:
            kube.apply(obj)
        expect(kube, istio_init("switch-deny", LABELLED_ONLY), "admitted", "the new policies", 60)
        assert judged(kube, host_pid("switch-deny")) == f"denied:{DENY.pod_guard}"
        assert judged(kube, host_pid("switch-warn")) == f"warned:{WARN.pod_guard}"
        time.sleep(1)
        for obj in labelled_objects():
            if obj["kind"] == manifests.BINDING_KIND:
                kube.apply(obj)
        wait_for(
            lambda: all(
                "paramRef" not in (kube.get(VAP, manifests.BINDING_KIND, n) or {}).get("spec", {})
                for n in manifests.SHARED_NAMES
            ),
            "the bindings",
            30,
        )
        time.sleep(2)
        assert judged(kube, istio_init("switch-deny", LABELLED_ONLY)) == "admitted"
    finally:
        prober.stop.set()
        prober.join(10)
    assert not prober.gaps, prober.gaps[:5]
    assert len(prober.seen) > 30, len(prober.seen)
    for name in manifests.SHARED_NAMES:
        assert "paramKind" not in (kube.get(VAP, manifests.POLICY_KIND, name) or {}).get("spec", {"paramKind": 1})
        assert "paramRef" not in (kube.get(VAP, manifests.BINDING_KIND, name) or {}).get("spec", {"paramRef": 1})


def test_the_step_switches_from_the_parameter_guard_only_once_every_platform_is_marked(own_kube: Kube) -> None:
    """The upgrade as the operator does it: a cluster as the parameter guard left it (two platforms,
    their parameters published, their namespaces unmarked). The first platform's pass marks its
    namespace and keeps the parameter guard (the other's is not marked yet); the second's marks its
    own and switches the shared names in place. A probe runs throughout: no moment without a guard."""
    kube = own_kube
    for body in kube.list(constants.API_VERSION, constants.KIND):  # the other tests' platforms
        kube.delete(constants.API_VERSION, constants.KIND, body["metadata"]["name"])
    for kind in (manifests.BINDING_KIND, manifests.POLICY_KIND):
        for name in manifests.SHARED_NAMES:
            kube.delete(VAP, kind, name)
    for obj in manifests.render_parameter_guard():
        obj["metadata"].setdefault("labels", {}).update(podguard.shared_labels())
        kube.apply(obj)
    for name in ("up-a", "up-b"):
        namespace(kube, name, None, repositories="")
    add_platform(kube, "up-a", "up-a", "Deny")
    add_platform(kube, "up-b", "up-b", "Warn")
    expect(kube, host_pid("up-a"), f"denied:{DENY.pod_guard}", "the parameter guard", 60)
    expect(kube, host_pid("up-b"), f"warned:{WARN.pod_guard}", "the parameter guard", 60)

    def shape() -> list[bool]:
        return [manifests.is_parameter_guard(kube.get(VAP, manifests.POLICY_KIND, n)) for n in manifests.SHARED_NAMES]

    prober = Prober(kube, "up-a", "up-b")
    prober.start()
    try:
        time.sleep(1)
        first = reconcile_step(STEP, context(kube, fresh(kube, "up-a")))
        status, reason, message = sole_condition(first, "PodGuardReady")
        assert (status, reason) == ("True", "Enforcing"), message
        assert "with this TenantPlatform as their parameter" in message and "still missing in up-b/up-b" in message
        assert first.requeue_after is not None
        assert shape() == [True] * 4  # kept: up-b is not marked yet
        assert manifests.mark_of(kube.get("v1", "Namespace", "up-a")) == ("Deny", ",".join(DEFAULT_REPOSITORIES))
        time.sleep(1)
        second = reconcile_step(STEP, context(kube, fresh(kube, "up-b")))
        status, reason, message = sole_condition(second, "PodGuardReady")
        assert (status, reason) == ("True", "WarnOnly"), message
        assert "for the namespaces labelled tenancy.dev/pod-guard=Warn" in message
        assert shape() == [False] * 4
        for name in manifests.SHARED_NAMES:
            assert "paramRef" not in (kube.get(VAP, manifests.BINDING_KIND, name) or {}).get("spec", {"paramRef": 1})
        time.sleep(2)
    finally:
        prober.stop.set()
        prober.join(10)
    assert not prober.gaps, prober.gaps[:5]
    assert len(prober.seen) > 30, len(prober.seen)
    again = reconcile_step(STEP, context(kube, fresh(kube, "up-a")))
    status, reason, message = sole_condition(again, "PodGuardReady")
    assert (status, reason) == ("True", "Enforcing") and "labelled tenancy.dev/pod-guard=Deny" in message, message
    assert again.requeue_after is None
    assert judged(kube, host_pid("up-a")) == f"denied:{DENY.pod_guard}"
    assert judged(kube, host_pid("up-b")) == f"warned:{WARN.pod_guard}"


def test_a_platform_unmarks_only_what_it_released_never_another_platforms_namespace(own_kube: Kube) -> None:
    """A namespace a platform no longer owns loses that platform's mark, unless another platform
    claims it by then: then the mark is the other platform's, and stays. One released to no one
    keeps the guard it had, as the retained guard, until an admin releases it."""
    kube = own_kube

    def platform(name: str, extra: list[str], enforcement: str) -> None:
        body = {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "metadata": {"name": name},
            "spec": {
                "namespace": name,
                "additionalNamespaces": extra,
                "domain": f"{name}.example.com",
                "podGuard": {"enforcement": enforcement},
            },
        }
        if kube.get(constants.API_VERSION, constants.KIND, name) is None:
            kube.create(body)
        else:
            kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"spec": {"additionalNamespaces": extra}})

    def claim(ns: str, owner: str | None) -> None:
        kube.merge_patch("v1", "Namespace", ns, {"metadata": {"labels": {constants.LABEL_PLATFORM: owner}}})

    def mark(ns: str) -> manifests.Mark | None:
        return manifests.mark_of(kube.get("v1", "Namespace", ns))

    for ns in ("mv-a", "mv-b", "mv-x", "mv-y"):
        namespace(kube, ns, None, repositories="")
    claim("mv-a", "mv-a")
    claim("mv-x", "mv-a")
    claim("mv-y", "mv-a")
    claim("mv-b", "mv-b")
    platform("mv-a", ["mv-x", "mv-y"], "Deny")
    platform("mv-b", [], "Warn")
    for name in ("mv-a", "mv-b"):
        reconcile_step(STEP, context(kube, fresh(kube, name)))
    deny = ("Deny", ",".join(DEFAULT_REPOSITORIES))
    assert [mark(ns) for ns in ("mv-a", "mv-x", "mv-y")] == [deny, deny, deny]
    # mv-x moves to mv-b; mv-y is released (no claim).
    platform("mv-a", [], "Deny")
    claim("mv-x", "mv-b")
    claim("mv-y", None)
    platform("mv-b", ["mv-x"], "Warn")
    reconcile_step(STEP, context(kube, fresh(kube, "mv-b")))
    warn = ("Warn", ",".join(DEFAULT_REPOSITORIES))
    assert mark("mv-x") == warn
    result = reconcile_step(STEP, context(kube, fresh(kube, "mv-a")))
    assert sole_condition(result, "PodGuardReady")[:2] == ("True", "Enforcing")
    assert mark("mv-x") == warn  # mv-b's: left alone
    assert mark("mv-y") == ("", "")  # released: the shared mark goes ...
    labels = (kube.get("v1", "Namespace", "mv-y") or {})["metadata"]["labels"]
    assert labels.get(manifests.RETAINED_LABEL) == "Deny", labels  # ... the retained one stays
    assert mark("mv-a") == deny
    expect(kube, host_pid("mv-x"), f"warned:{WARN.pod_guard}", "mv-b's guard in mv-x")
    retained = manifests.retained_names("Deny").pod_guard
    expect(kube, host_pid("mv-y"), f"denied:{retained}", "mv-y keeps the guard it had")
    release = {"labels": {manifests.RETAINED_LABEL: None}, "annotations": {manifests.RETAINED_ANNOTATION: None}}
    kube.merge_patch("v1", "Namespace", "mv-y", {"metadata": release})
    expect(kube, host_pid("mv-y"), "admitted", "mv-y unguarded once an admin released it")
