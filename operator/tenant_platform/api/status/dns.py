"""Typed status of the DNS step: what it records in ``status.recorded.dns``.

The step owns no top-level status section. ``DnsRecord`` is always present with ``management``;
under ``management: CoreDNS`` it adds the distribution and the mode it recognised, the evidence
when the distribution manages CoreDNS itself, and the ConfigMap (and, for ``import``, the key)
that holds our rewrite.
"""

from __future__ import annotations

from enum import StrEnum

from tenant_platform.api.status import StatusModel


class Mode(StrEnum):
    """Where the rewrite goes: the main Corefile, an imported ``*.override`` key, or nowhere."""

    COREFILE = "corefile"
    IMPORT = "import"
    MANAGED = "managed"


class DnsRecord(StatusModel):
    """``status.recorded.dns``."""

    management: str
    """spec.dns.management: CoreDNS, External or Disabled."""
    distribution: str | None = None
    """k0s, k3s, rke2, aks, addon-manager or generic (CoreDNS only)."""
    mode: Mode | None = None
    evidence: str | None = None
    """Why the distribution is taken to manage CoreDNS (mode managed, with a CoreDNS ConfigMap)."""
    config_map: str | None = None
    """<namespace>/<name> of the ConfigMap holding our rewrite (modes corefile and import)."""
    key: str | None = None
    """Our key in that ConfigMap (mode import)."""
