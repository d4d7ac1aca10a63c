"""What the pass records about its target cluster: ``status.recorded.target`` (docs/fleet.md).

Only with ``spec.target``. Set when the target was reached; kept from the last pass that reached
it while it is not. Never a credential: the server URL, the version and the cluster's identity.
"""

from __future__ import annotations

from tenant_platform.api.status import StatusModel


class RecordedTarget(StatusModel):
    """``status.recorded.target``."""

    secret: str
    """The kubeconfig Secret read, ``<namespace>/<name>`` (its key is in spec.target)."""
    server: str
    """The API server URL of the kubeconfig's current context."""
    version: str
    """The target's gitVersion, e.g. v1.31.2."""
    cluster_uid: str = ""
    """The uid of the target's kube-system namespace: a different cluster behind the same URL
    (a recreated tenant control plane) has another."""
