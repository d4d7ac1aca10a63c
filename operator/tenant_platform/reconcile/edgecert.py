"""EdgeCertificateReady: the gateway's TLS Secret covers the domain, matches its key, is in date.

The Secret ``spec.edgeCertificate.secretName`` in the gateway namespace is analysed by
status/certs.py (pure). Reasons: Valid, SecretNotFound, WrongSecretType, Malformed, KeyMismatch,
ChainInvalid, DomainNotCovered, NotYetValid, Expired, ExpiringSoon, plus Conflict.

``issuer: SelfSigned``: the operator issues an ECDSA P-256 certificate for the domain (and
``*.domain``) when the Secret is missing or unusable, and re-issues it once it is within
``renewBefore`` of expiry. The Secret carries our labels and an ownerReference; a Secret of that
name that is not ours is never overwritten (Conflict). ``issuer: External``: verify only.

When the certificate is not publicly trusted, its CA (or the self-signed certificate itself) is
published in the tenant namespace as ConfigMap ``platform.trust_config_map_name``, key
``ca-certificates.crt``: public certificates only. It is pruned when the certificate becomes
publicly trusted. The private key is only ever sent to the API server inside the Secret: never
logged, never put in an event, a condition or the status.

Records ``edgeCertificate`` (selfSigned, notBefore, notAfter, dnsNames, subject, issuer,
publiclyTrusted, secret, trustConfigMap) and sets the seconds-to-expiry gauge.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile.base import (
    CleanupResult,
    StepContext,
    StepResult,
    api_error_condition,
    apply_children,
    owner_of,
    stamp,
)
from tenant_platform.render import certs as render_certs
from tenant_platform.status import certs, conditions

COMPONENT = "edgecert"
CONFIG_MAP = ("v1", "ConfigMap")
# Come back at the renewal point when it is this close (the drift timer covers the rest).
REQUEUE_HORIZON = 3600.0


class EdgeCertStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.EDGE_CERTIFICATE_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """The trust ConfigMap skeleton (its bundle is only known at runtime)."""
        return [render_certs.render_trust_config_map(platform, None)]

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        # The Secret we issued is owned (garbage collection removes it); the trust ConfigMap lives
        # in the tenant namespace and follows deletionPolicy with the namespace's contents.
        metrics.record_edge_certificate_expiry(ctx.name, ctx.platform.spec.edge_certificate.secret_name, None)
        return CleanupResult(True)

    def reconcile(self, ctx: StepContext) -> StepResult:
        type_ = constants.EDGE_CERTIFICATE_READY
        try:
            return self._reconcile(ctx)
        except errors.KubeError as exc:
            return StepResult(conditions=[api_error_condition(type_, exc, "check the edge certificate")], failed=True)

    def _reconcile(self, ctx: StepContext) -> StepResult:
        type_ = constants.EDGE_CERTIFICATE_READY
        platform = ctx.platform
        spec = platform.spec
        namespace, name = spec.gateway.namespace, spec.edge_certificate.secret_name
        where = f"{namespace}/{name}"
        renew_before = parse_duration(spec.edge_certificate.renew_before)
        secret = ctx.kube.get("v1", "Secret", name, namespace)
        report = certs.analyze_secret(secret, domain=spec.domain, now=ctx.now, renew_before=renew_before, where=where)
        notes: list[str] = []

        if spec.edge_certificate.issuer == "SelfSigned" and self._needs_issuing(report, secret, ctx.name):
            owner = owner_of(secret) if secret is not None else None
            if secret is not None and owner != ctx.name:
                who = f"TenantPlatform {owner}" if owner else "someone else (it lacks our labels)"
                return self._result(
                    ctx,
                    report,
                    conditions.false(
                        type_,
                        constants.REASON_CONFLICT,
                        f"{report.message} The operator would issue a self-signed certificate, but Secret {where} "
                        f"belongs to {who}, so it was left untouched; delete it or choose another "
                        "spec.edgeCertificate.secretName.",
                    ),
                )
            if ctx.dry_run:
                return self._result(
                    ctx,
                    report,
                    conditions.false(
                        type_,
                        "WouldIssue",
                        f"{report.message} The operator would issue a self-signed certificate ({report.reason}).",
                    ),
                )
            secret = self._issue(ctx, secret, renew_before)
            notes.append(f"issued a self-signed certificate ({report.reason})")
            report = certs.analyze_secret(
                secret, domain=spec.domain, now=ctx.now, renew_before=renew_before, where=where
            )

        trust_problem = self._publish_trust(ctx, report)
        if trust_problem is not None:
            return self._result(ctx, report, trust_problem, notes=notes)
        if report.ok:
            message = report.message
            if report.trust_pem:
                message += f" Published for clients in ConfigMap {spec.namespace}/{platform.trust_config_map_name}."
            cond = conditions.true(type_, certs.VALID, message + _notes(notes))
        else:
            cond = conditions.false(type_, report.reason, report.message + _notes(notes))
        return self._result(ctx, report, cond, notes=notes, renew_before=renew_before)

    # -- helpers ----------------------------------------------------------------------------------

    @staticmethod
    def _needs_issuing(report: certs.CertReport, secret: Obj | None, platform: str) -> bool:
        if report.reason in certs.REISSUE_REASONS:
            return True
        # A Secret of ours with the wrong type (type is immutable) is re-created.
        return report.reason == certs.WRONG_SECRET_TYPE and secret is not None and owner_of(secret) == platform

    def _issue(self, ctx: StepContext, secret: Obj | None, renew_before: timedelta) -> Obj:
        spec = ctx.platform.spec
        if secret is not None and (secret.get("type") or "Opaque") != certs.TLS_TYPE:
            meta = secret["metadata"]
            ctx.kube.delete("v1", "Secret", meta["name"], meta.get("namespace"), uid=meta.get("uid"))
        cert_pem, key_pem = certs.issue_self_signed(
            spec.domain, now=ctx.now, validity=certs.self_signed_validity(renew_before)
        )
        desired = stamp(
            render_certs.render_tls_secret(ctx.platform, cert_pem=cert_pem, key_pem=key_pem), ctx, COMPONENT
        )
        applied = ctx.kube.apply(desired)
        ctx.events.append(
            (
                "Normal",
                "CertificateIssued",
                f"Issued a self-signed certificate for {spec.domain} in Secret {spec.gateway.namespace}/"
                f"{spec.edge_certificate.secret_name}.",
            )
        )
        return applied

    def _publish_trust(self, ctx: StepContext, report: certs.CertReport) -> conditions.Condition | None:
        """Apply (or prune) the trust ConfigMap; a condition when that could not be done."""
        if report.facts is None or ctx.dry_run:
            return None  # nothing readable to publish; leave what is there
        platform = ctx.platform
        ns = platform.spec.namespace
        name = platform.trust_config_map_name
        type_ = constants.EDGE_CERTIFICATE_READY
        if ctx.kube.get("v1", "Namespace", ns) is None:
            if not report.trust_pem:
                return None
            return conditions.false(
                type_,
                "NamespaceMissing",
                f"{report.message} The trust ConfigMap {ns}/{name} waits for namespace {ns} to exist.",
            )
        desired: list[Obj] = []
        if report.trust_pem:
            live = ctx.kube.get(*CONFIG_MAP, name, ns)
            owner = owner_of(live) if live is not None else None
            if live is not None and owner != platform.name:
                who = f"TenantPlatform {owner}" if owner else "someone else (it lacks our labels)"
                return conditions.false(
                    type_,
                    constants.REASON_CONFLICT,
                    f"{report.message} ConfigMap {ns}/{name} belongs to {who}, so the trust bundle was not "
                    "published; delete it or set spec.edgeCertificate.trustConfigMapName.",
                )
            desired.append(render_certs.render_trust_config_map(platform, report.trust_pem))
        outcome = apply_children(ctx, COMPONENT, desired, prune_kinds=[CONFIG_MAP], prune_namespaces=[ns])
        if not outcome.ok:
            return conditions.false(
                type_, constants.REASON_API_ERROR, "Could not publish the trust ConfigMap: " + "; ".join(outcome.errors)
            )
        return None

    def _result(
        self,
        ctx: StepContext,
        report: certs.CertReport,
        cond: conditions.Condition,
        *,
        notes: list[str] | None = None,
        renew_before: timedelta | None = None,
    ) -> StepResult:
        spec = ctx.platform.spec
        seconds = report.seconds_to_expiry(ctx.now)
        if not ctx.dry_run:
            metrics.record_edge_certificate_expiry(ctx.name, spec.edge_certificate.secret_name, seconds)
        recorded: dict[str, Any] = {
            "secretName": spec.edge_certificate.secret_name,
            "namespace": spec.gateway.namespace,
            "issuerMode": spec.edge_certificate.issuer,
        }
        if report.facts is not None:
            recorded.update(report.facts.recorded(publicly_trusted=report.publicly_trusted))
            if report.trust_pem:
                recorded["trustConfigMap"] = ctx.platform.trust_config_map_name
        requeue: float | None = None
        if report.facts is not None and renew_before is not None and cond.is_true:
            until_renewal = (report.facts.not_after - renew_before - ctx.now).total_seconds()
            if until_renewal < REQUEUE_HORIZON:
                requeue = max(until_renewal, 1.0)
        return StepResult(
            conditions=[cond],
            recorded={"edgeCertificate": recorded},
            requeue_after=requeue,
            progressing=cond.reason == "NamespaceMissing",
        )


def _notes(notes: list[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""


STEP = EdgeCertStep()
