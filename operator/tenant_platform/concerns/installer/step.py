"""InstallerReady: the namespace-scoped installer identity, proven with SubjectAccessReviews.

Children (ServiceAccount, Roles, RoleBindings, the optional kubeconfig Secret) live in the
primary namespace and carry our labels but no ownerReference (they follow deletionPolicy with
the namespace, see reconcile.base.stamp). The condition is True only when every checklist
``can-i`` check answers as expected for the ServiceAccount's identity.

One pass, in this order (no token before the checks that prove the identity is safe):
1. read the identity's objects (and the kubeconfig Secret); one that exists without this
   platform's claim (our labels) is never taken: Conflict, nothing written, no token;
2. apply the identity (concerns/installer/manifests.py); on any error stop (Forbidden/APIError);
3. ask the SubjectAccessReviews (alone in a dry run);
4. with ``kubeconfigSecret.enabled`` and no ExcessPermissions: let status/installer.token_plan
   keep the Secret's token or mint a new one (TokenRequest; event TokenMinted), apply the Secret;
   with ExcessPermissions no token is minted and our kubeconfig Secret is deleted (pruned);
5. prune our labelled ServiceAccounts, Roles and RoleBindings no longer wanted, and the kubeconfig
   Secret by name (the configured and the last recorded name: the operator may not list Secrets);
6. status/installer.evaluate (pure) decides the condition and the recorded facts.
A failed SubjectAccessReview is an API error condition that still records the identity's names.
Writes into a namespace the platform does not own never leave the process (the write gate,
reconcile/base.NamespaceClaims).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.installer import manifests as render_installer
from tenant_platform.concerns.installer import verdict as installer_status
from tenant_platform.concerns.installer.verdict import Answer, InstallerFacts
from tenant_platform.core.identities import service_account_user
from tenant_platform.framework.base import (
    ApplyOutcome,
    CleanupResult,
    Key,
    StepContext,
    StepResult,
    api_error_condition,
    apply_children,
    describe,
    key,
    labelled_platform,
    owner_of,
    prune_children,
)
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj, b64

COMPONENT = "installer"
PRUNE_KINDS = [
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("v1", "ServiceAccount"),
]
"""Pruned by listing our labelled children. Secrets are not listed (no ``list`` on Secrets in the
operator's RBAC, see docs/security.md): the kubeconfig Secret is pruned by name."""
REVIEWING = "run SubjectAccessReviews for the installer"


def ask(ctx: StepContext) -> tuple[Answer, ...]:
    """The checklist's can-i questions for the installer ServiceAccount, in order (raises KubeError)."""
    platform = ctx.platform
    user, groups = service_account_user(platform)
    answers: list[Answer] = []
    for verb, group, resource, namespaced, expected in render_installer.CAN_I_CHECKS:
        allowed, _ = ctx.kube.can_i(
            user=user,
            groups=groups,
            verb=verb,
            group=group,
            resource=resource,
            namespace=platform.spec.namespace if namespaced else "",
        )
        answers.append(Answer(verb, group, resource, namespaced, expected, allowed))
    return tuple(answers)


def foreign(ctx: StepContext, desired: list[Obj]) -> tuple[dict[Key, Obj | None], tuple[str, ...]]:
    """The identity's objects as they are (by ``key``), and those that exist without this
    platform's claim (our managed-by label and ``tenancy.dev/tenant-platform=<name>``): never taken."""
    live: dict[Key, Obj | None] = {}
    taken: list[str] = []
    for obj in desired:
        meta = obj["metadata"]
        current = ctx.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        live[key(obj)] = current
        if current is not None and owner_of(current) != ctx.name:
            claim = owner_of(current)
            whose = f"claimed by TenantPlatform {claim}" if claim else "not created by the operator"
            taken.append(f"{describe(obj)} ({whose})")
    return live, tuple(taken)


class InstallerStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.INSTALLER_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_installer.render_installer(platform)

    def reconcile(self, ctx: StepContext) -> StepResult:
        if ctx.dry_run:
            facts = InstallerFacts()
            try:
                facts = replace(facts, answers=ask(ctx))
            except errors.KubeError as exc:
                return self._review_failed(ctx, facts, exc)
        else:
            try:
                facts = self.write(ctx)
            except _ReviewFailed as failed:
                return self._review_failed(ctx, failed.facts, failed.error)
        verdict = installer_status.evaluate(ctx.platform, facts, dry_run=ctx.dry_run)
        return StepResult(
            conditions=verdict.conditions,
            recorded=verdict.recorded,
            progressing=verdict.progressing,
            requeue_after=verdict.requeue_after,
            failed=bool(facts.apply_errors),
        )

    def _review_failed(self, ctx: StepContext, facts: InstallerFacts, exc: errors.KubeError) -> StepResult:
        return StepResult(
            conditions=[api_error_condition(constants.INSTALLER_READY, exc, REVIEWING)],
            recorded=installer_status.recorded(ctx.platform, facts.kubeconfig_secret, facts.server),
            failed=True,
            progressing=True,
        )

    def write(self, ctx: StepContext) -> InstallerFacts:
        """The identity, the access checks, then (only when they pass) the token, then pruning.

        Nothing is taken: an existing object of the identity without our claim stops the pass
        before any write (Conflict). No token is minted before the SubjectAccessReviews have shown
        that the ServiceAccount holds no more than it should; with ExcessPermissions our kubeconfig
        Secret is deleted (pruned) instead of renewed.
        """
        platform = ctx.platform
        desired = render_installer.render_installer(platform)
        secret_key = ("v1", "Secret", platform.spec.namespace, platform.kubeconfig_secret_name)
        kubeconfig = platform.spec.installer.kubeconfig_secret.enabled
        probe = [*desired, _secret_ref(platform)] if kubeconfig else desired
        live, taken = foreign(ctx, probe)
        if taken:
            return InstallerFacts(foreign=taken)
        # The ServiceAccount must exist before a token can be minted for it.
        outcome = apply_children(ctx, COMPONENT, desired, live={k: v for k, v in live.items() if k != secret_key})
        if not outcome.ok:
            return InstallerFacts(apply_errors=tuple(outcome.errors), forbidden=outcome.forbidden)
        try:
            answers = ask(ctx)
        except errors.KubeError as exc:
            raise _ReviewFailed(InstallerFacts(), exc) from None
        facts = InstallerFacts(answers=answers)
        secret_name: str | None = None
        requeue: float | None = None
        server: installer_status.ServerChoice | None = None
        if kubeconfig and not facts.excess:
            server = self._server(ctx)
            secret, requeue = self._kubeconfig_secret(ctx, live.get(secret_key), server)
            desired.append(secret)
            secret_outcome = apply_children(ctx, COMPONENT, [secret])
            outcome.errors.extend(secret_outcome.errors)
            outcome.forbidden |= secret_outcome.forbidden
            secret_name = secret["metadata"]["name"]
        # With ExcessPermissions the kubeconfig Secret is not wanted: pruning deletes ours.
        prune_children(
            ctx,
            COMPONENT,
            wanted={key(o) for o in desired},
            kinds=PRUNE_KINDS,
            namespaces=[platform.spec.namespace],
            outcome=outcome,
        )
        self._prune_kubeconfig_secret(ctx, keep=secret_name, outcome=outcome)
        return replace(
            facts,
            apply_errors=tuple(outcome.errors),
            forbidden=outcome.forbidden,
            kubeconfig_secret=secret_name,
            server=server,
            token_requeue=requeue,
            withheld=kubeconfig and facts.excess,
        )

    @staticmethod
    def _prune_kubeconfig_secret(ctx: StepContext, *, keep: str | None, outcome: ApplyOutcome) -> None:
        """Delete our kubeconfig Secret under a name no longer wanted, read by name, never listed."""
        platform = ctx.platform
        ns = platform.spec.namespace
        last = ((platform.status.get("recorded") or {}).get("installer") or {}).get("kubeconfigSecret")
        for name in sorted({platform.kubeconfig_secret_name, str(last or "")} - {keep or "", ""}):
            try:
                live = ctx.kube.get("v1", "Secret", name, ns)
                if live is None or owner_of(live) != ctx.name:
                    continue
                if (live["metadata"].get("labels") or {}).get(constants.LABEL_COMPONENT) != COMPONENT:
                    continue
                ctx.kube.delete("v1", "Secret", name, ns, uid=live["metadata"].get("uid"))
                outcome.pruned.append(f"Secret {ns}/{name}")
            except errors.KubeError as exc:
                outcome.errors.append(f"pruning Secret {name}: {exc.message or exc}")
                outcome.forbidden |= isinstance(exc, errors.Forbidden)

    @staticmethod
    def _server(ctx: StepContext) -> installer_status.ServerChoice:
        """The kubeconfig's server: the spec's, else kube-public/cluster-info's, else ours.

        cluster-info is read only when the spec names no server; a cluster without it (or an
        operator not allowed to read it) falls through to the operator's own API address.
        """
        cluster_info: Obj | None = None
        refused = ""
        if not ctx.platform.spec.installer.kubeconfig_secret.server:
            try:
                cluster_info = ctx.kube.get(
                    "v1", "ConfigMap", installer_status.CLUSTER_INFO_NAME, installer_status.CLUSTER_INFO_NAMESPACE
                )
            except errors.Forbidden:
                refused = "the operator may not read ConfigMap kube-public/cluster-info"
        choice = installer_status.choose_server(
            ctx.platform, cluster_info=cluster_info, operator_server=ctx.kube.server, operator_ca=ctx.kube.ca_data()
        )
        return replace(choice, note=refused) if refused else choice

    def _kubeconfig_secret(
        self, ctx: StepContext, live: Obj | None, server: installer_status.ServerChoice
    ) -> tuple[Obj, float]:
        """The kubeconfig Secret intent, re-minting the token when status/installer says so."""
        platform = ctx.platform
        ns = platform.spec.namespace
        plan = installer_status.token_plan(
            platform,
            live,
            claim=labelled_platform(live) if live is not None else None,
            now=ctx.now,
            server=server.server,
        )
        if plan.keep is not None:
            return plan.keep, plan.requeue_after
        # The expiry is the server's (TokenRequest status.expirationTimestamp): it may be capped
        # below the lifetime asked for, and renewal follows what was granted.
        issued = ctx.now.replace(microsecond=0)
        token, expiry = ctx.kube.request_token(
            ns, platform.spec.installer.service_account_name, expiration_seconds=plan.expiration_seconds
        )
        user, _ = service_account_user(platform)
        kubeconfig = render_installer.render_kubeconfig(
            server=server.server, ca_pem=server.ca_pem, namespace=ns, user=user, token=token
        )
        ctx.events.append(installer_status.token_minted(platform))
        intent = render_installer.kubeconfig_secret(
            platform,
            expires_at=expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
            kubeconfig_b64=b64(kubeconfig),
            server=server.server,
            issued_at=issued.strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        requested = timedelta(seconds=plan.expiration_seconds)
        return intent, installer_status.renewal_requeue(issued, expiry, requested, ctx.now)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        # The identity is part of the namespace's contents: deletionPolicy Retain keeps it (the
        # installed platform needs it for upgrades), Delete removes it with the namespace.
        return CleanupResult(True)


class _ReviewFailed(Exception):
    def __init__(self, facts: InstallerFacts, error: errors.KubeError) -> None:
        super().__init__(str(error))
        self.facts = facts
        self.error = error


def _secret_ref(platform: TenantPlatform) -> Obj:
    """The kubeconfig Secret's coordinates (to read it before anything is written)."""
    meta = {"name": platform.kubeconfig_secret_name, "namespace": platform.spec.namespace}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta}


STEP = InstallerStep()
