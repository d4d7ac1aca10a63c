"""GPUShareReady, decided (pure): the tenant's GPU share as ResourceQuotas, and what they report.

The step (concerns/gpushare/step.py) gathers ``GpuShareFacts``: our ResourceQuota in each of the
platform's namespaces as read (None where there is none). ``evaluate`` decides:

- the quotas to apply (``desired``): one per namespace with the whole share
  (concerns/gpushare/manifests.py), none without ``spec.gpu.share`` (the step prunes ours);
- the condition, by the first finding of ``CHECKS``, in this order:
  QuotaPending (a quota not applied yet, or its status not yet computed by the quota controller
  for the share asked: False, in progress, back soon) > UsageAboveShare (a namespace uses more
  than the share, e.g. after the share was lowered: running pods are never evicted; False) >
  ShareExhausted (a namespace uses all of one resource: True, the quota does its job, new pods
  asking for it are refused) > ShareEnforced (True); NoShare (True) without a share;
- ``status.gpuShare``: per namespace the quota's ``hard`` and ``used`` as its status says, and per
  resource the share, the platform's use summed over its namespaces and their ratio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import GpuShare, TenantPlatform
from tenant_platform.api.reasons import GPUShare
from tenant_platform.api.status.gpushare import GpuShareStatus, NamespaceQuota, ShareResource
from tenant_platform.concerns.gpushare import manifests
from tenant_platform.concerns.gpushare.manifests import ShareNames
from tenant_platform.core import conditions
from tenant_platform.core.checks import Chain, Check
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Manifest, Verdict

SECTION = "gpuShare"
PENDING_REQUEUE = 2.0
"""Come back this soon while the quota controller has not computed a quota's status."""

_SUFFIXES = {
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def quantity(value: Any) -> int | None:
    """A Kubernetes quantity (``2``, ``20k``, ``1500m``, ``1Gi``, ``1e3``) as a whole number,
    rounded up as the quota system does; None for anything else (never raises)."""
    text = str(value if value is not None else "").strip()
    if not text or len(text) > 40 or not text.isascii():
        return None
    factor = Decimal(1)
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)]:
            factor, text = _SUFFIXES[suffix], text[: -len(suffix)]
            break
    try:
        number = Decimal(text) * factor
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    return int(number.to_integral_value(rounding=ROUND_CEILING))


@dataclass(frozen=True)
class QuotaFacts:
    """Our ResourceQuota in one of the platform's namespaces, as read (None: there is none)."""

    namespace: str
    live: Manifest | None = None


@dataclass(frozen=True)
class GpuShareFacts:
    quotas: tuple[QuotaFacts, ...] = ()

    def live(self, namespace: str) -> Manifest | None:
        return next((q.live for q in self.quotas if q.namespace == namespace), None)


def amounts_of(section: Mapping[str, Any] | None) -> dict[str, int]:
    """A quota's ``hard`` or ``used`` map, keyed by resource (``requests.`` dropped), whole numbers."""
    found: dict[str, int] = {}
    for key, value in (section or {}).items():
        amount = quantity(value)
        if amount is not None and str(key).startswith(manifests.REQUESTS):
            found[str(key)[len(manifests.REQUESTS) :]] = amount
    return found


@dataclass(frozen=True)
class Observed:
    """One namespace: what the share asks (``want``), and the quota's spec and status as read."""

    namespace: str
    want: dict[str, int]
    spec_hard: dict[str, int]
    status_hard: dict[str, int]
    used: dict[str, int]
    exists: bool


@dataclass(frozen=True)
class Subject:
    """What every check looks at: the share (by resource name) and each namespace as observed."""

    share: dict[str, int]
    namespaces: tuple[Observed, ...]


def observe(platform: TenantPlatform, share: GpuShare, names: ShareNames, facts: GpuShareFacts) -> Subject:
    want = manifests.amounts(share, names)
    observed = []
    for namespace in platform.spec.all_namespaces:
        live = facts.live(namespace) or {}
        status = live.get("status") or {}
        observed.append(
            Observed(
                namespace=namespace,
                want=want,
                spec_hard=amounts_of((live.get("spec") or {}).get("hard")),
                status_hard=amounts_of(status.get("hard")),
                used=amounts_of(status.get("used")),
                exists=bool(live),
            )
        )
    return Subject(share=want, namespaces=tuple(observed))


def _join(items: list[str]) -> str:
    return "; ".join(items)


def quota_pending(subject: Subject) -> Condition | None:
    """A quota not applied yet, or one whose status the quota controller has not computed for the
    share asked (quota admission judges pods by ``status.hard``, and refuses them while it lacks
    the resource's usage)."""
    unapplied = [o.namespace for o in subject.namespaces if not o.exists or o.spec_hard != o.want]
    uncomputed = [
        o.namespace
        for o in subject.namespaces
        if o.namespace not in unapplied and any(o.status_hard.get(r) != a or r not in o.used for r, a in o.want.items())
    ]
    if not unapplied and not uncomputed:
        return None
    found = []
    if unapplied:
        found.append(f"not applied yet (or changed by hand) in namespace {', '.join(unapplied)}")
    if uncomputed:
        found.append(
            f"in namespace {', '.join(uncomputed)} the quota controller (kube-controller-manager) has not "
            "computed its status for the share yet; until it has, the API server judges pods asking GPU "
            "resources there by the quota's previous status, or refuses them"
        )
    message = f"ResourceQuota {manifests.QUOTA_NAME}: " + "; ".join(found) + "."
    return conditions.false(constants.GPU_SHARE_READY, GPUShare.QUOTA_PENDING, message)


def usage_above_share(subject: Subject) -> Condition | None:
    """A namespace uses more than its share (the share was lowered, or pods predate the quota):
    running pods are never evicted, new pods asking for the resource are refused."""
    found = [
        f"namespace {o.namespace} uses {o.used[r]} {r}, above the share of {a}"
        for o in subject.namespaces
        for r, a in o.want.items()
        if o.used.get(r, 0) > a
    ]
    if not found:
        return None
    message = (
        _join(found) + ". Running pods are not evicted; new pods asking for it are refused until enough of "
        "them end (or raise spec.gpu.share)."
    )
    return conditions.false(constants.GPU_SHARE_READY, GPUShare.ABOVE_SHARE, message)


def share_exhausted(subject: Subject) -> Condition | None:
    """A namespace uses all of one resource of the share: the quota works; new pods wait."""
    found = [
        f"namespace {o.namespace} uses all {a} {r}"
        for o in subject.namespaces
        for r, a in o.want.items()
        if o.used.get(r, 0) == a
    ]
    if not found:
        return None
    message = _join(found) + " of its share: the API server refuses new pods asking for more until some end."
    return conditions.true(constants.GPU_SHARE_READY, GPUShare.EXHAUSTED, message)


CHECKS = Chain[Subject, Condition](
    Check("quota not applied or not computed", quota_pending),
    Check("usage above the share", usage_above_share),
    Check("share used up", share_exhausted),
)


def enforced(subject: Subject) -> Condition:
    share = ", ".join(f"{a} {r}" for r, a in subject.share.items())
    used = ", ".join(f"{sum(o.used.get(r, 0) for o in subject.namespaces)} {r}" for r in subject.share)
    count = len(subject.namespaces)
    where = "its namespace" if count == 1 else f"each of its {count} namespaces"
    message = f"ResourceQuota {manifests.QUOTA_NAME} bounds {where} to {share}; in use: {used}."
    return conditions.true(constants.GPU_SHARE_READY, GPUShare.ENFORCED, message)


def section(subject: Subject) -> GpuShareStatus:
    resources = []
    for resource, amount in subject.share.items():
        used = sum(o.used.get(resource, 0) for o in subject.namespaces)
        resources.append(ShareResource(resource=resource, share=amount, used=used, used_ratio=ratio(used, amount)))
    namespaces = [
        NamespaceQuota(
            namespace=o.namespace,
            quota=manifests.QUOTA_NAME,
            hard={r: o.status_hard[r] for r in o.want if r in o.status_hard},
            used={r: o.used[r] for r in o.want if r in o.used},
        )
        for o in subject.namespaces
    ]
    return GpuShareStatus(resources=resources, namespaces=namespaces)


def ratio(used: int, share: int) -> float:
    return round(used / share, 4) if share > 0 else 0.0


def evaluate(platform: TenantPlatform, facts: GpuShareFacts, names: ShareNames) -> Verdict:
    """The quotas to apply, the condition (first finding of ``CHECKS``) and ``status.gpuShare``."""
    share = platform.spec.gpu.share
    if share is None:
        message = "spec.gpu.share is not set: no GPU quota in the platform's namespaces."
        return Verdict(conditions=[conditions.true(constants.GPU_SHARE_READY, GPUShare.NO_SHARE, message)])
    subject = observe(platform, share, names, facts)
    found = CHECKS.first(subject)
    condition = found.value if found is not None else enforced(subject)
    pending = found is not None and found.value.reason == GPUShare.QUOTA_PENDING
    return Verdict(
        conditions=[condition],
        desired=manifests.render(platform, names),
        sections={SECTION: section(subject).dump()},
        progressing=pending,
        requeue_after=PENDING_REQUEUE if pending else None,
    )
