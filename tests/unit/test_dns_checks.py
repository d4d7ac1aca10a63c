"""Management CoreDNS as a chain of named checks (concerns/dns/verdict.py ``COREDNS_CHECKS``): one
table per check (what it finds, or None when it passes), the chain's order (the order of reasons),
and the subject computing what several checks need once."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.test_dns_evaluate import (
    DOMAIN,
    HAND_LINE,
    HAND_MADE,
    HOST,
    K3S_COREFILE,
    NAME,
    OURS,
    OVERRIDE,
    OVERRIDE_KEY,
    STALE,
    T0,
    coredns_cm,
    custom_cm,
    demo,
    opted_in,
)

from tenant_platform.api.reasons import DNS
from tenant_platform.concerns.dns import verdict
from tenant_platform.concerns.dns.coredns import CoreDNSTarget
from tenant_platform.concerns.dns.verdict import DnsFacts
from tenant_platform.formats import corefile
from tenant_platform.testing.seed import STOCK_COREFILE

ELSEWHERE = "elsewhere.example.net"
CONFLICT = HAND_MADE.replace(HOST, ELSEWHERE)
TWO = HAND_MADE.replace(HAND_LINE, HAND_LINE + "\n" + HAND_LINE, 1)
BOTH = corefile.upsert_block(HAND_MADE, NAME, DOMAIN, HOST)
OWN_BLOCK = STOCK_COREFILE + f"{DOMAIN}:53 {{\n{HAND_LINE}\n    forward . /etc/resolv.conf\n}}\n"
NO_KUBERNETES = ".:53 {\n    forward . /etc/resolv.conf\n}\n"
DAMAGED = OURS.replace("# END", "# BROKEN", 1)
K0S = {"k0s.k0sproject.io/stack": "coredns"}
KAMAJI = {"kamaji.clastix.io/project": "kamaji"}
ADDON = {"addonmanager.kubernetes.io/mode": "Reconcile"}
K3S = {"objectset.rio.cattle.io/hash": "x"}
RKE2_NODE = {"metadata": {"name": "n1", "annotations": {"rke2.io/hostname": "n1"}}}
K0S_NODE = {"metadata": {"name": "n1", "labels": {"node.k0sproject.io/role": "worker"}}}


def rke2(text: str) -> DnsFacts:
    return DnsFacts(rke2_cm={"metadata": {"name": "rke2-coredns-rke2-coredns"}, "data": {"Corefile": text}})


def cm(text: str, labels: dict[str, str] | None = None) -> DnsFacts:
    return DnsFacts(corefile_cm=coredns_cm(text, labels=labels), pods=STALE)


def imports(data: dict[str, str]) -> DnsFacts:
    return DnsFacts(corefile_cm=coredns_cm(K3S_COREFILE), custom_cm=custom_cm(data), pods=STALE)


def subject(facts: DnsFacts, *, dry_run: bool = False) -> verdict.CoreDNSSubject:
    return verdict.CoreDNSSubject(demo(), facts, T0, CoreDNSTarget(), dry_run)


DRY = {"dry_run": True}
Found = tuple[str, str, int] | None
"""(status, reason, number of writes) of a finding; None when the check passed."""

# check -> rows of (id, facts, subject options, what it finds)
TABLE: dict[str, list[tuple[str, DnsFacts, dict[str, Any], Found]]] = {
    "RKE2's chart ConfigMap rewrites the domain": [
        ("the chart's line is live", rke2(HAND_MADE), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("our block copied into the chart", rke2(OURS), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("no rewrite in the chart", rke2(STOCK_COREFILE), {}, None),
        ("a rewrite elsewhere", rke2(CONFLICT), {}, None),
        ("RKE2 node, no chart ConfigMap", DnsFacts(node=RKE2_NODE), {}, None),
        ("CoreDNS ConfigMap present: not judged", cm(HAND_MADE), {}, None),
    ],
    "RKE2's chart manages CoreDNS": [
        ("no rewrite in the chart", rke2(STOCK_COREFILE), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("a rewrite elsewhere", rke2(CONFLICT), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("RKE2 node, no chart ConfigMap", DnsFacts(node=RKE2_NODE), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("the line is live: the check before's", rke2(HAND_MADE), {}, None),
        ("not RKE2", DnsFacts(), {}, None),
        ("CoreDNS ConfigMap present: not judged", cm(STOCK_COREFILE), {}, None),
    ],
    "CoreDNS ConfigMap exists": [
        ("absent", DnsFacts(), {}, ("False", DNS.COREDNS_NOT_FOUND, 0)),
        ("absent on k0s", DnsFacts(node=K0S_NODE), {}, ("False", DNS.COREDNS_NOT_FOUND, 0)),
        ("present", cm(STOCK_COREFILE), {}, None),
    ],
    "Corefile editable safely": [
        ("stock", cm(STOCK_COREFILE), {}, None),
        ("no kubernetes plugin", cm(NO_KUBERNETES), {}, ("False", DNS.COREFILE_UNSUPPORTED, 0)),
        ("damaged marker", cm(DAMAGED), {}, ("False", DNS.COREFILE_UNSUPPORTED, 0)),
        ("damaged, managed too", cm(DAMAGED, K0S), {}, ("False", DNS.COREFILE_UNSUPPORTED, 0)),
        ("absent: not judged", DnsFacts(), {}, None),
    ],
    "Kamaji writes its Corefile back": [
        ("no rewrite", cm(STOCK_COREFILE, KAMAJI), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("the line live now", cm(HAND_MADE, KAMAJI), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("not Kamaji", cm(HAND_MADE, K0S), {}, None),
        ("not editable: not judged", cm(NO_KUBERNETES, KAMAJI), {}, None),
    ],
    "live Corefile rewrites the domain (managed)": [
        ("k0s, the checklist's line", cm(HAND_MADE, K0S), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("k0s, our block copied", cm(OURS, K0S), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("addon manager, the line", cm(HAND_MADE, ADDON), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("k3s without the import, the line", cm(HAND_MADE, K3S), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("k0s, a rewrite elsewhere", cm(CONFLICT, K0S), {}, None),
        ("k0s, no rewrite", cm(STOCK_COREFILE, K0S), {}, None),
        ("Kamaji: not durable", cm(HAND_MADE, KAMAJI), {}, None),
        ("plain Corefile: not managed", cm(HAND_MADE), {}, None),
    ],
    "distribution manages CoreDNS": [
        ("k0s", cm(STOCK_COREFILE, K0S), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("k0s, a rewrite elsewhere", cm(CONFLICT, K0S), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("addon manager", cm(STOCK_COREFILE, ADDON), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("k3s without the import", cm(STOCK_COREFILE, K3S), {}, ("False", DNS.MANAGED_BY_DISTRIBUTION, 0)),
        ("the line is live: the check before's", cm(HAND_MADE, K0S), {}, None),
        ("plain Corefile", cm(STOCK_COREFILE), {}, None),
        ("import mode", imports({}), {}, None),
    ],
    "no conflicting rewrite by hand": [
        ("to another host", cm(CONFLICT), {}, ("False", DNS.CONFLICTING_REWRITE, 0)),
        ("twice", cm(TWO), {}, ("False", DNS.CONFLICTING_REWRITE, 0)),
        ("in a server block of its own", cm(OWN_BLOCK), {}, ("False", DNS.CONFLICTING_REWRITE, 0)),
        (
            "an admin's key elsewhere",
            imports({"a.override": f"rewrite name {DOMAIN} {ELSEWHERE}\n"}),
            {},
            ("False", DNS.CONFLICTING_REWRITE, 0),
        ),
        ("the checklist's line", cm(HAND_MADE), {}, None),
        ("opted in: taken over", DnsFacts(corefile_cm=opted_in(CONFLICT, NAME)), {}, None),
        ("managed: not judged", cm(CONFLICT, K0S), {}, None),
        ("none", cm(OURS), {}, None),
    ],
    "rewrite by hand to the gateway": [
        ("the checklist's line", cm(HAND_MADE), {}, ("True", DNS.REWRITE_FOUND, 0)),
        ("the line beside our block: ours goes", cm(BOTH), {}, ("True", DNS.REWRITE_FOUND, 1)),
        ("dry run: ours stays", cm(BOTH), DRY, ("True", DNS.REWRITE_FOUND, 0)),
        ("an admin's key", imports({"a.override": HAND_LINE.strip() + "\n"}), {}, ("True", DNS.REWRITE_FOUND, 0)),
        (
            "an admin's key beside ours: ours goes",
            imports({"a.override": HAND_LINE.strip(), OVERRIDE_KEY: OVERRIDE}),
            {},
            ("True", DNS.REWRITE_FOUND, 1),
        ),
        ("to another host: the check before's", cm(CONFLICT), {}, None),
        ("opted in: taken over", DnsFacts(corefile_cm=opted_in(HAND_MADE, NAME)), {}, None),
        ("none", cm(STOCK_COREFILE), {}, None),
    ],
    "nothing to write (dry run)": [
        ("block missing", cm(STOCK_COREFILE), DRY, ("False", DNS.WOULD_CONFIGURE, 0)),
        ("key missing", imports({}), DRY, ("False", DNS.WOULD_CONFIGURE, 0)),
        (
            "opted in: the takeover",
            DnsFacts(corefile_cm=opted_in(HAND_MADE, NAME)),
            DRY,
            ("False", DNS.WOULD_CONFIGURE, 0),
        ),
        ("block right", cm(OURS), DRY, None),
        ("key right", imports({OVERRIDE_KEY: OVERRIDE}), DRY, None),
        ("not a dry run", cm(STOCK_COREFILE), {}, None),
        ("managed: not judged", cm(STOCK_COREFILE, K0S), DRY, None),
    ],
}
ROWS = [
    pytest.param(name, facts, options, found, id=f"{name}: {row_id}")
    for name, rows in TABLE.items()
    for row_id, facts, options, found in rows
]


def summary(plan: verdict.DnsPlan | None) -> Found:
    if plan is None:
        return None
    cond = plan.verdict.condition
    return (cond.status, cond.reason, len(plan.writes))


def test_every_check_has_a_table() -> None:
    assert list(TABLE) == list(verdict.COREDNS_CHECKS.names)


@pytest.mark.parametrize(("name", "facts", "options", "found"), ROWS)
def test_check(name: str, facts: DnsFacts, options: dict[str, Any], found: Found) -> None:
    (check,) = [c for c in verdict.COREDNS_CHECKS if c.name == name]
    assert summary(check.run(subject(facts, **options))) == found


def test_chain_order() -> None:
    assert verdict.COREDNS_CHECKS.names == (
        "RKE2's chart ConfigMap rewrites the domain",
        "RKE2's chart manages CoreDNS",
        "CoreDNS ConfigMap exists",
        "Corefile editable safely",
        "Kamaji writes its Corefile back",
        "live Corefile rewrites the domain (managed)",
        "distribution manages CoreDNS",
        "no conflicting rewrite by hand",
        "rewrite by hand to the gateway",
        "nothing to write (dry run)",
    )
    # Findings come in chain order: a dry run would add our block beside a conflicting line, but
    # the conflict is what DNSReady says.
    found = verdict.COREDNS_CHECKS.every(subject(cm(CONFLICT), dry_run=True))
    assert [(f.check, f.value.verdict.condition.reason) for f in found] == [
        ("no conflicting rewrite by hand", DNS.CONFLICTING_REWRITE),
        ("nothing to write (dry run)", DNS.WOULD_CONFIGURE),
    ]
    dry = verdict.plan(demo(), cm(CONFLICT), now=T0, dry_run=True)
    assert (dry.verdict.condition.reason, dry.writes) == (DNS.CONFLICTING_REWRITE, [])
    # Kamaji's check comes before the managed live rewrite's: a line live now is not RewriteFound.
    assert [f.check for f in verdict.COREDNS_CHECKS.every(subject(cm(HAND_MADE, KAMAJI)))] == [
        "Kamaji writes its Corefile back"
    ]


@pytest.mark.parametrize(
    "facts",
    [
        pytest.param(cm(OURS), id="block right"),
        pytest.param(cm(STOCK_COREFILE), id="block missing"),
        pytest.param(imports({OVERRIDE_KEY: OVERRIDE}), id="key right"),
    ],
)
def test_no_check_finds_then_configured(facts: DnsFacts) -> None:
    s = subject(facts)
    assert verdict.COREDNS_CHECKS.first(s) is None
    plan = verdict.configured(s)
    assert plan.verdict.condition.reason in (DNS.CONFIGURED, DNS.RESTART_REQUIRED, DNS.RELOAD_PENDING)
    assert plan == verdict.plan(demo(), facts, now=T0)


def test_the_subject_computes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The distribution, the wanted Corefile, the live rewrite and the placement: once per decision,
    however many checks ask."""
    calls: dict[str, int] = {}

    def counted(name: str) -> None:
        real = getattr(verdict, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(verdict, name, wrapper)

    for name in ("detect_distribution", "_live_in", "_in_corefile", "_hand_made"):
        counted(name)
    verdict.plan(demo(), cm(STOCK_COREFILE, KAMAJI), now=T0)
    assert calls == {"detect_distribution": 1, "_live_in": 1}
    calls.clear()
    verdict.plan(demo(), cm(STOCK_COREFILE), now=T0, dry_run=True)
    assert calls == {"detect_distribution": 1, "_hand_made": 1, "_in_corefile": 1}
    s = subject(cm(STOCK_COREFILE))
    assert s.wanted is s.wanted
