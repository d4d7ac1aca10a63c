"""The edgecert step's pure verdict (status/edgecert.evaluate): one row per EdgeCertificateReady reason,
then issuance, the trust ConfigMap, the requeue and what is recorded."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from copy import deepcopy
from dataclasses import replace
from functools import partial
from typing import Any, NamedTuple

import pytest
from tests.support import platform

from tenant_platform.api import constants
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.concerns.edgecert import verdict as edgecert
from tenant_platform.testing import certs as factory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DOMAIN = "kamiwaza.example.com"
GW = "istio-system"
SECRET = "kamiwaza-edge-tls"
TRUST = "kamiwaza-edge-trust"


demo = partial(platform, "demo", namespace="kamiwaza", domain=DOMAIN, edgeCertificate={})


def leaf_secret(names: tuple[str, ...] = (DOMAIN,), **dates: dt.datetime) -> dict[str, Any]:
    leaf = factory.make_leaf(list(names), now=NOW, **dates)
    return factory.tls_secret(SECRET, GW, chain=[leaf.cert], key=leaf.key)


def key_mismatch() -> dict[str, Any]:
    leaf = factory.make_leaf([DOMAIN], now=NOW)
    return factory.tls_secret(SECRET, GW, chain=[leaf.cert], key=factory.new_key())


def chain_invalid() -> dict[str, Any]:
    root, other = factory.make_ca(now=NOW), factory.make_ca("unrelated CA", now=NOW)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=root)
    return factory.tls_secret(SECRET, GW, chain=[leaf.cert, other.cert], key=leaf.key)


def publicly_trusted() -> dict[str, Any]:
    root = factory.make_ca(now=NOW)
    inter = factory.make_ca("intermediate", now=NOW, parent=root)
    leaf = factory.make_leaf([DOMAIN], now=NOW, issuer=inter)
    return factory.tls_secret(SECRET, GW, chain=[leaf.cert, inter.cert], key=leaf.key)


def malformed() -> dict[str, Any]:
    secret = leaf_secret()
    secret["data"]["tls.crt"] = base64.b64encode(b"not a certificate").decode()
    return secret


def wrong_type() -> dict[str, Any]:
    secret = leaf_secret()
    secret["type"] = "Opaque"
    return secret


def facts(secret: dict[str, Any] | None, **changes: Any) -> edgecert.EdgeCertFacts:
    """The tenant namespace exists and holds no trust ConfigMap yet; the Secret is not ours."""
    return replace(edgecert.EdgeCertFacts(secret=secret, namespace_exists=True), **changes)


SELF_SIGNED = {"issuer": "SelfSigned"}
CERT_MANAGER = {"issuer": "CertManager", "issuerRef": {"name": "selfsigned"}}


def cm_certificate(**conditions: tuple[str, str, str]) -> dict[str, Any]:
    """A Certificate of ours as cert-manager leaves it: {type: (status, reason, message)}."""
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": SECRET, "namespace": GW, "generation": 1, "uid": "c-1"},
        "status": {
            "conditions": [
                {"type": t, "status": st, "reason": r, "message": m, "observedGeneration": 1}
                for t, (st, r, m) in conditions.items()
            ]
        },
    }


CM_PENDING = {
    "certificate": cm_certificate(
        Ready=("False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
        Issuing=("True", "DoesNotExist", "Issuing certificate as Secret does not exist"),
    ),
    "certificate_owner": "demo",
}
CM_FAILED = {
    "certificate": cm_certificate(
        Ready=("False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
        Issuing=("False", "Failed", "The certificate request has failed to complete and will be retried: boom"),
    ),
    "certificate_owner": "demo",
}


class Row(NamedTuple):
    name: str
    secret: Callable[[], dict[str, Any] | None]
    changes: dict[str, Any]
    """Changes to ``facts(secret)``."""
    edge: dict[str, Any]
    """spec.edgeCertificate."""
    dry_run: bool
    status: str
    reason: str
    fragment: str
    """A piece of the expected message."""


ROWS = [
    Row(
        "valid",
        leaf_secret,
        {},
        {},
        False,
        "True",
        Reason.VALID,
        f"Published for clients in ConfigMap kamiwaza/{TRUST}",
    ),
    Row("secret not found", lambda: None, {}, {}, False, "False", Reason.SECRET_NOT_FOUND, f"{GW}/{SECRET} does not"),
    Row("wrong type", wrong_type, {}, {}, False, "False", Reason.WRONG_SECRET_TYPE, "has type Opaque"),
    Row("malformed", malformed, {}, {}, False, "False", Reason.MALFORMED, "tls.crt holds no readable PEM certificate"),
    Row("key mismatch", key_mismatch, {}, {}, False, "False", Reason.KEY_MISMATCH, "tls.key is not the private key"),
    Row("chain invalid", chain_invalid, {}, {}, False, "False", Reason.CHAIN_INVALID, "order the chain leaf first"),
    Row(
        "domain not covered",
        lambda: leaf_secret(("other.example.com",)),
        {},
        {},
        False,
        "False",
        Reason.DOMAIN_NOT_COVERED,
        f"DNS names (other.example.com) do not cover {DOMAIN}",
    ),
    Row(
        "not yet valid",
        lambda: leaf_secret(not_before=NOW + dt.timedelta(days=1)),
        {},
        {},
        False,
        "False",
        Reason.NOT_YET_VALID,
        "not valid before 2026-06-02T12:00:00Z",
    ),
    Row(
        "expired",
        lambda: leaf_secret(not_before=NOW - dt.timedelta(days=9), not_after=NOW - dt.timedelta(days=1)),
        {},
        {},
        False,
        "False",
        Reason.EXPIRED,
        "expired at 2026-05-31T12:00:00Z",
    ),
    Row(
        "expiring soon",
        lambda: leaf_secret(not_after=NOW + dt.timedelta(days=10)),
        {},
        {},
        False,
        "False",
        Reason.EXPIRING_SOON,
        "within renewBefore (720h)",
    ),
    Row(
        "would issue",
        lambda: None,
        {},
        SELF_SIGNED,
        True,
        "False",
        Reason.WOULD_ISSUE,
        "does not exist. The operator would issue a self-signed certificate (SecretNotFound).",
    ),
    Row(
        "namespace missing",
        leaf_secret,
        {"namespace_exists": False},
        {},
        False,
        "False",
        Reason.NAMESPACE_MISSING,
        f"The trust ConfigMap kamiwaza/{TRUST} waits for namespace kamiwaza to exist.",
    ),
    Row(
        "conflict",
        lambda: leaf_secret(not_before=NOW - dt.timedelta(days=9), not_after=NOW - dt.timedelta(days=1)),
        {"secret_owner": ""},
        SELF_SIGNED,
        False,
        "False",
        Common.CONFLICT,
        f"but Secret {GW}/{SECRET} belongs to someone else (it lacks our labels), so it was left untouched",
    ),
    Row(
        "cert-manager pending",
        lambda: None,
        CM_PENDING,
        CERT_MANAGER,
        False,
        "False",
        Reason.CERTIFICATE_PENDING,
        "is not Ready yet (Ready: False, DoesNotExist: Issuing certificate as Secret does not exist",
    ),
    Row(
        "cert-manager failed",
        lambda: None,
        CM_FAILED,
        CERT_MANAGER,
        False,
        "False",
        Reason.CERTIFICATE_FAILED,
        "Issuing: False, Failed: The certificate request has failed to complete and will be retried: boom",
    ),
    Row(
        "cert-manager not installed",
        lambda: None,
        {"certificate_served": False},
        CERT_MANAGER,
        False,
        "False",
        Reason.CERT_MANAGER_NOT_INSTALLED,
        "cert-manager.io/v1 Certificate is not served",
    ),
]


def test_every_reason_has_a_row() -> None:
    assert {row.reason for row in ROWS} == {*Reason, Common.CONFLICT}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_evaluate(row: Row) -> None:
    plan = edgecert.plan(
        demo(edgeCertificate=row.edge), facts(row.secret(), **row.changes), now=NOW, dry_run=row.dry_run
    )
    verdict = plan.verdict
    cond = verdict.condition
    expected = (constants.EDGE_CERTIFICATE_READY, row.status, row.reason)
    assert (cond.type, cond.status, cond.reason) == expected, cond.message
    assert row.fragment in cond.message
    assert "PRIVATE KEY" not in cond.message
    assert plan.issue is None
    assert verdict.progressing is (row.reason in (Reason.NAMESPACE_MISSING, Reason.CERTIFICATE_PENDING))


def test_self_signed_issues_for_a_missing_secret_then_reports_the_new_one() -> None:
    first = edgecert.plan(demo(edgeCertificate=SELF_SIGNED), facts(None), now=NOW)
    assert first.issue is not None
    assert (first.issue.because, first.issue.replace) == (Reason.SECRET_NOT_FOUND, False)
    assert first.issue.validity == dt.timedelta(days=90)
    assert first.issue.event == (
        "Normal",
        "CertificateIssued",
        f"Issued a self-signed certificate for {DOMAIN} in Secret {GW}/{SECRET}.",
    )
    assert not first.publish

    issued = facts(leaf_secret(), secret_owner="demo", issued_for=Reason.SECRET_NOT_FOUND)
    second = edgecert.plan(demo(edgeCertificate=SELF_SIGNED), issued, now=NOW)
    assert second.issue is None
    assert second.verdict.condition.reason == Reason.VALID
    assert second.verdict.condition.message.endswith("(issued a self-signed certificate (SecretNotFound))")
    assert second.publish
    (trust,) = second.verdict.desired
    assert (trust["kind"], trust["metadata"]["name"]) == ("ConfigMap", TRUST)
    assert "PRIVATE KEY" not in trust["data"]["ca-certificates.crt"]


def test_evaluate_is_the_plans_verdict() -> None:
    secret = leaf_secret()
    for spec in ({}, SELF_SIGNED):
        for f in (facts(None), facts(secret), facts(secret, namespace_exists=False)):
            planned = edgecert.plan(demo(edgeCertificate=spec), f, now=NOW)
            assert edgecert.evaluate(demo(edgeCertificate=spec), f, now=NOW) == planned.verdict


def test_never_issues_twice_in_a_pass() -> None:
    expired = leaf_secret(not_before=NOW - dt.timedelta(days=9), not_after=NOW - dt.timedelta(days=1))
    plan = edgecert.plan(
        demo(edgeCertificate=SELF_SIGNED), facts(expired, secret_owner="demo", issued_for=Reason.EXPIRED), now=NOW
    )
    assert plan.issue is None
    assert plan.verdict.condition.reason == Reason.EXPIRED


def test_a_secret_of_ours_with_the_wrong_type_is_replaced() -> None:
    plan = edgecert.plan(demo(edgeCertificate=SELF_SIGNED), facts(wrong_type(), secret_owner="demo"), now=NOW)
    assert plan.issue is not None
    assert (plan.issue.because, plan.issue.replace) == (Reason.WRONG_SECRET_TYPE, True)
    # Not ours: reported, never re-created.
    other = edgecert.plan(demo(edgeCertificate=SELF_SIGNED), facts(wrong_type()), now=NOW)
    assert other.issue is None and other.verdict.condition.reason == Reason.WRONG_SECRET_TYPE


def test_a_trust_config_map_that_is_not_ours_is_a_conflict() -> None:
    live = {"metadata": {"name": TRUST, "namespace": "kamiwaza"}}
    plan = edgecert.plan(demo(), facts(leaf_secret(), trust_map=live, trust_map_owner="other"), now=NOW)
    verdict = plan.verdict
    assert verdict.condition.reason == Common.CONFLICT
    assert (
        f"ConfigMap kamiwaza/{TRUST} belongs to TenantPlatform other, so the trust bundle" in verdict.condition.message
    )
    assert not plan.publish


HAND_MADE = {"metadata": {"name": TRUST, "namespace": "kamiwaza"}, "data": {"ca-certificates.crt": "old"}}


def opted_in(*names: str) -> dict[str, Any]:
    """The checklist's hand-made trust ConfigMap, annotated by an admin for ``names``."""
    live = deepcopy(HAND_MADE)
    live["metadata"]["annotations"] = {constants.ANNOTATION_ADOPTABLE: ",".join(names)}
    return live


# A hand-made trust ConfigMap (docs/migration.md): adopted in place only when opted in for this
# platform and carrying no one's labels. (trust_map, trust_map_owner, reason, published)
TAKEOVER = [
    pytest.param(HAND_MADE, "", Common.CONFLICT, False, id="hand-made, not opted in"),
    pytest.param(opted_in("someone-else"), "", Common.CONFLICT, False, id="opted in for another platform"),
    pytest.param(opted_in("demo"), "other", Common.CONFLICT, False, id="another platform's, annotated for us"),
    pytest.param(opted_in("demo"), "", Reason.VALID, True, id="opted in: adopted"),
    pytest.param(opted_in("x", " demo"), "", Reason.VALID, True, id="opted in among several"),
]


@pytest.mark.parametrize(("live", "owner", "reason", "published"), TAKEOVER)
def test_a_hand_made_trust_config_map_is_adopted_only_when_opted_in(
    live: dict[str, Any], owner: str, reason: str, published: bool
) -> None:
    plan = edgecert.plan(demo(), facts(leaf_secret(), trust_map=live, trust_map_owner=owner), now=NOW)
    verdict = plan.verdict
    assert verdict.condition.reason == reason, verdict.condition.message
    assert plan.publish is published
    if published:
        (trust,) = verdict.desired
        assert trust["metadata"]["name"] == TRUST  # the same object, applied in place
    elif not owner:
        assert f"annotate it {constants.ANNOTATION_ADOPTABLE}=demo" in verdict.condition.message


def test_a_publicly_trusted_chain_prunes_the_bundle_and_a_dry_run_touches_nothing() -> None:
    plan = edgecert.plan(demo(), facts(publicly_trusted()), now=NOW)
    verdict = plan.verdict
    assert verdict.condition.reason == Reason.VALID
    assert plan.publish and verdict.desired == []
    assert verdict.recorded.dump()["edgeCertificate"]["publiclyTrusted"] is True
    assert "trustConfigMap" not in verdict.recorded.dump()["edgeCertificate"]

    dry = edgecert.plan(demo(), facts(leaf_secret(), namespace_exists=False), now=NOW, dry_run=True)
    assert dry.verdict.condition.reason == Reason.VALID
    assert not dry.publish and dry.verdict.desired == []


def test_recorded_facts_and_expiry() -> None:
    plan = edgecert.plan(demo(), facts(leaf_secret()), now=NOW)
    verdict = plan.verdict
    assert verdict.recorded.dump() == {
        "edgeCertificate": {
            "secretName": SECRET,
            "namespace": GW,
            "issuerMode": "External",
            "selfSigned": True,
            "notBefore": "2026-05-31T12:00:00Z",
            "notAfter": "2026-08-30T12:00:00Z",
            "dnsNames": [DOMAIN],
            "subject": f"CN={DOMAIN}",
            "issuer": f"CN={DOMAIN}",
            "publiclyTrusted": False,
            "trustConfigMap": TRUST,
        }
    }
    assert plan.expiry_seconds == pytest.approx(90 * 86400)
    assert verdict.requeue_after is None  # the renewal point is weeks away: the drift timer covers it

    missing = edgecert.plan(demo(), facts(None), now=NOW)
    assert missing.verdict.recorded.dump() == {
        "edgeCertificate": {"secretName": SECRET, "namespace": GW, "issuerMode": "External"}
    }
    assert missing.expiry_seconds is None


def test_requeue_at_the_renewal_point_when_it_is_within_the_hour() -> None:
    # renewBefore 720h; the certificate expires 720h and 20 minutes from now.
    soon = leaf_secret(not_after=NOW + dt.timedelta(hours=720, minutes=20))
    verdict = edgecert.evaluate(demo(), facts(soon), now=NOW)
    assert verdict.condition.is_true
    assert verdict.requeue_after == pytest.approx(20 * 60)


def test_a_failed_publish_is_an_api_error() -> None:
    cond = edgecert.not_published(["ConfigMap kamiwaza/x: boom"])
    assert (cond.status, cond.reason) == ("False", Common.API_ERROR)
    assert cond.message == "Could not publish the trust ConfigMap: ConfigMap kamiwaza/x: boom"
