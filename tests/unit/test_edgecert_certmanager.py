"""issuer CertManager in the edgecert verdict (concerns/edgecert/verdict.py), on Certificate,
CertificateRequest and Secret objects shaped as cert-manager v1.21 writes them: the Certificate
to apply, EdgeCertificateReady following its Ready condition, then the Secret checked as for any
issuer; never touching a Certificate or Secret that is not ours."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import constants
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.concerns.edgecert import manifests
from tenant_platform.concerns.edgecert import verdict as edgecert
from tenant_platform.testing import certs as factory

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DOMAIN = "kamiwaza.example.com"
GW = "istio-system"
SECRET = "kamiwaza-edge-tls"
WHERE = f"{GW}/{SECRET}"
CERT_MANAGER = {"issuer": "CertManager", "issuerRef": {"name": "selfsigned"}}
APPROVED = "Certificate request has been approved by cert-manager.io"
NOT_FOUND = 'Referenced "Issuer" not found: issuer.cert-manager.io "selfsigned" not found'

demo = partial(platform, "demo", namespace="kamiwaza", domain=DOMAIN, edgeCertificate=CERT_MANAGER)


def condition(type_: str, status: str, reason: str, message: str, generation: int = 1) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": "2026-06-01T11:59:00Z",
    }


def certificate(*conditions: dict[str, Any], generation: int = 1, revision: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if revision is not None:
        status["revision"] = revision
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {
            "name": SECRET,
            "namespace": GW,
            "generation": generation,
            "uid": "cert-uid",
            "labels": {
                constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
                constants.LABEL_PLATFORM: "demo",
                constants.LABEL_COMPONENT: "edgecert",
            },
        },
        "spec": manifests.render_certificate(
            demo(), component="edgecert", dns_names=[DOMAIN], duration=dt.timedelta(days=90)
        )["spec"],
        "status": status,
    }


PENDING = certificate(
    condition("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
    condition("Issuing", "True", "DoesNotExist", "Issuing certificate as Secret does not exist"),
)
READY = certificate(
    condition("Ready", "True", "Ready", "Certificate is up to date and has not expired"),
    revision=1,
)


def request_pending() -> dict[str, Any]:
    """The CertificateRequest cert-manager made for revision 1, stuck on a missing Issuer."""
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "CertificateRequest",
        "metadata": {
            "name": f"{SECRET}-1",
            "namespace": GW,
            "annotations": {"cert-manager.io/certificate-revision": "1"},
            "ownerReferences": [{"kind": "Certificate", "name": SECRET, "uid": "cert-uid", "controller": True}],
        },
        "status": {
            "conditions": [
                condition("Approved", "True", "cert-manager.io", APPROVED),
                condition("Ready", "False", "Pending", NOT_FOUND),
            ]
        },
    }


def cm_secret(names: tuple[str, ...] = (DOMAIN,)) -> dict[str, Any]:
    """The Secret cert-manager writes for our Certificate: our labels (secretTemplate), its annotations."""
    leaf = factory.make_leaf(list(names), now=NOW)
    secret = factory.tls_secret(SECRET, GW, chain=[leaf.cert], key=leaf.key)
    meta = secret["metadata"]
    meta["labels"] = {
        constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
        constants.LABEL_PLATFORM: "demo",
        constants.LABEL_COMPONENT: "edgecert",
        "controller.cert-manager.io/fao": "true",
    }
    meta["annotations"] = {
        "cert-manager.io/certificate-name": SECRET,
        "cert-manager.io/issuer-name": "selfsigned",
        "cert-manager.io/issuer-kind": "Issuer",
        "cert-manager.io/issuer-group": "cert-manager.io",
        "cert-manager.io/common-name": "",
        "cert-manager.io/alt-names": ",".join(names),
    }
    return secret


def hand_made() -> dict[str, Any]:
    leaf = factory.make_leaf([DOMAIN], now=NOW)
    return factory.tls_secret(SECRET, GW, chain=[leaf.cert], key=leaf.key)


def facts(**changes: Any) -> edgecert.EdgeCertFacts:
    return replace(edgecert.EdgeCertFacts(secret=None, namespace_exists=True), **changes)


def ours(cert: dict[str, Any], **changes: Any) -> edgecert.EdgeCertFacts:
    return facts(certificate=cert, certificate_owner="demo", **changes)


def test_the_certificate_asked_for() -> None:
    rendered = edgecert.certificate_for(demo())
    assert rendered == {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": SECRET, "namespace": GW},
        "spec": {
            "secretName": SECRET,
            "dnsNames": [DOMAIN],
            "issuerRef": {"name": "selfsigned", "kind": "Issuer", "group": "cert-manager.io"},
            "duration": "2160h",
            "renewBefore": "720h",
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["digital signature", "server auth"],
            "secretTemplate": {
                "labels": {
                    constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
                    constants.LABEL_PLATFORM: "demo",
                    constants.LABEL_COMPONENT: "edgecert",
                }
            },
        },
    }
    cluster = demo(
        edgeCertificate={
            "issuer": "CertManager",
            "renewBefore": "1000h",
            "issuerRef": {"name": "acme", "kind": "ClusterIssuer", "group": "example.io"},
        }
    )
    spec = edgecert.certificate_for(cluster)["spec"]
    assert spec["issuerRef"] == {"name": "acme", "kind": "ClusterIssuer", "group": "example.io"}
    assert (spec["duration"], spec["renewBefore"]) == ("3000h", "1000h")


def test_an_absent_certificate_is_applied_then_judged_again() -> None:
    plan = edgecert.plan(demo(), facts(), now=NOW)
    assert plan.certificate == edgecert.certificate_for(demo())
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("False", Reason.CERTIFICATE_PENDING)
    assert plan.verdict.progressing
    assert plan.issue is None and not plan.publish
    # what the step does next: decide on the stored Certificate, without applying again
    again = edgecert.plan(demo(), ours(PENDING, certificate_applied=True), now=NOW)
    assert again.certificate is None
    assert again.verdict.condition.reason == Reason.CERTIFICATE_PENDING
    assert again.verdict.requeue_after == edgecert.PENDING_REQUEUE


def test_a_dry_run_would_issue_and_applies_nothing() -> None:
    plan = edgecert.plan(demo(), facts(), now=NOW, dry_run=True)
    cond = plan.verdict.condition
    assert (cond.reason, plan.certificate) == (Reason.WOULD_ISSUE, None)
    assert f"would create cert-manager Certificate {WHERE} for {DOMAIN} from Issuer selfsigned" in cond.message
    pending = edgecert.plan(demo(), ours(PENDING), now=NOW, dry_run=True)
    assert (pending.verdict.condition.reason, pending.certificate) == (Reason.CERTIFICATE_PENDING, None)


@pytest.mark.parametrize(
    ("label", "changes", "fragment"),
    [
        (
            "a Certificate of someone else's",
            {"certificate": PENDING, "certificate_owner": ""},
            f"cert-manager Certificate {WHERE} belongs to someone else",
        ),
        (
            "a Certificate of another platform's",
            {"certificate": PENDING, "certificate_owner": "other"},
            "belongs to TenantPlatform other",
        ),
        (
            "a hand-made Secret",
            {"secret": hand_made()},
            f"Secret {WHERE} belongs to someone else (it lacks our labels); a cert-manager Certificate for it would "
            "overwrite it",
        ),
    ],
)
def test_what_is_not_ours_is_never_touched(label: str, changes: dict[str, Any], fragment: str) -> None:
    plan = edgecert.plan(demo(), facts(**changes), now=NOW)
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("False", Common.CONFLICT), label
    assert fragment in cond.message
    assert plan.certificate is None and not plan.prune_certificates and not plan.publish


def test_cert_managers_own_secret_is_not_a_conflict() -> None:
    """A Secret cert-manager wrote for our Certificate, before it carried our labels."""
    secret = cm_secret()
    del secret["metadata"]["labels"]
    plan = edgecert.plan(demo(), ours(READY, secret=secret), now=NOW)
    assert plan.verdict.condition.reason == Reason.VALID


def test_ready_then_the_secret_is_checked_as_for_any_issuer() -> None:
    plan = edgecert.plan(demo(), ours(READY, secret=cm_secret(), secret_owner="demo"), now=NOW)
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("True", Reason.VALID)
    assert f"cert-manager Certificate {WHERE} is Ready, from Issuer selfsigned (cert-manager.io)" in cond.message
    assert plan.publish and plan.verdict.desired  # a self-signed certificate: its trust bundle is published
    assert plan.certificate == edgecert.certificate_for(demo())  # kept as the spec says
    recorded = plan.verdict.recorded.dump()["edgeCertificate"]
    assert recorded["issuerMode"] == "CertManager" and recorded["dnsNames"] == [DOMAIN]
    wrong = edgecert.plan(demo(), ours(READY, secret=cm_secret(("other.example.com",)), secret_owner="demo"), now=NOW)
    assert (wrong.verdict.condition.status, wrong.verdict.condition.reason) == ("False", Reason.DOMAIN_NOT_COVERED)
    gone = edgecert.plan(demo(), ours(READY), now=NOW)
    assert gone.verdict.condition.reason == Reason.SECRET_NOT_FOUND


def test_a_ready_condition_of_an_older_generation_is_pending() -> None:
    ready = condition("Ready", "True", "Ready", "Certificate is up to date and has not expired")
    stale = certificate(ready, generation=2)
    plan = edgecert.plan(demo(), ours(stale, secret=cm_secret(), secret_owner="demo"), now=NOW)
    cond = plan.verdict.condition
    assert cond.reason == Reason.CERTIFICATE_PENDING
    assert "Ready: not yet observed for this generation" in cond.message


def test_a_pending_request_says_why() -> None:
    plan = edgecert.plan(demo(), ours(PENDING, certificate_request=request_pending()), now=NOW)
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("False", Reason.CERTIFICATE_PENDING)
    assert f"CertificateRequest {GW}/{SECRET}-1: False, Pending: {NOT_FOUND}" in cond.message


def test_a_failed_issuance() -> None:
    failed = certificate(
        condition("Ready", "False", "DoesNotExist", "Issuing certificate as Secret does not exist"),
        condition(
            "Issuing",
            "False",
            "Failed",
            "The certificate request has failed to complete and will be retried: the signer refused",
        ),
    )
    plan = edgecert.plan(demo(), ours(failed), now=NOW)
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("False", Reason.CERTIFICATE_FAILED)
    assert "the signer refused" in cond.message
    assert not plan.verdict.progressing
    assert plan.certificate == edgecert.certificate_for(demo())  # a fixed spec reaches cert-manager


def test_not_installed() -> None:
    plan = edgecert.plan(demo(), facts(certificate_served=False), now=NOW)
    cond = plan.verdict.condition
    assert (cond.status, cond.reason) == ("False", Reason.CERT_MANAGER_NOT_INSTALLED)
    assert "install cert-manager" in cond.message
    assert plan.certificate is None and not plan.prune_certificates


@pytest.mark.parametrize("issuer", ["SelfSigned", "External"])
def test_leaving_cert_manager_prunes_our_certificate(issuer: str) -> None:
    status = {"recorded": {"edgeCertificate": {"issuerMode": "CertManager"}}}
    moved = demo(edgeCertificate={"issuer": issuer}, status=status)
    assert edgecert.plan(moved, facts(secret=cm_secret(), secret_owner="demo"), now=NOW).prune_certificates
    assert not edgecert.plan(moved, facts(secret=cm_secret()), now=NOW, dry_run=True).prune_certificates
    never = demo(edgeCertificate={"issuer": issuer})
    assert not edgecert.plan(never, facts(secret=cm_secret()), now=NOW).prune_certificates
