"""The step contract every concern implements, and helpers for owned children.

A step gathers what it needs (reads only), decides with a pure function (status/ or render/),
applies what was decided with server-side apply under our one field manager (``apply_children``,
the one helper that stamps, ensures and prunes owned children), and returns a StepResult.
Steps turn API trouble they can name into a condition; ``reconcile.pipeline._run_step`` turns
anything escaping a step into its conditions (``Step.action``, ``api_error_condition``), so one
step never aborts another.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic

from tenant_platform.api import constants
from tenant_platform.api.models import SecretRef, Target, TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.config import Settings
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj, is_subset


@dataclass
class StepContext:
    """What a step may use. ``dry_run`` (the ``check`` command) forbids every write."""

    platform: TenantPlatform
    kube: Kube
    settings: Settings
    now: datetime
    logger: logging.Logger | logging.LoggerAdapter[Any] = field(
        default_factory=lambda: logging.getLogger("tenant_platform")
    )
    dry_run: bool = False
    # Filled by the operator's watches (observe/): shared, read-only snapshots for steps that need
    # cluster-wide state without listing it on every reconcile (GPU nodes and HAMi pods).
    observed: Any = None
    # Facts the steps recorded so far in this pass, typed (the install-values hand-off reads them).
    # Starts with the domain; ``record`` adds each step's fragment.
    recorded: Recorded = field(default_factory=Recorded)
    # Events to post for this platform: (type "Normal"|"Warning", reason, message).
    events: list[tuple[str, str, str]] = field(default_factory=list)
    # The write gate (NamespaceClaims): set by the pipeline, which also fences ``kube`` with it.
    # None (a step run alone, as some tests do): no gate.
    claims: NamespaceClaims | None = None
    # spec.target (docs/fleet.md): the management cluster's client, where the TenantPlatforms and
    # their status live, while ``kube`` works in the target. None: the pass prepares its own cluster.
    management: Kube | None = None
    target_uid: str = ""
    """The target's kube-system namespace uid (spec.target only)."""
    status_written: dict[str, Any] = field(default_factory=dict)
    """Status sections a step already wrote to the API server in this pass (the pod guard's
    parameter, ``podGuard``, must be there before its check): the end-of-pass write starts from
    them, so it sends only what still differs."""

    @property
    def name(self) -> str:
        return self.platform.name

    def platforms(self) -> list[Obj]:
        """Every TenantPlatform that prepares the same cluster as this one (this one included).

        Without spec.target: those without one. With it: those whose kubeconfig Secret is the same,
        or whose recorded target has the same cluster uid (two Secrets for one cluster).
        Read-only: from the operator's cache these are the cached bodies themselves, not copies
        (``Kube.list_shared``; N bodies copied on every pass made converging N platforms cost N^2).
        """
        if self.management is None:
            return [b for b in self.kube.list_shared(constants.API_VERSION, constants.KIND) if not _target_of(b)]
        own = self.platform.spec.target.secret_ref() if self.platform.spec.target else None
        same: list[Obj] = []
        for body in self.management.list_shared(constants.API_VERSION, constants.KIND):
            target = _target_of(body)
            if not target:
                continue
            uid = (((body.get("status") or {}).get("recorded") or {}).get("target") or {}).get("clusterUid")
            if (self.target_uid and uid == self.target_uid) or _secret_ref(target) == own:
                same.append(body)
        return same

    def record(self, fragment: dict[str, Any]) -> None:
        """Add a step's fragment of ``status.recorded`` (validated: a malformed fact raises)."""
        self.recorded = self.recorded.merged(fragment)

    def owner_reference(self) -> Obj:
        return {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "name": self.platform.name,
            "uid": self.platform.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


class NamespaceClaims:
    """The central write gate: which namespaces this platform owns in this pass.

    The pipeline fences the pass's client with ``check`` (``Kube.fenced``), so every namespaced
    write of every step (apply, create, delete, a TokenRequest; not server-side dry runs) into a
    namespace is refused before it is sent, with ``errors.NotOwned``, unless:

    - the namespace is one the platform names (``spec.namespace``/``additionalNamespaces``) and the
      namespaces step claimed it in this pass (``claimed``: created, adopted, or already carrying
      our claim label), or
    - the platform does not name it and it carries no other platform's claim label (the mesh's,
      CoreDNS's or the operator's own namespace; read once per pass).

    Before the namespaces step has reported (and in a cleanup pass, where it runs last) the claims
    are read from the cluster: the namespaces labelled ``tenancy.dev/tenant-platform=<name>``.
    Every refusal is kept in ``refused`` ((namespace, why), in order); the pipeline turns a step's refusals
    into its conditions (reason NamespaceNotOwned), so no step needs code of its own for this.
    Cluster-scoped objects that name namespaces (the pod guard's policies) ask ``covered``.
    """

    def __init__(self, platform: TenantPlatform, kube: Kube) -> None:
        self._platform = platform
        self._kube = kube  # unfenced: only reads
        self._owned: frozenset[str] | None = None
        self._why: dict[str, str] = {}
        self._claims: dict[str, str | None] = {}
        self.refused: list[tuple[str, str]] = []

    def claimed(self, owned: Iterable[str], why_not: Mapping[str, str]) -> None:
        """The namespaces step's verdict: what this platform owns, and why it does not own the rest."""
        self._owned = frozenset(owned)
        self._why = dict(why_not)

    def owned(self) -> frozenset[str]:
        """The platform's namespaces it owns (read from the claim labels until the step reports)."""
        if self._owned is None:
            label = f"{constants.LABEL_PLATFORM}={self._platform.name}"
            found = self._kube.list("v1", "Namespace", None, label_selector=label)
            self._owned = frozenset(n["metadata"]["name"] for n in found if labelled_platform(n) == self._platform.name)
        return self._owned

    def covered(self) -> list[str]:
        """The platform's namespaces, in spec order, that it owns (policies may cover these only)."""
        owned = self.owned()
        return [n for n in self._platform.spec.all_namespaces if n in owned]

    def _claim(self, namespace: str) -> str | None:
        if namespace not in self._claims:
            live = self._kube.get("v1", "Namespace", namespace)
            self._claims[namespace] = labelled_platform(live) if live else None
        return self._claims[namespace]

    def check(self, namespace: str) -> None:
        """Raise errors.NotOwned unless this platform may write into ``namespace``."""
        name = self._platform.name
        if namespace in self._platform.spec.all_namespaces:
            if namespace in self.owned():
                return
            why = self._why.get(namespace) or f"TenantPlatform {name} has not claimed it"
        else:
            claim = self._claim(namespace)
            if claim in (None, name):
                return
            why = f"it is claimed by TenantPlatform {claim}"
        self.refused.append((namespace, why))
        raise errors.NotOwned(namespace, f"nothing written into namespace {namespace}: {why}")


@dataclass
class StepResult:
    """A step's verdict. ``conditions`` holds one Condition per type the step owns."""

    conditions: list[Condition]
    recorded: dict[str, Any] = field(default_factory=dict)
    """Facts merged into status.recorded (and the install values)."""
    status: dict[str, Any] = field(default_factory=dict)
    """Top-level status sections this step owns, e.g. {"podGuard": {...}} or {"gpu": {...}}."""
    progressing: bool = False
    """Work in flight that will finish without a human (Reconciling=True; requeue soon)."""
    requeue_after: float | None = None
    """Ask for another pass within this many seconds (e.g. certificate renewal, staged checks)."""
    failed: bool = False
    """The step could not finish (API error); observedGeneration is not bumped."""
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """Events for the TenantPlatform: (type "Normal"|"Warning", reason, message)."""


@dataclass
class CleanupResult:
    done: bool
    message: str = ""


def child_labels(platform_name: str, component: str) -> dict[str, str]:
    return {
        constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE,
        constants.LABEL_PLATFORM: platform_name,
        constants.LABEL_COMPONENT: component,
    }


def labelled_platform(obj: Obj) -> str | None:
    """The TenantPlatform named by ``obj``'s ``tenancy.dev/tenant-platform`` label, if any."""
    value = (obj.get("metadata", {}).get("labels") or {}).get(constants.LABEL_PLATFORM)
    return str(value) if value is not None else None


def _target_of(body: Obj) -> dict[str, Any]:
    target = (body.get("spec") or {}).get("target")
    return target if isinstance(target, dict) else {}


def _secret_ref(target: dict[str, Any]) -> SecretRef | None:
    try:
        return Target.model_validate(target).secret_ref()
    except pydantic.ValidationError:
        return None


def owner_of(obj: Obj) -> str:
    """The platform that owns ``obj`` by our labels; "" when it lacks our managed-by label."""
    labels = obj.get("metadata", {}).get("labels") or {}
    if labels.get(constants.LABEL_MANAGED_BY) != constants.MANAGED_BY_VALUE:
        return ""
    return labelled_platform(obj) or ""


def selector(platform_name: str, component: str) -> str:
    """Our three labels: a hand-made object labelled with the platform (and component) but not
    managed by us never matches, so pruning and cleanup never touch it."""
    return (
        f"{constants.LABEL_MANAGED_BY}={constants.MANAGED_BY_VALUE},"
        f"{constants.LABEL_PLATFORM}={platform_name},{constants.LABEL_COMPONENT}={component}"
    )


def delete_outside_namespaces(ctx: StepContext, component: str, api_version: str, kind: str) -> list[str]:
    """Delete this platform's ``component`` children of one kind outside its own namespaces, in
    every namespace (cleanup). Locally these carry an ownerReference and garbage collection would
    remove them too, but only once the TenantPlatform is gone; in a target cluster (spec.target)
    nothing owns them, so this delete is the only one. Selected by our three labels, checked again
    on each object, deleted with its uid as precondition: a hand-made object, another platform's,
    or one recreated meanwhile is never deleted. Children inside the platform's namespaces follow
    its deletionPolicy (the namespaces step). Idempotent: a kind not served, or nothing left, is
    done. Returns what was deleted ("Kind namespace/name"); raises KubeError."""
    try:
        listed = ctx.kube.list(api_version, kind, label_selector=selector(ctx.name, component))
    except errors.NotFound:  # the kind is not served: nothing of ours can exist
        return []
    deleted: list[str] = []
    own = set(ctx.platform.spec.all_namespaces)
    for item in listed:
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        if owner_of(item) != ctx.name or labels.get(constants.LABEL_COMPONENT) != component:
            continue
        if meta.get("namespace") in own or meta.get("deletionTimestamp"):
            continue
        if ctx.dry_run:
            deleted.append(f"{kind} {meta.get('namespace') or '-'}/{meta['name']} (dry run)")
            continue
        if ctx.kube.delete(api_version, kind, meta["name"], meta.get("namespace"), uid=meta.get("uid")):
            deleted.append(f"{kind} {meta.get('namespace') or '-'}/{meta['name']}")
    return deleted


def stamp(obj: Obj, ctx: StepContext, component: str, *, owned: bool = True) -> Obj:
    """Add our labels (never the CR's) and, where ``owned``, an ownerReference to the platform.

    NB: children inside the platform's own namespaces get no ownerReference. They are part of the
    namespaces' contents, which deletionPolicy Retain keeps (the installed platform still needs its
    installer identity) and Delete removes with the namespaces; garbage collection must not
    decide that instead.
    """
    meta = obj.setdefault("metadata", {})
    meta.setdefault("labels", {}).update(child_labels(ctx.name, component))
    if meta.get("namespace") in ctx.platform.spec.all_namespaces:
        owned = False
    if ctx.management is not None:  # the platform lives in another cluster than its children
        owned = False
    if owned and ctx.platform.uid:
        meta["ownerReferences"] = [ctx.owner_reference()]
    return obj


@dataclass
class ApplyOutcome:
    applied: list[Obj] = field(default_factory=list)
    written: int = 0
    pruned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    would_apply: list[str] = field(default_factory=list)
    """Dry run with ``live`` given: the children that differ from their intent (nothing written)."""
    forbidden: bool = False
    """One of ``errors`` was the API saying 403 (RBAC or admission), so the reason is Forbidden."""

    @property
    def ok(self) -> bool:
        return not self.errors


Key = tuple[str, str, str, str]
"""(apiVersion, kind, namespace or "", name)."""


def key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


def describe(obj: Obj) -> str:
    """ "Kind namespace/name", or "Kind name" for a cluster-scoped object (for messages)."""
    _, kind, namespace, name = key(obj)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def ensure_one(ctx: StepContext, obj: Obj, current: Obj | bool | None, outcome: ApplyOutcome) -> None:
    """Write ``obj`` unless ``current`` (the live object; None: known absent; False: not read)
    already matches it, recording the result in ``outcome``. In a dry run only compared: a
    difference goes to ``would_apply``, the live object to ``applied``."""
    if ctx.dry_run:
        if not isinstance(current, dict) or not is_subset(obj, current):
            outcome.would_apply.append(f"{obj['kind']} {obj['metadata']['name']}")
        if isinstance(current, dict):
            outcome.applied.append(current)
        return
    try:
        applied, wrote = ctx.kube.ensure(obj, live=current)
    except errors.KubeError as exc:
        outcome.errors.append(f"{describe(obj)}: {exc.message or exc}")
        outcome.forbidden = outcome.forbidden or isinstance(exc, errors.Forbidden)
        return
    applied.setdefault("apiVersion", obj["apiVersion"])
    applied.setdefault("kind", obj["kind"])
    outcome.applied.append(applied)
    outcome.written += int(wrote)


def apply_children(
    ctx: StepContext,
    component: str,
    desired: Sequence[Obj],
    *,
    prune_kinds: Iterable[tuple[str, str]] = (),
    prune_namespaces: Iterable[str | None] = (None,),
    owned: bool = True,
    ordering: Callable[[Obj], int] | None = None,
    live: Mapping[Key, Obj | None] | None = None,
) -> ApplyOutcome:
    """Stamp, ensure and prune one component's children.

    ``prune_kinds``: (apiVersion, kind) pairs to look for stale children of this component, in
    ``prune_namespaces`` (None: cluster-scoped or all namespaces the identity may list).
    Children already matching their intent are not written (see Kube.ensure). ``live``: the
    children as the caller already read them, by ``key`` (None: known absent); then nothing is
    read again, and a dry run lists the children that differ in ``would_apply`` and returns the
    live ones in ``applied``. Without it a dry run returns the stamped intent in ``applied``.
    """
    outcome = ApplyOutcome()
    wanted = {key(o) for o in desired}
    items = list(desired)
    if ordering:
        items.sort(key=ordering)
    for obj in items:
        stamped = stamp(copy.deepcopy(obj), ctx, component, owned=owned)
        if ctx.dry_run and live is None:
            outcome.applied.append(stamped)
            continue
        ensure_one(ctx, stamped, False if live is None else live.get(key(obj)), outcome)
    if not ctx.dry_run:
        prune_children(ctx, component, wanted=wanted, kinds=prune_kinds, namespaces=prune_namespaces, outcome=outcome)
    return outcome


def prune_children(
    ctx: StepContext,
    component: str,
    *,
    wanted: set[Key],
    kinds: Iterable[tuple[str, str]],
    namespaces: Iterable[str | None],
    outcome: ApplyOutcome,
) -> None:
    """Delete this component's labelled children whose (apiVersion, kind, namespace, name) is not wanted."""
    namespaces = list(namespaces)
    for api_version, kind in kinds:
        for namespace in namespaces:
            try:
                existing = ctx.kube.list(api_version, kind, namespace, label_selector=selector(ctx.name, component))
            except errors.NotFound:
                continue
            except errors.KubeError as exc:
                outcome.errors.append(f"listing {kind} for pruning: {exc.message or exc}")
                outcome.forbidden |= isinstance(exc, errors.Forbidden)
                continue
            for item in existing:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                if key(item) in wanted:
                    continue
                meta = item["metadata"]
                try:
                    ctx.kube.delete(api_version, kind, meta["name"], meta.get("namespace"), uid=meta.get("uid"))
                    outcome.pruned.append(f"{kind} {meta.get('namespace') or '-'}/{meta['name']}")
                except errors.KubeError as exc:
                    outcome.errors.append(f"pruning {kind} {meta['name']}: {exc.message or exc}")
                    outcome.forbidden |= isinstance(exc, errors.Forbidden)


def api_error_condition(type_: str, exc: errors.KubeError, doing: str) -> Condition:
    """A condition for an API failure, with a reason a person can act on."""
    if isinstance(exc, errors.NotOwned):
        return conditions.false(type_, Common.NAMESPACE_NOT_OWNED, f"Could not {doing}: {exc.message}.")
    if isinstance(exc, errors.Forbidden):
        return conditions.false(
            type_,
            Common.FORBIDDEN,
            f"The operator is not allowed to {doing}: {exc.message}. Check its RBAC in deploy/.",
        )
    return conditions.false(type_, Common.API_ERROR, f"Failed to {doing}: {exc.message or exc}")
