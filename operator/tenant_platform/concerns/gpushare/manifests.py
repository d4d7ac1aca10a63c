"""The GPU share's children: one ResourceQuota per platform namespace, each with the whole share
(pure render; docs/gpu.md says why per namespace).

Keys are ``requests.<resource>``, the only form ResourceQuota accepts for extended resources
(kubernetes/website content/en/docs/concepts/policy/resource-quotas.md, "Resource quota for
extended resources"), with HAMi's resource names: the ones the GPU step read from HAMi's
ConfigMap this pass (``status.recorded.gpuResourceNames``), else HAMi's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenant_platform.api.models import GpuShare, TenantPlatform
from tenant_platform.api.status.gpu import ResourceNamesStatus
from tenant_platform.core.verdict import Manifest
from tenant_platform.formats.hami.names import DEFAULT_NAMES

COMPONENT = "gpushare"
QUOTA_NAME = "tenant-platform-gpu-share"
REQUESTS = "requests."


@dataclass(frozen=True)
class ShareNames:
    """HAMi's names of the three resources a share bounds."""

    cards: str = DEFAULT_NAMES.count
    memory: str = DEFAULT_NAMES.memory
    cores: str = DEFAULT_NAMES.cores


def names_from(recorded: ResourceNamesStatus | None) -> ShareNames:
    """The names the GPU step recorded this pass, else HAMi's defaults."""
    if recorded is None:
        return ShareNames()
    return ShareNames(cards=recorded.count, memory=recorded.memory, cores=recorded.cores)


def amounts(share: GpuShare, names: ShareNames) -> dict[str, int]:
    """The share by resource name, in the spec's order (cards, memory, cores); unset ones left out."""
    found = {names.cards: share.cards}
    if share.memory_mib is not None:
        found[names.memory] = share.memory_mib
    if share.cores_percent is not None:
        found[names.cores] = share.cores_percent
    return found


def quota_key(resource: str) -> str:
    return f"{REQUESTS}{resource}"


_DECIMAL_SUFFIXES = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))


def canonical(amount: int) -> str:
    """``amount`` as the API server stores a whole quantity (``20000`` -> ``20k``), so the intent
    compares equal to what it reads back and an unchanged share is never written again."""
    for suffix, exponent in _DECIMAL_SUFFIXES:
        if amount and amount % 10**exponent == 0:
            return f"{amount // 10**exponent}{suffix}"
    return str(amount)


def render_quota(namespace: str, share: GpuShare, names: ShareNames) -> Manifest:
    hard = {quota_key(resource): canonical(amount) for resource, amount in amounts(share, names).items()}
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": namespace},
        "spec": {"hard": hard},
    }


def render(platform: TenantPlatform, names: ShareNames | None = None) -> list[Manifest]:
    """One ResourceQuota per namespace of the platform (spec order); none without a share."""
    share = platform.spec.gpu.share
    if share is None:
        return []
    return [render_quota(ns, share, names or ShareNames()) for ns in platform.spec.all_namespaces]
