"""What the gateway step records: ``status.recorded.gateway``, the coordinates installs need."""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel


class RecordedGateway(StatusModel):
    """The Gateway the platform's routes attach to, and the workload behind it (from the spec)."""

    name: str
    namespace: str
    selector: dict[str, str]
    service_account_name: str
    service_host: str
    mesh_namespace: str
    management: Literal["Managed", "External"]
