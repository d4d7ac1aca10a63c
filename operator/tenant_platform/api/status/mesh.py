"""Typed status of the mesh step: what it records in ``status.recorded`` (it owns no section)."""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel

SidecarStyle = Literal["Native", "Classic", "Unknown"]


class MeshRecorded(StatusModel):
    """The mesh facts the install needs."""

    sidecar_style: SidecarStyle
    """How istiod injects the proxy: as a native sidecar (init container with restartPolicy
    Always), as a classic container, or Unknown when it could not be detected."""
