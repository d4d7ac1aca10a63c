"""kopf wiring: thin adapters around ``reconcile.run`` and ``reconcile.cleanup``.

Design (see docs/architecture.md):
- the process state (state.OperatorState: settings, the API client, per-platform wakeups, the
  watched-cluster snapshot) is built at start-up from explicit Settings (``main.run`` installs
  it); importing this module only registers the kopf handlers;
- one async daemon per TenantPlatform runs the level-triggered reconcile loop of scheduler.py
  (``scheduler.platform_loop``: passes of one object serialised by construction, each in a
  bounded thread pool, at wakeups, requeues and the drift interval; GPU-only passes);
- the watch handler never writes: kopf stores no progress or diff-base annotations for us; it
  only wakes the platform's loop when its spec or annotations changed;
- the Node and Pod watches behind the GPU snapshot (gpuwatch.py) start and stop with kopf;
- deletion runs ``reconcile.cleanup`` behind our finalizer (every step's cleanup, reverse order;
  it reports what blocks in status and gives up after a deadline); this module only turns its
  outcome into events and kopf's retry. Cleanup takes the platform's pass lock, so it waits for a
  pass that started before the deletion (a late pass would re-add what cleanup removed), and
  every pass that starts later reads the deletionTimestamp and does nothing;
- events are posted through kube.events (any thread), never kopf.info/warn (kopf's context
  variables exist only in kopf's own tasks, not in our reconcile pool);
- kopf runs only while this process leads (main.py): these handlers never run on a standby.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import kopf

from tenant_platform import gpuwatch, reconcile, scheduler
from tenant_platform.api import constants
from tenant_platform.observe import cluster
from tenant_platform.state import current, installed

log = logging.getLogger("tenant_platform.handlers")
Logger = logging.Logger | logging.LoggerAdapter[Any]

# A blocked deletion is retried this often (kopf.TemporaryError) until reconcile.cleanup gives up.
DELETION_RETRY_SECONDS = 10
# How long the delete handler waits for an in-flight pass before kopf retries it.
DELETION_LOCK_WAIT_SECONDS = 30.0


@kopf.on.startup()
def start_cluster_watches(**_: Any) -> None:
    """Watch Nodes and Pods into the GPU snapshot; a change wakes the platforms it concerns for a
    GPU-only pass (debounced, ``OperatorState.wake_gpu``).

    NB: plain list-and-watch threads, not kopf handlers: at 2,000 nodes and 20,000 pods kopf's
    per-object machinery did not get through the initial listing (docs/gpu.md).
    """
    state = current()
    state.observed_provider = lambda: cluster.SNAPSHOT
    gpuwatch.start(state.client(), on_change=state.wake_gpu, debounce=state.settings.gpu_debounce)


@kopf.on.cleanup()
def stop_cluster_watches(**_: Any) -> None:
    gpuwatch.stop_all()
    if installed():
        current().targets.stop_all()


HEARTBEAT_SECONDS = 1.0


@kopf.on.startup()
async def keep_heartbeat(**_: Any) -> None:
    """Tick ``state.heartbeat`` from kopf's event loop, so /healthz notices a frozen loop."""
    state = current()

    async def beat() -> None:
        # Ends once the operator stops (kopf otherwise waits 5 s for it as a "hung" task).
        while not state.stopping.is_set():
            state.heartbeat = time.monotonic()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    state.heartbeat = time.monotonic()
    _background.add(asyncio.get_running_loop().create_task(beat()))


_background: set[asyncio.Task[None]] = set()


def _resource() -> tuple[str, str, str]:
    return constants.GROUP, constants.VERSION, constants.PLURAL


@kopf.on.event(*_resource())
def on_platform_event(name: str, body: kopf.Body, **_: Any) -> None:
    """Wake the platform's loop when its spec (generation) or annotations changed."""
    meta = body.get("metadata", {})
    annotations = meta.get("annotations") or {}
    fingerprint = (int(meta.get("generation") or 0), annotations.get(constants.ANNOTATION_PAUSED, ""))
    state = current()
    if state.seen.get(name) != fingerprint:
        state.seen[name] = fingerprint
        state.wake_fresh(name)


@kopf.daemon(*_resource(), cancellation_timeout=10.0)
async def platform_loop(name: str, stopped: kopf.DaemonStopped, logger: Logger, **_: Any) -> None:
    """The per-platform reconcile loop (scheduler.platform_loop).

    NB: async on purpose. A sync daemon holds one of kopf's worker threads for the platform's
    whole life, so with more platforms than workers the rest would never start. Here a platform
    only takes a thread (from a bounded pool) while a pass runs.
    """
    await scheduler.platform_loop(name, stopped, logger)


@kopf.on.delete(*_resource())
def on_delete(body: kopf.Body, name: str, logger: Logger, **_: Any) -> None:
    """Clean up (reconcile.cleanup) once no pass runs; kopf retries while something blocks."""
    state = current()
    lock = state.pass_lock(name)
    if not lock.acquire(timeout=DELETION_LOCK_WAIT_SECONDS):
        raise kopf.TemporaryError(f"waiting for the reconcile pass of {name} in flight to finish", delay=1)
    try:
        outcome = reconcile.cleanup(
            dict(body), kube=state.client(), settings=state.settings, now=state.clock(), logger=logger
        )
        scheduler.post_events(state, body, [], outcome.events)
    finally:
        lock.release()
    if not outcome.finished:
        raise kopf.TemporaryError(outcome.message, delay=DELETION_RETRY_SECONDS)
    state.forget(name)
