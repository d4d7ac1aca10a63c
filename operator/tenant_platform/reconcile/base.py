"""The step contract every concern implements, and helpers for owned children.

A step renders its concern (pure functions in render/), applies it with server-side apply under
our one field manager (``apply_children``), prunes the objects it owns that are no longer wanted
(found by our labels), and returns a StepResult. Steps never raise for API trouble they can name:
they turn it into a condition. ``reconcile.run_steps`` catches anything else, so one step never
aborts another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition


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
    # Facts earlier steps recorded in this pass (later steps, e.g. the values ConfigMap, read them).
    recorded: dict[str, Any] = field(default_factory=dict)
    # Events to post for this platform: (type "Normal"|"Warning", reason, message).
    events: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.platform.name

    def owner_reference(self) -> Obj:
        return {
            "apiVersion": constants.API_VERSION,
            "kind": constants.KIND,
            "name": self.platform.name,
            "uid": self.platform.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


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


@dataclass
class CleanupResult:
    done: bool
    message: str = ""


class Step(Protocol):
    """One concern. Implementations are module-level singletons registered in reconcile.STEPS."""

    name: str
    condition_types: tuple[str, ...]

    def reconcile(self, ctx: StepContext) -> StepResult: ...

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Undo what only we may undo on TenantPlatform deletion (idempotent, fast)."""
        ...

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """Every manifest the step would apply, without a cluster (for `tenant-platform render`)."""
        ...

    # Optional: ``def action(self, platform: TenantPlatform) -> str`` names what the step does
    # ("check the edge certificate"). When a step defines it, an API error escaping the step
    # becomes "<Forbidden|APIError>: ... failed to <action>" on each of its conditions (failed,
    # not progressing), so steps need no try/except of their own for that.


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


def owner_of(obj: Obj) -> str:
    """The platform that owns ``obj`` by our labels; "" when it lacks our managed-by label."""
    labels = obj.get("metadata", {}).get("labels") or {}
    if labels.get(constants.LABEL_MANAGED_BY) != constants.MANAGED_BY_VALUE:
        return ""
    return labelled_platform(obj) or ""


def selector(platform_name: str, component: str) -> str:
    return f"{constants.LABEL_PLATFORM}={platform_name},{constants.LABEL_COMPONENT}={component}"


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
    if owned and ctx.platform.uid:
        meta["ownerReferences"] = [ctx.owner_reference()]
    return obj


@dataclass
class ApplyOutcome:
    applied: list[Obj] = field(default_factory=list)
    written: int = 0
    pruned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    forbidden: bool = False
    """One of ``errors`` was the API saying 403 (RBAC or admission), so the reason is Forbidden."""

    @property
    def ok(self) -> bool:
        return not self.errors


def key(obj: Obj) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


def apply_children(
    ctx: StepContext,
    component: str,
    desired: Sequence[Obj],
    *,
    prune_kinds: Iterable[tuple[str, str]] = (),
    prune_namespaces: Iterable[str | None] = (None,),
    owned: bool = True,
    ordering: Callable[[Obj], int] | None = None,
) -> ApplyOutcome:
    """Stamp, ensure and prune one component's children.

    ``prune_kinds``: (apiVersion, kind) pairs to look for stale children of this component, in
    ``prune_namespaces`` (None: cluster-scoped or all namespaces the identity may list).
    Children already matching their intent are not written (see Kube.ensure).
    """
    outcome = ApplyOutcome()
    wanted = {key(o) for o in desired}
    items = list(desired)
    if ordering:
        items.sort(key=ordering)
    for obj in items:
        stamped = stamp(dict(obj), ctx, component, owned=owned)
        if ctx.dry_run:
            outcome.applied.append(stamped)
            continue
        try:
            live, wrote = ctx.kube.ensure(stamped)
            outcome.applied.append(live)
            outcome.written += int(wrote)
        except errors.KubeError as exc:
            outcome.errors.append(f"{obj['kind']} {key(obj)[2]}/{key(obj)[3]}: {exc.message or exc}")
            outcome.forbidden |= isinstance(exc, errors.Forbidden)
    if not ctx.dry_run:
        prune_children(ctx, component, wanted=wanted, kinds=prune_kinds, namespaces=prune_namespaces, outcome=outcome)
    return outcome


def prune_children(
    ctx: StepContext,
    component: str,
    *,
    wanted: set[tuple[str, str, str, str]],
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
    if isinstance(exc, errors.Forbidden):
        return conditions.false(
            type_,
            reasons.Common.FORBIDDEN,
            f"The operator is not allowed to {doing}: {exc.message}. Check its RBAC in deploy/.",
        )
    return conditions.false(type_, reasons.Common.API_ERROR, f"Failed to {doing}: {exc.message or exc}")
