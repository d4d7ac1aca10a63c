"""NamespacesReady, decided (pure): which namespaces to claim or release, and the condition.

Namespaces are claimed, never taken. ``refusal`` says why a namespace the spec names may not be
claimed (None: it may):

- another platform's claim label is on it (Conflict);
- it is protected (ProtectedNamespace): ``default``, ``kube-*``, the operator's own namespace,
  the mesh's (``spec.mesh.namespace``, ``istio-system``), the gateway's (``spec.gateway.namespace``)
  and the operator's configurable deny list (``Protection.names``), whether it exists or not;
- it exists, carries no claim label, and no admin opted it in (NotAdoptable): adoption needs the
  annotation ``tenancy.dev/adoptable-by: <platform name>`` on the namespace, which only someone
  allowed to update namespaces can set.

The namespaces step (concerns/namespaces/step.py) gathers ``NamespacesFacts``: each namespace the
spec names, and each one that carries our claim label (listed from the cluster; also those
``status.managed.namespaces`` remembers) but the spec no longer names, as read (its claim label,
adoption annotation, phase, created-by-operator annotation, or the API's words when the read
failed). Then:

- ``writes`` says what to apply: the intent for every namespace we may claim and that is not
  terminating (created or adopted; the created-by-operator annotation stays on one we created),
  and the empty release intent for every dropped namespace still unclaimed or ours. Nothing in a
  dry run.
- ``evaluate`` turns the facts and the writes that failed into the verdict: the condition
  (Conflict > ProtectedNamespace > NotAdoptable > APIError > Terminating > WouldCreate >
  Reconciled), ``status.managed.namespaces`` (what we labelled, a terminating namespace, and a
  dropped one we could not release yet; not written in a dry run), a requeue while a namespace
  terminates; it is failed when a read or a write failed.
- ``claims`` says, from the same facts and failed writes, what this platform owns in this pass
  (the write gate, framework/base.NamespaceClaims, lets every other step write only there) and
  why it does not own the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common, Namespaces
from tenant_platform.api.status.namespaces import ManagedNamespaces
from tenant_platform.concerns.namespaces import manifests
from tenant_platform.core import conditions
from tenant_platform.core.ownership import owner_phrase
from tenant_platform.core.verdict import Manifest, Verdict

# Come back this soon while a namespace terminates (it is recreated once gone).
TERMINATING_REQUEUE = 5.0


# Namespaces no platform may claim, whatever the operator's deny list says.
ALWAYS_PROTECTED = ("default", "istio-system")
ALWAYS_PROTECTED_PREFIX = "kube-"


@dataclass(frozen=True)
class Protection:
    """The operator's part of the protected set (from its Settings)."""

    operator_namespace: str = "tenant-platform-system"
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class NamespaceFacts:
    """One namespace as read. ``error``: the API's words when the read failed (nothing else is set)."""

    name: str
    live: Manifest | None = None
    claim: str | None = None
    """The ``tenancy.dev/tenant-platform`` label: the platform claiming it, if any."""
    terminating: bool = False
    created_by_operator: bool = False
    adoptable_by: tuple[str, ...] = ()
    """The platforms an admin opted the namespace in for (``tenancy.dev/adoptable-by``, a
    comma-separated list, read by ``core.ownership.adoptable_by``)."""
    error: str | None = None

    @property
    def exists(self) -> bool:
        return self.live is not None


@dataclass(frozen=True)
class NamespacesFacts:
    wanted: tuple[NamespaceFacts, ...]
    """``spec.namespace`` and ``spec.additionalNamespaces``, in spec order."""
    dropped: tuple[NamespaceFacts, ...] = ()
    """Namespaces carrying our claim label (or remembered in ``status.managed.namespaces``) that the
    spec no longer names (not read in a dry run)."""

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


def dropped_names(platform: TenantPlatform, labelled: Iterable[str] = ()) -> list[str]:
    """Namespaces that carry our claim label (``labelled``, read from the cluster) or that status
    remembers, and that the spec no longer names: to be released (sorted)."""
    wanted = platform.spec.all_namespaces
    return sorted({*labelled, *previously_managed(platform)} - set(wanted))


def claimed_by_other(platform: TenantPlatform, ns: NamespaceFacts) -> bool:
    """Another TenantPlatform's claim label is on the namespace: never touch it."""
    return bool(ns.claim) and ns.claim != platform.name


def protected(platform: TenantPlatform, name: str, protection: Protection) -> str | None:
    """Why no platform may claim ``name`` (None: it is not protected)."""
    if name in ALWAYS_PROTECTED or name.startswith(ALWAYS_PROTECTED_PREFIX):
        return "a system namespace"
    if name == protection.operator_namespace:
        return "the operator's own namespace"
    if name == platform.spec.mesh.namespace:
        return "the mesh's namespace (spec.mesh.namespace)"
    if name == platform.spec.gateway.namespace:
        return "the gateway's namespace (spec.gateway.namespace)"
    if name in protection.names:
        return "on the operator's list of protected namespaces"
    return None


def refusal(platform: TenantPlatform, ns: NamespaceFacts, protection: Protection) -> tuple[str, str] | None:
    """(reason, why) this platform may not claim ``ns``; None when it may (or already has)."""
    if claimed_by_other(platform, ns):
        return Common.CONFLICT, f"claimed by {owner_phrase(ns.claim)}"
    why = protected(platform, ns.name, protection)
    if why:
        return Namespaces.PROTECTED, why
    if ns.exists and ns.claim != platform.name and platform.name not in ns.adoptable_by:
        return (
            Namespaces.NOT_ADOPTABLE,
            f"it exists and was not opted in (annotate it {manifests.ANNOTATION_ADOPTABLE}={platform.name})",
        )
    return None


def releasable(platform: TenantPlatform, ns: NamespaceFacts) -> bool:
    """The namespace exists and carries no claim label but possibly ours: we may remove our labels."""
    return ns.exists and ns.claim in (None, platform.name)


def _labels(platform: TenantPlatform, ns: NamespaceFacts, protection: Protection) -> bool:
    """Outside a dry run, the namespace gets our labels (created or adopted)."""
    return not ns.error and refusal(platform, ns, protection) is None and not ns.terminating


def writes(
    platform: TenantPlatform, facts: NamespacesFacts, *, dry_run: bool, protection: Protection = Protection()
) -> Writes:
    """What to apply, in order: the wanted namespaces in spec order, then the releases."""
    if dry_run:
        return Writes()
    label = tuple(
        manifests.render_namespace(platform, ns.name, created=not ns.exists or ns.created_by_operator)
        for ns in facts.wanted
        if _labels(platform, ns, protection)
    )
    release = tuple(
        manifests.release_intent(ns.name) for ns in facts.dropped if not ns.error and releasable(platform, ns)
    )
    return Writes(label, release)


@dataclass(frozen=True)
class Claims:
    """What the namespaces step tells the write gate (framework/base.NamespaceClaims)."""

    owned: tuple[str, ...] = ()
    """The spec's namespaces this platform owns in this pass (dry run: those it would claim)."""
    refused: Mapping[str, str] = field(default_factory=dict)
    """The spec's namespaces it does not own, and why (the write gate repeats it)."""


def evaluate(
    platform: TenantPlatform,
    facts: NamespacesFacts,
    *,
    dry_run: bool = False,
    failed: Mapping[str, str] | None = None,
    protection: Protection = Protection(),
) -> Verdict:
    """The verdict once ``writes`` were applied; ``failed`` maps a namespace to the API's words."""
    return _judge(platform, facts, dry_run=dry_run, failed=failed or {}, protection=protection)[0]


def claims(
    platform: TenantPlatform,
    facts: NamespacesFacts,
    *,
    dry_run: bool = False,
    failed: Mapping[str, str] | None = None,
    protection: Protection = Protection(),
) -> Claims:
    """What the platform owns once ``writes`` were applied, and why not the rest (as ``evaluate``)."""
    return _judge(platform, facts, dry_run=dry_run, failed=failed or {}, protection=protection)[1]


def _judge(
    platform: TenantPlatform,
    facts: NamespacesFacts,
    *,
    dry_run: bool,
    failed: Mapping[str, str],
    protection: Protection,
) -> tuple[Verdict, Claims]:
    refusals: dict[str, list[str]] = {}
    refused: dict[str, str] = {}
    terminating: list[str] = []
    would_create: list[str] = []
    problems: list[str] = []
    managed: list[str] = []
    owned: list[str] = []
    for ns in facts.wanted:
        refuse = None if ns.error else refusal(platform, ns, protection)
        if ns.error:
            problems.append(f"{ns.name}: {ns.error}")
            refused[ns.name] = f"reading it failed: {ns.error}"
        elif refuse is not None:
            refusals.setdefault(refuse[0], []).append(f"{ns.name} ({refuse[1]})")
            refused[ns.name] = refuse[1]
        elif ns.terminating:
            terminating.append(ns.name)
            managed.append(ns.name)
            refused[ns.name] = "it is terminating"
        elif dry_run:
            owned.append(ns.name)
            if not ns.exists:
                would_create.append(ns.name)
        elif ns.name in failed:
            problems.append(f"{ns.name}: {failed[ns.name]}")
            refused[ns.name] = f"claiming it failed: {failed[ns.name]}"
        else:
            managed.append(ns.name)
            owned.append(ns.name)
    if not dry_run:
        for ns in facts.dropped:
            error = ns.error or failed.get(ns.name)
            if error:
                problems.append(f"releasing {ns.name}: {error}")
                managed.append(ns.name)

    sections: dict[str, Any] = {}
    if not dry_run:
        sections["managed"] = ManagedNamespaces(namespaces=sorted(set(managed))).dump()
    verdict = Verdict(
        conditions=[_condition(platform, refusals, problems, terminating, would_create)],
        sections=sections,
        progressing=bool(terminating),
        requeue_after=TERMINATING_REQUEUE if terminating else None,
        failed=facts.read_failed or bool(failed),
    )
    return verdict, Claims(tuple(owned), refused)


_REFUSALS: tuple[tuple[Common | Namespaces, str, str], ...] = (
    (
        Common.CONFLICT,
        "Namespace already claimed by another TenantPlatform, left untouched: ",
        ". Choose another spec.namespace/additionalNamespaces or delete the other platform.",
    ),
    (
        Namespaces.PROTECTED,
        "Namespace is protected, never created or adopted by a TenantPlatform: ",
        ". Choose another spec.namespace/additionalNamespaces.",
    ),
    (
        Namespaces.NOT_ADOPTABLE,
        "Namespace exists and is not ours to adopt, left untouched: ",
        f". An admin opts a namespace in with the annotation {manifests.ANNOTATION_ADOPTABLE}=<platform name>.",
    ),
)


def _condition(
    platform: TenantPlatform,
    refusals: Mapping[str, list[str]],
    problems: list[str],
    terminating: list[str],
    would_create: list[str],
) -> conditions.Condition:
    type_ = constants.NAMESPACES_READY
    for reason, before, after in _REFUSALS:
        if reason in refusals:
            others = [n for r, names in refusals.items() if r != reason for n in names]
            also = f" Also refused: {', '.join(others)}." if others else ""
            return conditions.false(type_, reason, before + ", ".join(refusals[reason]) + after + also)
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
