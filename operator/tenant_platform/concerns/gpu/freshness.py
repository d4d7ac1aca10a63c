"""What GPUReady says while the watched snapshot is not current (pure; concerns/gpu/verdict.py uses it).

Before the snapshot's first complete listing a pass keeps the previous GPUReady, ``status.gpu``
and recorded GPU facts (an operator restart neither flaps Ready nor empties the install values)
for up to STALE_AFTER seconds, then reports ``SnapshotNotSynced``; a snapshot that stopped being
current longer ago than STALE_AFTER is reported as ``SnapshotStale`` (by the verdict).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import pydantic

from tenant_platform.api import constants, reasons
from tenant_platform.api.status.gpu import GpuRecorded, GpuStatus
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.formats.hami.locks import rfc3339

# How soon to look again while the snapshot's first listing is incomplete (seconds).
UNSYNCED_REQUEUE: Final = 5.0
# A snapshot not current for longer than this is reported (seconds); shorter relists are normal.
STALE_AFTER: Final = 120.0
# How soon to look again while the snapshot is stale (seconds).
STALE_REQUEUE: Final = 30.0


def since_phrase(stale_since: datetime | None, why: str) -> str:
    """``<time> (<why>)``: since when the snapshot is not current."""
    when = rfc3339(stale_since) if stale_since is not None else "the operator started"
    return f"{when} ({why})" if why else when


def unsynced(
    old: Mapping[str, Any],
    *,
    since: str,
    sections: dict[str, Any],
    recorded: dict[str, Any],
    stale_for: float,
) -> tuple[Condition, dict[str, Any], dict[str, Any]]:
    """The first listing is incomplete: keep what the previous pass reported, say so when old.

    The previous ``status.gpu`` and recorded GPU facts are kept (an incomplete snapshot would
    otherwise empty them, and the install values with them). The previous GPUReady is kept for
    up to STALE_AFTER (an operator restart does not flap Ready); after that, or without one,
    GPUReady is Unknown with SnapshotNotSynced.
    """
    old_gpu = old.get("gpu")
    if isinstance(old_gpu, dict):
        with contextlib.suppress(pydantic.ValidationError):
            sections = {"gpu": GpuStatus.model_validate(old_gpu).dump()}
    old_recorded = {k: v for k, v in (old.get("recorded") or {}).items() if k in ("gpuNodes", "gpuResourceNames")}
    if old_recorded:
        with contextlib.suppress(pydantic.ValidationError):
            recorded = GpuRecorded.model_validate(old_recorded).dump()
    previous = _previous_condition(old)
    if previous is not None and stale_for <= STALE_AFTER:
        return previous, sections, recorded
    message = (
        f"The watched GPU snapshot has not completed its first listing of nodes and pods since "
        f"{since}; the last reported GPU status is kept and the operator looks again in "
        f"{UNSYNCED_REQUEUE:.0f} s."
    )
    return conditions.unknown(constants.GPU_READY, reasons.GPU.SNAPSHOT_NOT_SYNCED, message), sections, recorded


def _previous_condition(old_status: Mapping[str, Any]) -> Condition | None:
    """The GPUReady condition the previous pass wrote, when its reason is still in the catalogue."""
    for cond in old_status.get("conditions") or ():
        if not isinstance(cond, dict) or cond.get("type") != constants.GPU_READY:
            continue
        reason = str(cond.get("reason") or "")
        status = cond.get("status")
        member: reasons.GPU | reasons.Common
        try:
            member = reasons.GPU(reason)
        except ValueError:
            try:
                member = reasons.Common(reason)
            except ValueError:
                return None
        if member in (reasons.GPU.SNAPSHOT_NOT_SYNCED, reasons.Common.NOT_YET_REPORTED):
            return None
        message = str(cond.get("message") or "")
        if status == "True":
            return conditions.true(constants.GPU_READY, member, message)
        if status == "False":
            return conditions.false(constants.GPU_READY, member, message)
        return conditions.unknown(constants.GPU_READY, member, message)
    return None
