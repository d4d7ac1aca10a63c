"""Takeover of a cluster prepared by hand with the checklist, on the real API server.

So far: the checklist's Gateway (``kamiwaza-gateway`` in istio-system, created by hand as
``kubectl apply`` would, a different field manager). Without the admin's opt-in it is a Conflict
and stays byte for byte; annotated ``tenancy.dev/adoptable-by: <platform>`` it is taken over in
place: still exactly one Gateway of that name, now ours (labels, ownerReference, our servers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from networking_support import only, run

from tenant_platform.api import constants
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.kube.client import Kube
from tenant_platform.reconcile import gateway

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
    status, reason, message = only(run(gateway.STEP, crd, platform))
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
    assert only(run(gateway.STEP, crd, platform))[1] == Common.CONFLICT
    crd.delete(*GW, unique_name, ISTIO)
    before = hand_made(crd, unique_name, domain, adopt_for=unique_name)

    status, reason, message = only(run(gateway.STEP, crd, platform))
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
    assert only(run(gateway.STEP, crd, platform))[1] == Reason.PROGRAMMED
