"""DNSReady under management CoreDNS as a chain of named checks (concerns/dns/verdict.py
``COREDNS_CHECKS``): one table per check (the plan it decides, or None when it passes), and the
chain's order (the first check that finds gives the plan)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests.unit.test_dns_evaluate import (
    K3S_COREFILE,
    OURS,
    OVERRIDE,
    OVERRIDE_KEY,
    STALE,
    T0,
    coredns_cm,
    custom_cm,
    platform,
)

from tenant_platform.api.reasons import DNS
from tenant_platform.concerns.dns import verdict as dns
from tenant_platform.concerns.dns.coredns import CoreDNSTarget
from tenant_platform.concerns.dns.verdict import DnsFacts, OverrideWrite
from tenant_platform.testing.seed import STOCK_COREFILE

RKE2_CM = {"metadata": {"name": "rke2-coredns-rke2-coredns"}}
K0S = {"k0s.k0sproject.io/stack": "coredns"}
NO_KUBERNETES = ".:53 {\n    forward . /etc/resolv.conf\n}\n"


def subject(facts: DnsFacts, *, dry_run: bool = False, seconds: float = 0) -> dns.CoreDNSUnderCheck:
    return dns.CoreDNSUnderCheck(platform(), facts, T0 + timedelta(seconds=seconds), CoreDNSTarget(), dry_run)


def summary(found: dns.DnsPlan | None) -> Any:
    """(status, reason, recorded mode, the kinds of writes) of a plan; None when the check passed."""
    if found is None:
        return None
    cond = found.verdict.condition
    recorded = found.verdict.recorded.dns
    return (cond.status, cond.reason, recorded.mode if recorded else None, [type(w).__name__ for w in found.writes])


REFUSED_MANAGED = ("False", DNS.MANAGED_BY_DISTRIBUTION, "managed", [])


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        pytest.param(DnsFacts(corefile_cm=coredns_cm()), None, id="ConfigMap exists"),
        pytest.param(DnsFacts(), None, id="no ConfigMap, not RKE2"),
        pytest.param(DnsFacts(rke2_cm=RKE2_CM), REFUSED_MANAGED, id="RKE2's chart ConfigMap"),
        pytest.param(DnsFacts(corefile_cm=coredns_cm(), rke2_cm=RKE2_CM), None, id="ConfigMap exists beside it"),
    ],
)
def test_rke2_manages(facts: DnsFacts, expected: Any) -> None:
    found = dns.rke2_manages(subject(facts))
    assert summary(found) == expected
    if found is not None:
        assert "HelmChartConfig named rke2-coredns" in found.verdict.condition.message


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        pytest.param(DnsFacts(corefile_cm=coredns_cm()), None, id="ConfigMap exists"),
        pytest.param(DnsFacts(), ("False", DNS.COREDNS_NOT_FOUND, "managed", []), id="no ConfigMap"),
        pytest.param(DnsFacts(rke2_cm=RKE2_CM), ("False", DNS.COREDNS_NOT_FOUND, "managed", []), id="RKE2 too"),
    ],
)
def test_coredns_not_found(facts: DnsFacts, expected: Any) -> None:
    assert summary(dns.coredns_not_found(subject(facts))) == expected


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        pytest.param(DnsFacts(corefile_cm=coredns_cm()), None, id="our block"),
        pytest.param(DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE)), None, id="stock Corefile"),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(NO_KUBERNETES)),
            ("False", DNS.COREFILE_UNSUPPORTED, "corefile", []),
            id="no kubernetes plugin",
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(NO_KUBERNETES, labels=K0S)),
            ("False", DNS.COREFILE_UNSUPPORTED, "managed", []),
            id="even where the distribution manages it",
        ),
    ],
)
def test_corefile_unsupported(facts: DnsFacts, expected: Any) -> None:
    found = dns.corefile_unsupported(subject(facts))
    assert summary(found) == expected
    if found is not None:
        assert "cannot be edited safely" in found.verdict.condition.message


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        pytest.param(DnsFacts(corefile_cm=coredns_cm()), None, id="generic"),
        pytest.param(DnsFacts(corefile_cm=coredns_cm(K3S_COREFILE)), None, id="imports"),
        pytest.param(DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE, labels=K0S)), REFUSED_MANAGED, id="k0s"),
        pytest.param(DnsFacts(corefile_cm=coredns_cm(NO_KUBERNETES, labels=K0S)), None, id="k0s, uneditable"),
    ],
)
def test_distribution_manages(facts: DnsFacts, expected: Any) -> None:
    found = dns.distribution_manages(subject(facts))
    assert summary(found) == expected
    if found is not None:
        assert "spec:\n  network:\n    coreDNS:\n      patches:" in found.verdict.condition.message


@pytest.mark.parametrize(
    ("facts", "dry_run", "expected"),
    [
        pytest.param(DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE)), False, None, id="not a dry run"),
        pytest.param(DnsFacts(corefile_cm=coredns_cm()), True, None, id="nothing to write"),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE)),
            True,
            ("False", DNS.WOULD_CONFIGURE, "corefile", []),
            id="block missing",
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(K3S_COREFILE), custom_cm=custom_cm({})),
            True,
            ("False", DNS.WOULD_CONFIGURE, "import", []),
            id="import key missing",
        ),
    ],
)
def test_would_configure(facts: DnsFacts, dry_run: bool, expected: Any) -> None:
    assert summary(dns.would_configure(subject(facts, dry_run=dry_run))) == expected


@pytest.mark.parametrize(
    ("facts", "dry_run", "expected", "recheck"),
    [
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm()), False, ("True", DNS.CONFIGURED, "corefile", []), False, id="in place"
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE), pods=STALE),
            False,
            ("False", DNS.RELOAD_PENDING, "corefile", ["CorefileWrite"]),
            True,
            id="block written now: the pods reload it",
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE), pods=STALE),
            True,
            ("False", DNS.RELOAD_PENDING, "corefile", []),
            True,
            id="a dry run writes nothing",
        ),
        pytest.param(
            DnsFacts(
                corefile_cm=coredns_cm(K3S_COREFILE),
                custom_cm=custom_cm({OVERRIDE_KEY: OVERRIDE}, changed=T0),
                pods=STALE,
            ),
            False,
            ("False", DNS.RESTART_REQUIRED, "import", []),
            False,
            id="imported key in place: a restart",
        ),
        pytest.param(
            DnsFacts(corefile_cm=coredns_cm(K3S_COREFILE), custom_cm=custom_cm({}), pods=STALE),
            False,
            ("False", DNS.RESTART_REQUIRED, "import", ["OverrideWrite"]),
            True,
            id="import key written",
        ),
    ],
)
def test_pods_pick_up(facts: DnsFacts, dry_run: bool, expected: Any, recheck: bool) -> None:
    found = dns.pods_pick_up(subject(facts, dry_run=dry_run))
    assert summary(found) == expected
    assert found is not None and found.recheck is recheck


def test_the_chain_order() -> None:
    assert dns.COREDNS_CHECKS.names == (
        "RKE2 configures CoreDNS",
        "CoreDNS ConfigMap exists",
        "Corefile editable",
        "distribution reverts edits",
        "dry run: would configure",
        "pods pick up the rewrite",
    )
    # No ConfigMap at all: RKE2's chart decides before "not found" (which finds too).
    rke2 = subject(DnsFacts(rke2_cm=RKE2_CM))
    assert dns.COREDNS_CHECKS.first(rke2).check == "RKE2 configures CoreDNS"  # type: ignore[union-attr]
    assert dns.coredns_not_found(rke2) is not None
    # An uneditable Corefile is refused before the distribution's advice.
    uneditable = subject(DnsFacts(corefile_cm=coredns_cm(NO_KUBERNETES, labels=K0S)))
    assert dns.COREDNS_CHECKS.first(uneditable).check == "Corefile editable"  # type: ignore[union-attr]
    # A managed distribution in a dry run: the advice, not "would configure".
    managed = subject(DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE, labels=K0S)), dry_run=True)
    assert dns.COREDNS_CHECKS.first(managed).check == "distribution reverts edits"  # type: ignore[union-attr]
    # A dry run with a write due stops before the pickup; the plan is the chain's first finding.
    dry = subject(DnsFacts(corefile_cm=coredns_cm(STOCK_COREFILE)), dry_run=True)
    assert [f.check for f in dns.COREDNS_CHECKS.every(dry)] == ["dry run: would configure", "pods pick up the rewrite"]
    decided = dns.plan(platform(), dry.facts, now=T0, dry_run=True)
    assert decided == dns.would_configure(dry) and not decided.writes
    # Our block in place and our old import key left: the pickup, with the key's removal.
    moved = subject(DnsFacts(corefile_cm=coredns_cm(OURS), custom_cm=custom_cm({OVERRIDE_KEY: OVERRIDE})))
    assert [f.check for f in dns.COREDNS_CHECKS.every(moved)] == ["pods pick up the rewrite"]
    assert dns.plan(platform(), moved.facts, now=T0).writes == [OverrideWrite(OVERRIDE_KEY, None)]
