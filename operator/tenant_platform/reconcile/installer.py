"""InstallerReady: the namespace-scoped installer identity, proven with SubjectAccessReviews.

Children (ServiceAccount, Roles, RoleBindings, the optional kubeconfig Secret) live in the
primary namespace and carry an ownerReference to the platform. The condition is True only when
every checklist `can-i` check answers as expected for the ServiceAccount's identity.
"""

from __future__ import annotations

from datetime import datetime

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj, b64
from tenant_platform.reconcile.base import (
    CleanupResult,
    StepContext,
    StepResult,
    api_error_condition,
    apply_children,
    key,
    labelled_platform,
    prune_children,
)
from tenant_platform.render import installer as render_installer
from tenant_platform.status import conditions

COMPONENT = "installer"
ANNOTATION_TOKEN_EXPIRES = f"{constants.GROUP}/token-expires-at"
# Re-mint the token once less than this share of its lifetime is left.
RENEW_FRACTION = 0.3


class InstallerStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.INSTALLER_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return render_installer.render_installer(platform)

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        ns = platform.spec.namespace
        type_ = constants.INSTALLER_READY
        desired = render_installer.render_installer(platform)
        requeue: float | None = None
        recorded: dict[str, object] = {
            "installer": {"serviceAccountName": platform.spec.installer.service_account_name, "namespace": ns}
        }
        if ctx.dry_run:
            return self._verify(ctx, recorded, requeue, dry_run_note=True)

        # The ServiceAccount must exist before a token can be minted for it.
        outcome = apply_children(ctx, COMPONENT, desired)
        if outcome.ok:
            secret, requeue = self._kubeconfig_secret(ctx)
            if secret is not None:
                desired.append(secret)
                secret_outcome = apply_children(ctx, COMPONENT, [secret])
                outcome.errors.extend(secret_outcome.errors)
                recorded["installer"] = {
                    **recorded["installer"],  # type: ignore[dict-item]
                    "kubeconfigSecret": secret["metadata"]["name"],
                }
            prune_children(
                ctx,
                COMPONENT,
                wanted={key(o) for o in desired},
                kinds=[
                    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
                    ("rbac.authorization.k8s.io/v1", "Role"),
                    ("v1", "ServiceAccount"),
                    ("v1", "Secret"),
                ],
                namespaces=[ns],
                outcome=outcome,
            )
        if not outcome.ok:
            message = "; ".join(outcome.errors)
            reason = constants.REASON_FORBIDDEN if "forbidden" in message.lower() else constants.REASON_API_ERROR
            return StepResult(
                conditions=[conditions.false(type_, reason, f"Could not apply the installer identity: {message}.")],
                failed=True,
                progressing=True,
            )
        return self._verify(ctx, recorded, requeue, dry_run_note=False)

    def _verify(
        self, ctx: StepContext, recorded: dict[str, object], requeue: float | None, *, dry_run_note: bool
    ) -> StepResult:
        platform = ctx.platform
        type_ = constants.INSTALLER_READY
        user, groups = render_installer.service_account_user(platform)
        failures: list[str] = []
        try:
            for verb, group, resource, namespaced, expected in render_installer.CAN_I_CHECKS:
                allowed, _ = ctx.kube.can_i(
                    user=user,
                    groups=groups,
                    verb=verb,
                    group=group,
                    resource=resource,
                    namespace=platform.spec.namespace if namespaced else "",
                )
                if allowed != expected:
                    where = f" in {platform.spec.namespace}" if namespaced else " (cluster-wide)"
                    what = f"{verb} {resource}{'.' + group if group else ''}{where}"
                    failures.append(f"can {what}: got {'yes' if allowed else 'no'}, want {'yes' if expected else 'no'}")
        except errors.KubeError as exc:
            cond = api_error_condition(type_, exc, "run SubjectAccessReviews for the installer")
            return StepResult(conditions=[cond], recorded=recorded, failed=True, progressing=True)
        if failures:
            too_much = any("want no" in f for f in failures)
            if dry_run_note and not too_much:
                cond = conditions.false(
                    type_,
                    "WouldCreate",
                    f"The operator would create the installer identity {user}; today: " + "; ".join(failures) + ".",
                )
            else:
                reason = "ExcessPermissions" if too_much else "PermissionsMissing"
                cond = conditions.false(
                    type_,
                    reason,
                    f"Installer {user} failed the checklist's access checks: " + "; ".join(failures) + ".",
                )
            return StepResult(conditions=[cond], recorded=recorded, progressing=not too_much, requeue_after=requeue)
        cond = conditions.true(
            type_,
            constants.REASON_RECONCILED,
            f"Installer {user} can create deployments and virtualservices in {platform.spec.namespace} and cannot "
            "create clusterroles or customresourcedefinitions or list nodes.",
        )
        return StepResult(conditions=[cond], recorded=recorded, requeue_after=requeue)

    def _kubeconfig_secret(self, ctx: StepContext) -> tuple[Obj | None, float | None]:
        """The kubeconfig Secret intent, re-minting the token when it is missing or near expiry."""
        platform = ctx.platform
        ks = platform.spec.installer.kubeconfig_secret
        if not ks.enabled:
            return None, None
        ns = platform.spec.namespace
        name = platform.kubeconfig_secret_name
        ttl = parse_duration(ks.token_ttl)
        live = ctx.kube.get("v1", "Secret", name, ns)
        expires_at = _expiry(live)
        renew_at = expires_at - ttl * RENEW_FRACTION if expires_at else None
        if (
            live is not None
            and renew_at is not None
            and ctx.now < renew_at
            and labelled_platform(live) == platform.name
        ):
            # Keep the current token: re-send the same intent so the apply stays a no-op.
            intent: Obj = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "annotations": {
                        ANNOTATION_TOKEN_EXPIRES: live["metadata"]["annotations"][ANNOTATION_TOKEN_EXPIRES]
                    },
                },
                "type": "Opaque",
                "data": {"kubeconfig": live.get("data", {}).get("kubeconfig", "")},
            }
            return intent, max((renew_at - ctx.now).total_seconds(), 60.0)
        token, expiry = ctx.kube.request_token(
            ns, platform.spec.installer.service_account_name, expiration_seconds=int(ttl.total_seconds())
        )
        user, _ = render_installer.service_account_user(platform)
        kubeconfig = render_installer.render_kubeconfig(
            server=ctx.kube.server, ca_pem=ctx.kube.ca_data(), namespace=ns, user=user, token=token
        )
        ctx.events.append(("Normal", "TokenMinted", f"Minted a new installer token for Secret {ns}/{name}."))
        intent = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": ns,
                "annotations": {ANNOTATION_TOKEN_EXPIRES: expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
            },
            "type": "Opaque",
            "data": {"kubeconfig": b64(kubeconfig)},
        }
        return intent, max((ttl * (1 - RENEW_FRACTION)).total_seconds(), 60.0)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        # The identity is part of the namespace's contents: deletionPolicy Retain keeps it (the
        # installed platform needs it for upgrades), Delete removes it with the namespace.
        return CleanupResult(True)


def _expiry(secret: Obj | None) -> datetime | None:
    if not secret:
        return None
    return conditions.parse_time((secret.get("metadata", {}).get("annotations") or {}).get(ANNOTATION_TOKEN_EXPIRES))


STEP = InstallerStep()
