"""NamespacesReady decided without a cluster (status/namespaces.py): one row per reason, then what
is labelled, adopted, released and remembered in ``status.managed``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common, Namespaces
from tenant_platform.render import namespaces as render_ns
from tenant_platform.status import namespaces as evaluate_ns
from tenant_platform.status.namespaces import NamespaceFacts, NamespacesFacts

NAME = "demo"


def platform(managed: list[str] | None = None, **spec: Any) -> TenantPlatform:
    body: dict[str, Any] = {
        "metadata": {"name": NAME, "uid": "u-1"},
        "spec": {"namespace": "kamiwaza", "domain": "kamiwaza.example.com", **spec},
    }
    if managed is not None:
        body["status"] = {"managed": {"namespaces": managed}}
    return TenantPlatform.from_body(body)


def ns(
    name: str,
    *,
    exists: bool = True,
    claim: str | None = None,
    terminating: bool = False,
    created: bool = False,
    error: str | None = None,
) -> NamespaceFacts:
    if error is not None:
        return NamespaceFacts(name, error=error)
    if not exists:
        return NamespaceFacts(name)
    live = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    return NamespaceFacts(name, live=live, claim=claim, terminating=terminating, created_by_operator=created)


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


ROWS = {
    "reconciled: created and adopted": Row(
        NamespacesFacts((ns("kamiwaza", exists=False), ns("extra", claim=NAME))),
        "True",
        Namespaces.RECONCILED,
        "Namespaces kamiwaza, extra exist with injection and Pod Security warn/audit labels.",
        spec={"additionalNamespaces": ["extra"]},
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
        NamespacesFacts((ns("kamiwaza"),), (ns("gone", claim=NAME),)),
        "False",
        Common.API_ERROR,
        "Could not label: kamiwaza: denied; releasing gone: also denied.",
        failed={"kamiwaza": "denied", "gone": "also denied"},
        managed=["gone"],
    ),
    "api error: reading a dropped namespace failed": Row(
        NamespacesFacts((ns("kamiwaza"),), (ns("gone", error="timeout"),)),
        "False",
        Common.API_ERROR,
        "Could not label: releasing gone: timeout.",
        managed=["gone"],
    ),
    "terminating": Row(
        NamespacesFacts((ns("kamiwaza", claim=NAME, terminating=True),)),
        "False",
        Namespaces.TERMINATING,
        "Namespace is terminating; it will be recreated once gone: kamiwaza.",
    ),
    "would create (dry run)": Row(
        NamespacesFacts((ns("kamiwaza", exists=False), ns("extra"))),
        "False",
        Namespaces.WOULD_CREATE,
        "The operator would create namespaces: kamiwaza.",
        spec={"additionalNamespaces": ["extra"]},
        dry_run=True,
    ),
    "reconciled (dry run, everything exists)": Row(
        NamespacesFacts((ns("kamiwaza", claim=NAME),)),
        "True",
        Namespaces.RECONCILED,
        "Namespaces kamiwaza exist",
        dry_run=True,
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_condition(row: Row) -> None:
    verdict = evaluate_ns.evaluate(platform(row.managed, **row.spec), row.facts, dry_run=row.dry_run, failed=row.failed)
    cond = verdict.condition
    assert (cond.type, cond.status, cond.reason) == ("NamespacesReady", row.status, row.reason)
    assert row.message in cond.message
    assert verdict.progressing == (row.reason == Namespaces.TERMINATING)
    assert verdict.requeue_after == (5.0 if row.reason == Namespaces.TERMINATING else None)


def test_every_namespaces_reason_has_a_row() -> None:
    assert {r.reason for r in ROWS.values()} >= set(Namespaces) | {Common.CONFLICT, Common.API_ERROR}


def test_writes_label_created_and_adopted_namespaces_and_release_dropped_ones() -> None:
    p = platform(["gone", "theirs", "absent"], additionalNamespaces=["adopted", "mine", "claimed", "dying"])
    facts = NamespacesFacts(
        (
            ns("kamiwaza", exists=False),
            ns("adopted"),
            ns("mine", claim=NAME, created=True),
            ns("claimed", claim="other"),
            ns("dying", terminating=True),
        ),
        (ns("gone", claim=NAME), ns("theirs", claim="other"), ns("absent", exists=False)),
    )
    writes = evaluate_ns.writes(p, facts, dry_run=False)
    assert writes.label == (
        render_ns.render_namespace(p, "kamiwaza", created=True),
        render_ns.render_namespace(p, "adopted", created=False),
        render_ns.render_namespace(p, "mine", created=True),
    )
    assert "annotations" not in writes.label[1]["metadata"], "an adopted namespace is never marked deletable"
    assert writes.release == (render_ns.release_intent("gone"),)
    assert evaluate_ns.writes(p, facts, dry_run=True) == evaluate_ns.Writes()


def test_managed_remembers_what_we_labelled_and_is_not_written_in_a_dry_run() -> None:
    p = platform(["gone"], additionalNamespaces=["b", "claimed", "dying"])
    facts = NamespacesFacts(
        (ns("kamiwaza"), ns("b", exists=False), ns("claimed", claim="other"), ns("dying", terminating=True)),
        (ns("gone", claim=NAME),),
    )
    assert evaluate_ns.evaluate(p, facts).sections == {"managed": {"namespaces": ["b", "dying", "kamiwaza"]}}
    failed = evaluate_ns.evaluate(p, facts, failed={"b": "no", "gone": "no"})
    assert failed.sections == {"managed": {"namespaces": ["dying", "gone", "kamiwaza"]}}
    assert evaluate_ns.evaluate(p, facts, dry_run=True).sections == {}
    assert evaluate_ns.evaluate(platform(), NamespacesFacts(())).sections == {"managed": {"namespaces": []}}


def test_dropped_names_are_the_managed_ones_the_spec_no_longer_names() -> None:
    assert evaluate_ns.dropped_names(platform(["kamiwaza", "old"])) == ["old"]
    assert evaluate_ns.dropped_names(platform()) == []
