"""NamespacesReady, decided (pure): which namespaces to label or release, and the condition.

The namespaces step (reconcile/namespaces.py) gathers ``NamespacesFacts``: each namespace the
spec names, and each one ``status.managed.namespaces`` remembers but the spec no longer names,
as read (its claim label, phase, created-by-operator annotation, or the API's words when the read
failed). Then:

- ``writes`` says what to apply: the intent for every namespace that is unclaimed or ours and not
  terminating (created or adopted; the created-by-operator annotation stays on one we created),
  and the empty release intent for every dropped namespace still unclaimed or ours. Nothing in a
  dry run.
- ``evaluate`` turns the facts and the writes that failed into the verdict: the condition
  (Conflict > APIError > Terminating > WouldCreate > Reconciled), ``status.managed.namespaces``
  (what we labelled, a terminating namespace, and a dropped one we could not release yet; not
  written in a dry run), and a requeue while a namespace terminates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common, Namespaces
from tenant_platform.api.status.namespaces import ManagedNamespaces
from tenant_platform.render import namespaces as render_ns
from tenant_platform.status import conditions
from tenant_platform.status.ownership import owner_phrase
from tenant_platform.status.verdict import Manifest, Verdict

# Come back this soon while a namespace terminates (it is recreated once gone).
TERMINATING_REQUEUE = 5.0


@dataclass(frozen=True)
class NamespaceFacts:
    """One namespace as read. ``error``: the API's words when the read failed (nothing else is set)."""

    name: str
    live: Manifest | None = None
    claim: str | None = None
    """The ``tenancy.dev/tenant-platform`` label: the platform claiming it, if any."""
    terminating: bool = False
    created_by_operator: bool = False
    error: str | None = None

    @property
    def exists(self) -> bool:
        return self.live is not None


@dataclass(frozen=True)
class NamespacesFacts:
    wanted: tuple[NamespaceFacts, ...]
    """``spec.namespace`` and ``spec.additionalNamespaces``, in spec order."""
    dropped: tuple[NamespaceFacts, ...] = ()
    """Namespaces ``status.managed.namespaces`` remembers and the spec no longer names (not read
    in a dry run)."""

    @property
    def read_failed(self) -> bool:
        return any(ns.error for ns in (*self.wanted, *self.dropped))

    def live(self, name: str) -> Manifest | None:
        """The namespace ``name`` as read (None: absent or not read)."""
        return next((ns.live for ns in (*self.wanted, *self.dropped) if ns.name == name), None)


@dataclass(frozen=True)
class Writes:
    label: tuple[Manifest, ...] = ()
    """Namespace intents to apply (server-side apply, skipped when the live object matches)."""
    release: tuple[Manifest, ...] = ()
    """Empty intents for dropped namespaces: applying one removes the labels only we own."""


def previously_managed(platform: TenantPlatform) -> list[str]:
    """``status.managed.namespaces`` from the last pass."""
    return list((platform.status.get("managed") or {}).get("namespaces") or [])


def dropped_names(platform: TenantPlatform) -> list[str]:
    """Namespaces we labelled before that the spec no longer names: to be released."""
    wanted = platform.spec.all_namespaces
    return [name for name in previously_managed(platform) if name not in wanted]


def claimed_by_other(platform: TenantPlatform, ns: NamespaceFacts) -> bool:
    """Another TenantPlatform's claim label is on the namespace: never touch it."""
    return bool(ns.claim) and ns.claim != platform.name


def releasable(platform: TenantPlatform, ns: NamespaceFacts) -> bool:
    """The namespace exists and carries no claim label but possibly ours: we may remove our labels."""
    return ns.exists and ns.claim in (None, platform.name)


def _labels(platform: TenantPlatform, ns: NamespaceFacts) -> bool:
    """Outside a dry run, the namespace gets our labels (created or adopted)."""
    return not ns.error and not claimed_by_other(platform, ns) and not ns.terminating


def writes(platform: TenantPlatform, facts: NamespacesFacts, *, dry_run: bool) -> Writes:
    """What to apply, in order: the wanted namespaces in spec order, then the releases."""
    if dry_run:
        return Writes()
    label = tuple(
        render_ns.render_namespace(platform, ns.name, created=not ns.exists or ns.created_by_operator)
        for ns in facts.wanted
        if _labels(platform, ns)
    )
    release = tuple(
        render_ns.release_intent(ns.name) for ns in facts.dropped if not ns.error and releasable(platform, ns)
    )
    return Writes(label, release)


def evaluate(
    platform: TenantPlatform,
    facts: NamespacesFacts,
    *,
    dry_run: bool = False,
    failed: Mapping[str, str] | None = None,
) -> Verdict:
    """The verdict once ``writes`` were applied; ``failed`` maps a namespace to the API's words."""
    failed = failed or {}
    conflicts: list[str] = []
    terminating: list[str] = []
    would_create: list[str] = []
    problems: list[str] = []
    managed: list[str] = []
    for ns in facts.wanted:
        if ns.error:
            problems.append(f"{ns.name}: {ns.error}")
        elif claimed_by_other(platform, ns):
            conflicts.append(f"{ns.name} (claimed by {owner_phrase(ns.claim)})")
        elif ns.terminating:
            terminating.append(ns.name)
            managed.append(ns.name)
        elif dry_run:
            if not ns.exists:
                would_create.append(ns.name)
        elif ns.name in failed:
            problems.append(f"{ns.name}: {failed[ns.name]}")
        else:
            managed.append(ns.name)
    if not dry_run:
        for ns in facts.dropped:
            error = ns.error or failed.get(ns.name)
            if error:
                problems.append(f"releasing {ns.name}: {error}")
                managed.append(ns.name)

    sections: dict[str, Any] = {}
    if not dry_run:
        sections["managed"] = ManagedNamespaces(namespaces=sorted(set(managed))).dump()
    return Verdict(
        conditions=[_condition(platform, conflicts, problems, terminating, would_create)],
        sections=sections,
        progressing=bool(terminating),
        requeue_after=TERMINATING_REQUEUE if terminating else None,
    )


def _condition(
    platform: TenantPlatform,
    conflicts: list[str],
    problems: list[str],
    terminating: list[str],
    would_create: list[str],
) -> conditions.Condition:
    type_ = constants.NAMESPACES_READY
    if conflicts:
        return conditions.false(
            type_,
            Common.CONFLICT,
            "Namespace already claimed by another TenantPlatform, left untouched: "
            + ", ".join(conflicts)
            + ". Choose another spec.namespace/additionalNamespaces or delete the other platform.",
        )
    if problems:
        return conditions.false(type_, Common.API_ERROR, "Could not label: " + "; ".join(problems) + ".")
    if terminating:
        return conditions.false(
            type_,
            Namespaces.TERMINATING,
            "Namespace is terminating; it will be recreated once gone: " + ", ".join(terminating) + ".",
        )
    if would_create:
        return conditions.false(
            type_, Namespaces.WOULD_CREATE, "The operator would create namespaces: " + ", ".join(would_create) + "."
        )
    return conditions.true(
        type_,
        Namespaces.RECONCILED,
        f"Namespaces {', '.join(platform.spec.all_namespaces)} exist with injection and Pod Security warn/audit "
        "labels.",
    )
