"""``status.recorded``, typed: every fact the steps record, by the steps' own models.

Each step records its facts with its own model (api/status/<concern>.py) and hands them over as a
fragment of ``status.recorded``; the pipeline validates each fragment into ``Recorded`` as it
arrives (``StepContext.record``), so a malformed fact fails the step that recorded it, and the
install-values hand-off (concerns/installvalues/step.py, and ``tenant-platform facts`` from a live
object) reads the facts typed. ``Recorded`` keeps any top-level fact it does not name
(``extra="allow"``): a fact recorded by a newer step still reaches the values unchanged, and
``Recorded.parse(x).dump() == x`` for every recorded ``x`` without null values.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from tenant_platform.api.status import StatusModel
from tenant_platform.api.status.apiaddresses import KubernetesAPI
from tenant_platform.api.status.dns import DnsRecord
from tenant_platform.api.status.edgecert import RecordedEdgeCertificate
from tenant_platform.api.status.gateway import RecordedGateway
from tenant_platform.api.status.gpu import GpuNodeRecord, ResourceNamesStatus
from tenant_platform.api.status.installer import RecordedInstaller
from tenant_platform.api.status.mesh import SidecarStyle
from tenant_platform.api.status.objectstore import RecordedObjectStore
from tenant_platform.api.status.storage import StorageVerification
from tenant_platform.api.status.target import RecordedTarget


class Recorded(StatusModel):
    """``status.recorded`` for the hand-off. ``dump`` gives back exactly what was parsed."""

    model_config = ConfigDict(extra="allow")

    domain: str | None = None
    # storage, apiaddresses, pullsecrets, objectstore
    storage_class_name: str | None = None
    storage_volume_binding_mode: str | None = None
    storage_verification: StorageVerification | None = None
    kubernetes_api: KubernetesAPI | None = Field(None, alias="kubernetesAPI")
    image_pull_secrets: list[str] | None = None
    object_store: RecordedObjectStore | None = None
    # installer, gateway, mesh, edgecert, dns, gpu
    installer: RecordedInstaller | None = None
    gateway: RecordedGateway | None = None
    sidecar_style: SidecarStyle | None = None
    edge_certificate: RecordedEdgeCertificate | None = None
    dns: DnsRecord | None = None
    gpu_nodes: list[GpuNodeRecord] | None = None
    gpu_resource_names: ResourceNamesStatus | None = None
    # spec.target only (the pipeline records it, docs/fleet.md)
    target: RecordedTarget | None = None

    @classmethod
    def parse(cls, recorded: Any) -> Recorded:
        """``status.recorded`` (a mapping) as typed facts."""
        parsed: Recorded = cls.model_validate(recorded or {})
        return parsed

    @classmethod
    def fragment(cls, recorded: dict[str, Any]) -> Recorded:
        """One step's fragment of ``status.recorded`` (validated: a malformed fact raises)."""
        return cls.parse(recorded)

    def with_fragment(self, fragment: Recorded) -> Recorded:
        """These facts with a step's typed ``fragment`` on top (only the fields it set)."""
        update = {name: getattr(fragment, name) for name in fragment.model_fields_set}
        update.update(fragment.model_extra or {})
        return self.model_copy(update=update)

    def merged(self, fragment: dict[str, Any]) -> Recorded:
        """These facts with a step's ``fragment`` of ``status.recorded`` on top, the fragment
        validated first (a malformed fact raises ``pydantic.ValidationError``)."""
        parsed = Recorded.model_validate(fragment)
        update = {name: getattr(parsed, name) for name in parsed.model_fields_set}
        update.update(parsed.model_extra or {})
        return self.model_copy(update=update)

    @property
    def pull_secret_names(self) -> list[str]:
        return list(self.image_pull_secrets or [])
