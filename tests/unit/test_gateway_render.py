"""Pure Gateway rendering and verification of an External Gateway."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.render import gateway as render_gateway
from tenant_platform.status import gateway as check
from tenant_platform.status import gatewayservice

DOMAIN = "kamiwaza.example.com"


def platform(**spec: Any) -> TenantPlatform:
    return TenantPlatform.from_body(
        {"metadata": {"name": "demo"}, "spec": {"namespace": "kamiwaza", "domain": DOMAIN, **spec}}
    )


def test_render_managed_gateway() -> None:
    gw = render_gateway.render_gateway(
        platform(gateway={"selector": {"istio": "ingressgateway", "app": "gw"}}, edgeCertificate={"secretName": "edge"})
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
                    "hosts": [DOMAIN],
                    "tls": {"mode": "SIMPLE", "credentialName": "edge"},
                },
                {
                    "port": {"number": 80, "name": "http", "protocol": "HTTP"},
                    "hosts": [DOMAIN],
                    "tls": {"httpsRedirect": True},
                },
            ],
        },
    }


def test_selector_values_are_escaped() -> None:
    awkward = {"example.com/role": "a: b # {c}", "yes": "no"}
    gw = render_gateway.render_gateway(platform(gateway={"selector": awkward}))
    assert gw["spec"]["selector"] == awkward


def test_external_renders_nothing() -> None:
    assert render_gateway.render(platform(gateway={"management": "External"})) == []
    assert len(render_gateway.render(platform())) == 1


def live_gateway() -> dict[str, Any]:
    return copy.deepcopy(render_gateway.render_gateway(platform()))


def verify(live: dict[str, Any] | None, **overrides: Any) -> check.GatewayReport:
    args: dict[str, Any] = {
        "name": "kamiwaza-gateway",
        "namespace": "istio-system",
        "domain": DOMAIN,
        "selector": {"istio": "ingressgateway"},
        "tenant_namespace": "kamiwaza",
        "credential_name": "kamiwaza-edge-tls",
    }
    args.update(overrides)
    return check.verify_gateway(live, **args)


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
        pytest.param(["*.example.com"], id="wildcard"),
        pytest.param(["*"], id="star"),
        pytest.param(["kamiwaza/kamiwaza.example.com"], id="tenant namespace"),
        pytest.param(["*/kamiwaza.example.com"], id="any namespace"),
        pytest.param(["other.example.com", "*.com"], id="istio suffix wildcard"),
    ],
)
def test_hosts_that_admit_the_domain(hosts: list[str]) -> None:
    assert verify(with_hosts(hosts)).ok


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
