"""What HAMi does with the node lock a node carries (pure), by HAMi's own release rules.

HAMi never sweeps locks; the scheduler's next Bind on the node decides (HAMi pkg/util/nodelock
``LockNode``):

- a lock it cannot parse fails that Bind, and every later one, until someone removes it;
- an expired lock (older than the node-lock timeout), or one whose pod is NotFound, is released
  and taken over by that Bind;
- a lock whose pod still exists (running, finished binding, Succeeded or Failed) makes the Bind
  fail with "node has been locked within ..." until it expires; then the next Bind takes it over.

So only a ``malformed`` lock (formats/hami/locks.py ``lock_state``) needs a person: it
``blocks``. ``expired``, ``dangling`` and ``leaked`` locks are left behind but go by themselves
(``outlook`` says how); clearing them by hand is a lab workaround, not advice for a cluster.
The snapshot holds live pods only, so a ``dangling`` lock's pod may be gone (taken over at the
next Bind) or finished and still stored (taken over once the lock expires).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tenant_platform.formats.hami.locks import NodeLock, rfc3339


def blocks(lock: NodeLock) -> bool:
    """HAMi will not take this lock over by itself: binds on the node fail until it is removed."""
    return lock.state == "malformed"


def left_behind(lock: NodeLock) -> bool:
    """Stale, but HAMi's next Bind takes it over (at once, or once it expires)."""
    return lock.state in ("expired", "dangling", "leaked")


def expires_at(lock: NodeLock, timeout: timedelta) -> datetime | None:
    """When HAMi starts treating the lock as expired (None: a lock without a readable time)."""
    return lock.since + timeout if lock.since is not None else None


def outlook(lock: NodeLock, *, timeout: timedelta) -> str:
    """What HAMi does with a left-behind lock, as a phrase (empty for active and malformed locks)."""
    expiry = expires_at(lock, timeout)
    when = f"at {rfc3339(expiry)}" if expiry is not None else "after its timeout"
    if lock.state == "expired":
        return "HAMi takes it over at the next GPU pod's bind"
    if lock.state == "dangling":
        return f"HAMi takes it over at the next GPU pod's bind if the pod is gone, or once it expires {when}"
    if lock.state == "leaked":
        return f"binds there wait until it expires {when}, then HAMi takes it over"
    return ""


def turns_expired_in(lock: NodeLock, *, now: datetime, timeout: timedelta) -> float | None:
    """Seconds until an active, dangling or leaked lock turns expired (no watch event marks that
    moment, and what HAMi does with it changes then)."""
    if lock.state not in ("active", "dangling", "leaked"):
        return None
    expiry = expires_at(lock, timeout)
    if expiry is None:
        return None
    return max(0.0, (expiry - now).total_seconds())
