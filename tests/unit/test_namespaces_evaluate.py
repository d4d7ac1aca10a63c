"""NamespacesReady decided without a cluster (concerns/namespaces/verdict.py): one row per reason, then what
is labelled, adopted, released and remembered in ``status.managed``."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import constants
from tenant_platform.api.reasons import Common, Namespaces
from tenant_platform.concerns.namespaces import manifests
from tenant_platform.concerns.namespaces import verdict as evaluate_ns
from tenant_platform.concerns.namespaces.verdict import NamespaceFacts, NamespacesFacts
from tenant_platform.core import ownership

NAME = "demo"


demo = partial(platform, NAME, namespace="kamiwaza", uid="u-1", domain="kamiwaza.example.com")


def managed(namespaces: list[str] | None) -> dict[str, Any] | None:
    """A status that lists ``namespaces`` as managed (None: no status)."""
    return None if namespaces is None else {"managed": {"namespaces": namespaces}}


def ns(
    name: str,
    *,
    exists: bool = True,
    claim: str | None = None,
    terminating: bool = False,
    created: bool = False,
    adoptable_by: str | None = None,
    error: str | None = None,
) -> NamespaceFacts:
    if error is not None:
        return NamespaceFacts(name, error=error)
    if not exists:
        return NamespaceFacts(name)
    live: dict[str, object] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if adoptable_by is not None:  # as an admin writes it: the annotation, read by the one parser
        live["metadata"] = {"name": name, "annotations": {constants.ANNOTATION_ADOPTABLE: adoptable_by}}
    return NamespaceFacts(
        name,
        live=live,
        claim=claim,
        terminating=terminating,
        created_by_operator=created,
        adoptable_by=tuple(ownership.adoptable_by(live)),
    )


PROTECTION = evaluate_ns.Protection("tp-system", ("flux-system", "argocd"))


@dataclass(frozen=True)
class Row:
    facts: NamespacesFacts
    status: str
    reason: str
    message: str
    spec: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False
    failed: dict[str, str] = field(default_factory=dict)
    managed: list[str] | None = None
    owned: tuple[str, ...] = ()


ROWS = {
    "reconciled: created, ours, and adopted by an admin's opt-in": Row(
        NamespacesFacts(
            (ns("kamiwaza", exists=False), ns("extra", claim=NAME), ns("optin", adoptable_by=NAME)),
        ),
        "True",
        Namespaces.RECONCILED,
        "Namespaces kamiwaza, extra, optin exist with injection and Pod Security warn/audit labels.",
        spec={"additionalNamespaces": ["extra", "optin"]},
        owned=("kamiwaza", "extra", "optin"),
    ),
    "adopted: the annotation lists several platforms, this one among them": Row(
        NamespacesFacts((ns("kamiwaza", exists=False), ns("shared", adoptable_by=f"other, {NAME} ,third"))),
        "True",
        Namespaces.RECONCILED,
        "Namespaces kamiwaza, shared exist with injection and Pod Security warn/audit labels.",
        spec={"additionalNamespaces": ["shared"]},
        owned=("kamiwaza", "shared"),
    ),
    "not adoptable: a list naming others only, one a prefix of this platform's name": Row(
        NamespacesFacts((ns("kamiwaza", exists=False), ns("shared", adoptable_by=f"{NAME}-2,{NAME[:-1]}"))),
        "False",
        Namespaces.NOT_ADOPTABLE,
        "Namespace exists and is not ours to adopt, left untouched: shared (",
        spec={"additionalNamespaces": ["shared"]},
        owned=("kamiwaza",),
    ),
    "not adoptable: an existing namespace nobody opted in": Row(
        NamespacesFacts((ns("kamiwaza", exists=False), ns("team-a"), ns("team-b", adoptable_by="someone-else"))),
        "False",
        Namespaces.NOT_ADOPTABLE,
        "Namespace exists and is not ours to adopt, left untouched: team-a (it exists and was not opted in "
        "(annotate it tenancy.dev/adoptable-by=demo)), team-b (",
        spec={"additionalNamespaces": ["team-a", "team-b"]},
        owned=("kamiwaza",),
    ),
    "protected: the operator's own namespace, even opted in": Row(
        NamespacesFacts((ns("tp-system", adoptable_by=NAME),)),
        "False",
        Namespaces.PROTECTED,
        "Namespace is protected, never created or adopted by a TenantPlatform: tp-system (the operator's own "
        "namespace).",
        spec={"namespace": "tp-system"},
    ),
    "protected: istio-system, the gateway's, a deny-listed tool's, even absent": Row(
        NamespacesFacts(
            (ns("kamiwaza", claim=NAME), ns("istio-system"), ns("edge", exists=False), ns("argocd", exists=False))
        ),
        "False",
        Namespaces.PROTECTED,
        "istio-system (a system namespace), edge (the gateway's namespace (spec.gateway.namespace)), argocd (on "
        "the operator's list of protected namespaces)",
        spec={"additionalNamespaces": ["istio-system", "edge", "argocd"], "gateway": {"namespace": "edge"}},
        owned=("kamiwaza",),
    ),
    "conflict outranks protected, and names the rest": Row(
        NamespacesFacts((ns("kamiwaza", claim="other"), ns("flux-system"))),
        "False",
        Common.CONFLICT,
        "delete the other platform. Also refused: flux-system (on the operator's list of protected namespaces).",
        spec={"additionalNamespaces": ["flux-system"]},
    ),
    "conflict: claimed by another platform": Row(
        NamespacesFacts((ns("kamiwaza", claim="other"),)),
        "False",
        Common.CONFLICT,
        "Namespace already claimed by another TenantPlatform, left untouched: kamiwaza (claimed by TenantPlatform "
        "other). Choose another spec.namespace/additionalNamespaces or delete the other platform.",
    ),
    "conflict outranks an API error": Row(
        NamespacesFacts((ns("kamiwaza", error="boom"), ns("extra", claim="other"))),
        "False",
        Common.CONFLICT,
        "extra (claimed by TenantPlatform other)",
        spec={"additionalNamespaces": ["extra"]},
    ),
    "api error: a read failed": Row(
        NamespacesFacts((ns("kamiwaza", error="etcd is sad"),)),
        "False",
        Common.API_ERROR,
        "Could not label: kamiwaza: etcd is sad.",
    ),
    "api error: a write failed, a release failed": Row(
        NamespacesFacts((ns("kamiwaza", claim=NAME),), (ns("gone", claim=NAME),)),
        "False",
        Common.API_ERROR,
        "Could not label: kamiwaza: denied; releasing gone: also denied.",
        failed={"kamiwaza": "denied", "gone": "also denied"},
        managed=["gone"],
    ),
    "api error: reading a dropped namespace failed": Row(
        NamespacesFacts((ns("kamiwaza", claim=NAME),), (ns("gone", error="timeout"),)),
        "False",
        Common.API_ERROR,
        "Could not label: releasing gone: timeout.",
        managed=["gone"],
        owned=("kamiwaza",),
    ),
    "terminating": Row(
        NamespacesFacts((ns("kamiwaza", claim=NAME, terminating=True),)),
        "False",
        Namespaces.TERMINATING,
        "Namespace is terminating; it will be recreated once gone: kamiwaza.",
    ),
    "would create (dry run)": Row(
        NamespacesFacts((ns("kamiwaza", exists=False), ns("extra", claim=NAME))),
        "False",
        Namespaces.WOULD_CREATE,
        "The operator would create namespaces: kamiwaza.",
        spec={"additionalNamespaces": ["extra"]},
        dry_run=True,
        owned=("kamiwaza", "extra"),
    ),
    "reconciled (dry run, everything exists)": Row(
        NamespacesFacts((ns("kamiwaza", claim=NAME),)),
        "True",
        Namespaces.RECONCILED,
        "Namespaces kamiwaza exist",
        dry_run=True,
        owned=("kamiwaza",),
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_condition(row: Row) -> None:
    p = demo(status=managed(row.managed), **row.spec)
    verdict = evaluate_ns.evaluate(p, row.facts, dry_run=row.dry_run, failed=row.failed, protection=PROTECTION)
    cond = verdict.condition
    assert (cond.type, cond.status, cond.reason) == ("NamespacesReady", row.status, row.reason)
    assert row.message in cond.message
    # What the write gate is told: the platform owns exactly these, and every other one is refused.
    claims = evaluate_ns.claims(p, row.facts, dry_run=row.dry_run, failed=row.failed, protection=PROTECTION)
    assert claims.owned == row.owned
    assert set(claims.refused) == set(p.spec.all_namespaces) - set(row.owned)
    assert verdict.failed == (row.facts.read_failed or bool(row.failed))
    assert verdict.progressing == (row.reason == Namespaces.TERMINATING)
    assert verdict.requeue_after == (5.0 if row.reason == Namespaces.TERMINATING else None)


def test_every_namespaces_reason_has_a_row() -> None:
    assert {r.reason for r in ROWS.values()} >= set(Namespaces) | {Common.CONFLICT, Common.API_ERROR}


def test_an_existing_namespace_is_labelled_only_once_claimed_or_opted_in() -> None:
    p = demo(additionalNamespaces=["plain", "optin", "theirs-optin", "system"])
    facts = NamespacesFacts(
        (
            ns("kamiwaza", claim=NAME),
            ns("plain"),
            ns("optin", adoptable_by=NAME),
            ns("theirs-optin", adoptable_by="other"),
            ns("system", adoptable_by=NAME),
        )
    )
    protection = evaluate_ns.Protection("tp-system", ("system",))
    labelled = [w["metadata"]["name"] for w in evaluate_ns.writes(p, facts, dry_run=False, protection=protection).label]
    assert labelled == ["kamiwaza", "optin"]


def test_writes_label_created_and_adopted_namespaces_and_release_dropped_ones() -> None:
    p = demo(status=managed(["gone", "theirs", "absent"]), additionalNamespaces=["adopted", "mine", "claimed", "dying"])
    facts = NamespacesFacts(
        (
            ns("kamiwaza", exists=False),
            ns("adopted", adoptable_by=NAME),
            ns("mine", claim=NAME, created=True),
            ns("claimed", claim="other"),
            ns("dying", terminating=True),
        ),
        (ns("gone", claim=NAME), ns("theirs", claim="other"), ns("absent", exists=False)),
    )
    writes = evaluate_ns.writes(p, facts, dry_run=False)
    assert writes.label == (
        manifests.render_namespace(p, "kamiwaza", created=True),
        manifests.render_namespace(p, "adopted", created=False),
        manifests.render_namespace(p, "mine", created=True),
    )
    assert "annotations" not in writes.label[1]["metadata"], "an adopted namespace is never marked deletable"
    assert writes.release == (manifests.release_intent("gone"),)
    assert evaluate_ns.writes(p, facts, dry_run=True) == evaluate_ns.Writes()


def test_managed_remembers_what_we_labelled_and_is_not_written_in_a_dry_run() -> None:
    p = demo(status=managed(["gone"]), additionalNamespaces=["b", "claimed", "dying"])
    facts = NamespacesFacts(
        (
            ns("kamiwaza", claim=NAME),
            ns("b", exists=False),
            ns("claimed", claim="other"),
            ns("dying", claim=NAME, terminating=True),
        ),
        (ns("gone", claim=NAME),),
    )
    assert evaluate_ns.evaluate(p, facts).sections == {"managed": {"namespaces": ["b", "dying", "kamiwaza"]}}
    failed = evaluate_ns.evaluate(p, facts, failed={"b": "no", "gone": "no"})
    assert failed.sections == {"managed": {"namespaces": ["dying", "gone", "kamiwaza"]}}
    assert evaluate_ns.evaluate(p, facts, dry_run=True).sections == {}
    assert evaluate_ns.evaluate(demo(), NamespacesFacts(())).sections == {"managed": {"namespaces": []}}


def test_dropped_names_are_the_managed_ones_the_spec_no_longer_names() -> None:
    assert evaluate_ns.dropped_names(demo(status=managed(["kamiwaza", "old"]))) == ["old"]
    assert evaluate_ns.dropped_names(demo()) == []


def test_dropped_names_come_from_the_claim_labels_even_when_status_forgot_them() -> None:
    # Killed between labelling "extra" and the first status write: status.managed is empty.
    assert evaluate_ns.dropped_names(demo(), labelled=["kamiwaza", "extra"]) == ["extra"]
    assert evaluate_ns.dropped_names(demo(status=managed(["old"])), labelled=["extra"]) == ["extra", "old"]
