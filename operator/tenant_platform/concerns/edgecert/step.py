"""EdgeCertificateReady: the gateway's TLS Secret covers the domain, matches its key, is in date.

The step contract (framework/contract.py): ``gather`` reads the Secret
``spec.edgeCertificate.secretName`` in the gateway namespace (and, outside a dry run, the tenant
namespace and the trust ConfigMap), concerns/edgecert/verdict.py ``evaluate`` (pure, on
concerns/edgecert/certs.py's analysis) decides, and ``apply`` carries out the plan behind that
verdict: it issues when the plan says so (then decides again, purely, on the Secret the API
server stored: nothing is read again), applies or prunes the trust ConfigMap, sets the
seconds-to-expiry gauge and reports (the CertificateIssued event in the verdict). Reasons:
``reasons.EdgeCertificate``, plus Conflict and APIError.

``issuer: SelfSigned``: the operator issues an ECDSA P-256 certificate for the domain (and
``*.domain``, tenant_platform/issuance.py) when the Secret is missing or unusable, and re-issues
it once it is within ``renewBefore`` of expiry. The Secret carries our labels and an
ownerReference (none in a target cluster; cleanup deletes it by name and labels, locally too);
a Secret of that name that is not ours is never overwritten (Conflict). The write is conditional
on the Secret as read (create, or apply with its resourceVersion), so a stale pass never replaces
a newer certificate and a repeated pass issues nothing new.
``issuer: External``: verify only.

When the certificate is not publicly trusted, its CA (or the self-signed certificate itself) is
published in the tenant namespace as ConfigMap ``platform.trust_config_map_name``, key
``ca-certificates.crt``: public certificates only. It is pruned when the certificate becomes
publicly trusted. A hand-made ConfigMap of that name (the checklist's ``kamiwaza-edge-trust``)
is adopted in place when an admin annotated it ``tenancy.dev/adoptable-by: <platform>``:
server-side apply with force takes over its key and adds our labels (docs/migration.md).
The private key is only ever sent to the API server inside the Secret: never logged, never put
in an event, a condition or the status.

Records ``edgeCertificate`` (``api.status.edgecert``). An API error becomes the step's condition
through ``action`` (reconcile/pipeline.py ``run_step``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tenant_platform import metrics
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.concerns.edgecert import issuance, manifests, verdict
from tenant_platform.core import conditions
from tenant_platform.core.identities import GATEWAY_API_VERSION, GATEWAY_KIND
from tenant_platform.core.verdict import Event, Verdict
from tenant_platform.framework.base import (
    CleanupResult,
    StepContext,
    apply_children,
    key,
    owner_of,
    selector,
    stamp,
)
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj

COMPONENT = "edgecert"
CONFIG_MAP = ("v1", "ConfigMap")
GATEWAY = (GATEWAY_API_VERSION, GATEWAY_KIND)
CERTIFICATE_REQUEST = ("cert-manager.io/v1", "CertificateRequest")
REVISION_ANNOTATION = "cert-manager.io/certificate-revision"
GATEWAY_COMPONENT = "gateway"
"""The gateway step's component label (steps do not import each other)."""


def gather(ctx: StepContext) -> verdict.EdgeCertFacts:
    """Reads only: the Secret (and, for issuer CertManager, the Certificate and its pending
    CertificateRequest); outside a dry run also the tenant namespace and the trust ConfigMap."""
    platform = ctx.platform
    secret = ctx.kube.get("v1", "Secret", platform.spec.edge_certificate.secret_name, platform.spec.gateway.namespace)
    facts = verdict.EdgeCertFacts(secret=secret, secret_owner=owner_of(secret) if secret is not None else "")
    if platform.spec.edge_certificate.issuer == "CertManager":
        facts = gather_certificate(ctx, facts)
    if ctx.dry_run:
        return facts  # a dry run publishes nothing
    namespace = platform.spec.namespace
    if ctx.kube.get("v1", "Namespace", namespace) is None:
        return facts
    trust_map = ctx.kube.get(*CONFIG_MAP, platform.trust_config_map_name, namespace)
    return replace(
        facts,
        namespace_exists=True,
        trust_map=trust_map,
        trust_map_owner=owner_of(trust_map) if trust_map is not None else "",
    )


def gather_certificate(ctx: StepContext, facts: verdict.EdgeCertFacts) -> verdict.EdgeCertFacts:
    """issuer CertManager: whether cert-manager's Certificate is served, the Certificate named like
    the Secret, and (while it is not Ready) its CertificateRequest for the revision being issued,
    found by our labels (cert-manager copies a Certificate's labels onto its requests)."""
    spec = ctx.platform.spec
    namespace = spec.gateway.namespace
    if not ctx.kube.served(*manifests.CERTIFICATE):
        return replace(facts, certificate_served=False)
    certificate = ctx.kube.get(*manifests.CERTIFICATE, spec.edge_certificate.secret_name, namespace)
    facts = replace(
        facts, certificate=certificate, certificate_owner=owner_of(certificate) if certificate is not None else ""
    )
    if certificate is None or facts.certificate_owner != ctx.name:
        return facts
    ready = [c for c in (certificate.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    if ready and ready[0].get("status") == "True":
        return facts
    return replace(facts, certificate_request=pending_request(ctx, certificate))


def pending_request(ctx: StepContext, certificate: Obj) -> Obj | None:
    """The newest CertificateRequest the Certificate owns for its next revision, if any."""
    meta = certificate.get("metadata") or {}
    revision = int((certificate.get("status") or {}).get("revision") or 0) + 1
    try:
        requests = ctx.kube.list(
            *CERTIFICATE_REQUEST, meta.get("namespace"), label_selector=selector(ctx.name, COMPONENT)
        )
    except errors.NotFound:
        return None
    mine = [
        r
        for r in requests
        if any(o.get("uid") == meta.get("uid") for o in (r.get("metadata") or {}).get("ownerReferences") or [])
        and ((r.get("metadata") or {}).get("annotations") or {}).get(REVISION_ANNOTATION) == str(revision)
    ]
    mine.sort(key=lambda r: str((r.get("metadata") or {}).get("creationTimestamp") or ""))
    return mine[-1] if mine else None


def issued_secret_names(ctx: StepContext) -> set[tuple[str, str]]:
    """(namespace, name) of every Secret this platform may have issued (read by name, never listed)."""
    spec = ctx.platform.spec
    names = {(spec.gateway.namespace, spec.edge_certificate.secret_name)}
    recorded = (ctx.platform.status.get("recorded") or {}).get("edgeCertificate") or {}
    if recorded.get("namespace") and recorded.get("secretName"):
        names.add((str(recorded["namespace"]), str(recorded["secretName"])))
    try:
        gateways = ctx.kube.list(*GATEWAY, label_selector=selector(ctx.name, GATEWAY_COMPONENT))
    except errors.NotFound:  # Gateways not served
        gateways = []
    for gateway in gateways:
        namespace = str((gateway.get("metadata") or {}).get("namespace") or "")
        for server in (gateway.get("spec") or {}).get("servers") or []:
            credential = str(((server or {}).get("tls") or {}).get("credentialName") or "")
            if namespace and credential:
                names.add((namespace, credential))
    return names


def uses_cert_manager(platform: TenantPlatform) -> bool:
    """issuer CertManager now, or when status was last recorded."""
    recorded = (platform.status.get("recorded") or {}).get("edgeCertificate") or {}
    return platform.spec.edge_certificate.issuer == "CertManager" or recorded.get("issuerMode") == "CertManager"


def delete_certificate(ctx: StepContext, namespace: str, name: str) -> list[str]:
    """Delete our Certificate of that name (our three labels, uid precondition); never another's."""
    try:
        live = ctx.kube.get(*manifests.CERTIFICATE, name, namespace)
    except errors.NotFound:  # not served
        return []
    if live is None or owner_of(live) != ctx.name:
        return []
    meta = live["metadata"]
    if (meta.get("labels") or {}).get(constants.LABEL_COMPONENT) != COMPONENT or meta.get("deletionTimestamp"):
        return []
    if ctx.dry_run:
        return [f"Certificate {namespace}/{name} (dry run)"]
    if ctx.kube.delete(*manifests.CERTIFICATE, name, namespace, uid=meta.get("uid")):
        return [f"Certificate {namespace}/{name}"]
    return []


class EdgeCertStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.EDGE_CERTIFICATE_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """The trust ConfigMap skeleton (its bundle is only known at runtime), and with
        ``issuer: CertManager`` the Certificate before it."""
        skeleton = manifests.render_trust_config_map(platform, None)
        if platform.spec.edge_certificate.issuer == "CertManager":
            return [verdict.certificate_for(platform), skeleton]
        return [skeleton]

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Delete the self-signed certificate Secrets we issued outside the platform's namespaces.

        Locally they are owned (garbage collection would remove them once the platform is gone);
        in a target cluster nothing owns them. Secrets are read by name only (the operator may not
        list them): the spec's, the one status.recorded names, and every ``credentialName`` of our
        Gateways (cleanup runs in reverse step order, so they are still there; a name the spec no
        longer gives is found through them). Deleted only when it carries our three labels (uid
        precondition). The trust ConfigMap lives in the tenant namespace and follows
        deletionPolicy with the namespace's contents."""
        metrics.record_edge_certificate_expiry(ctx.name, ctx.platform.spec.edge_certificate.secret_name, None)
        deleted: list[str] = []
        own = set(ctx.platform.spec.all_namespaces)
        names = sorted(issued_secret_names(ctx))
        if uses_cert_manager(ctx.platform):  # the Certificate first: cert-manager would write the Secret again
            for namespace, name in names:
                if namespace not in own:
                    deleted += delete_certificate(ctx, namespace, name)
        for namespace, name in names:
            if namespace in own:
                continue
            live = ctx.kube.get("v1", "Secret", name, namespace)
            if live is None or owner_of(live) != ctx.name:
                continue
            meta = live["metadata"]
            if (meta.get("labels") or {}).get(constants.LABEL_COMPONENT) != COMPONENT or meta.get("deletionTimestamp"):
                continue
            if ctx.dry_run:
                deleted.append(f"Secret {namespace}/{name} (dry run)")
            elif ctx.kube.delete("v1", "Secret", name, namespace, uid=meta.get("uid")):
                deleted.append(f"Secret {namespace}/{name}")
        return CleanupResult(True, "Deleted " + ", ".join(deleted) if deleted else "")

    def action(self, platform: TenantPlatform) -> Action:
        return Action("check the edge certificate")

    def gather(self, ctx: StepContext) -> verdict.EdgeCertFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: verdict.EdgeCertFacts) -> Verdict:
        return verdict.evaluate(given.platform, facts, now=given.now, dry_run=given.dry_run)

    def apply(self, ctx: StepContext, facts: verdict.EdgeCertFacts, decided: Verdict) -> Verdict:
        """Carry out the plan behind ``verdict`` (the same pure decision): issue when it says so,
        then decide again on the Secret the API server stored (nothing read again); set the
        expiry gauge; apply or prune the trust ConfigMap."""
        plan = verdict.plan(ctx.platform, facts, now=ctx.now, dry_run=ctx.dry_run)
        events: list[Event] = []
        if plan.issue is not None:
            secret = self._issue(ctx, facts, plan.issue)
            if secret is None:
                return decided.but(requeue_after=1.0, progressing=False)
            events.append(plan.issue.event)
            facts = replace(facts, secret=secret, secret_owner=owner_of(secret), issued_for=plan.issue.because)
            plan = verdict.plan(ctx.platform, facts, now=ctx.now, dry_run=ctx.dry_run)
        if plan.certificate is not None or plan.prune_certificates:
            stored = self._apply_certificate(ctx, facts, plan)
            if isinstance(stored, Verdict):
                return stored
            if stored is not None:
                facts = replace(facts, certificate=stored, certificate_owner=owner_of(stored), certificate_applied=True)
                plan = verdict.plan(ctx.platform, facts, now=ctx.now, dry_run=ctx.dry_run)
        decided = plan.verdict.but(events=[*events, *plan.verdict.events])
        if not ctx.dry_run:
            spec = ctx.platform.spec
            expires = None if plan.expiry_seconds is None else ctx.now + timedelta(seconds=plan.expiry_seconds)
            metrics.record_edge_certificate_expiry(ctx.name, spec.edge_certificate.secret_name, expires)
        if plan.publish:
            outcome = apply_children(
                ctx,
                COMPONENT,
                decided.desired,
                prune_kinds=[CONFIG_MAP],
                prune_namespaces=[ctx.platform.spec.namespace],
            )
            if not outcome.ok:
                decided = decided.but(conditions=[verdict.not_published(outcome.errors)], requeue_after=None)
        return decided

    @staticmethod
    def _apply_certificate(
        ctx: StepContext, facts: verdict.EdgeCertFacts, plan: verdict.EdgeCertPlan
    ) -> Obj | Verdict | None:
        """Apply the plan's Certificate (server-side apply; nothing written when it already matches)
        and prune our other Certificates in the gateway namespace. Returns the Certificate as stored,
        None when there is none to apply, or the failure's verdict."""
        desired = [plan.certificate] if plan.certificate is not None else []
        live = None
        if plan.certificate is not None:
            live = {key(plan.certificate): facts.certificate}
        outcome = apply_children(
            ctx,
            COMPONENT,
            desired,
            prune_kinds=[manifests.CERTIFICATE],
            prune_namespaces=[ctx.platform.spec.gateway.namespace],
            live=live,
        )
        if not outcome.ok:
            what = "apply" if plan.certificate is not None else "prune"
            cond = conditions.false(
                verdict.TYPE,
                Common.FORBIDDEN if outcome.forbidden else Common.API_ERROR,
                f"Could not {what} the cert-manager Certificate: " + "; ".join(outcome.errors),
            )
            return plan.verdict.but(conditions=[cond], failed=True, progressing=False, requeue_after=None)
        return outcome.applied[0] if plan.certificate is not None and outcome.applied else None

    @staticmethod
    def _issue(ctx: StepContext, facts: verdict.EdgeCertFacts, issue: verdict.Issue) -> Obj | None:
        """Make a new key and certificate and write them into the Secret; returns what the API
        stored, or None when the Secret changed since it was read (nothing written).

        The write is conditional on the Secret as read: created when it was absent, applied with
        the resourceVersion read as a precondition otherwise. A pass that read the Secret before
        someone else (re-)issued it therefore never overwrites the newer certificate, and a pass
        repeated after a lost status write finds the Secret it wrote and issues nothing (the
        Secret itself is the record: concerns/edgecert/verdict.py decides from it alone). The
        caller posts ``issue.event`` once this returned the stored Secret.
        """
        live = facts.secret
        if issue.replace and live is not None:
            meta = live["metadata"]
            ctx.kube.delete("v1", "Secret", meta["name"], meta.get("namespace"), uid=meta.get("uid"))
            live = None
        cert_pem, key_pem = issuance.issue_self_signed(ctx.platform.spec.domain, now=ctx.now, validity=issue.validity)
        desired = stamp(manifests.render_tls_secret(ctx.platform, cert_pem=cert_pem, key_pem=key_pem), ctx, COMPONENT)
        try:
            if live is None:
                stored = ctx.kube.create(desired)
            else:
                desired["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                stored = ctx.kube.apply(desired)
        except errors.Conflict:
            ctx.logger.info("edge certificate Secret changed while issuing; not overwritten, read again next pass")
            return None
        return stored


STEP = EdgeCertStep()
_CONTRACT: Step[verdict.EdgeCertFacts] = STEP
