"""The gateway step's pure verdict (concerns/gateway/verdict.py evaluate): one row per GatewayReady reason."""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

import pytest
from tests.support import platform

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.concerns.gateway import manifests
from tenant_platform.concerns.gateway.verdict import GatewayFacts, evaluate, not_applied, prunes, serves_domain
from tenant_platform.core import domainclaims

DOMAIN = "kamiwaza.example.com"
SERVICE = {"metadata": {"name": "istio-ingressgateway"}, "spec": {"ports": [{"port": 80}, {"port": 443}]}}


demo = partial(platform, "demo", namespace="kamiwaza", domain=DOMAIN)


def gateway(**spec: Any) -> dict[str, Any]:
    """The Gateway as the operator renders it, with ``spec`` fields replaced."""
    live = copy.deepcopy(manifests.render_gateway(demo()))
    live["spec"].update(spec)
    return live


def https(**server: Any) -> list[dict[str, Any]]:
    """The rendered servers with the HTTPS one's fields replaced."""
    servers = gateway()["spec"]["servers"]
    servers[0].update(server)
    return servers


def facts(**changes: Any) -> GatewayFacts:
    """A Managed Gateway of ours just applied, and a gateway Service with port 443."""
    base = GatewayFacts(
        kind_served=True,
        live=gateway(),
        live_owner="demo",
        service_ref=("istio-ingressgateway", "istio-system"),
        service=SERVICE,
        applied=True,
    )
    return replace(base, **changes)


EXTERNAL = {"gateway": {"management": "External"}}
EARLIER, LATER = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"


def claim(name: str, created: str, domain: str = DOMAIN, *, deleting: bool = False) -> domainclaims.Claim:
    return domainclaims.Claim(platform=name, domain=domain, created=created, deleting=deleting)


class Row(NamedTuple):
    name: str
    facts: GatewayFacts
    spec: dict[str, Any]
    dry_run: bool
    status: str
    reason: str
    fragment: str
    """A piece of the expected message."""


ROWS = [
    Row("programmed", facts(), {}, False, "True", Reason.PROGRAMMED, f"serves {DOMAIN} on HTTPS 443 with credential"),
    Row("verified", facts(live_owner=""), EXTERNAL, False, "True", Reason.VERIFIED, "External Gateway istio-system/"),
    Row(
        "kind not served",
        GatewayFacts(kind_served=False),
        {},
        False,
        "False",
        Reason.GATEWAY_KIND_NOT_SERVED,
        "does not serve Gateway (networking.istio.io/v1); install Istio's CRDs.",
    ),
    Row(
        "service missing",
        facts(service=None),
        {},
        False,
        "False",
        Reason.GATEWAY_SERVICE_NOT_FOUND,
        "The gateway Service istio-system/istio-ingressgateway (spec.gateway.serviceHost",
    ),
    Row("would apply", facts(live=None, applied=False), {}, True, "False", Reason.WOULD_APPLY, "would create Gateway"),
    Row(
        "conflict",
        facts(live_owner="", applied=False),
        {},
        False,
        "False",
        Common.CONFLICT,
        "already exists and belongs to someone else (it lacks our labels); it was left untouched",
    ),
    Row("not found", facts(live=None), EXTERNAL, False, "False", Reason.GATEWAY_NOT_FOUND, "does not exist; create it"),
    Row(
        "selector mismatch",
        facts(live=gateway(selector={"istio": "other"})),
        EXTERNAL,
        False,
        "False",
        Reason.SELECTOR_MISMATCH,
        "selects {istio=other} but spec.gateway.selector is {istio=ingressgateway}",
    ),
    Row(
        "no https server",
        facts(live=gateway(servers=https(port={"number": 443, "protocol": "HTTP"}))),
        EXTERNAL,
        False,
        "False",
        Reason.NO_HTTPS_SERVER,
        "has no server with port number 443 and protocol HTTPS.",
    ),
    Row(
        "hosts miss domain",
        facts(live=gateway(servers=https(hosts=["other.example.com"]))),
        EXTERNAL,
        False,
        "False",
        Reason.HOSTS_MISS_DOMAIN,
        f"hosts ['other.example.com'] do not include {DOMAIN}",
    ),
    Row(
        "domain open to all namespaces (Managed: as the API server kept it)",
        facts(live=gateway(servers=https(hosts=[DOMAIN]))),
        {},
        False,
        "False",
        Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES,
        f"hosts ['{DOMAIN}'] admit {DOMAIN} for VirtualServices from every namespace",
    ),
    Row(
        "the checklist's Gateway with plain hosts, verified: True with the hardening named",
        facts(live=gateway(servers=https(hosts=[DOMAIN])), live_owner=""),
        EXTERNAL,
        False,
        "True",
        Reason.VERIFIED,
        f"Hardening recommended: Gateway istio-system/kamiwaza-gateway's hosts ['{DOMAIN}'] admit {DOMAIN} for "
        f"VirtualServices from every namespace, so any namespace could route the platform's domain; list it as "
        f"kamiwaza/{DOMAIN} instead.",
    ),
    Row(
        "no credential",
        facts(live=gateway(servers=https(tls={"mode": "SIMPLE"}))),
        EXTERNAL,
        False,
        "False",
        Reason.NO_CREDENTIAL,
        "has no tls.credentialName (tls mode SIMPLE)",
    ),
    Row(
        "credential mismatch",
        facts(live=gateway(servers=https(tls={"mode": "SIMPLE", "credentialName": "other-tls"}))),
        EXTERNAL,
        False,
        "False",
        Reason.CREDENTIAL_MISMATCH,
        "with credentialName other-tls but spec.edgeCertificate.secretName is kamiwaza-edge-tls",
    ),
    Row(
        "domain held by an earlier platform",
        facts(live=None, live_owner="", applied=False, claims=(claim("demo", LATER), claim("first", EARLIER))),
        {},
        False,
        "False",
        Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
        f"TenantPlatform first was created earlier with spec.domain {DOMAIN}; two platforms cannot share a domain, "
        "so nothing was written",
    ),
]


def test_every_reason_has_a_row() -> None:
    assert {row.reason for row in ROWS} == {*Reason, Common.CONFLICT}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_evaluate(row: Row) -> None:
    verdict = evaluate(demo(**row.spec), row.facts, dry_run=row.dry_run)
    cond = verdict.condition
    assert (cond.type, cond.status, cond.reason) == (constants.GATEWAY_READY, row.status, row.reason), cond.message
    assert row.fragment in cond.message
    assert verdict.desired == []  # nothing (more) to write in any of these
    assert verdict.recorded.dump()["gateway"]["management"] == demo(**row.spec).spec.gateway.management


def test_managed_wants_the_gateway_then_judges_what_the_api_server_kept() -> None:
    first = evaluate(demo(), facts(live=None, live_owner="", applied=False))
    assert first.desired == manifests.render(demo())
    assert prunes(demo(), first) == ["istio-system"]
    assert first.condition.reason == Reason.PROGRAMMED  # the rendered Gateway, as rendered
    assert first.events == []

    # Another field manager's selector label survives the server-side apply: caught on the re-check.
    kept = gateway(selector={"istio": "ingressgateway", "extra": "label"})
    second = evaluate(demo(), facts(live=kept, wrote=True))
    assert second.desired == []
    assert second.condition.reason == Reason.SELECTOR_MISMATCH
    assert second.events == [("Normal", "GatewayApplied", "Applied Gateway istio-system/kamiwaza-gateway.")]


def test_a_moved_gateway_prunes_the_previous_namespace_too() -> None:
    moved = demo(gateway={"namespace": "gw"}, status={"recorded": {"gateway": {"namespace": "istio-system"}}})
    verdict = evaluate(moved, facts(live=None, applied=False))
    assert prunes(moved, verdict) == ["gw", "istio-system"]


def test_conflict_names_the_other_platform() -> None:
    verdict = evaluate(demo(), facts(live_owner="other", applied=False))
    assert verdict.condition.reason == Common.CONFLICT
    assert "belongs to TenantPlatform other" in verdict.condition.message
    assert verdict.desired == []


def test_dry_run_verifies_the_live_gateway_and_says_drift_would_be_repaired() -> None:
    verdict = evaluate(demo(), facts(applied=False), dry_run=True)
    assert verdict.desired == []
    assert verdict.condition.reason == Reason.PROGRAMMED
    assert verdict.condition.message.endswith("(dry run: any drift would be repaired on a real reconcile).")


def test_service_without_port_443_and_hosts_that_are_not_services() -> None:
    no_443 = facts(service={"spec": {"ports": [{"port": 80}]}})
    message = evaluate(demo(), no_443).condition.message
    assert message == (
        "The gateway Service istio-system/istio-ingressgateway exposes no port 443 (ports: [80]); HTTPS cannot "
        "reach it."
    )
    assert evaluate(demo(), facts(service_ref=None, service=None)).condition.reason == Reason.PROGRAMMED


def test_missing_port_80_is_a_note_and_the_recorded_coordinates() -> None:
    live = gateway(servers=gateway()["spec"]["servers"][:1])
    verdict = evaluate(demo(**EXTERNAL), facts(live=live, live_owner=""))
    assert verdict.condition.is_true
    assert "; note: Gateway istio-system/kamiwaza-gateway serves no port 80" in verdict.condition.message
    assert verdict.recorded.dump() == {
        "gateway": {
            "name": "kamiwaza-gateway",
            "namespace": "istio-system",
            "selector": {"istio": "ingressgateway"},
            "serviceAccountName": "istio-ingressgateway",
            "serviceHost": "istio-ingressgateway.istio-system.svc.cluster.local",
            "meshNamespace": "istio-system",
            "management": "External",
        }
    }


def test_a_failed_apply_is_an_api_error() -> None:
    cond = not_applied(["Gateway istio-system/kamiwaza-gateway: boom"])
    assert (cond.status, cond.reason) == ("False", Common.API_ERROR)
    assert cond.message == "Could not apply: Gateway istio-system/kamiwaza-gateway: boom."


def annotated(value: str) -> dict[str, Any]:
    live = gateway(servers=https(hosts=["*/" + DOMAIN]))
    live["metadata"]["annotations"] = {"tenancy.dev/adoptable-by": value}
    return live


ADOPTION = {
    # (live Gateway, its owner by our labels) -> adopted (applied), else Conflict
    "hand-made, opted in for this platform: adopted": (annotated("demo"), "", True),
    "hand-made, opted in for several platforms, this one among them: adopted": (annotated("other, demo"), "", True),
    "hand-made, opted in for a platform whose name starts like this one's: Conflict": (annotated("demo-2"), "", False),
    "hand-made, opted in for another platform: conflict": (annotated("other"), "", False),
    "hand-made, not opted in: conflict": (gateway(), "", False),
    "another platform's, annotated for this one: conflict": (annotated("demo"), "other", False),
}


@pytest.mark.parametrize(("live", "owner", "adopted"), ADOPTION.values(), ids=ADOPTION.keys())
def test_adoption_needs_the_admins_opt_in(live: dict[str, Any], owner: str, adopted: bool) -> None:
    v = evaluate(demo(), facts(live=live, live_owner=owner, applied=False))
    cond = v.conditions[0]
    if adopted:
        assert v.desired == manifests.render(demo())
        assert cond.reason == Reason.PROGRAMMED, cond
    else:
        assert v.desired == []
        assert cond.reason == Common.CONFLICT
        if not owner:
            assert "annotate it tenancy.dev/adoptable-by=demo (docs/migration.md)" in cond.message


@pytest.mark.parametrize(
    ("claims", "serving", "held"),
    [
        pytest.param((claim("demo", LATER),), (), "", id="alone"),
        pytest.param((claim("demo", EARLIER), claim("b", LATER)), (), "", id="first"),
        pytest.param((claim("demo", LATER), claim("a", EARLIER)), (), "created earlier", id="second"),
        pytest.param((claim("demo", EARLIER), claim("a", EARLIER)), (), "created earlier", id="tie by name"),
        pytest.param((claim("demo", EARLIER), claim("z", EARLIER)), (), "", id="tie won by name"),
        pytest.param((claim("demo", LATER), claim("a", EARLIER, deleting=True)), (), "", id="earlier one deleting"),
        pytest.param((claim("demo", LATER), claim("a", EARLIER, "other.example.com")), (), "", id="other domain"),
        pytest.param(
            (claim("demo", EARLIER), claim("b", LATER)),
            (("b", "istio-system/b-gw"),),
            "already served by TenantPlatform b with Gateway istio-system/b-gw",
            id="a later platform's Gateway in place keeps it",
        ),
        pytest.param(
            (claim("demo", LATER), claim("a", EARLIER)),
            (("demo", "istio-system/kamiwaza-gateway"),),
            "",
            id="ours in place",
        ),
        pytest.param(
            (claim("demo", LATER), claim("a", EARLIER)),
            (("demo", "istio-system/kamiwaza-gateway"), ("a", "istio-system/a-gw")),
            "already served by TenantPlatform a",
            id="both in place: the earlier keeps it",
        ),
        pytest.param(
            (claim("demo", EARLIER), claim("b", LATER)),
            (("demo", "istio-system/kamiwaza-gateway"), ("b", "istio-system/b-gw")),
            "",
            id="both in place: ours is earlier",
        ),
    ],
)
def test_one_domain_one_platform(
    claims: tuple[domainclaims.Claim, ...], serving: tuple[tuple[str, str], ...], held: str
) -> None:
    """The ownership rule DNSReady applies (core/domainclaims.py holders), in both modes."""
    for spec in ({}, EXTERNAL):
        cond = evaluate(demo(**spec), facts(claims=claims, serving=serving)).condition
        if held:
            assert cond.reason == Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM, cond.message
            assert held in cond.message
        else:
            assert cond.reason != Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM, cond.message


def test_a_held_domain_writes_nothing_even_before_the_apply() -> None:
    verdict = evaluate(
        demo(), facts(live=None, live_owner="", applied=False, claims=(claim("a", EARLIER), claim("demo", LATER)))
    )
    assert verdict.desired == [] and prunes(demo(), verdict) == [] and verdict.events == []


def test_serves_domain_reads_the_dns_name_of_every_host() -> None:
    assert serves_domain(gateway(), DOMAIN)
    assert serves_domain(gateway(servers=https(hosts=[f"*/{DOMAIN.upper()}."])), DOMAIN)
    assert not serves_domain(gateway(servers=[{"hosts": ["ns/other.example.com"]}]), DOMAIN)


def test_plain_hosts_warn_once_when_verified() -> None:
    """External, plain hosts: a Warning event when the hardening note is new, none once status says it."""
    plain = facts(live=gateway(servers=https(hosts=[DOMAIN])), live_owner="")
    first = evaluate(demo(**EXTERNAL), plain)
    assert [(e[0], e[1]) for e in first.events] == [("Warning", "GatewayHostsOpen")]
    assert f"list it as kamiwaza/{DOMAIN}" in first.events[0][2]
    body = {
        "metadata": {"name": "demo"},
        "spec": {"namespace": "kamiwaza", "domain": DOMAIN, **EXTERNAL},
        "status": {"conditions": [{"type": "GatewayReady", "message": first.condition.message}]},
    }
    again = evaluate(TenantPlatform.from_body(body), plain)
    assert again.condition == first.condition and again.events == []
    # Namespaced hosts: nothing to harden, no event.
    assert evaluate(demo(**EXTERNAL), facts(live_owner="")).events == []
