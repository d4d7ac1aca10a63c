"""What the API-addresses step records (``kubernetesAPI``) and the check it reports.

That step owns no condition: its findings go to ``status.checks.kubernetesAPI`` as a ``Check``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tenant_platform.api.status import StatusModel


class KubernetesAPI(StatusModel):
    """``status.recorded.kubernetesAPI``: the addresses and ports a NetworkPolicy must allow."""

    service_cidrs: list[str] = Field(alias="serviceCIDRs")
    endpoint_cidrs: list[str] = Field(alias="endpointCIDRs")
    service_ports: list[int]
    endpoint_ports: list[int]


class APIAddressesRecorded(StatusModel):
    """The API-addresses step's part of ``status.recorded``."""

    kubernetes_api: KubernetesAPI = Field(alias="kubernetesAPI")


class Check(StatusModel):
    """One ``status.checks`` entry that is not a condition: a Pass or a Warn, with why."""

    result: Literal["Pass", "Warn"]
    message: str
