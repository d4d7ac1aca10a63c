"""Takeover of a cluster prepared by hand with the checklist, on the real API server.

The checklist's Gateway (``kamiwaza-gateway`` in istio-system, created by hand as ``kubectl apply``
would, a different field manager): without the admin's opt-in it is a Conflict and stays byte for
byte; annotated ``tenancy.dev/adoptable-by: <platform>`` it is taken over in place: still exactly
one Gateway of that name, now ours (labels, ownerReference, our servers).

The whole hand-prepared cluster (``test_hand_prepared_cluster_is_taken_over_without_a_gap``): the
checklist's pod guard and exec guard policies with ``[Deny]`` bindings, its Gateway, its trust
ConfigMap and its Corefile line, all opted in; the TenantPlatform's steps then leave exactly one
guard, one Gateway, one rewrite (our marked block) and one trust ConfigMap. A thread submits a
baseline-violating pod (server-side dry run) and an exec into istio-init all along the switch:
every one is denied.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from networking_support import context, delete_namespace, run
from tests.checklist_support import Prober, wait_for_denial
from tests.support import create_namespace, sole_condition

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common, PodGuard
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.concerns.dns.coredns import CoreDNSTarget
from tenant_platform.concerns.dns.step import DnsStep
from tenant_platform.concerns.edgecert.step import STEP
from tenant_platform.concerns.gateway import step as gateway
from tenant_platform.concerns.podguard import manifests
from tenant_platform.concerns.podguard import step as podguard
from tenant_platform.formats import corefile
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.seed import STOCK_COREFILE
from tenant_platform.testing.steps import reconcile_step

GW = ("networking.istio.io/v1", "Gateway")
ISTIO = "istio-system"


def hand_made(kube: Kube, name: str, domain: str, *, adopt_for: str | None) -> dict[str, Any]:
    """The checklist's Gateway as an admin's ``kubectl apply`` creates it (its own field manager)."""
    meta: dict[str, Any] = {"name": name, "namespace": ISTIO}
    if adopt_for:
        meta["annotations"] = {constants.ANNOTATION_ADOPTABLE: adopt_for}
    obj = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": meta,
        "spec": {
            "selector": {"istio": "ingressgateway"},
            "servers": [
                {
                    "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                    "hosts": [f"*/{domain}"],
                    "tls": {"mode": "SIMPLE", "credentialName": "kamiwaza-edge-tls"},
                },
                {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": [f"*/{domain}"]},
            ],
        },
    }
    path = kube.path(*GW, namespace=ISTIO)
    return kube.request("POST", path, body=obj, query={"fieldManager": "kubectl-client-side-apply"})


@pytest.fixture
def gateways(crd: Kube) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        crd.delete(*GW, name, ISTIO)


def test_hand_made_gateway_is_left_alone_without_opt_in(
    crd: Kube, unique_name: str, make_platform: Any, gateways: list[str]
) -> None:
    gateways.append(unique_name)
    platform = make_platform(unique_name, unique_name, gateway={"name": unique_name})
    before = hand_made(crd, unique_name, platform["spec"]["domain"], adopt_for=None)
    status, reason, message = sole_condition(run(gateway.STEP, crd, platform))
    assert (status, reason) == ("False", Common.CONFLICT), message
    assert f"annotate it {constants.ANNOTATION_ADOPTABLE}={unique_name}" in message
    after = crd.get(*GW, unique_name, ISTIO)
    assert after is not None and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_opted_in_gateway_is_taken_over_in_place(
    crd: Kube, unique_name: str, make_platform: Any, gateways: list[str]
) -> None:
    gateways.append(unique_name)
    platform = make_platform(unique_name, unique_name, gateway={"name": unique_name})
    domain = platform["spec"]["domain"]
    # Opted in for another platform: not ours to take.
    hand_made(crd, unique_name, domain, adopt_for="someone-else")
    assert sole_condition(run(gateway.STEP, crd, platform))[1] == Common.CONFLICT
    crd.delete(*GW, unique_name, ISTIO)
    before = hand_made(crd, unique_name, domain, adopt_for=unique_name)

    status, reason, message = sole_condition(run(gateway.STEP, crd, platform))
    assert (status, reason) == ("True", Reason.PROGRAMMED), message
    found = [g for g in crd.list(*GW, ISTIO) if g["metadata"]["name"] == unique_name]
    assert len(found) == 1
    live = found[0]
    assert live["metadata"]["uid"] == before["metadata"]["uid"], "taken over in place, never recreated"
    assert live["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    assert live["metadata"]["ownerReferences"][0]["uid"] == platform["metadata"]["uid"]
    https, http = live["spec"]["servers"]
    assert https["hosts"] == [f"{unique_name}/{domain}"], "the hand-made '*/' host (open to all namespaces) is gone"
    assert http["tls"] == {"httpsRedirect": True}
    # A resync is idle: ours now.
    assert sole_condition(run(gateway.STEP, crd, platform))[1] == Reason.PROGRAMMED


# ---- the whole hand-prepared cluster ------------------------------------------------------------------

VAP = "admissionregistration.k8s.io/v1"
HOST = "istio-ingressgateway.istio-system.svc.cluster.local"
TRUST = "kamiwaza-edge-trust"


def by_hand(kube: Kube, obj: dict[str, Any], adopt_for: str) -> dict[str, Any]:
    """``obj`` created as an admin's ``kubectl apply`` creates it, annotated for ``adopt_for``."""
    meta = obj["metadata"]
    meta.pop("labels", None)
    meta["annotations"] = {**(meta.get("annotations") or {}), constants.ANNOTATION_ADOPTABLE: adopt_for}
    path = kube.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace"))
    return kube.request("POST", path, body=obj, query={"fieldManager": "kubectl-client-side-apply"})


def checklist_guard(kube: Kube, platform_body: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    """The checklist's two policies (its rules: the same CEL, its namespaces inlined), named its
    way, with [Deny] bindings."""
    parsed = TenantPlatform.from_body(platform_body)
    literal = manifests.GuardParam(
        tuple(parsed.spec.all_namespaces), "Deny", tuple(parsed.spec.pod_guard.proxy_image_repositories)
    )
    made = []
    for policy, name in (
        (manifests.render_pod_guard_policy("Deny", literal, parsed.name), f"{prefix}-pod-guard"),
        (manifests.render_exec_guard_policy("Deny", literal, parsed.name), f"{prefix}-exec-guard"),
    ):
        policy["metadata"]["name"] = name
        by_hand(kube, policy, parsed.name)
        binding = manifests.render_binding(name, "Deny", shared=False)
        binding["spec"]["validationActions"] = ["Deny"]
        by_hand(kube, binding, parsed.name)
        made += [("ValidatingAdmissionPolicy", name), ("ValidatingAdmissionPolicyBinding", name)]
    return made


@pytest.fixture
def hand_prepared(crd: Kube, unique_name: str) -> Iterator[list[str]]:
    """The tenant namespaces and a private CoreDNS setup; everything made by the test is removed."""
    namespaces = [unique_name, f"{unique_name}-ext", f"{unique_name}-dns"]
    yield namespaces
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        for item in crd.list(VAP, kind):
            if unique_name in item["metadata"]["name"]:
                crd.delete(VAP, kind, item["metadata"]["name"])
    crd.delete(*GW, unique_name, ISTIO)
    for ns in namespaces:
        delete_namespace(crd, ns)


def test_hand_prepared_cluster_is_taken_over_without_a_gap(
    crd: Kube, unique_name: str, make_platform: Any, hand_prepared: list[str], control_plane: ControlPlane
) -> None:
    tenant, extensions, dns_ns = hand_prepared[:3]
    for ns in (tenant, extensions):
        create_namespace(crd, ns, wait_sa=True, adoptable_by=unique_name)
    platform = make_platform(
        unique_name,
        tenant,
        additionalNamespaces=[extensions],
        gateway={"name": unique_name},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls", "trustConfigMapName": TRUST},
        podGuard={"enforcement": "Staged"},
    )
    domain = platform["spec"]["domain"]

    # The checklist's objects, by hand, opted in.
    hand_guard = checklist_guard(crd, platform, f"kamiwaza-{unique_name}")
    hand_gateway = hand_made(crd, unique_name, domain, adopt_for=unique_name)
    hand_trust = by_hand(
        crd,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": TRUST, "namespace": tenant},
            "data": {"ca-certificates.crt": "-----BEGIN CERTIFICATE-----\nold\n-----END CERTIFICATE-----\n"},
        },
        unique_name,
    )
    create_namespace(crd, dns_ns)
    line = f"    rewrite name exact {domain} {HOST}"
    by_hand(
        crd,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": dns_ns},
            "data": {
                "Corefile": STOCK_COREFILE.replace(
                    "    kubernetes cluster.local", f"{line}\n    kubernetes cluster.local", 1
                )
            },
        },
        unique_name,
    )

    for ns in (tenant, extensions):  # claimed, as the namespaces step leaves them
        crd.merge_patch("v1", "Namespace", ns, {"metadata": {"labels": {constants.LABEL_PLATFORM: unique_name}}})
    prober = Prober(Kube.from_kubeconfig(str(control_plane.kubeconfig_path)), [tenant, extensions])
    # The hand-made guard is in effect before anything of ours exists.
    wait_for_denial(prober, hand_guard[0][1])
    prober.start()
    names = manifests.guard_names("Deny")
    try:
        # Pass 1: ours at Deny from the start (a hand-made binding denies, so Staged does not start
        # at Warn); the hand-made guard is still needed (ours was written in this pass).
        result = reconcile_step(podguard.STEP, context(crd, platform))
        status, reason, message = sole_condition(result)
        assert (status, reason) == ("True", PodGuard.ENFORCING), message
        assert "is still needed" in message
        assert result.status["podGuard"]["enforcement"] == "Deny"
        assert all(crd.get(VAP, kind, name) is not None for kind, name in hand_guard)
        # Pass 2 (a fresh step, as a restarted operator): ours was in place before it began, so
        # the hand-made guard is reported redundant with the command that deletes it; the
        # operator deletes nothing (it may not).
        body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
        status, reason, message = sole_condition(reconcile_step(podguard.PodGuardStep(), context(crd, body)))
        assert (status, reason) == ("True", PodGuard.HAND_MADE_GUARD_REDUNDANT), message
        assert f"kubectl delete validatingadmissionpolicybinding {hand_guard[3][1]} {hand_guard[1][1]}" in message
        assert all(crd.get(VAP, kind, name) is not None for kind, name in hand_guard)
        # The admin deletes them, bindings first, while the prober keeps going.
        for kind, name in sorted(hand_guard, key=lambda ref: ref[0] != "ValidatingAdmissionPolicyBinding"):
            crd.delete(VAP, kind, name)
        wait_for_denial(prober, names.pod_guard)
        time.sleep(1)
    finally:
        prober.stop.set()
        prober.join(10)
    assert not prober.gaps, prober.gaps[:5]
    assert len(prober.denied_by) > 20
    assert {hand_guard[0][1], hand_guard[2][1]} & set(prober.denied_by), "the hand-made guard denied first"
    assert {names.pod_guard, names.exec_guard} <= set(prober.denied_by[-4:]), "ours deny at the end"
    body = crd.get(constants.API_VERSION, constants.KIND, unique_name)
    status, reason, message = sole_condition(reconcile_step(podguard.PodGuardStep(), context(crd, body)))
    assert (status, reason) == ("True", PodGuard.ENFORCING), message
    assert "hand-made" not in message

    # One Gateway (the same object), one trust ConfigMap (the same object, now ours).
    assert sole_condition(run(gateway.STEP, crd, platform))[1] == "Programmed"
    assert [g["metadata"]["uid"] for g in crd.list(*GW, ISTIO) if g["metadata"]["name"] == unique_name] == [
        hand_gateway["metadata"]["uid"]
    ]
    status, reason, message = sole_condition(run(STEP, crd, platform))
    assert (status, reason) == ("True", "Valid"), message
    trust = [c for c in crd.list("v1", "ConfigMap", tenant) if c["metadata"]["name"] == TRUST]
    assert [c["metadata"]["uid"] for c in trust] == [hand_trust["metadata"]["uid"]]
    assert trust[0]["metadata"]["labels"][constants.LABEL_PLATFORM] == unique_name
    assert trust[0]["data"]["ca-certificates.crt"] != hand_trust["data"]["ca-certificates.crt"]

    # One Corefile rewrite of the domain, in our marked block, written once; no other line touched.
    step_dns = DnsStep(target=CoreDNSTarget(namespace=dns_ns))
    writes_before = crd.counter.snapshot()[1]
    result = reconcile_step(step_dns, context(crd, platform))
    assert crd.counter.snapshot()[1] - writes_before == 1, sole_condition(result)
    text = crd.get("v1", "ConfigMap", "coredns", dns_ns)["data"]["Corefile"]
    assert text == corefile.upsert_block(STOCK_COREFILE, unique_name, domain, HOST)
    assert sum(1 for x in text.splitlines() if x.strip().startswith(f"rewrite name exact {domain} ")) == 1
