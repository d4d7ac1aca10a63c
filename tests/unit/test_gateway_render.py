"""Pure Gateway rendering and verification of an External Gateway."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.concerns.gateway import manifests, verdict
from tenant_platform.core import gatewayservice

DOMAIN = "kamiwaza.example.com"


demo = partial(platform, "demo", namespace="kamiwaza", domain=DOMAIN)


def test_render_managed_gateway() -> None:
    gw = manifests.render_gateway(
        demo(gateway={"selector": {"istio": "ingressgateway", "app": "gw"}}, edgeCertificate={"secretName": "edge"})
    )
    assert gw == {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "kamiwaza-gateway", "namespace": "istio-system"},
        "spec": {
            "selector": {"app": "gw", "istio": "ingressgateway"},
            "servers": [
                {
                    "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                    "hosts": [f"kamiwaza/{DOMAIN}"],
                    "tls": {"mode": "SIMPLE", "credentialName": "edge"},
                },
                {
                    "port": {"number": 80, "name": "http", "protocol": "HTTP"},
                    "hosts": [f"kamiwaza/{DOMAIN}"],
                    "tls": {"httpsRedirect": True},
                },
            ],
        },
    }


def test_hosts_name_every_tenant_namespace_and_nothing_else() -> None:
    gw = manifests.render_gateway(demo(additionalNamespaces=["kamiwaza-jobs", "kamiwaza-models"]))
    hosts = [f"kamiwaza/{DOMAIN}", f"kamiwaza-jobs/{DOMAIN}", f"kamiwaza-models/{DOMAIN}"]
    assert [server["hosts"] for server in gw["spec"]["servers"]] == [hosts, hosts]
    assert not any(verdict.open_to_all(h, domain=DOMAIN) for h in hosts)


@pytest.mark.parametrize(
    ("namespace", "host", "ports"),
    [
        pytest.param("kamiwaza", DOMAIN, [443, 80], id="the tenant's route binds"),
        pytest.param("attacker", DOMAIN, [], id="another namespace does not bind"),
        pytest.param("istio-system", DOMAIN, [], id="nor the gateway's own namespace"),
        pytest.param("kamiwaza", "other.example.com", [], id="nor another host from the tenant"),
    ],
)
def test_which_virtualservices_bind_the_rendered_gateway(namespace: str, host: str, ports: list[int]) -> None:
    assert verdict.binds(live_gateway(), namespace=namespace, host=host) == ports


def test_a_bare_host_binds_routes_from_any_namespace() -> None:
    live = with_hosts([DOMAIN])
    assert verdict.binds(live, namespace="attacker", host=DOMAIN) == [443]
    assert verdict.binds(with_hosts(["./" + DOMAIN]), namespace="istio-system", host=DOMAIN) == [443]


def test_selector_values_are_escaped() -> None:
    awkward = {"example.com/role": "a: b # {c}", "yes": "no"}
    gw = manifests.render_gateway(demo(gateway={"selector": awkward}))
    assert gw["spec"]["selector"] == awkward


def test_external_renders_nothing() -> None:
    assert manifests.render(demo(gateway={"management": "External"})) == []
    assert len(manifests.render(demo())) == 1


def live_gateway() -> dict[str, Any]:
    return copy.deepcopy(manifests.render_gateway(demo()))


def verify(live: dict[str, Any] | None, **overrides: Any) -> verdict.GatewayReport:
    args: dict[str, Any] = {
        "name": "kamiwaza-gateway",
        "namespace": "istio-system",
        "domain": DOMAIN,
        "selector": {"istio": "ingressgateway"},
        "tenant_namespace": "kamiwaza",
        "credential_name": "kamiwaza-edge-tls",
    }
    args.update(overrides)
    return verdict.verify_gateway(live, **args)


def test_rendered_gateway_verifies() -> None:
    report = verify(live_gateway())
    assert report.ok, report.problems
    assert report.notes == []


def with_hosts(hosts: list[str]) -> dict[str, Any]:
    live = live_gateway()
    live["spec"]["servers"][0]["hosts"] = hosts
    return live


@pytest.mark.parametrize(
    "hosts",
    [
        pytest.param(["kamiwaza/*.example.com"], id="wildcard"),
        pytest.param(["kamiwaza/*"], id="star"),
        pytest.param(["kamiwaza/kamiwaza.example.com"], id="tenant namespace"),
        pytest.param(["other.example.com", "kamiwaza/*.com"], id="istio suffix wildcard"),
        pytest.param(["kamiwaza/kamiwaza.example.com", "*/other.example.com"], id="open hosts for other names"),
    ],
)
def test_hosts_that_admit_the_domain(hosts: list[str]) -> None:
    assert verify(with_hosts(hosts)).ok


@pytest.mark.parametrize(
    "hosts",
    [
        pytest.param(["*.example.com"], id="bare wildcard"),
        pytest.param(["*"], id="bare star"),
        pytest.param(["kamiwaza.example.com"], id="bare host"),
        pytest.param(["*/kamiwaza.example.com"], id="any namespace"),
        pytest.param(["kamiwaza/kamiwaza.example.com", "*/*.com"], id="one open host beside a closed one"),
    ],
)
def test_hosts_open_to_every_namespace_are_reported(hosts: list[str]) -> None:
    report = verify(with_hosts(hosts))
    assert report.reason == Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES, report.problems
    assert "from every namespace" in report.message and f"kamiwaza/{DOMAIN}" in report.message


def test_an_open_port_80_host_is_reported_too() -> None:
    live = live_gateway()
    live["spec"]["servers"][1]["hosts"] = [DOMAIN]
    assert verify(live).reason == Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES


@pytest.mark.parametrize(
    ("mutate", "reason", "fragment"),
    [
        pytest.param(lambda g: None, Reason.GATEWAY_NOT_FOUND, "does not exist", id="missing"),
        pytest.param(
            lambda g: g["spec"].update(selector={"istio": "other"}), Reason.SELECTOR_MISMATCH, "istio=other", id="sel"
        ),
        pytest.param(
            lambda g: g["spec"]["servers"][0]["port"].update(protocol="HTTP"),
            Reason.NO_HTTPS_SERVER,
            "port number 443",
            id="no https",
        ),
        pytest.param(
            lambda g: g["spec"]["servers"][0].update(hosts=["other.example.com"]),
            Reason.HOSTS_MISS_DOMAIN,
            "other.example.com",
            id="hosts miss",
        ),
        pytest.param(
            lambda g: g["spec"]["servers"][0].update(hosts=["other/kamiwaza.example.com"]),
            Reason.HOSTS_MISS_DOMAIN,
            "only admits VirtualServices from namespace other",
            id="wrong namespace",
        ),
        pytest.param(
            lambda g: g["spec"]["servers"][0].update(hosts=["./kamiwaza.example.com"]),
            Reason.HOSTS_MISS_DOMAIN,
            "namespace istio-system",
            id="dot namespace",
        ),
        pytest.param(
            lambda g: g["spec"]["servers"][0].update(tls={"mode": "PASSTHROUGH"}),
            Reason.NO_CREDENTIAL,
            "PASSTHROUGH",
            id="no credential",
        ),
        pytest.param(
            lambda g: g["spec"]["servers"][0]["tls"].update(credentialName="other-tls"),
            Reason.CREDENTIAL_MISMATCH,
            "other-tls",
            id="other credential",
        ),
    ],
)
def test_problems_are_named(mutate: Any, reason: str, fragment: str) -> None:
    live = live_gateway()
    if mutate(live) is None and reason == Reason.GATEWAY_NOT_FOUND:
        live = None
    report = verify(live)
    assert report.reason == reason
    assert fragment in report.message


def test_missing_port_80_is_only_a_note() -> None:
    live = live_gateway()
    live["spec"]["servers"] = live["spec"]["servers"][:1]
    report = verify(live)
    assert report.ok
    assert "port 80" in report.notes[0]


def test_service_of_host() -> None:
    assert gatewayservice.service_of("istio-ingressgateway.istio-system.svc.cluster.local") == (
        "istio-ingressgateway",
        "istio-system",
    )
    assert gatewayservice.service_of("gw.example.com") is None
