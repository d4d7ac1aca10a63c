"""What the pull-secrets step records: the names in ``spec.imagePullSecrets``, in spec order."""

from __future__ import annotations

from tenant_platform.api.status import StatusModel


class PullSecretsRecorded(StatusModel):
    """The pull-secrets step's part of ``status.recorded`` (the names only, never the contents)."""

    image_pull_secrets: list[str]
