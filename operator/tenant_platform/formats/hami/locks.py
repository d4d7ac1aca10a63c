"""HAMi's node lock (``hami.io/mutex.lock``) and whether it is stale.

The value is ``<RFC3339>,<namespace>,<pod>`` since v2.4 (the legacy value is the timestamp
alone), written by the scheduler's Bind and released by the device plugin. HAMi never sweeps
locks: another pod's Bind takes one over only when it expired or its owner pod is gone, so a
lock left behind blocks new GPU pods on that node until it expires. ``lock_state`` classifies
one, in the operator's order: malformed, expired, dangling, leaked, else active. A malformed
value (oversized, not RFC 3339, a namespace or pod name the API server would not accept) is
reported with a short reason and never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from tenant_platform.api.status.gpu import NodeLockStatus
from tenant_platform.formats.hami.allocations import PodLike
from tenant_platform.formats.hami.bounds import check_size, show
from tenant_platform.formats.hami.names import BIND_DONE, TERMINATED_PHASES, HamiParseError

LockStateName = Literal["active", "expired", "dangling", "leaked", "malformed"]

PodLookup = Callable[[str, str], PodLike | None]

# Namespace and pod names as the API server accepts them (ASCII only: ``re.ASCII``).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
# A lock is a timestamp, a namespace and a pod name: well under 400 characters.
_MAX_LOCK_CHARS = 400
# A lock time this far ahead of our clock is not clock skew.
_CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class NodeLock:
    since: datetime | None
    namespace: str
    pod: str
    state: LockStateName
    reason: str = ""
    """Why the lock is malformed or stale, as a phrase."""

    @property
    def stale(self) -> bool:
        return self.state != "active"

    def to_status(self) -> NodeLockStatus:
        return NodeLockStatus(
            held=True,
            since=rfc3339(self.since) if self.since is not None else None,
            pod=f"{self.namespace}/{self.pod}" if self.pod else "",
            state=self.state,
            stale=self.stale,
            reason=self.reason or None,
        )

    def phrase(self) -> str:
        """``held since <time>, by <ns>/<pod>, <reason>``: what the GPUReady message says of it."""
        parts = []
        if self.since is not None:
            parts.append(f"held since {rfc3339(self.since)}")
        if self.pod:
            parts.append(f"by {self.namespace}/{self.pod}")
        if self.reason:
            parts.append(self.reason)
        return ", ".join(parts)


def parse_lock(value: str) -> tuple[datetime, str, str]:
    """``<RFC3339>,<namespace>,<pod>`` (v2.4+) or a bare timestamp (legacy) -> (since, ns, pod)."""
    check_size(value)
    if len(value) > _MAX_LOCK_CHARS:
        raise HamiParseError(f"lock value is {len(value)} characters long; HAMi writes fewer than {_MAX_LOCK_CHARS}")
    parts = value.split(",")
    if len(parts) not in (1, 3):
        raise HamiParseError(f"lock value has {len(parts)} comma-separated parts; expected 1 or 3")
    stamp = parts[0].strip()
    try:
        since = datetime.fromisoformat(stamp.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise HamiParseError(f"lock time {show(stamp)} is not RFC 3339") from None
    if since.tzinfo is None:
        raise HamiParseError(f"lock time {show(stamp)} has no time zone")
    if len(parts) == 1:
        return since, "", ""
    namespace, pod = parts[1].strip(), parts[2].strip()
    if not namespace or not pod:
        raise HamiParseError("lock value names no pod")
    if not _DNS_LABEL.fullmatch(namespace) or len(pod) > 253 or not _DNS_SUBDOMAIN.fullmatch(pod):
        raise HamiParseError(f"lock owner {show(namespace + '/' + pod)} is not a pod name")
    return since, namespace, pod


def lock_state(value: str, *, now: datetime, timeout: timedelta, owner: PodLookup) -> NodeLock:
    """Classify a node lock, in this order: malformed, expired, dangling, leaked, else active.

    - expired: older than ``timeout`` (HAMi lets the next Bind take it over);
    - dangling: its pod is gone or terminated (HAMi still waits for the timeout);
    - leaked: its pod already finished binding (bind-phase success/failed) or runs, yet the lock
      is still held (the device plugin never released it);
    - a legacy lock (timestamp only) names no pod, so only its age can make it stale.
    """
    try:
        since, namespace, pod_name = parse_lock(value)
    except HamiParseError as exc:
        return NodeLock(None, "", "", "malformed", str(exc))
    age = now - since
    if age < -_CLOCK_SKEW:
        # HAMi compares the age with the timeout too: a lock from the future never expires.
        return NodeLock(since, namespace, pod_name, "malformed", "its time is in the future")
    if age > timeout:
        return NodeLock(since, namespace, pod_name, "expired", f"older than {duration(timeout)}")
    if not pod_name:
        return NodeLock(since, namespace, pod_name, "active")
    pod = owner(namespace, pod_name)
    if pod is None:
        return NodeLock(since, namespace, pod_name, "dangling", "its pod no longer exists")
    if pod.phase in TERMINATED_PHASES:
        return NodeLock(since, namespace, pod_name, "dangling", f"its pod has {pod.phase.lower()}")
    if pod.bind_phase in BIND_DONE:
        return NodeLock(since, namespace, pod_name, "leaked", f"its pod's bind-phase is already {pod.bind_phase}")
    if pod.phase == "Running":
        return NodeLock(since, namespace, pod_name, "leaked", "its pod is already running")
    return NodeLock(since, namespace, pod_name, "active")


def lock_expires_in(lock: NodeLock, *, now: datetime, timeout: timedelta) -> float | None:
    """Seconds until an active lock turns expired (no watch event marks that moment)."""
    if lock.state != "active" or lock.since is None:
        return None
    return max(0.0, (lock.since + timeout - now).total_seconds())


def rfc3339(moment: datetime) -> str:
    text = moment.isoformat()
    return text.replace("+00:00", "Z")


def duration(delta: timedelta) -> str:
    """``5m`` or ``90s``: how the spec writes a lock timeout."""
    seconds = int(delta.total_seconds())
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60}m"
    return f"{seconds}s"
