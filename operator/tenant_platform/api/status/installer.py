"""What the installer step records: ``status.recorded.installer``.

The install needs the installer identity's names: the ServiceAccount, its namespace and, when
``spec.installer.kubeconfigSecret.enabled``, the Secret holding its kubeconfig. Never the token.
"""

from __future__ import annotations

from tenant_platform.api.status import StatusModel


class RecordedInstaller(StatusModel):
    """``status.recorded.installer``."""

    service_account_name: str
    namespace: str
    kubeconfig_secret: str | None = None
    """Set once the kubeconfig Secret was written in this pass; absent otherwise."""
