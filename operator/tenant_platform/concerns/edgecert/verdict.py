"""PURE decisions for EdgeCertificateReady, from the Secret's analysis (concerns/edgecert/certs.py).

``plan(platform, facts, now=..., dry_run=...)`` turns what the edgecert step read
(``EdgeCertFacts``) into its ``EdgeCertPlan``: the ``Verdict`` (what ``evaluate`` returns) and the
writes it implies:

- issuance (``issuer: SelfSigned``): when the Secret is missing or unusable (``REISSUE_REASONS``,
  or a Secret of ours with the wrong, immutable, type), an ``Issue`` for the step to carry out;
  the step's ``apply`` then decides again, with this same function, on the Secret the API server
  stored (``facts.issued_for`` set; nothing read again), and a plan never asks for a second
  issuance in one pass. A Secret that is not ours is never
  overwritten (``Conflict``); a dry run says ``WouldIssue``;
- the trust ConfigMap: publish the bundle (``publish`` with the ConfigMap in ``desired``), prune
  it (``publish`` with nothing desired, once the certificate is publicly trusted), or leave it
  alone (dry run, nothing readable, the tenant namespace missing: ``NamespaceMissing``, or a
  ConfigMap of that name that is not ours: ``Conflict``). A hand-made ConfigMap of that name (no
  one's labels) that an admin annotated ``tenancy.dev/adoptable-by: <platform>`` is adopted in
  place: the same object, applied under our field manager (docs/migration.md);
- ``issuer: CertManager``: the cert-manager ``Certificate`` (concerns/edgecert/manifests.py) to
  apply (``certificate``), after which the step decides again on the Certificate the API server
  stored; EdgeCertificateReady follows its Ready condition (``CertificatePending`` with
  cert-manager's reasons and the pending CertificateRequest's, ``CertificateFailed`` when its
  Issuing condition says Failed, ``CertManagerNotInstalled`` when the kind is not served) and,
  once Ready, the Secret is analysed exactly as for the other issuers. A Certificate, or a Secret,
  of that name that is not ours (nor written by cert-manager for our Certificate) is never
  touched (``Conflict``); a dry run says ``WouldIssue``;
- the condition, the recorded facts (``api.status.edgecert``), the seconds to expiry for the
  gauge, and a requeue at the renewal point when that is within the hour.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, replace

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.api.status.edgecert import RecordedEdgeCertificate
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.api.tls import TLS_TYPE
from tenant_platform.concerns.edgecert import certs, manifests
from tenant_platform.core import conditions, ownership
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Event, Manifest, Verdict

TYPE = constants.EDGE_CERTIFICATE_READY
# Come back at the renewal point when it is this close (the drift timer covers the rest).
REQUEUE_HORIZON = 3600.0


@dataclass(frozen=True)
class EdgeCertFacts:
    """What the edgecert step read (concerns/edgecert/step.py ``gather``), or wrote when it issued."""

    secret: Manifest | None
    """The Secret spec.edgeCertificate.secretName in the gateway namespace; None when absent."""
    secret_owner: str = ""
    """The TenantPlatform owning the Secret by our labels; "" when it lacks them."""
    namespace_exists: bool = False
    """The tenant namespace exists (not read in a dry run, which publishes nothing)."""
    trust_map: Manifest | None = None
    """The live trust ConfigMap in the tenant namespace; None when absent."""
    trust_map_owner: str = ""
    issued_for: Reason | None = None
    """Set once this pass issued the certificate in ``secret``: the reason it was issued."""
    certificate_served: bool = True
    """issuer CertManager: cert-manager.io/v1 Certificate is served (not read otherwise)."""
    certificate: Manifest | None = None
    """issuer CertManager: the live Certificate named like the Secret; None when absent."""
    certificate_owner: str = ""
    certificate_request: Manifest | None = None
    """issuer CertManager: the Certificate's CertificateRequest for the revision being issued, if any."""
    certificate_applied: bool = False
    """Set once this pass applied the Certificate: ``certificate`` is what the API server stored."""


@dataclass(frozen=True)
class Issue:
    """Issue a self-signed certificate into the Secret, then evaluate again."""

    because: Reason
    replace: bool
    """Delete the Secret first: it is ours, but its type (immutable) is wrong."""
    validity: dt.timedelta
    event: Event


@dataclass(frozen=True)
class EdgeCertPlan:
    """The decision (``verdict``) and the writes it implies, which the step carries out."""

    verdict: Verdict
    issue: Issue | None = None
    """Issue first (the condition describes the Secret as it is until then)."""
    publish: bool = False
    """Apply ``verdict.desired`` (the trust ConfigMap, or nothing) and prune our other trust ConfigMaps."""
    expiry_seconds: float | None = None
    """Seconds until the certificate expires, for the gauge; None when none could be read."""
    certificate: Manifest | None = None
    """issuer CertManager: apply this Certificate (absent or ours), then decide again on the stored one."""
    prune_certificates: bool = False
    """Delete our Certificates in the gateway namespace other than ``certificate`` (the issuer, or
    the Secret's name, changed since a pass that used cert-manager)."""


def needs_issuing(report: certs.CertReport, facts: EdgeCertFacts, platform_name: str) -> bool:
    if report.reason in certs.REISSUE_REASONS:
        return True
    # A Secret of ours with the wrong type (type is immutable) is re-created.
    return (
        report.reason == Reason.WRONG_SECRET_TYPE and facts.secret is not None and facts.secret_owner == platform_name
    )


def not_published(errors: list[str]) -> Condition:
    """EdgeCertificateReady when the trust ConfigMap could not be applied or pruned."""
    return conditions.false(TYPE, Common.API_ERROR, "Could not publish the trust ConfigMap: " + "; ".join(errors))


def evaluate(platform: TenantPlatform, facts: EdgeCertFacts, *, now: dt.datetime, dry_run: bool = False) -> Verdict:
    """EdgeCertificateReady, the trust ConfigMap and what to record, at time ``now`` (``plan``'s verdict)."""
    return plan(platform, facts, now=now, dry_run=dry_run).verdict


def plan(platform: TenantPlatform, facts: EdgeCertFacts, *, now: dt.datetime, dry_run: bool = False) -> EdgeCertPlan:
    """EdgeCertificateReady, what to issue, apply or publish, and what to record, at time ``now``
    (``_plan``); a platform that used cert-manager before and no longer does prunes its Certificate."""
    decided = _plan(platform, facts, now=now, dry_run=dry_run)
    if platform.spec.edge_certificate.issuer != "CertManager" and _recorded_issuer(platform) == "CertManager":
        decided = replace(decided, prune_certificates=not dry_run)
    return decided


def _plan(platform: TenantPlatform, facts: EdgeCertFacts, *, now: dt.datetime, dry_run: bool = False) -> EdgeCertPlan:
    """EdgeCertificateReady, what to issue or publish, and what to record, at time ``now``.

    The reason is the analysis's (concerns/edgecert/certs.py) unless issuance or the trust bundle is
    blocked: ``Conflict``, ``WouldIssue`` or ``NamespaceMissing`` (which is progressing).
    """
    spec = platform.spec
    where = f"{spec.gateway.namespace}/{spec.edge_certificate.secret_name}"
    renew_before = parse_duration(spec.edge_certificate.renew_before)
    report = certs.analyze_secret(facts.secret, domain=spec.domain, now=now, renew_before=renew_before, where=where)
    verdict = functools.partial(_verdict, platform, report, now=now, renew_before=renew_before)
    cert_manager_notes = ""
    if spec.edge_certificate.issuer == "CertManager":
        waiting, cert_manager_notes = _cert_manager(platform, facts, report, now=now, dry_run=dry_run)
        if waiting is not None:
            return waiting

    if (
        spec.edge_certificate.issuer == "SelfSigned"
        and facts.issued_for is None
        and needs_issuing(report, facts, platform.name)
    ):
        if facts.secret is not None and facts.secret_owner != platform.name:
            owned = ownership.belongs_to(f"Secret {where}", facts.secret_owner)
            return verdict(
                conditions.false(
                    TYPE,
                    Common.CONFLICT,
                    f"{report.message} The operator would issue a self-signed certificate, but {owned}, so it was "
                    "left untouched; delete it or choose another spec.edgeCertificate.secretName.",
                )
            )
        if dry_run:
            return verdict(
                conditions.false(
                    TYPE,
                    Reason.WOULD_ISSUE,
                    f"{report.message} The operator would issue a self-signed certificate ({report.reason}).",
                )
            )
        issue = Issue(
            because=report.reason,
            replace=facts.secret is not None and (facts.secret.get("type") or "Opaque") != TLS_TYPE,
            validity=certs.self_signed_validity(renew_before),
            event=(
                "Normal",
                reasons.Event.CERTIFICATE_ISSUED,
                f"Issued a self-signed certificate for {spec.domain} in Secret {where}.",
            ),
        )
        return verdict(conditions.false(TYPE, report.reason, report.message), issue=issue)

    # Nothing readable to publish, or a dry run: leave the trust ConfigMap as it is.
    publishing = report.facts is not None and not dry_run
    problem = _trust_problem(platform, report, facts) if publishing else None
    if problem is not None:
        return verdict(problem, progressing=problem.reason == Reason.NAMESPACE_MISSING)
    publish = publishing and facts.namespace_exists

    notes = f" (issued a self-signed certificate ({facts.issued_for}))" if facts.issued_for else cert_manager_notes
    if report.ok:
        message = report.message
        if report.trust_pem:
            message += f" Published for clients in ConfigMap {spec.namespace}/{platform.trust_config_map_name}."
        cond = conditions.true(TYPE, Reason.VALID, message + notes)
    else:
        cond = conditions.false(TYPE, report.reason, report.message + notes)
    desired = [manifests.render_trust_config_map(platform, report.trust_pem)] if publish and report.trust_pem else []
    decided = verdict(cond, publish=publish, desired=desired)
    if spec.edge_certificate.issuer == "CertManager" and not dry_run and not facts.certificate_applied:
        decided = replace(decided, certificate=certificate_for(platform))
    return decided


COMPONENT = "edgecert"
"""Our component label on the Certificate and on the Secret cert-manager writes for it (the step's)."""
PENDING_REQUEUE = 10.0
"""Seconds before looking at a pending Certificate again (the operator does not watch them)."""
CERT_MANAGER_READY = "Ready"
CERT_MANAGER_ISSUING = "Issuing"
CERT_MANAGER_FAILED = "Failed"
ANNOTATION_CERTIFICATE_NAME = "cert-manager.io/certificate-name"
"""cert-manager's annotation on a Secret it wrote for a Certificate."""


def certificate_for(platform: TenantPlatform) -> Manifest:
    """The cert-manager Certificate of ``issuer: CertManager``: for the domain alone, with the
    lifetime a self-signed certificate gets (so it is never due at birth)."""
    renew_before = parse_duration(platform.spec.edge_certificate.renew_before)
    return manifests.render_certificate(
        platform,
        component=COMPONENT,
        dns_names=[certs.normalize(platform.spec.domain)],
        duration=certs.self_signed_validity(renew_before),
    )


def _recorded_issuer(platform: TenantPlatform) -> str:
    recorded = (platform.status.get("recorded") or {}).get("edgeCertificate") or {}
    return str(recorded.get("issuerMode") or "")


def _condition(obj: Manifest | None, type_: str) -> dict[str, object]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return {}


def _said(cond: dict[str, object]) -> str:
    """cert-manager's reason and message of one condition, as a person reads them."""
    if not cond:
        return "no condition yet"
    reason, message = str(cond.get("reason") or ""), str(cond.get("message") or "")
    return f"{cond.get('status')}, {reason}: {message}" if reason else f"{cond.get('status')}: {message}"


def _cert_manager(
    platform: TenantPlatform, facts: EdgeCertFacts, report: certs.CertReport, *, now: dt.datetime, dry_run: bool
) -> tuple[EdgeCertPlan | None, str]:
    """issuer CertManager: the plan while the Certificate cannot be trusted yet (None once it is
    Ready: the Secret is then analysed as for any issuer), and the note the final message carries."""
    spec = platform.spec
    ref = spec.edge_certificate.issuer_ref
    name, namespace = spec.edge_certificate.secret_name, spec.gateway.namespace
    where = f"{namespace}/{name}"
    renew_before = parse_duration(spec.edge_certificate.renew_before)

    def stop(
        cond: Condition, *, progressing: bool = False, requeue: float | None = None, apply: bool = False
    ) -> EdgeCertPlan:
        decided = _verdict(platform, report, cond, now=now, renew_before=renew_before, progressing=progressing)
        certificate = certificate_for(platform) if apply else None
        return replace(
            decided,
            verdict=decided.verdict.but(requeue_after=requeue),
            certificate=certificate,
        )

    issuer = f"{ref.kind} {ref.name} ({ref.group})" if ref is not None else "no issuerRef"
    if ref is None:  # the CRD rule makes this impossible for a stored object
        missing = "issuer CertManager needs spec.edgeCertificate.issuerRef."
        return stop(conditions.false(TYPE, Reason.CERTIFICATE_FAILED, missing)), ""
    if not facts.certificate_served:
        return stop(
            conditions.false(
                TYPE,
                Reason.CERT_MANAGER_NOT_INSTALLED,
                f"cert-manager.io/v1 Certificate is not served, so no certificate can be requested from {issuer}: "
                "install cert-manager (its CRDs and controller), or set spec.edgeCertificate.issuer to SelfSigned "
                "or External.",
            )
        ), ""
    if facts.certificate is not None and facts.certificate_owner != platform.name:
        owned = ownership.belongs_to(f"cert-manager Certificate {where}", facts.certificate_owner)
        return stop(
            conditions.false(
                TYPE,
                Common.CONFLICT,
                f"{owned}, so it was left untouched; delete it or choose another spec.edgeCertificate.secretName.",
            )
        ), ""
    secret_annotations = ((facts.secret or {}).get("metadata") or {}).get("annotations") or {}
    if (
        facts.secret is not None
        and facts.secret_owner != platform.name
        and not (facts.certificate is not None and secret_annotations.get(ANNOTATION_CERTIFICATE_NAME) == name)
    ):
        owned = ownership.belongs_to(f"Secret {where}", facts.secret_owner)
        return stop(
            conditions.false(
                TYPE,
                Common.CONFLICT,
                f"{owned}; a cert-manager Certificate for it would overwrite it, so none was created; delete it "
                "or choose another spec.edgeCertificate.secretName.",
            )
        ), ""
    if facts.certificate is None:
        if dry_run:
            return stop(
                conditions.false(
                    TYPE,
                    Reason.WOULD_ISSUE,
                    f"The operator would create cert-manager Certificate {where} for {spec.domain} from {issuer}.",
                )
            ), ""
        # not applied yet: apply it, then decide again on what the API server stored
        return stop(
            conditions.false(TYPE, Reason.CERTIFICATE_PENDING, f"cert-manager Certificate {where} is being created."),
            progressing=True,
            apply=True,
        ), ""
    certificate = facts.certificate
    ready = _condition(certificate, CERT_MANAGER_READY)
    generation = (certificate.get("metadata") or {}).get("generation")
    observed = ready.get("observedGeneration")
    current = observed is None or generation is None or observed == generation
    apply_again = not dry_run and not facts.certificate_applied
    if ready.get("status") == "True" and current:
        return None, f" (cert-manager Certificate {where} is Ready, from {issuer})"
    issuing = _condition(certificate, CERT_MANAGER_ISSUING)
    request = facts.certificate_request
    said = f"Ready: {_said(ready) if current else 'not yet observed for this generation'}"
    if issuing:
        said += f"; Issuing: {_said(issuing)}"
    if request is not None:
        request_name = (request.get("metadata") or {}).get("name")
        said += f"; CertificateRequest {namespace}/{request_name}: {_said(_condition(request, CERT_MANAGER_READY))}"
    if issuing.get("status") == "False" and issuing.get("reason") == CERT_MANAGER_FAILED:
        return stop(
            conditions.false(
                TYPE,
                Reason.CERTIFICATE_FAILED,
                f"cert-manager could not issue Certificate {where} from {issuer} ({said}). cert-manager retries "
                "with a backoff; fix the issuer, or see `kubectl describe certificate`.",
            ),
            requeue=PENDING_REQUEUE * 6,
            apply=apply_again,
        ), ""
    return stop(
        conditions.false(
            TYPE,
            Reason.CERTIFICATE_PENDING,
            f"cert-manager Certificate {where} from {issuer} is not Ready yet ({said}).",
        ),
        progressing=True,
        requeue=PENDING_REQUEUE,
        apply=apply_again,
    ), ""


def _trust_problem(platform: TenantPlatform, report: certs.CertReport, facts: EdgeCertFacts) -> Condition | None:
    """Why the trust bundle cannot be published now, if it cannot."""
    if not report.trust_pem:
        return None
    ns, name = platform.spec.namespace, platform.trust_config_map_name
    if not facts.namespace_exists:
        return conditions.false(
            TYPE,
            Reason.NAMESPACE_MISSING,
            f"{report.message} The trust ConfigMap {ns}/{name} waits for namespace {ns} to exist.",
        )
    if (
        facts.trust_map is not None
        and facts.trust_map_owner != platform.name
        and not ownership.adoptable(facts.trust_map, facts.trust_map_owner, platform.name)
    ):
        owned = ownership.belongs_to(f"ConfigMap {ns}/{name}", facts.trust_map_owner)
        return conditions.false(
            TYPE,
            Common.CONFLICT,
            f"{report.message} {owned}, so the trust bundle was not published; delete it or set "
            "spec.edgeCertificate.trustConfigMapName."
            + (
                ""
                if facts.trust_map_owner
                else f" To hand a ConfigMap prepared by hand over to this platform, annotate it "
                f"{constants.ANNOTATION_ADOPTABLE}={platform.name} (docs/migration.md)."
            ),
        )
    return None


def _verdict(
    platform: TenantPlatform,
    report: certs.CertReport,
    cond: Condition,
    *,
    now: dt.datetime,
    renew_before: dt.timedelta,
    desired: list[Manifest] | None = None,
    publish: bool = False,
    issue: Issue | None = None,
    progressing: bool = False,
) -> EdgeCertPlan:
    spec = platform.spec
    recorded: dict[str, object] = {
        "secretName": spec.edge_certificate.secret_name,
        "namespace": spec.gateway.namespace,
        "issuerMode": spec.edge_certificate.issuer,
    }
    requeue: float | None = None
    if report.facts is not None:
        recorded.update(report.facts.recorded(publicly_trusted=report.publicly_trusted))
        if report.trust_pem:
            recorded["trustConfigMap"] = platform.trust_config_map_name
        until_renewal = (report.facts.not_after - renew_before - now).total_seconds()
        if cond.is_true and until_renewal < REQUEUE_HORIZON:
            requeue = max(until_renewal, 1.0)
    return EdgeCertPlan(
        Verdict(
            conditions=[cond],
            desired=desired or [],
            recorded=Recorded(edge_certificate=RecordedEdgeCertificate.model_validate(recorded)),
            progressing=progressing,
            requeue_after=requeue,
        ),
        issue=issue,
        publish=publish,
        expiry_seconds=report.seconds_to_expiry(now),
    )
