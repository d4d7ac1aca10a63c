"""The pure DNSReady evaluator (concerns/dns/verdict.py): one row per reason, then the writes it plans."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, NamedTuple

import pytest
from tests.support import platform

from tenant_platform.api import constants
from tenant_platform.api.reasons import DNS, Common
from tenant_platform.api.status.dns import DnsRecord
from tenant_platform.concerns.dns import verdict as dns
from tenant_platform.concerns.dns.coredns import CoreDNSTarget, corefile_text
from tenant_platform.concerns.dns.verdict import CorefileWrite, DnsFacts, OverrideWrite
from tenant_platform.core import domainclaims
from tenant_platform.formats import corefile
from tenant_platform.testing.seed import STOCK_COREFILE

NAME = "demo"
DOMAIN = "demo.example.com"
HOST = "istio-ingressgateway.istio-system.svc.cluster.local"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
K3S_COREFILE = STOCK_COREFILE.replace(
    "    loadbalance\n", "    loadbalance\n    import /etc/coredns/custom/*.override\n"
)
OURS = corefile.upsert_block(STOCK_COREFILE, NAME, DOMAIN, HOST)
OVERRIDE_KEY = corefile.override_key(NAME)
HAND_LINE = f"    rewrite name exact {DOMAIN} {HOST}"
HAND_MADE = STOCK_COREFILE.replace("    kubernetes cluster.local", HAND_LINE + "\n    kubernetes cluster.local", 1)


demo = partial(platform, NAME, namespace=NAME, domain=DOMAIN)


def stamp(changed: datetime | None) -> list[dict[str, Any]]:
    if changed is None:
        return []
    return [{"manager": constants.FIELD_MANAGER, "time": changed.strftime("%Y-%m-%dT%H:%M:%SZ")}]


def coredns_cm(
    text: str = OURS, *, labels: dict[str, str] | None = None, changed: datetime | None = None
) -> dict[str, Any]:
    meta = {"name": "coredns", "namespace": "kube-system", "labels": labels or {}, "managedFields": stamp(changed)}
    return {"metadata": meta, "data": {"Corefile": text}}


def custom_cm(data: dict[str, str], *, changed: datetime | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "coredns-custom", "managedFields": stamp(changed)}, "data": data}


def pod(started: datetime) -> dict[str, Any]:
    return {
        "metadata": {"name": "coredns-1"},
        "status": {"phase": "Running", "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }


STALE = [pod(T0 - timedelta(hours=1))]
OVERRIDE = corefile.render_override(NAME, DOMAIN, HOST)
GATEWAY_SERVICE = {"spec": {"clusterIP": "10.0.0.10"}, "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}}
EXTERNAL = {"dns": {"management": "External"}}


class Row(NamedTuple):
    name: str
    facts: DnsFacts
    spec: dict[str, Any]
    """Spec tweaks."""
    options: dict[str, Any]
    """Keyword arguments of evaluate (``now`` is T0 unless given)."""
    status: str
    reason: str
    fragment: str
    """Part of the message."""


ROWS = [
    Row(
        "configured, nothing to ask",
        DnsFacts(corefile_cm=coredns_cm()),
        {},
        {},
        "True",
        DNS.CONFIGURED,
        "No CoreDNS pod is running",
    ),
    Row(
        "reload pending",
        DnsFacts(corefile_cm=coredns_cm(changed=T0), pods=STALE),
        {},
        {"now": T0 + timedelta(seconds=30)},
        "False",
        DNS.RELOAD_PENDING,
        "pick it up through the reload plugin",
    ),
    Row(
        "reload plugin missing",
        DnsFacts(corefile_cm=coredns_cm(OURS.replace("    reload\n", ""), changed=T0), pods=STALE),
        {},
        {},
        "False",
        DNS.RELOAD_PLUGIN_MISSING,
        "rollout restart deployment/coredns",
    ),
    Row(
        "imported override needs a restart",
        DnsFacts(
            corefile_cm=coredns_cm(K3S_COREFILE),
            custom_cm=custom_cm({OVERRIDE_KEY: OVERRIDE}, changed=T0),
            pods=STALE,
        ),
        {},
        {},
        "False",
        DNS.RESTART_REQUIRED,
        "not to imported files",
    ),
    Row(
        "k0s manages CoreDNS",
        DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE, labels={"k0s.k0sproject.io/stack": "coredns"})),
        {},
        {},
        "False",
        DNS.MANAGED_BY_DISTRIBUTION,
        "spec:\n  network:\n    coreDNS:\n      patches:",
    ),
    Row(
        "k0s: the ClusterConfig patch is live (the checklist's line)",
        DnsFacts(corefile_cm=coredns_cm(HAND_MADE, labels={"k0s.k0sproject.io/stack": "coredns"})),
        {},
        {},
        "True",
        DNS.REWRITE_FOUND,
        f"The live Corefile in ConfigMap kube-system/coredns rewrites {DOMAIN} to {HOST}",
    ),
    Row(
        "k0s: the patch copied from the instructions (our marked block) is live",
        DnsFacts(corefile_cm=coredns_cm(OURS, labels={"k0s.k0sproject.io/stack": "coredns"})),
        {},
        {},
        "True",
        DNS.REWRITE_FOUND,
        "the operator did not write it and writes nothing",
    ),
    Row(
        "RKE2: the HelmChartConfig result is live",
        DnsFacts(rke2_cm={"metadata": {"name": "rke2-coredns-rke2-coredns"}, "data": {"Corefile": HAND_MADE}}),
        {},
        {},
        "True",
        DNS.REWRITE_FOUND,
        "ConfigMap kube-system/rke2-coredns-rke2-coredns rewrites",
    ),
    Row(
        "RKE2 without the rewrite: the HelmChartConfig, with the whole-list warning",
        DnsFacts(rke2_cm={"metadata": {"name": "rke2-coredns-rke2-coredns"}, "data": {"Corefile": STOCK_COREFILE}}),
        {},
        {},
        "False",
        DNS.MANAGED_BY_DISTRIBUTION,
        "Helm replaces a list value whole",
    ),
    Row(
        "Kamaji's add-on: no durable way, even with the line live now",
        DnsFacts(corefile_cm=coredns_cm(HAND_MADE, labels={"kamaji.clastix.io/project": "kamaji"})),
        {},
        {},
        "False",
        DNS.MANAGED_BY_DISTRIBUTION,
        "there is no durable way to carry the rewrite there",
    ),
    Row(
        "the checklist's bare line, not opted in",
        DnsFacts(corefile_cm=coredns_cm(HAND_MADE), pods=STALE),
        {},
        {},
        "True",
        DNS.REWRITE_FOUND,
        "adds no rewrite of its own",
    ),
    Row(
        "a coredns-custom key of someone else's",
        DnsFacts(
            corefile_cm=coredns_cm(K3S_COREFILE),
            custom_cm=custom_cm({"kamiwaza.override": HAND_LINE.strip() + "\n"}),
            pods=STALE,
        ),
        {},
        {},
        "True",
        DNS.REWRITE_FOUND,
        "(key kamiwaza.override)",
    ),
    Row(
        "a hand-made rewrite of the domain to another host",
        DnsFacts(corefile_cm=coredns_cm(HAND_MADE.replace(HOST, "elsewhere.example.net"))),
        {},
        {},
        "False",
        DNS.CONFLICTING_REWRITE,
        "adds no\nsecond rewrite".replace("\n", " "),
    ),
    Row(
        "no CoreDNS ConfigMap",
        DnsFacts(),
        {},
        {},
        "False",
        DNS.COREDNS_NOT_FOUND,
        "ConfigMap kube-system/coredns does not exist",
    ),
    Row(
        "Corefile without the kubernetes plugin",
        DnsFacts(corefile_cm=coredns_cm(".:53 {\n    forward . /etc/resolv.conf\n}\n")),
        {},
        {},
        "False",
        DNS.COREFILE_UNSUPPORTED,
        "kubernetes plugin",
    ),
    Row(
        "dry run with the block missing",
        DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE)),
        {},
        {"dry_run": True},
        "False",
        DNS.WOULD_CONFIGURE,
        f"would add `rewrite name exact {DOMAIN} {HOST}`",
    ),
    Row(
        "another platform rewrites the domain",
        DnsFacts(corefile_cm=coredns_cm(corefile.upsert_block(STOCK_COREFILE, "other", DOMAIN, HOST))),
        {},
        {},
        "False",
        DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
        f"TenantPlatform other already rewrites {DOMAIN} in the cluster DNS",
    ),
    Row(
        "a cluster-internal domain",
        DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE)),
        {"domain": "kubernetes.default.svc.cluster.local"},
        {},
        "False",
        DNS.RESERVED_DOMAIN,
        "kubernetes.default.svc.cluster.local is a cluster-internal name (under cluster.local)",
    ),
    Row(
        "External resolves to the gateway",
        DnsFacts(in_cluster=True, gateway_service=GATEWAY_SERVICE, resolved=["203.0.113.9"]),
        EXTERNAL,
        {},
        "True",
        DNS.RESOLVES,
        "an address of the gateway Service",
    ),
    Row(
        "External resolves elsewhere",
        DnsFacts(in_cluster=True, gateway_service=GATEWAY_SERVICE, resolved=["192.0.2.7"]),
        EXTERNAL,
        {},
        "False",
        DNS.RESOLVES_ELSEWHERE,
        "(10.0.0.10, 203.0.113.9)",
    ),
    Row(
        "External does not resolve",
        DnsFacts(in_cluster=True, resolve_error="Name or service not known"),
        EXTERNAL,
        {},
        "False",
        DNS.DOES_NOT_RESOLVE,
        "does not resolve from the operator's pod (Name or service not known)",
    ),
    Row(
        "External outside the cluster",
        DnsFacts(),
        EXTERNAL,
        {},
        "Unknown",
        DNS.NOT_VERIFIABLE,
        "runs outside the cluster",
    ),
    Row(
        "Disabled",
        DnsFacts(),
        {"dns": {"management": "Disabled"}},
        {},
        "True",
        Common.DISABLED,
        "neither configures nor checks DNS.",
    ),
]


@pytest.mark.parametrize("row", [pytest.param(row, id=row.name) for row in ROWS])
def test_reason(row: Row) -> None:
    plan = dns.plan(demo(**row.spec), row.facts, **{"now": T0, **row.options})
    cond = plan.verdict.condition
    assert (cond.type, cond.status, cond.reason) == (constants.DNS_READY, row.status, row.reason), cond.message
    assert row.fragment in cond.message
    assert not plan.writes
    assert row.reason == DNS.RELOAD_PENDING or (not plan.verdict.progressing and plan.verdict.requeue_after is None)


def test_every_dns_reason_has_a_row() -> None:
    assert {row.reason for row in ROWS} >= set(DNS)


# -- guard rails: in every mode, re-judged from whatever was read -----------------------------------

MODES = ["CoreDNS", "External", "Disabled"]
OTHER_BLOCK = corefile.upsert_block(STOCK_COREFILE, "other", DOMAIN, HOST)


def claim(name: str, created: str, domain: str = DOMAIN, *, deleting: bool = False) -> domainclaims.Claim:
    return domainclaims.Claim(name, domain, created, deleting)


GUARD_ROWS = [
    pytest.param(
        {"domain": "metadata.google.internal"}, DnsFacts(), DNS.RESERVED_DOMAIN, "instance-metadata", id="gce"
    ),
    pytest.param({"domain": "169.254.169.254.nip.io"}, DnsFacts(), DNS.RESERVED_DOMAIN, "link-local", id="imds ip"),
    pytest.param({"domain": "web.tenant.svc"}, DnsFacts(), DNS.RESERVED_DOMAIN, "under svc", id="svc"),
    pytest.param(
        {"domain": "api.corp.k8s"},
        DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE.replace("kubernetes cluster.local", "kubernetes corp.k8s"))),
        DNS.RESERVED_DOMAIN,
        "inside corp.k8s, a zone the cluster's CoreDNS answers with the kubernetes plugin",
        id="the cluster's own domain",
    ),
    pytest.param(
        {}, DnsFacts(corefile_cm=coredns_cm(OTHER_BLOCK)), DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM, "other", id="block"
    ),
    pytest.param(
        {},
        DnsFacts(
            corefile_cm=coredns_cm(K3S_COREFILE),
            custom_cm=custom_cm({corefile.override_key("other"): corefile.render_override("other", DOMAIN, HOST)}),
        ),
        DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
        "TenantPlatform other already rewrites",
        id="import key",
    ),
    pytest.param(
        {},
        DnsFacts(
            corefile_cm=coredns_cm(STOCK_COREFILE),
            claims=(claim(NAME, "2026-06-01T12:00:00Z"), claim("first", "2026-05-01T12:00:00Z")),
        ),
        DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
        "TenantPlatform first was created earlier with spec.domain",
        id="older claim",
    ),
]


@pytest.mark.parametrize("management", MODES)
@pytest.mark.parametrize(("spec", "facts", "reason", "fragment"), GUARD_ROWS)
def test_guard_refuses_in_every_mode(
    management: str, spec: dict[str, Any], facts: DnsFacts, reason: str, fragment: str
) -> None:
    plan = dns.plan(demo(dns={"management": management}, **spec), facts, now=T0)
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("False", reason), cond.message
    assert fragment in cond.message
    assert plan.writes == []  # nothing of ours to remove here, and nothing else is ever written
    assert plan.verdict.recorded.dump() == {"dns": {"management": management}}


def test_a_reserved_domain_loses_the_rewrite_we_wrote_for_it() -> None:
    bad = "kubernetes.default.svc.cluster.local"
    text = corefile.upsert_block(STOCK_COREFILE, NAME, bad, HOST)
    facts = DnsFacts(corefile_cm=coredns_cm(text), custom_cm=custom_cm({OVERRIDE_KEY: OVERRIDE}))
    plan = dns.plan(demo(domain=bad), facts, now=T0)
    assert plan.verdict.condition.reason == DNS.RESERVED_DOMAIN
    assert [type(w) for w in plan.writes] == [CorefileWrite, OverrideWrite]
    assert plan.writes[0].edit(text) == STOCK_COREFILE
    assert "Removed the rewrite" in plan.verdict.condition.message
    assert dns.plan(demo(domain=bad), facts, now=T0, dry_run=True).writes == []


def test_a_held_domain_keeps_the_other_platforms_rewrite_and_writes_nothing() -> None:
    text = corefile.upsert_block(OTHER_BLOCK, NAME, DOMAIN, HOST)  # both rewrite it (written before the guard)
    plan = dns.plan(demo(), DnsFacts(corefile_cm=coredns_cm(text)), now=T0)
    assert plan.verdict.condition.reason == DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM
    assert plan.writes == []


@pytest.mark.parametrize(
    ("claims", "corefile_text", "held"),
    [
        pytest.param((claim(NAME, "2026-06-01T00:00:00Z"),), STOCK_COREFILE, False, id="alone"),
        pytest.param(
            (claim("b", "2026-07-01T00:00:00Z"), claim(NAME, "2026-06-01T00:00:00Z")), STOCK_COREFILE, False, id="first"
        ),
        pytest.param(
            (claim("a", "2026-06-01T00:00:00Z"), claim(NAME, "2026-06-01T00:00:00Z")),
            STOCK_COREFILE,
            True,
            id="tie by name",
        ),
        pytest.param((claim("a", "2026-05-01T00:00:00Z"),), STOCK_COREFILE, True, id="we are not listed"),
        pytest.param(
            (claim("a", "2026-05-01T00:00:00Z", deleting=True),), STOCK_COREFILE, False, id="older one deleting"
        ),
        pytest.param((claim("a", "2026-05-01T00:00:00Z", "a.example.com"),), STOCK_COREFILE, False, id="other domain"),
        pytest.param(
            (claim("a", "2026-05-01T00:00:00Z"), claim(NAME, "2026-06-01T00:00:00Z")), OURS, False, id="ours in place"
        ),
    ],
)
def test_first_come_first_served(claims: tuple[domainclaims.Claim, ...], corefile_text: str, held: bool) -> None:
    found = domainclaims.refusal(demo(), corefile_text=corefile_text, custom_data={}, claims=claims)
    assert (found is not None) == held, found


def test_claims_of_listed_platforms() -> None:
    items = [
        {"metadata": {"name": "a", "creationTimestamp": "2026-05-01T00:00:00Z"}, "spec": {"domain": "a.example.com"}},
        {"metadata": {"name": "b", "deletionTimestamp": "2026-05-02T00:00:00Z"}, "spec": {"domain": "b.example.com"}},
    ]
    assert domainclaims.claims_of(items) == (
        claim("a", "2026-05-01T00:00:00Z", "a.example.com"),
        claim("b", "", "b.example.com", deleting=True),
    )


def test_cluster_zones() -> None:
    assert domainclaims.cluster_zones(STOCK_COREFILE) == ["cluster.local", "in-addr.arpa", "ip6.arpa"]
    assert domainclaims.cluster_zones("broken {") == []


def test_reload_pending_is_progressing_until_the_grace_ends() -> None:
    facts = DnsFacts(corefile_cm=coredns_cm(changed=T0), pods=STALE)
    plan = dns.plan(demo(), facts, now=T0 + timedelta(seconds=30))
    assert plan.verdict.progressing and plan.verdict.requeue_after == pytest.approx(120)


@pytest.mark.parametrize(
    ("facts", "recorded"),
    [
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm()),
            {
                "management": "CoreDNS",
                "distribution": "generic",
                "mode": "corefile",
                "configMap": "kube-system/coredns",
            },
            id="corefile",
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(K3S_COREFILE), custom_cm=custom_cm({OVERRIDE_KEY: OVERRIDE})),
            {
                "management": "CoreDNS",
                "distribution": "generic",
                "mode": "import",
                "configMap": "kube-system/coredns-custom",
                "key": OVERRIDE_KEY,
            },
            id="import",
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(labels={"addonmanager.kubernetes.io/mode": "Reconcile"})),
            {
                "management": "CoreDNS",
                "distribution": "addon-manager",
                "mode": "managed",
                "evidence": "ConfigMap kube-system/coredns is labelled addonmanager.kubernetes.io/mode=Reconcile",
                # the live Corefile holds the rewrite (RewriteFound): where it lives
                "configMap": "kube-system/coredns",
            },
            id="managed",
        ),
        pytest.param(
            DnsFacts(), {"management": "CoreDNS", "distribution": "generic", "mode": "managed"}, id="not found"
        ),
    ],
)
def test_recorded(facts: DnsFacts, recorded: dict[str, Any]) -> None:
    plan = dns.plan(demo(), facts, now=T0)
    assert plan.verdict.recorded.dump() == {"dns": recorded}
    assert DnsRecord.load(recorded).dump() == recorded


def test_corefile_mode_plans_the_block_and_drops_an_old_import_key() -> None:
    facts = DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE), custom_cm=custom_cm({OVERRIDE_KEY: "x", "a": "b"}))
    plan = dns.plan(demo(), facts, now=T0)
    upsert, drop = plan.writes
    assert isinstance(upsert, CorefileWrite) and upsert.edit(STOCK_COREFILE) == OURS
    assert upsert.event == (
        "Normal",
        "CorefileUpdated",
        f"Added the rewrite for {DOMAIN} to ConfigMap kube-system/coredns.",
    )
    assert drop == OverrideWrite(OVERRIDE_KEY, None)
    assert plan.recheck  # the server's time of the change counts
    assert plan.verdict.condition.reason == DNS.CONFIGURED


def test_import_mode_writes_our_key_then_removes_a_block_we_wrote_before() -> None:
    facts = DnsFacts(
        corefile_cm=coredns_cm(corefile.upsert_block(K3S_COREFILE, NAME, DOMAIN, HOST)),
        custom_cm=custom_cm({"someone.override": "log\n"}),
        pods=STALE,
    )
    plan = dns.plan(demo(), facts, now=T0)
    key, block = plan.writes
    wrote = f"Wrote key {OVERRIDE_KEY} of ConfigMap kube-system/coredns-custom."
    assert key == OverrideWrite(OVERRIDE_KEY, OVERRIDE, ("Normal", "CorednsCustomUpdated", wrote))
    assert isinstance(block, CorefileWrite)
    assert block.edit(corefile.upsert_block(K3S_COREFILE, NAME, DOMAIN, HOST)) == K3S_COREFILE
    # Assumed written now: the pod started before it and imports need a restart.
    assert plan.recheck and plan.verdict.condition.reason == DNS.RESTART_REQUIRED


def test_nothing_to_write_when_right() -> None:
    facts = DnsFacts(corefile_cm=coredns_cm(changed=T0), pods=[pod(T0 + timedelta(seconds=5))])
    plan = dns.plan(demo(), facts, now=T0 + timedelta(minutes=1))
    assert not plan.writes and not plan.recheck
    assert "All 1 running CoreDNS pods started after the change" in plan.verdict.condition.message


@pytest.mark.parametrize("management", ["Disabled", "External"])
def test_a_damaged_marker_is_reported_not_guessed(management: str) -> None:
    damaged = OURS.replace("# END", "# BROKEN", 1)
    assert damaged != OURS
    plan = dns.plan(demo(dns={"management": management}), DnsFacts(corefile_cm=coredns_cm(damaged)), now=T0)
    assert not plan.writes
    assert (plan.verdict.condition.status, plan.verdict.condition.reason) == ("False", DNS.COREFILE_UNSUPPORTED)
    assert "by hand" in plan.verdict.condition.message and "kube-system/coredns" in plan.verdict.condition.message
    assert plan.verdict.recorded.dump() == {"dns": {"management": management}}


@pytest.mark.parametrize("management", ["Disabled", "External"])
def test_disabled_and_external_remove_our_rewrite(management: str) -> None:
    facts = DnsFacts(corefile_cm=coredns_cm(), custom_cm=custom_cm({OVERRIDE_KEY: OVERRIDE}))
    plan = dns.plan(demo(dns={"management": management}), facts, now=T0)
    assert plan.writes == [CorefileWrite(NAME, None), OverrideWrite(OVERRIDE_KEY, None)]
    assert not plan.recheck
    assert plan.verdict.condition.message.endswith(" Removed the CoreDNS rewrite the operator had written.")
    assert plan.verdict.recorded.dump() == {"dns": {"management": management}}

    dry = dns.plan(demo(dns={"management": management}), facts, now=T0, dry_run=True)
    assert not dry.writes and "Removed" not in dry.verdict.condition.message


def test_dry_run_never_writes() -> None:
    facts = DnsFacts(corefile_cm=coredns_cm(K3S_COREFILE), custom_cm=custom_cm({}), deployment=None, pods=STALE)
    plan = dns.plan(demo(), facts, now=T0, dry_run=True)
    assert not plan.writes
    assert plan.verdict.condition.reason == DNS.WOULD_CONFIGURE
    assert "would write key" in plan.verdict.condition.message


def test_evaluate_is_the_plans_verdict() -> None:
    for row in ROWS:
        options: dict[str, Any] = {"now": T0, **row.options}
        assert dns.evaluate(demo(**row.spec), row.facts, **options) == (
            dns.plan(demo(**row.spec), row.facts, **options).verdict
        )


def test_kept_changing_is_a_conflict_retried_shortly() -> None:
    verdict = dns.kept_changing(CoreDNSTarget(namespace="scratch"))
    assert (verdict.condition.reason, verdict.condition.status) == (Common.CONFLICT, "False")
    assert "ConfigMap scratch/coredns changed under the operator 5 times" in verdict.condition.message
    assert verdict.progressing and verdict.requeue_after == 5.0 and verdict.recorded.dump() == {}


# -- a hand-made rewrite of the domain (docs/migration.md) ------------------------------------------


def opted_in(text: str, value: str) -> dict[str, Any]:
    cm = coredns_cm(text)
    cm["metadata"]["annotations"] = {constants.ANNOTATION_ADOPTABLE: value}
    return cm


# (the CoreDNS ConfigMap, takes the hand-made line over, a fragment of the message or event)
TAKEOVER_ROWS = [
    pytest.param(opted_in(HAND_MADE, f"other, {NAME}"), True, "replacing the hand-made", id="opted in: replaced"),
]


@pytest.mark.parametrize(
    "cm",
    [
        pytest.param(coredns_cm(HAND_MADE), id="not opted in"),
        pytest.param(opted_in(HAND_MADE, "other"), id="opted in for another platform"),
    ],
)
def test_a_hand_made_rewrite_to_the_gateway_is_never_doubled(cm: dict[str, Any]) -> None:
    """Not opted in for this platform: no block of ours beside the line (never two rewrites of the
    domain); DNSReady True, and the message names the annotation that hands it over."""
    plan = dns.plan(demo(), DnsFacts(corefile_cm=cm, pods=STALE), now=T0)
    assert not plan.writes
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("True", DNS.REWRITE_FOUND), cond.message
    assert f"annotate ConfigMap kube-system/coredns {constants.ANNOTATION_ADOPTABLE}={NAME}" in cond.message
    # Our block left beside it by an earlier version goes, in one write of ours only.
    both = corefile.upsert_block(corefile_text(cm), NAME, DOMAIN, HOST)
    cm = {**cm, "data": {"Corefile": both}}
    plan = dns.plan(demo(), DnsFacts(corefile_cm=cm, pods=STALE), now=T0)
    (write,) = plan.writes
    assert write == CorefileWrite(NAME, None, event=write.event)
    assert write.edit(both) == corefile_text(opted_in(HAND_MADE, ""))
    assert "Removed the operator's own rewrite" in plan.verdict.condition.message


@pytest.mark.parametrize(("cm", "takes_over", "fragment"), TAKEOVER_ROWS)
def test_a_hand_made_rewrite_is_replaced_in_one_write_only_when_opted_in(
    cm: dict[str, Any], takes_over: bool, fragment: str
) -> None:
    plan = dns.plan(demo(), DnsFacts(corefile_cm=cm, pods=STALE), now=T0)
    (write,) = plan.writes
    assert isinstance(write, CorefileWrite) and write.take_over is takes_over
    after = write.edit(corefile_text(cm))
    assert corefile.block_for(after, NAME) is not None
    extra = Counter(after.splitlines()) - Counter(OURS.splitlines())
    assert extra == (Counter() if takes_over else Counter([HAND_LINE]))  # no other line touched
    assert write.event is not None
    said = plan.verdict.condition.message + " " + write.event[2]
    assert fragment in said, said
    # The guard never calls the hand-made line another platform's.
    assert domainclaims.refusal(demo(), corefile_text=corefile_text(cm), custom_data={}, claims=()) is None
