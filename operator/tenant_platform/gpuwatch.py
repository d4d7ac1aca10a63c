"""The watches behind the GPU snapshot: Node and Pod list-and-watch threads, and the debounced GPU
refresher that turns snapshot changes into wakeups.

The kopf startup handler (handlers.py) calls ``start`` and the cleanup handler ``stop_all``; the
watches of target clusters (targetwatch.py) reuse ``start_watches`` and ``gpu_refresher``.
Nothing here writes to the API, and no finalizer is ever put on a Node or Pod.

Why not kopf's own watches for Nodes and Pods: kopf handles every watched object with a
per-object worker, and its index barrier (which holds handlers back until the initial listing is
indexed) wakes every waiting worker on every object it indexes. Measured with 2,000 nodes and
20,000 pods (docs/performance.md): neither ``@kopf.index`` nor ``@kopf.on.event`` handlers got
through the initial listing within several minutes of CPU time. A plain list-and-watch per kind
(``observe.reflector.Reflector``, two threads) does it in seconds, keeps only the fields we need,
tells exactly when the first listing is complete (``SNAPSHOT.synced``), and relists after a
watch gap so deleted objects cannot linger. kopf still runs everything about TenantPlatforms.

``gpu_refresher`` runs in one thread for the whole operator: it waits for snapshot changes and,
at most once per debounce window, hands the nodes they touched to ``on_change``
(state.OperatorState.wake_gpu wakes the platforms that depend on them for a GPU-only pass), so
a busy cluster causes one partial pass (and at most one status write) per window per affected
platform, not one per pod event.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.kube.client import Kube
from tenant_platform.observe import cluster
from tenant_platform.observe.cluster import Changes, ClusterSnapshot
from tenant_platform.observe.reflector import Reflector

log = logging.getLogger("tenant_platform.gpu")

Refresh = Callable[[Changes], object]
"""Called with the snapshot's changes since the last call (``Changes.nodes``: the nodes touched)."""


@dataclass
class GpuWatches:
    """The running Node and Pod reflectors of one snapshot."""

    snapshot: ClusterSnapshot
    reflectors: list[Reflector]
    stopped: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def stop(self, timeout: float = 2.0) -> None:
        """Ask both threads to stop (they are daemons: a watch blocked in a read ends with it)."""
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout)


def start_watches(kube: Kube, snapshot: ClusterSnapshot | None = None, *, watch_timeout: int = 300) -> GpuWatches:
    """List and watch Nodes and live Pods into ``snapshot`` (default: the process's SNAPSHOT)."""
    snap = snapshot if snapshot is not None else cluster.SNAPSHOT
    watches = GpuWatches(
        snap, [Reflector(kube, snap, kind, watch_timeout=watch_timeout, log=log) for kind in ("nodes", "pods")]
    )
    for reflector in watches.reflectors:
        thread = threading.Thread(
            target=reflector.run, args=(watches.stopped,), name=f"gpu-watch-{reflector.kind}", daemon=True
        )
        thread.start()
        watches.threads.append(thread)
    return watches


_RUNNING: list[GpuWatches] = []


def start(kube: Kube, *, on_change: Refresh, debounce: float) -> GpuWatches:
    """Start the Node and Pod watches and one refresher thread calling ``on_change`` (debounced)
    with the snapshot's changes.

    Called from the operator's startup handler (handlers.start_cluster_watches); ``stop_all`` undoes it.
    """
    watches = start_watches(kube)
    thread = threading.Thread(
        target=gpu_refresher,
        kwargs={"stopped": watches.stopped, "refresh": on_change, "debounce": debounce},
        name="gpu-refresher",
        daemon=True,
    )
    thread.start()
    watches.threads.append(thread)
    _RUNNING.append(watches)
    return watches


def stop_all() -> None:
    while _RUNNING:
        _RUNNING.pop().stop()


def _is_stopped(stopped: Any) -> bool:
    if isinstance(stopped, threading.Event):
        return stopped.is_set()
    return bool(stopped)


def _sleep(stopped: Any, seconds: float) -> bool:
    """Sleep up to ``seconds`` in short steps; True when stopped meanwhile."""
    deadline = time.monotonic() + seconds
    while not _is_stopped(stopped):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(0.2, remaining))
    return True


def gpu_refresher(
    *,
    stopped: Any,
    refresh: Refresh,
    debounce: float,
    snapshot: ClusterSnapshot | None = None,
    poll: float = 1.0,
    since: int | None = None,
    sleep: Callable[[Any, float], bool] = _sleep,
) -> None:
    """Call ``refresh(changes)`` after the GPU snapshot changed, at most once per ``debounce``
    seconds; ``changes.nodes(platform)``: the nodes those changes touched (None for any).

    ``stopped``: kopf's DaemonStopped flag, a threading.Event, or anything truthy when done.
    After a change it waits ``debounce`` seconds (more changes are gathered meanwhile), then
    calls ``refresh`` once; changes during the refresh trigger another round. Exceptions from
    ``refresh`` are logged, never raised, so the refresher outlives a failed pass. ``poll``
    bounds how long a stop request can go unnoticed. ``since``: the change counter already
    handled (default: the current one). ``sleep`` is injectable for tests.

    The operator runs one, started by ``start`` with ``refresh`` waking the platforms whose GPU
    result depends on the changed nodes for a GPU-only pass (state.OperatorState.wake_gpu).

    A caller that runs a first pass itself should read ``snapshot.changes`` before that pass and
    pass it as ``since``, so changes made during the pass trigger the next one.
    """
    snap = snapshot if snapshot is not None else cluster.SNAPSHOT
    seen = snap.changes if since is None else since
    while not _is_stopped(stopped):
        current = snap.wait_for_change(seen, timeout=poll)
        if current == seen:
            continue
        if sleep(stopped, debounce):
            return
        previous, seen = seen, snap.changes
        try:
            refresh(Changes(snap, previous, seen))
        except Exception:
            log.exception("GPU status refresh failed; will retry on the next change")
