"""What the installer step records: ``status.recorded.installer``.

The install needs the installer identity's names: the ServiceAccount, its namespace and, when
``spec.installer.kubeconfigSecret.enabled``, the Secret holding its kubeconfig and the API server
address that kubeconfig names, with where that address came from. Never the token.
"""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel

ServerSource = Literal["Spec", "ClusterInfo", "OperatorAPI"]
"""Where the kubeconfig's server came from: ``spec.installer.kubeconfigSecret.server``, the
kubeconfig kubeadm publishes in ``kube-public/cluster-info``, or the API address the operator uses."""


class RecordedInstaller(StatusModel):
    """``status.recorded.installer``."""

    service_account_name: str
    namespace: str
    kubeconfig_secret: str | None = None
    """Set once the kubeconfig Secret was written in this pass; absent otherwise."""
    kubeconfig_server: str | None = None
    """The ``server`` of the minted kubeconfig (set with ``kubeconfig_secret``)."""
    kubeconfig_server_source: ServerSource | None = None
    """Where ``kubeconfig_server`` came from."""
