"""What the storage step records: the StorageClass and the memory of the write test.

``status.recorded`` gets ``storageClassName`` and ``storageVolumeBindingMode`` when a class was
found, and ``storageVerification`` while a write test runs or its verdict stands (see
concerns/storage/step.py for the state machine that memory drives).
"""

from __future__ import annotations

from enum import StrEnum

from tenant_platform.api.status import StatusModel


class VerificationResult(StrEnum):
    """Where a write test stands."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"


FINISHED: frozenset[VerificationResult] = frozenset(
    {VerificationResult.SUCCEEDED, VerificationResult.FAILED, VerificationResult.TIMED_OUT}
)


class StorageVerification(StatusModel):
    """``status.recorded.storageVerification``: one write test, by the attempt id naming its objects."""

    storage_class_name: str
    attempt: int
    """The Unix time the test started; the test objects' names end in it."""
    result: VerificationResult
    started_at: str
    namespace: str | None = None
    """Where the test ran: the platform's namespace (absent: the operator's own, where tests ran
    before they moved to the platform's; such a verdict does not stand)."""
    finished_at: str | None = None
    message: str | None = None
    cleaned_up: bool | None = None
    """Set when the test finished: False while its objects could not be deleted yet."""

    @property
    def leftover(self) -> bool:
        """Objects of this test may still exist: it is running, or deleting them failed."""
        return self.result == VerificationResult.RUNNING or self.cleaned_up is False


class StorageRecorded(StatusModel):
    """The storage step's part of ``status.recorded``."""

    storage_class_name: str | None = None
    storage_volume_binding_mode: str | None = None
    storage_verification: StorageVerification | None = None
