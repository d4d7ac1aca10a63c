"""InstallerReady: the namespace-scoped installer identity, proven with SubjectAccessReviews.

Children (ServiceAccount, Roles, RoleBindings, the optional kubeconfig Secret) live in the
primary namespace and carry our labels but no ownerReference (they follow deletionPolicy with
the namespace, see framework.base.stamp). The condition is True only when every checklist
``can-i`` check answers as expected for the ServiceAccount's identity.

A pass, in this order (no token before the checks that prove the identity is safe), as the
step contract's rounds (framework/contract.py):
1. ``gather`` reads the identity's objects (and the kubeconfig Secret); one that exists without
   this platform's claim (our labels) is never taken: ``evaluate`` says Conflict (naming the
   ``tenancy.dev/adoptable-by`` opt-in when it carries nobody's labels), nothing is written, no
   token; one an admin opted in for this platform is taken over in place by step 2;
2. an identity not in place (an object missing or drifted from its intent): ``evaluate`` asks
   ``apply`` to write it (concerns/installer/manifests.py; an error stops the pass:
   Forbidden/APIError) and for another round (``Verdict.again``), whose ``gather`` reads again;
3. with the identity in place ``gather`` asks the SubjectAccessReviews (alone in a dry run) and,
   with ``kubeconfigSecret.enabled`` and no ExcessPermissions, reads the kubeconfig's server;
4. ``evaluate`` (concerns/installer/verdict.py, pure) decides the condition, the recorded facts
   and what to write: the identity, then (``kubeconfigSecret.enabled``, no ExcessPermissions) the
   kubeconfig Secret as ``token_plan`` keeps it, or a TokenRequest to mint a new token (event
   TokenMinted); with ExcessPermissions no token is minted and our kubeconfig Secret is pruned;
5. ``apply`` writes that, minting the token and rendering the Secret around it (renewal follows
   the expiry the API server granted), then prunes our labelled ServiceAccounts, Roles and
   RoleBindings no longer wanted, and the kubeconfig Secret by name (the configured and the last
   recorded name: the operator may not list Secrets); a failed write or prune turns the verdict
   into Forbidden/APIError.
A failed SubjectAccessReview is an API error condition that still records the identity's names.
Writes into a namespace the platform does not own never leave the process (the write gate,
framework/base.NamespaceClaims).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.concerns.installer import manifests
from tenant_platform.concerns.installer.verdict import (
    CLUSTER_INFO_NAME,
    CLUSTER_INFO_NAMESPACE,
    NOT_OURS,
    Answer,
    InstallerFacts,
    ServerChoice,
    choose_server,
    evaluate,
    recorded,
    renewal_requeue,
    token_minted,
    token_plan,
)
from tenant_platform.core import conditions, ownership
from tenant_platform.core.identities import service_account_user
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import (
    ApplyOutcome,
    CleanupResult,
    Key,
    StepContext,
    api_error_condition,
    apply_children,
    describe,
    key,
    labelled_platform,
    owner_of,
    prune_children,
    stamp,
)
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj, b64, intent_hash, is_subset

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
    for verb, group, resource, namespaced, expected in manifests.CAN_I_CHECKS:
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
    platform's claim (our managed-by label and ``tenancy.dev/tenant-platform=<name>``): never taken,
    unless an admin opted one in (``tenancy.dev/adoptable-by`` lists this platform and it carries
    nobody's labels: the checklist's installer identity made by hand), which is then taken over in
    place by the apply (server-side apply with ``force``, our labels added; docs/migration.md)."""
    live: dict[Key, Obj | None] = {}
    taken: list[str] = []
    for obj in desired:
        meta = obj["metadata"]
        current = ctx.kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        live[key(obj)] = current
        if current is not None and owner_of(current) != ctx.name:
            claim = owner_of(current)
            if ownership.adoptable(current, claim, ctx.name):
                continue
            whose = f"claimed by TenantPlatform {claim}" if claim else NOT_OURS
            taken.append(f"{describe(obj)} ({whose})")
    return live, tuple(taken)


TOKEN_REQUEST = ("authentication.k8s.io/v1", "TokenRequest")
"""The intent to mint a token (the ServiceAccount's ``token`` subresource) in ``Verdict.desired``."""


@dataclass(frozen=True)
class Gathered:
    """What the installer step read. Outside a dry run ``live`` holds the identity's objects and
    the kubeconfig Secret (``None``: absent); the access checks and the kubeconfig's server are
    read only once the identity is in place (every object of it already as intended), so the
    answers are about the identity as it will stay."""

    live: Mapping[Key, Obj | None] = field(default_factory=dict)
    foreign: tuple[str, ...] = ()
    in_place: bool = True
    answers: tuple[Answer, ...] | None = None
    """None: not asked (the identity is not in place yet, or another object of it is foreign)."""
    review_error: errors.KubeError | None = None
    """The SubjectAccessReviews failed (the API's error)."""
    server: ServerChoice | None = None
    """The kubeconfig's server (only with ``kubeconfigSecret.enabled`` and the answers)."""


def in_place(ctx: StepContext, desired: list[Obj], live: Mapping[Key, Obj | None]) -> bool:
    """Applying ``desired`` would write nothing: each object, stamped, matches the live one (as
    ``Kube.ensure`` judges it)."""
    for obj in desired:
        stamped = stamp(copy.deepcopy(obj), ctx, COMPONENT)
        stamped["metadata"].setdefault("annotations", {})[constants.ANNOTATION_APPLIED_HASH] = intent_hash(stamped)
        current = live.get(key(obj))
        if current is None or not is_subset(stamped, current):
            return False
    return True


def server(ctx: StepContext) -> ServerChoice:
    """The kubeconfig's server: the spec's, else kube-public/cluster-info's, else ours.

    cluster-info is read only when the spec names no server; a cluster without it (or an
    operator not allowed to read it) falls through to the operator's own API address.
    """
    cluster_info: Obj | None = None
    refused = ""
    if not ctx.platform.spec.installer.kubeconfig_secret.server:
        try:
            cluster_info = ctx.kube.get("v1", "ConfigMap", CLUSTER_INFO_NAME, CLUSTER_INFO_NAMESPACE)
        except errors.Forbidden:
            refused = "the operator may not read ConfigMap kube-public/cluster-info"
    choice = choose_server(
        ctx.platform, cluster_info=cluster_info, operator_server=ctx.kube.server, operator_ca=ctx.kube.ca_data()
    )
    return replace(choice, note=refused) if refused else choice


def gather(ctx: StepContext) -> Gathered:
    """Dry run: the access checks alone. Otherwise the identity's objects and the kubeconfig
    Secret; once the identity is in place, the access checks and the kubeconfig's server."""
    if ctx.dry_run:
        try:
            return Gathered(answers=ask(ctx))
        except errors.KubeError as exc:
            return Gathered(review_error=exc)
    platform = ctx.platform
    desired = manifests.render_installer(platform)
    kubeconfig = platform.spec.installer.kubeconfig_secret.enabled
    probe = [*desired, _secret_ref(platform)] if kubeconfig else desired
    live, taken = foreign(ctx, probe)
    if taken:
        return Gathered(live=live, foreign=taken)
    if not in_place(ctx, desired, live):
        return Gathered(live=live, in_place=False)
    try:
        answers = ask(ctx)
    except errors.KubeError as exc:
        return Gathered(live=live, review_error=exc)
    if kubeconfig and not InstallerFacts(answers=answers).excess:
        return Gathered(live=live, answers=answers, server=server(ctx))
    return Gathered(live=live, answers=answers)


class InstallerStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.INSTALLER_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return manifests.render_installer(platform)

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> Gathered:
        return gather(ctx)

    def evaluate(self, given: Given, facts: Gathered) -> Verdict:
        """What to write and the condition, in order: Conflict (nothing written, no token); the
        identity not in place yet (write it, then another round asks the access checks); the
        access checks failed to run; else the identity, and with ``kubeconfigSecret.enabled``
        and no ExcessPermissions the kubeconfig Secret to keep or a token to mint (event
        TokenMinted), then pruning (with ExcessPermissions our kubeconfig Secret goes)."""
        platform = given.platform
        if facts.foreign:
            return evaluate(platform, InstallerFacts(foreign=facts.foreign))
        identity = [] if given.dry_run else manifests.render_installer(platform)
        if not facts.in_place:
            pending = conditions.unknown(
                constants.INSTALLER_READY,
                Common.NOT_YET_REPORTED,
                "The installer identity is being applied; its access checks come next.",
            )
            return Verdict(conditions=[pending], desired=identity, progressing=True, again=True)
        if facts.review_error is not None:
            return Verdict(
                conditions=[api_error_condition(constants.INSTALLER_READY, facts.review_error, REVIEWING)],
                recorded=recorded(platform),
                failed=True,
                progressing=True,
            )
        if facts.answers is None:  # gather asks whenever the identity is in place and not foreign
            raise ValueError("the installer's access checks were not asked")
        answers = InstallerFacts(answers=facts.answers)
        kubeconfig = platform.spec.installer.kubeconfig_secret.enabled and not given.dry_run
        if not kubeconfig or answers.excess or facts.server is None:
            verdict = evaluate(
                platform, replace(answers, withheld=kubeconfig and answers.excess), dry_run=given.dry_run
            )
            return verdict.but(desired=identity)
        secret_key = ("v1", "Secret", platform.spec.namespace, platform.kubeconfig_secret_name)
        live = facts.live.get(secret_key)
        plan = token_plan(
            platform,
            live,
            claim=labelled_platform(live) if live is not None else None,
            now=given.now,
            server=facts.server.server,
        )
        judged = replace(
            answers,
            kubeconfig_secret=platform.kubeconfig_secret_name,
            server=facts.server,
            token_requeue=plan.requeue_after,
        )
        verdict = evaluate(platform, judged)
        if plan.keep is not None:
            return verdict.but(desired=[*identity, plan.keep])
        mint = {
            "apiVersion": TOKEN_REQUEST[0],
            "kind": TOKEN_REQUEST[1],
            "metadata": {"name": platform.spec.installer.service_account_name, "namespace": platform.spec.namespace},
            "spec": {"expirationSeconds": plan.expiration_seconds},
        }
        return verdict.but(desired=[*identity, mint], events=[token_minted(platform)])

    def apply(self, ctx: StepContext, facts: Gathered, verdict: Verdict) -> Verdict:
        """Write what the verdict lists, in order: the identity, then the kubeconfig Secret (kept,
        or with a token minted now); the final round prunes what is no longer wanted. A write
        that fails turns the verdict into Forbidden/APIError (no further writes)."""
        if ctx.dry_run or verdict.failed or not verdict.desired:
            return verdict
        platform = ctx.platform
        secret_key = ("v1", "Secret", platform.spec.namespace, platform.kubeconfig_secret_name)
        identity = [o for o in verdict.desired if o["kind"] not in ("Secret", TOKEN_REQUEST[1])]
        outcome = apply_children(
            ctx, COMPONENT, identity, live={k: v for k, v in facts.live.items() if k != secret_key}
        )
        if not outcome.ok:
            return _write_failed(platform, verdict, outcome)
        if verdict.again:  # the identity was not in place: the access checks come in the next round
            return verdict
        wanted = list(identity)
        secret_name: str | None = None
        requeue = verdict.requeue_after
        for intent in verdict.desired[len(identity) :]:
            secret = intent
            if intent["kind"] == TOKEN_REQUEST[1]:
                assert facts.server is not None  # evaluate mints only with the server chosen
                secret, requeue = _minted(ctx, facts.server, int(intent["spec"]["expirationSeconds"]))
            secret_outcome = apply_children(ctx, COMPONENT, [secret])
            outcome.errors.extend(secret_outcome.errors)
            outcome.forbidden |= secret_outcome.forbidden
            secret_name = secret["metadata"]["name"]
            wanted.append(secret)
        # With ExcessPermissions the kubeconfig Secret is not wanted: pruning deletes ours.
        prune_children(
            ctx,
            COMPONENT,
            wanted={key(o) for o in wanted},
            kinds=PRUNE_KINDS,
            namespaces=[platform.spec.namespace],
            outcome=outcome,
        )
        _prune_kubeconfig_secret(ctx, keep=secret_name, outcome=outcome)
        if not outcome.ok:
            return _write_failed(platform, verdict, outcome)
        return verdict.but(requeue_after=requeue)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        # The identity is part of the namespace's contents: deletionPolicy Retain keeps it (the
        # installed platform needs it for upgrades), Delete removes it with the namespace.
        return CleanupResult(True)


def _write_failed(platform: TenantPlatform, verdict: Verdict, outcome: ApplyOutcome) -> Verdict:
    """The verdict once a write or a prune failed: Forbidden or APIError, progressing, nothing recorded."""
    failed = evaluate(platform, InstallerFacts(apply_errors=tuple(outcome.errors), forbidden=outcome.forbidden))
    return failed.but(desired=verdict.desired, events=verdict.events, failed=True)


def _minted(ctx: StepContext, server: ServerChoice, expiration_seconds: int) -> tuple[Obj, float]:
    """Mint the token (TokenRequest) and the kubeconfig Secret naming it; the renewal requeue
    follows the expiry the API server granted (``status.expirationTimestamp``: it may be capped
    below the lifetime asked for)."""
    platform = ctx.platform
    ns = platform.spec.namespace
    issued = ctx.now.replace(microsecond=0)
    token, expiry = ctx.kube.request_token(
        ns, platform.spec.installer.service_account_name, expiration_seconds=expiration_seconds
    )
    user, _ = service_account_user(platform)
    kubeconfig = manifests.render_kubeconfig(
        server=server.server, ca_pem=server.ca_pem, namespace=ns, user=user, token=token
    )
    intent = manifests.kubeconfig_secret(
        platform,
        expires_at=expiry.strftime("%Y-%m-%dT%H:%M:%SZ"),
        kubeconfig_b64=b64(kubeconfig),
        server=server.server,
        issued_at=issued.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    requested = timedelta(seconds=expiration_seconds)
    return intent, renewal_requeue(issued, expiry, requested, ctx.now)


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


def _secret_ref(platform: TenantPlatform) -> Obj:
    """The kubeconfig Secret's coordinates (to read it before anything is written)."""
    meta = {"name": platform.kubeconfig_secret_name, "namespace": platform.spec.namespace}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta}


STEP: Step[Gathered] = InstallerStep()
