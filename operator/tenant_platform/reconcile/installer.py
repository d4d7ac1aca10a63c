"""InstallerReady: the namespace-scoped installer identity, proven with SubjectAccessReviews.

Children (ServiceAccount, Roles, RoleBindings, the optional kubeconfig Secret) live in the
primary namespace and carry our labels but no ownerReference (they follow deletionPolicy with
the namespace, see reconcile.base.stamp). The condition is True only when every checklist
``can-i`` check answers as expected for the ServiceAccount's identity.

One pass, in this order (the writes come before the checks that prove them):
1. apply the identity (render/installer.py); on any error skip to 4;
2. with ``kubeconfigSecret.enabled``: read the Secret, let status/installer.token_plan keep its
   token or mint a new one (TokenRequest; event TokenMinted), apply the Secret;
3. prune our labelled ServiceAccounts, Roles and RoleBindings no longer wanted, and the kubeconfig
   Secret by name (the configured and the last recorded name: the operator may not list Secrets);
4. ask the SubjectAccessReviews (not after an apply error; alone in a dry run);
5. status/installer.evaluate (pure) decides the condition and the recorded facts.
A failed SubjectAccessReview is an API error condition that still records the identity's names.
"""

from __future__ import annotations

from dataclasses import replace

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj, b64
from tenant_platform.reconcile.base import (
    ApplyOutcome,
    CleanupResult,
    StepContext,
    StepResult,
    api_error_condition,
    apply_children,
    key,
    labelled_platform,
    owner_of,
    prune_children,
)
from tenant_platform.render import installer as render_installer
from tenant_platform.status import installer as installer_status
from tenant_platform.status.installer import Answer, InstallerFacts

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
    user, groups = render_installer.service_account_user(platform)
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


class InstallerStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.INSTALLER_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_installer.render_installer(platform)

    def reconcile(self, ctx: StepContext) -> StepResult:
        facts = InstallerFacts() if ctx.dry_run else self.write(ctx)
        if not facts.apply_errors:
            try:
                facts = replace(facts, answers=ask(ctx))
            except errors.KubeError as exc:
                return StepResult(
                    conditions=[api_error_condition(constants.INSTALLER_READY, exc, REVIEWING)],
                    recorded=installer_status.recorded(ctx.platform, facts.kubeconfig_secret),
                    failed=True,
                    progressing=True,
                )
        verdict = installer_status.evaluate(ctx.platform, facts, dry_run=ctx.dry_run)
        return StepResult(
            conditions=verdict.conditions,
            recorded=verdict.recorded,
            progressing=verdict.progressing,
            requeue_after=verdict.requeue_after,
            failed=bool(facts.apply_errors),
        )

    def write(self, ctx: StepContext) -> InstallerFacts:
        """Steps 1-3: the identity, the kubeconfig Secret, pruning. Returns what happened."""
        platform = ctx.platform
        desired = render_installer.render_installer(platform)
        # The ServiceAccount must exist before a token can be minted for it.
        outcome = apply_children(ctx, COMPONENT, desired)
        if not outcome.ok:
            return InstallerFacts(apply_errors=tuple(outcome.errors), forbidden=outcome.forbidden)
        secret_name: str | None = None
        requeue: float | None = None
        if platform.spec.installer.kubeconfig_secret.enabled:
            secret, requeue = self._kubeconfig_secret(ctx)
            desired.append(secret)
            secret_outcome = apply_children(ctx, COMPONENT, [secret])
            outcome.errors.extend(secret_outcome.errors)
            outcome.forbidden |= secret_outcome.forbidden
            secret_name = secret["metadata"]["name"]
        prune_children(
            ctx,
            COMPONENT,
            wanted={key(o) for o in desired},
            kinds=PRUNE_KINDS,
            namespaces=[platform.spec.namespace],
            outcome=outcome,
        )
        self._prune_kubeconfig_secret(ctx, keep=secret_name, outcome=outcome)
        return InstallerFacts(
            apply_errors=tuple(outcome.errors),
            forbidden=outcome.forbidden,
            kubeconfig_secret=secret_name,
            token_requeue=requeue,
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

    def _kubeconfig_secret(self, ctx: StepContext) -> tuple[Obj, float]:
        """The kubeconfig Secret intent, re-minting the token when status/installer says so."""
        platform = ctx.platform
        ns = platform.spec.namespace
        live = ctx.kube.get("v1", "Secret", platform.kubeconfig_secret_name, ns)
        plan = installer_status.token_plan(
            platform, live, claim=labelled_platform(live) if live is not None else None, now=ctx.now
        )
        if plan.keep is not None:
            return plan.keep, plan.requeue_after
        token, expiry = ctx.kube.request_token(
            ns, platform.spec.installer.service_account_name, expiration_seconds=plan.expiration_seconds
        )
        user, _ = render_installer.service_account_user(platform)
        kubeconfig = render_installer.render_kubeconfig(
            server=ctx.kube.server, ca_pem=ctx.kube.ca_data(), namespace=ns, user=user, token=token
        )
        ctx.events.append(installer_status.token_minted(platform))
        intent = render_installer.kubeconfig_secret(
            platform, expires_at=expiry.strftime("%Y-%m-%dT%H:%M:%SZ"), kubeconfig_b64=b64(kubeconfig)
        )
        return intent, plan.requeue_after

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        # The identity is part of the namespace's contents: deletionPolicy Retain keeps it (the
        # installed platform needs it for upgrades), Delete removes it with the namespace.
        return CleanupResult(True)


STEP = InstallerStep()
