"""Names one concern defines and another reads, in one place, so concerns stay independent.

- the installer ServiceAccount's user and groups (the installer concern creates it; the mesh
  concern asks what it may do);
- the pod guard's fixed policy and binding names (the pod guard writes them; the mesh concern's
  dry run names them when a denial comes from them; the target phase lists them);
- the Istio Gateway's kind (the gateway concern writes it; the edge certificate concern reads the
  live Gateways for the ``credentialName`` they serve);
- our node-label field managers (the gpu concern writes with them; the watched snapshot in
  observe/ reads them off each node's managedFields);
- the annotation on namespaces the operator created (the namespaces concern writes it and
  deletes only those; the pod guard keeps no guard for a namespace the deletion removes).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final, Literal

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform

# -- the installer identity -------------------------------------------------------------------


def service_account_user(platform: TenantPlatform) -> tuple[str, list[str]]:
    """(username, groups) the API server assigns the installer ServiceAccount's tokens."""
    ns = platform.spec.namespace
    sa = platform.spec.installer.service_account_name
    return (
        f"system:serviceaccount:{ns}:{sa}",
        ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
    )


# -- the namespaces the operator created ------------------------------------------------------

NAMESPACE_CREATED_ANNOTATION: Final = f"{constants.GROUP}/created-by-operator"
"""Set on namespaces the operator created (not adopted): only those may ever be deleted by it
(under ``deletionPolicy: Delete``)."""


# -- the pod guard's names ------------------------------------------------------------------------

Enforcement = Literal["Deny", "Warn"]
ENFORCEMENTS: Final[tuple[Enforcement, ...]] = ("Deny", "Warn")

POD_GUARD: Final = "tenant-platform-pod-guard"
EXEC_GUARD: Final = "tenant-platform-exec-guard"
_MAX_NAME: Final = 253
_PREFIX: Final = "tenant-platform-"


@dataclass(frozen=True)
class GuardNames:
    """The pod guard's and the exec guard's policy (and binding) names for one enforcement."""

    pod_guard: str
    exec_guard: str


def guard_names(enforcement: Enforcement, platform_name: str = "") -> GuardNames:
    """The shared names (``platform_name`` empty), or a target cluster's per-platform ones
    (shortened with a stable hash when the platform name is long)."""
    suffix = f"-{enforcement.lower()}"
    if not platform_name:
        return GuardNames(pod_guard=f"{POD_GUARD}{suffix}", exec_guard=f"{EXEC_GUARD}{suffix}")
    base = platform_name
    longest_suffix = len("-exec-guard-deny")
    if len(_PREFIX) + len(base) + longest_suffix > _MAX_NAME:
        digest = hashlib.sha256(platform_name.encode()).hexdigest()[:8]
        keep = _MAX_NAME - len(_PREFIX) - longest_suffix - len(digest) - 1
        base = f"{platform_name[:keep].rstrip('-.')}-{digest}"
    return GuardNames(pod_guard=f"{_PREFIX}{base}-pod-guard{suffix}", exec_guard=f"{_PREFIX}{base}-exec-guard{suffix}")


def all_names(platform_name: str = "") -> tuple[str, ...]:
    """Every policy (and binding) name: pod guard Deny, Warn, exec guard Deny, Warn."""
    pairs = [guard_names(e, platform_name) for e in ENFORCEMENTS]
    return (*(n.pod_guard for n in pairs), *(n.exec_guard for n in pairs))


SHARED_NAMES: Final = all_names()
"""The four shared policy names, which are also the binding names (deploy/base/rbac.yaml)."""


# -- the Istio Gateway ----------------------------------------------------------------------------

GATEWAY_API_VERSION: Final = "networking.istio.io/v1"
GATEWAY_KIND: Final = "Gateway"


# -- node-label field managers --------------------------------------------------------------------

# Field managers of earlier versions, one per platform: "tenant-platform-operator/<platform>".
# Still read (a node may carry them after an upgrade) and released, never written.
LABEL_MANAGER_PREFIX: Final = "tenant-platform-operator/"
# Our node-label field managers, one per label key and value, shared by every platform that wants
# that value: "tenant-platform-operator/labels/<key>=<value>".
VALUE_MANAGER_PREFIX: Final = LABEL_MANAGER_PREFIX + "labels/"


def label_manager(platform: str) -> str:
    """The per-platform field manager earlier versions labelled nodes with."""
    return LABEL_MANAGER_PREFIX + platform
