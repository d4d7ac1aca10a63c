"""concerns/gateway/verdict.py's chains, check by check: each named check has its own table, and
each chain's order (the order of reasons) has one test."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.concerns.gateway import manifests, verdict
from tenant_platform.core import domainclaims

DOMAIN = "kamiwaza.example.com"
SERVICE = {"metadata": {"name": "istio-ingressgateway"}, "spec": {"ports": [{"port": 443}]}}
EXTERNAL = {"gateway": {"management": "External"}}


def platform(**spec: Any) -> TenantPlatform:
    return TenantPlatform.from_body(
        {"metadata": {"name": "demo"}, "spec": {"namespace": "kamiwaza", "domain": DOMAIN, **spec}}
    )


def gateway(**spec: Any) -> dict[str, Any]:
    live = copy.deepcopy(manifests.render_gateway(platform()))
    live["spec"].update(spec)
    return live


def https(**server: Any) -> list[dict[str, Any]]:
    servers = gateway()["spec"]["servers"]
    servers[0].update(server)
    return servers


def subject(live: dict[str, Any] | None) -> verdict.GatewayUnderCheck:
    return verdict.GatewayUnderCheck(
        live,
        name="kamiwaza-gateway",
        namespace="istio-system",
        domain=DOMAIN,
        selector={"istio": "ingressgateway"},
        tenant_namespace="kamiwaza",
        credential_name="kamiwaza-edge-tls",
    )


NO_HTTPS = gateway(servers=https(port={"number": 443, "protocol": "HTTP"}))
MISSES = gateway(servers=https(hosts=["other.example.com"]))
OPEN = gateway(servers=https(hosts=[DOMAIN]))
NO_CRED = gateway(servers=https(tls={"mode": "SIMPLE"}))
OTHER_CRED = gateway(servers=https(tls={"mode": "SIMPLE", "credentialName": "other-tls"}))
WRONG_SELECTOR = gateway(selector={"istio": "other"})

# check -> rows of (id, live Gateway, the reason it finds or None)
VERIFY_TABLE: dict[str, list[tuple[str, dict[str, Any] | None, Reason | None]]] = {
    "Gateway exists": [
        ("absent", None, Reason.GATEWAY_NOT_FOUND),
        ("present", gateway(), None),
    ],
    "selects the gateway workload": [
        ("absent: not judged", None, None),
        ("same selector", gateway(), None),
        ("other selector", WRONG_SELECTOR, Reason.SELECTOR_MISMATCH),
        ("no selector", gateway(selector={}), Reason.SELECTOR_MISMATCH),
    ],
    "has an HTTPS 443 server": [
        ("absent: not judged", None, None),
        ("rendered", gateway(), None),
        ("443 is plain HTTP", NO_HTTPS, Reason.NO_HTTPS_SERVER),
        ("no servers", gateway(servers=[]), Reason.NO_HTTPS_SERVER),
    ],
    "HTTPS hosts admit the domain": [
        ("no HTTPS: not judged", NO_HTTPS, None),
        ("rendered", gateway(), None),
        ("other host", MISSES, Reason.HOSTS_MISS_DOMAIN),
        ("another namespace", gateway(servers=https(hosts=[f"other/{DOMAIN}"])), Reason.HOSTS_MISS_DOMAIN),
    ],
    "domain closed to other namespaces": [
        ("not serving: not judged", MISSES, None),
        ("tenant namespace only", gateway(), None),
        ("bare host", OPEN, Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES),
        ("*/ host", gateway(servers=https(hosts=[f"*/{DOMAIN}"])), Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES),
    ],
    "TLS from a credential": [
        ("not serving: not judged", MISSES, None),
        ("credential", gateway(), None),
        ("no credential", NO_CRED, Reason.NO_CREDENTIAL),
    ],
    "credential is the edge certificate": [
        ("not serving: not judged", MISSES, None),
        ("no credential: the other check's", NO_CRED, None),
        ("the edge certificate", gateway(), None),
        ("another Secret", OTHER_CRED, Reason.CREDENTIAL_MISMATCH),
    ],
}
VERIFY_ROWS = [
    pytest.param(name, live, reason, id=f"{name}: {row_id}")
    for name, rows in VERIFY_TABLE.items()
    for row_id, live, reason in rows
]


def test_every_verify_check_has_a_table() -> None:
    assert set(VERIFY_TABLE) == set(verdict.VERIFY_CHECKS.names)


@pytest.mark.parametrize(("name", "live", "reason"), VERIFY_ROWS)
def test_verify_check(name: str, live: dict[str, Any] | None, reason: Reason | None) -> None:
    (found,) = [c for c in verdict.VERIFY_CHECKS if c.name == name]
    problem = found.run(subject(live))
    assert (problem[0] if problem else None) == reason, problem


def test_verify_chain_order() -> None:
    assert verdict.VERIFY_CHECKS.names == (
        "Gateway exists",
        "selects the gateway workload",
        "has an HTTPS 443 server",
        "HTTPS hosts admit the domain",
        "domain closed to other namespaces",
        "TLS from a credential",
        "credential is the edge certificate",
    )
    # Findings come in chain order: a wrong selector, a bare host and another Secret together.
    both = gateway(selector={"istio": "other"}, servers=https(hosts=[DOMAIN], tls={"credentialName": "x"}))
    assert [f.value[0] for f in verdict.VERIFY_CHECKS.every(subject(both))] == [
        Reason.SELECTOR_MISMATCH,
        Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES,
        Reason.CREDENTIAL_MISMATCH,
    ]


def test_http_redirect_note() -> None:
    assert verdict.http_redirect_note(subject(gateway())) == ""
    only_https = gateway(servers=gateway()["spec"]["servers"][:1])
    assert "serves no port 80 for" in verdict.http_redirect_note(subject(only_https))


def facts(**changes: Any) -> verdict.GatewayFacts:
    base: dict[str, Any] = {
        "kind_served": True,
        "live": gateway(),
        "live_owner": "demo",
        "service_ref": ("istio-ingressgateway", "istio-system"),
        "service": SERVICE,
        "applied": True,
    }
    return verdict.GatewayFacts(**{**base, **changes})


HELD = (
    domainclaims.Claim(platform="first", domain=DOMAIN, created="2026-01-01T00:00:00Z"),
    domainclaims.Claim(platform="demo", domain=DOMAIN, created="2026-02-01T00:00:00Z"),
)

# check -> rows of (id, spec, facts, dry run, the reason it finds or None)
EVALUATE_TABLE: dict[str, list[tuple[str, dict[str, Any], verdict.GatewayFacts, bool, str | None]]] = {
    "Gateway kind served": [
        ("served", {}, facts(), False, None),
        ("not served", {}, verdict.GatewayFacts(kind_served=False), False, Reason.GATEWAY_KIND_NOT_SERVED),
    ],
    "domain not held by another platform": [
        ("alone", {}, facts(), False, None),
        ("an earlier platform", {}, facts(claims=HELD), False, Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM),
        ("in place elsewhere", EXTERNAL, facts(serving=(("b", "x/y"),)), False, Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM),
    ],
    "Gateway ours or opted in (Managed)": [
        ("ours", {}, facts(applied=False), False, None),
        ("absent", {}, facts(live=None, live_owner="", applied=False), False, None),
        ("hand-made", {}, facts(live_owner="", applied=False), False, Common.CONFLICT),
        ("another platform's", {}, facts(live_owner="other", applied=False), False, Common.CONFLICT),
        ("External: not judged", EXTERNAL, facts(live_owner="other"), False, None),
    ],
    "Gateway exists (Managed, dry run)": [
        ("absent, dry run", {}, facts(live=None, live_owner=""), True, Reason.WOULD_APPLY),
        ("absent, real pass", {}, facts(live=None, live_owner=""), False, None),
        ("present, dry run", {}, facts(), True, None),
        ("External", EXTERNAL, facts(live=None), True, None),
    ],
    "Gateway serves the domain": [
        ("as rendered", {}, facts(live=None, applied=False), False, None),
        ("External, absent", EXTERNAL, facts(live=None), False, Reason.GATEWAY_NOT_FOUND),
        ("kept another selector", {}, facts(live=WRONG_SELECTOR), False, Reason.SELECTOR_MISMATCH),
    ],
    "gateway Service exposes 443": [
        ("443", {}, facts(), False, None),
        ("no Service named", {}, facts(service_ref=None, service=None), False, None),
        ("missing", {}, facts(service=None), False, Reason.GATEWAY_SERVICE_NOT_FOUND),
        ("no 443", {}, facts(service={"spec": {"ports": [{"port": 80}]}}), False, Reason.GATEWAY_SERVICE_NOT_FOUND),
    ],
}
EVALUATE_ROWS = [
    pytest.param(name, spec, f, dry_run, reason, id=f"{name}: {row_id}")
    for name, rows in EVALUATE_TABLE.items()
    for row_id, spec, f, dry_run, reason in rows
]


def test_every_evaluate_check_has_a_table() -> None:
    assert set(EVALUATE_TABLE) == set(verdict.EVALUATE_CHECKS.names)


@pytest.mark.parametrize(("name", "spec", "facts_", "dry_run", "reason"), EVALUATE_ROWS)
def test_evaluate_check(
    name: str, spec: dict[str, Any], facts_: verdict.GatewayFacts, dry_run: bool, reason: str | None
) -> None:
    (found,) = [c for c in verdict.EVALUATE_CHECKS if c.name == name]
    cond = found.run(verdict.GatewayDecision(platform(**spec), facts_, dry_run))
    assert (cond.reason if cond else None) == reason, cond


def test_evaluate_chain_order() -> None:
    assert verdict.EVALUATE_CHECKS.names == (
        "Gateway kind served",
        "domain not held by another platform",
        "Gateway ours or opted in (Managed)",
        "Gateway exists (Managed, dry run)",
        "Gateway serves the domain",
        "gateway Service exposes 443",
    )
    # Only the checks before the Gateway is judged keep it from being applied.
    assert frozenset(verdict.EVALUATE_CHECKS.names[:4]) == verdict.WRITES_NOTHING
    # A held domain comes before a conflict, which comes before a missing Service.
    everything = facts(claims=HELD, live_owner="other", applied=False, service=None)
    found = verdict.EVALUATE_CHECKS.every(verdict.GatewayDecision(platform(), everything))
    assert [f.value.reason for f in found] == [
        Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
        Common.CONFLICT,
        Reason.GATEWAY_SERVICE_NOT_FOUND,
    ]
