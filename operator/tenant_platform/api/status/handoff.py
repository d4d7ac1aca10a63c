"""``status.recorded`` as the install-values hand-off reads it: typed, and nothing dropped.

The hand-off (reconcile/installvalues.py, and ``tenant-platform facts`` from a live object) turns
every recorded fact into the values document (render/values.py). It parses them through
``Recorded``: the facts the storage, API-addresses, pull-secrets and object-store steps record
with their own models (api/status/<concern>.py), the sections other steps own through small
readers of the fields known here. Readers and ``Recorded`` keep any field they do not name
(``extra="allow"``), so a fact recorded by a newer step, or a status written by an older operator,
still reaches the values unchanged: ``Recorded.load(x).dump() == x`` for every recorded ``x``
without null values.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from tenant_platform.api.status import StatusModel
from tenant_platform.api.status.apiaddresses import KubernetesAPI
from tenant_platform.api.status.objectstore import RecordedObjectStore
from tenant_platform.api.status.storage import StorageVerification


class Reader(StatusModel):
    """A section another step owns, read by the hand-off: named fields typed, the rest kept."""

    model_config = ConfigDict(extra="allow")


class InstallerFacts(Reader):
    """``installer`` (the installer step)."""

    service_account_name: str | None = None
    namespace: str | None = None
    kubeconfig_secret: str | None = None


class GatewayFacts(Reader):
    """``gateway`` (the gateway step)."""

    name: str | None = None
    namespace: str | None = None
    selector: dict[str, str] | None = None
    service_account_name: str | None = None
    service_host: str | None = None
    mesh_namespace: str | None = None
    management: str | None = None


class EdgeCertificateFacts(Reader):
    """``edgeCertificate`` (the edge-certificate step); times stay RFC 3339 text."""

    secret_name: str | None = None
    namespace: str | None = None
    issuer_mode: str | None = None
    self_signed: bool | None = None
    not_before: str | None = None
    not_after: str | None = None
    dns_names: list[str] | None = None
    subject: str | None = None
    issuer: str | None = None
    publicly_trusted: bool | None = None
    trust_config_map: str | None = None


class DNSFacts(Reader):
    """``dns`` (the DNS step)."""

    management: str | None = None
    distribution: str | None = None
    mode: str | None = None
    config_map: str | None = None
    key: str | None = None


class GPUNodeFacts(Reader):
    """One ``gpuNodes`` entry (the GPU step)."""

    name: str
    model: str | None = None
    cards: int | None = None


class Recorded(StatusModel):
    """``status.recorded`` for the hand-off. ``dump`` gives back exactly what was parsed."""

    model_config = ConfigDict(extra="allow")

    domain: str | None = None
    # Owned by the steps of this module's siblings (typed by their own models).
    storage_class_name: str | None = None
    storage_volume_binding_mode: str | None = None
    storage_verification: StorageVerification | None = None
    kubernetes_api: KubernetesAPI | None = Field(None, alias="kubernetesAPI")
    image_pull_secrets: list[str] | None = None
    object_store: RecordedObjectStore | None = None
    # Owned by other steps (read through the small readers above).
    installer: InstallerFacts | None = None
    gateway: GatewayFacts | None = None
    sidecar_style: str | None = None
    edge_certificate: EdgeCertificateFacts | None = None
    dns: DNSFacts | None = None
    gpu_nodes: list[GPUNodeFacts] | None = None
    gpu_resource_names: dict[str, str] | None = None

    @classmethod
    def parse(cls, recorded: Any) -> Recorded:
        """``status.recorded`` (a mapping) as typed facts."""
        parsed: Recorded = cls.model_validate(recorded or {})
        return parsed

    @property
    def pull_secret_names(self) -> list[str]:
        return list(self.image_pull_secrets or [])
