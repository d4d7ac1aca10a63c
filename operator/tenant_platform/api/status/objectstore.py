"""What the object-store step records: ``objectStore`` {mode, and for S3 endpoint, bucket, region,
credentialsSecret (the Secret's name only)}."""

from __future__ import annotations

from typing import Literal

from tenant_platform.api.status import StatusModel


class RecordedObjectStore(StatusModel):
    """``status.recorded.objectStore``. Builtin, or S3 without its settings, records the mode only."""

    mode: Literal["Builtin", "S3"]
    endpoint: str | None = None
    bucket: str | None = None
    region: str | None = None
    credentials_secret: str | None = None


class ObjectStoreRecorded(StatusModel):
    """The object-store step's part of ``status.recorded``."""

    object_store: RecordedObjectStore
