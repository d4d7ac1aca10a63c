"""Typed ``status.gpuShare`` (the GPUShareReady concern's section): the tenant's share, and each
of its ResourceQuotas' ``hard`` and ``used`` as the quota controller computed them, per namespace
and in total. Amounts are integers in the resource's own unit (cards, MiB, percent of a card),
keyed by HAMi's resource name (``nvidia.com/gpu``, ...; the cluster's names if HAMi renames them).
"""

from __future__ import annotations

from tenant_platform.api.status import StatusModel


class ShareResource(StatusModel):
    """One resource of the share: what the spec asks, what the quotas say, what the tenant uses."""

    resource: str
    """HAMi's resource name (``nvidia.com/gpu``); the quota key is ``requests.<resource>``."""
    share: int
    """The spec's share (every namespace's quota has it whole)."""
    used: int
    """Used in all the platform's namespaces together (the sum of the quotas' ``used``)."""
    used_ratio: float
    """``used / share`` for the platform (above 1 is possible with several namespaces: docs/gpu.md)."""


class NamespaceQuota(StatusModel):
    """One namespace's ResourceQuota as its status says (empty until the controller computed it)."""

    namespace: str
    quota: str
    hard: dict[str, int]
    used: dict[str, int]


class GpuShareStatus(StatusModel):
    resources: list[ShareResource]
    namespaces: list[NamespaceQuota]
