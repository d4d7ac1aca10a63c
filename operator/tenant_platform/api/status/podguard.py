"""Typed status of the pod guard step: the ``status.podGuard`` section (it records no facts).

Part of it is the shared pod guard's parameter (concerns/podguard/manifests.py): the API server reads
``namespaces``, ``enforcement`` and ``proxyImageRepositories`` from the TenantPlatform itself, so
only the operator writes them (status subresource) and the step writes them before it checks.
"""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel

InEffect = Literal["Deny", "Warn", "None"]
Requested = Literal["Deny", "Warn", "Staged"]


class PodGuardStatus(StatusModel):
    """``status.podGuard``: the guard's parameter and, for Staged, what the last check found."""

    enforcement: InEffect
    """The parameter: the policies that judge this platform's namespaces (Deny or Warn); None
    when the guard is not in place (not served, not applied)."""
    requested: Requested
    """``spec.podGuard.enforcement``."""
    namespaces: tuple[str, ...] | None = None
    """The parameter: the namespaces the guard covers (those this platform owns)."""
    proxy_image_repositories: tuple[str, ...] | None = None
    """The parameter: the validated ``spec.podGuard.proxyImageRepositories``."""
    pods_that_would_be_denied: int | None = None
    """Staged only: existing pods the guard would deny."""
    examples: tuple[str, ...] | None = None
    """Staged only: at most five "namespace/pod: reason"."""
    pods_not_checked: int | None = None
    """Staged only, when some re-submissions failed."""
