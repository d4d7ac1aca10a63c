"""PURE: what the staged check of the pod guard found (filled in by concerns/podguard/step.py), and
the PodGuardReady condition while staged enforcement waits (concerns/podguard/verdict.py decides when)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from tenant_platform.api import constants, reasons
from tenant_platform.concerns.podguard import manifests
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition

TYPE: Final = constants.POD_GUARD_READY
MAX_EXAMPLES: Final = 5


@dataclass
class PodVerdict:
    """One pod's dry-run result: the guard's reasons (empty: admitted), or why it was not checked."""

    reasons: list[str] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class InjectedCheck:
    """The dry run of a pod injected the way the live injector would inject (manifests.injected_canary)."""

    source: str
    """The injector's ConfigMap, ``namespace/name``."""
    injector: manifests.Injector | None = None
    reasons: tuple[str, ...] = ()
    """The guard's reasons (empty: admitted)."""
    error: str = ""
    """Why the pod could not be checked (unreadable values, a failed dry run)."""


@dataclass
class StagedCheck:
    """What re-submitting the existing pods found (built up pod by pod by the step)."""

    checked: int = 0
    violators: list[tuple[str, list[str]]] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)
    inactive: list[str] = field(default_factory=list)
    """Namespaces where the canary showed the policy not (yet) in effect."""
    injected: InjectedCheck | None = None
    """The injector canary; None when no injector ConfigMap exists (no Istio, or not yet)."""

    @property
    def clean(self) -> bool:
        injected_ok = self.injected is None or not (self.injected.reasons or self.injected.error)
        return injected_ok and not (self.violators or self.unchecked or self.inactive)

    def examples(self) -> list[str]:
        return [f"{name}: {'; '.join(reasons)}" for name, reasons in self.violators[:MAX_EXAMPLES]]


def join(items: Sequence[str], limit: int = MAX_EXAMPLES) -> str:
    shown = "; ".join(items[:limit])
    return shown + (f"; and {len(items) - limit} more" if len(items) > limit else "")


def waiting(check: StagedCheck) -> Condition:
    """Staged enforcement waits: the injector's pods or existing pods would be denied, pods could
    not be checked, or the policy is not live."""
    injected = check.injected
    if injected is not None and injected.injector is not None and injected.reasons:
        return injected_denied(injected, injected.injector)
    if injected is not None and injected.error:
        return conditions.false(
            TYPE,
            reasons.PodGuard.PODS_NOT_CHECKED,
            f"Staged enforcement is waiting: a pod injected the way the injector in {injected.source} injects "
            f"could not be checked: {injected.error}. Fix the cause or set spec.podGuard.enforcement to Deny "
            "after checking an injected pod yourself.",
        )
    if check.violators:
        return conditions.false(
            TYPE,
            reasons.PodGuard.VIOLATING_PODS_FOUND,
            f"Staged enforcement is waiting: {len(check.violators)} existing pod(s) would be denied: "
            + join(check.examples())
            + ". The guards stay at [Warn, Audit] until these pods are fixed or removed, then switch to "
            "[Deny, Audit] by themselves.",
        )
    if check.unchecked:
        return conditions.false(
            TYPE,
            reasons.PodGuard.PODS_NOT_CHECKED,
            f"Staged enforcement is waiting: {len(check.unchecked)} pod(s) could not be re-submitted as a "
            "dry run, so the guard cannot tell whether they would be denied: "
            + join([f"{n}: {e}" for n, e in check.unchecked])
            + ". Fix the cause (for example quota or a missing ServiceAccount) or set "
            "spec.podGuard.enforcement to Deny after reviewing them.",
        )
    return conditions.false(
        TYPE,
        reasons.PodGuard.WAITING_FOR_POLICY,
        "Staged enforcement is waiting for the API server to load the pod guard policy in: "
        + ", ".join(check.inactive)
        + ".",
    )


def injected_denied(injected: InjectedCheck, injector: manifests.Injector) -> Condition:
    """The live injector's pods would be denied: name the image and the field to change."""
    image = injector.init_image
    container = "istio-validation" if injector.cni else manifests.ISTIO_INIT_NAME
    mode = "CNI on" if injector.cni else "CNI off"
    image_denied = any("image" in r for r in injected.reasons)
    if injector.privileged:
        fix = (
            f"the injector sets global.proxy.privileged true ({injected.source}), which makes {container} "
            "privileged; set it to false"
        )
    elif image_denied:
        fix = (
            f"add {manifests.repository_of(image)} to spec.podGuard.proxyImageRepositories, or point the "
            f"injector's global.hub (now {injector.hub or 'unset'}) at an allowed repository"
        )
    else:
        fix = "fix what the guard names in the injector's configuration"
    return conditions.false(
        TYPE,
        reasons.PodGuard.INJECTED_POD_WOULD_BE_DENIED,
        f"Staged enforcement is waiting: a pod injected the way the injector in {injected.source} injects "
        f"({container} image {image}, {mode}) would be denied: {join(list(injected.reasons), 3)}. To fix: "
        f"{fix}. The guards stay at [Warn, Audit] until then.",
    )
