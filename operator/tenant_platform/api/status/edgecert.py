"""What the edge certificate step records: ``status.recorded.edgeCertificate``.

The Secret's coordinates are always there; the certificate's facts only when its ``tls.crt`` and
``tls.key`` could be read, and ``trustConfigMap`` only when a trust bundle is published.
"""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel


class RecordedEdgeCertificate(StatusModel):
    secret_name: str
    namespace: str
    """The Secret's namespace (the gateway namespace)."""
    issuer_mode: Literal["External", "SelfSigned", "CertManager"]
    self_signed: bool | None = None
    not_before: str | None = None
    """RFC 3339, UTC, seconds (``2026-06-01T12:00:00Z``)."""
    not_after: str | None = None
    dns_names: list[str] | None = None
    subject: str | None = None
    issuer: str | None = None
    publicly_trusted: bool | None = None
    trust_config_map: str | None = None
