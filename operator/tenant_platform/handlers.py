"""kopf wiring: thin adapters around ``reconcile.run`` and ``reconcile.cleanup``.

Design (see docs/architecture.md):
- the process state (``OperatorState``: settings, the API client, per-platform wakeups, the
  watched-cluster snapshot) is built at start-up from explicit Settings (``main.run`` installs
  it); importing this module only registers the kopf handlers;
- one async daemon per TenantPlatform runs the level-triggered reconcile loop, so passes of one
  object are serialised by construction; each pass runs in a bounded thread pool. The loop wakes
  on spec/annotation changes (watch events), on requests from steps (``requeue_after``), on
  watched cluster changes (``wake_all``), and on the drift interval; a change to the GPU
  snapshot wakes only the platforms whose GPU result depends on it, for a GPU-only pass
  (``wake_gpu``: reconcile.run(only=GPU_ONLY));
- the watch handler never writes: kopf stores no progress or diff-base annotations for us;
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
import concurrent.futures
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import kopf

from tenant_platform import handlers_gpu, metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gpu import step as gpu
from tenant_platform.concerns.target.step import TargetConnection
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.backoff import Backoff
from tenant_platform.kube.cache import CachedKube
from tenant_platform.kube.client import Kube
from tenant_platform.kube.events import EventRecorder
from tenant_platform.observe import cluster

log = logging.getLogger("tenant_platform.handlers")
Logger = logging.Logger | logging.LoggerAdapter[Any]

# How often an idle platform loop looks for a wakeup (no I/O: a flag check).
WAKEUP_POLL_SECONDS = 0.25
# A blocked deletion is retried this often (kopf.TemporaryError) until reconcile.cleanup gives up.
DELETION_RETRY_SECONDS = 10
# How long the delete handler waits for an in-flight pass before kopf retries it.
DELETION_LOCK_WAIT_SECONDS = 30.0
# Retry delay of a pass that failed with an API error or crashed: exponential back-off with full
# jitter (kube/backoff.py), per platform, reset by a pass that completes. An API error waits at
# most 1 s, 2 s, 4 s, ... up to ERROR_RETRY_SECONDS; a crash (a bug) starts at 5 s, up to
# CRASH_RETRY_SECONDS. The jitter spreads the retries of every platform (and of both replicas)
# that failed together, e.g. while the API server was down.
ERROR_RETRY_BASE_SECONDS = 1.0
ERROR_RETRY_SECONDS = 60.0
CRASH_RETRY_BASE_SECONDS = 5.0
CRASH_RETRY_SECONDS = 30.0
RETRY_FLOOR_SECONDS = 0.5
RETRY_RANDOM = random.Random()
"""The random source of the jitter (tests seed it)."""


def retry_backoffs() -> tuple[Backoff, Backoff]:
    """A platform loop's back-offs: (after an API error, after a crash)."""
    return (
        Backoff(base=ERROR_RETRY_BASE_SECONDS, cap=ERROR_RETRY_SECONDS, floor=RETRY_FLOOR_SECONDS, rng=RETRY_RANDOM),
        Backoff(base=CRASH_RETRY_BASE_SECONDS, cap=CRASH_RETRY_SECONDS, floor=RETRY_FLOOR_SECONDS, rng=RETRY_RANDOM),
    )


REPORTING_CONTROLLER = f"{constants.GROUP}/tenant-platform-operator"
GPU_ONLY: frozenset[str] = frozenset({gpu.COMPONENT})
"""The steps of the pass a GPU snapshot change asks for (the pipeline adds the hand-off when the
recorded GPU facts changed)."""


class OperatorState:
    """Process-wide state shared by the handlers (one per operator process, see ``install``)."""

    def __init__(self, settings: Settings, *, kube: Kube | None = None) -> None:
        self.settings = settings
        self.kube = kube
        self.wakeups: dict[str, threading.Event] = {}
        # Platforms whose pending wakeup asks for a GPU-only pass (any other wakeup: a full one).
        self.gpu_only: set[str] = set()
        # Platforms whose next pass must read Secrets from the API even when woken early (their
        # spec or pause annotation changed); any other early pass may reuse recent Secret reads.
        self.fresh: set[str] = set()
        self.seen: dict[str, tuple[int, str]] = {}
        self.lock = threading.Lock()
        # Returns the watched-cluster snapshot steps read (GPU nodes and HAMi pods); set by the
        # GPU watch wiring. None means "no snapshot": steps that need one load it themselves.
        self.observed_provider: Callable[[], Any] = lambda: None
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._events: EventRecorder | None = None
        self._pass_locks: dict[str, threading.Lock] = {}
        # name -> monotonic start of the pass running now (for /healthz: a stuck pass)
        self.running: dict[str, float] = {}
        self.last_pass_end: float | None = None
        # Monotonic time kopf's event loop last ticked (handlers.keep_heartbeat); None before.
        self.heartbeat: float | None = None
        # Set to stop the operator (main.run passes it to kopf as its stop flag).
        self.stopping = threading.Event()
        # spec.target: the Node and Pod watches of each target cluster (docs/fleet.md).
        self.targets = handlers_gpu.TargetSnapshots(
            wake=self.wake,
            debounce=settings.gpu_debounce,
            hami_namespaces=settings.cache_hami_namespaces,
            mesh_namespace=settings.cache_mesh_namespace,
        )

    def events(self) -> EventRecorder:
        """The recorder every pass and deletion posts its events through."""
        with self.lock:
            if self._events is None:
                self._events = EventRecorder(
                    self.client(), controller=REPORTING_CONTROLLER, instance=self.settings.identity or "operator"
                )
            return self._events

    def pass_lock(self, name: str) -> threading.Lock:
        """Held by a platform's reconcile pass and by its cleanup: never both at once."""
        with self.lock:
            return self._pass_locks.setdefault(name, threading.Lock())

    def oldest_pass(self, now: float) -> float:
        """Seconds the longest-running pass has been running (0 when none runs)."""
        with self.lock:
            return max((now - started for started in self.running.values()), default=0.0)

    def executor(self) -> concurrent.futures.ThreadPoolExecutor:
        """The bounded pool reconcile passes run in (the client is synchronous)."""
        with self.lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self.settings.reconcile_workers, thread_name_prefix="reconcile"
                )
            return self._executor

    def client(self) -> Kube:
        if self.kube is None:
            self.kube = Kube.from_kubeconfig(self.settings.kubeconfig, context=self.settings.kube_context)
        return self.kube

    def wakeup(self, name: str) -> threading.Event:
        with self.lock:
            return self.wakeups.setdefault(name, threading.Event())

    def wake(self, name: str) -> None:
        """Ask for a full pass of ``name``."""
        with self.lock:
            self.gpu_only.discard(name)
            self.wakeups.setdefault(name, threading.Event()).set()

    def wake_fresh(self, name: str) -> None:
        """Ask for a full pass of ``name`` that reads its Secrets from the API."""
        with self.lock:
            self.fresh.add(name)
        self.wake(name)

    def take_fresh(self, name: str) -> bool:
        with self.lock:
            fresh = name in self.fresh
            self.fresh.discard(name)
            return fresh

    def wake_all(self) -> None:
        with self.lock:
            self.gpu_only.clear()
            for event in self.wakeups.values():
                event.set()

    def wake_gpu(self, changes: cluster.Changes) -> int:
        """The GPU snapshot changed: wake each platform whose GPU result depends on the nodes the
        changes touched for it (``changes.nodes(name)``) for a GPU-only pass (a full pass already
        asked for stays full). Returns how many were woken."""
        with self.lock:
            names = list(self.wakeups)
        lookup = changes.snapshot.node
        woken = [name for name in names if gpu.SCOPES.depends_on(name, changes.nodes(name), lookup)]
        with self.lock:
            for name in woken:
                event = self.wakeups.get(name)
                if event is None:
                    continue
                if not event.is_set():
                    self.gpu_only.add(name)
                event.set()
        return len(woken)

    def take_wakeup(self, name: str) -> bool:
        """Clear ``name``'s wakeup; True when what woke it asked only for a GPU-only pass."""
        with self.lock:
            event = self.wakeups.setdefault(name, threading.Event())
            gpu_only = event.is_set() and name in self.gpu_only
            self.gpu_only.discard(name)
            event.clear()
            return gpu_only

    def forget(self, name: str) -> None:
        """Drop a deleted platform's wakeup and fingerprint."""
        with self.lock:
            self.wakeups.pop(name, None)
            self.gpu_only.discard(name)
            self.fresh.discard(name)
            self.seen.pop(name, None)
            self._pass_locks.pop(name, None)
        self.targets.release(name)

    def observe_target(self, platform: TenantPlatform, connection: TargetConnection) -> Any:
        """The watched snapshot and read cache of a platform's target cluster (reconcile.run's
        ``observe_target``)."""
        if connection.kube is None:
            return None
        return self.targets.observe(platform.name, connection.key, connection.resource_version, connection.kube)


_installed: list[OperatorState] = []


def install(state: OperatorState | None) -> None:
    """Make ``state`` the process's operator state (``main.run`` does, before kopf starts);
    None removes it."""
    _installed[:] = [state] if state is not None else []


def current() -> OperatorState:
    """The installed operator state; the handlers run only after ``main.run`` installed it."""
    if not _installed:
        raise RuntimeError("no operator state: start the operator with tenant_platform.main.run(settings)")
    return _installed[0]


@kopf.on.startup()
def start_cluster_watches(**_: Any) -> None:
    """Watch Nodes and Pods into the GPU snapshot; a change wakes the platforms it concerns for a
    GPU-only pass (debounced, ``OperatorState.wake_gpu``).

    NB: plain list-and-watch threads, not kopf handlers: at 2,000 nodes and 20,000 pods kopf's
    per-object machinery did not get through the initial listing (docs/gpu.md).
    """
    state = current()
    state.observed_provider = lambda: cluster.SNAPSHOT
    handlers_gpu.start(state.client(), on_change=state.wake_gpu, debounce=state.settings.gpu_debounce)


@kopf.on.cleanup()
def stop_cluster_watches(**_: Any) -> None:
    handlers_gpu.stop_all()
    if _installed:
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


def reconcile_once(name: str, *, gpu_only: bool = False, reuse_secrets: bool = False) -> tuple[float, bool]:
    """One pass for one platform (fresh read, under its pass lock): (seconds until the next pass,
    whether it was a partial, GPU-only one). ``reuse_secrets``: Secrets read within the drift
    interval are not read again (kube/secretwatch.RecentReads)."""
    state = current()
    with state.pass_lock(name):
        started = time.monotonic()
        with state.lock:
            state.running[name] = started
        try:
            return _pass(state, name, gpu_only=gpu_only, reuse_secrets=reuse_secrets)
        finally:
            with state.lock:
                state.running.pop(name, None)
                state.last_pass_end = time.monotonic()


def _pass(state: OperatorState, name: str, *, gpu_only: bool, reuse_secrets: bool = False) -> tuple[float, bool]:
    kube = state.client()
    settings = state.settings
    if reuse_secrets and isinstance(kube, CachedKube):
        kube = kube.reusing_secrets(settings.drift_interval)
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    if body is None or body.get("metadata", {}).get("deletionTimestamp"):
        return settings.drift_interval, False
    outcome = reconcile.run(
        body,
        kube=kube,
        settings=settings,
        now=state.clock(),
        observed=state.observed_provider(),
        observe_target=state.observe_target,
        only=GPU_ONLY if gpu_only else None,
    )
    metrics.record_pass(name, partial=outcome.partial)
    _post_events(state, body, outcome.transitions, outcome.events)
    wait = settings.drift_interval
    if outcome.requeue_after is not None:
        wait = min(wait, max(outcome.requeue_after, 1.0))
    return wait, outcome.partial


def _post_events(
    state: OperatorState,
    body: Mapping[str, Any],
    transitions: list[tuple[str, str, str]],
    extra: list[tuple[str, str, str]],
) -> None:
    recorder = state.events()
    for type_, status, reason in transitions:
        if type_ == constants.RECONCILING:
            continue
        message = f"{type_} is now {status} ({reason})."
        warning = (status == "False" and type_ != constants.STALLED) or (
            type_ == constants.STALLED and status == "True"
        )
        recorder.post(body, "Warning" if warning else "Normal", reason, message)
    for kind, reason, message in extra:
        recorder.post(body, "Warning" if kind == "Warning" else "Normal", reason, message)


@kopf.daemon(*_resource(), cancellation_timeout=10.0)
async def platform_loop(name: str, stopped: kopf.DaemonStopped, logger: Logger, **_: Any) -> None:
    """The per-platform reconcile loop.

    NB: async on purpose. A sync daemon holds one of kopf's worker threads for the platform's
    whole life, so with more platforms than workers the rest would never start. Here a platform
    only takes a thread (from a bounded pool) while a pass runs.
    """
    state = current()
    wakeup = state.wakeup(name)
    state.wake(name)
    loop = asyncio.get_running_loop()
    # The next pass comes at a wakeup or after ``wait``: the drift interval, or sooner when the
    # last pass asked (a step's requeue_after) or failed. The first pass runs at once; later
    # waits look at the wakeup only after one poll, so a burst of changes costs one more pass.
    # A GPU-only pass keeps the time the last full pass set for the next one (``due``), so GPU
    # churn never postpones the drift check. Secrets have a clock of their own (``fresh_due``): a
    # full pass before it (woken by an event: a child or fact changed; or a step's requeue) reuses
    # Secrets read within the drift interval and does not move it, so the drift timer's pass still
    # comes once per drift interval and reads them from the API (a Secret changed by someone else
    # is seen within one drift interval, as before), while a burst of events costs no Secret GETs.
    # A change of the platform itself (``wake_fresh``) reads them again at once.
    wait = state.settings.drift_interval
    due = fresh_due = time.monotonic()
    first = True
    on_error, on_crash = retry_backoffs()
    while not stopped:
        if not await _wait(wakeup, stopped, wait, first_check=first):
            break
        first = False
        now = time.monotonic()
        gpu_only = state.take_wakeup(name) and now < due
        fresh = state.take_fresh(name)
        reuse = now < fresh_due and not fresh and not gpu_only
        try:
            wait, partial = await loop.run_in_executor(
                state.executor(), functools.partial(reconcile_once, name, gpu_only=gpu_only, reuse_secrets=reuse)
            )
            now = time.monotonic()
            if partial:
                wait = min(wait, max(0.0, due - now))
            else:
                if not reuse:
                    fresh_due = now + state.settings.drift_interval
                wait = min(wait, max(0.0, fresh_due - now))
                due = now + wait
            on_error.reset()
            on_crash.reset()
        except errors.KubeError as exc:
            wait = on_error.next()
            logger.warning("reconcile of %s failed: %s; retrying in %.1fs", name, exc, wait)
        except Exception:
            wait = on_crash.next()
            logger.exception("reconcile of %s crashed; retrying in %.1fs", name, wait)


async def _wait(
    wakeup: threading.Event, stopped: kopf.DaemonStopped, seconds: float, *, first_check: bool = True
) -> bool:
    """Wait up to ``seconds`` for a wakeup; True when it is time to reconcile (not stopped).

    Wakeups come from other threads (watch handlers, the GPU refresher), hence a threading.Event
    polled at a short interval rather than an asyncio.Event.
    """
    deadline = time.monotonic() + seconds
    while not stopped:
        if first_check and wakeup.is_set():
            return True
        first_check = True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        await asyncio.sleep(min(WAKEUP_POLL_SECONDS, remaining))
    return False


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
        _post_events(state, body, [], outcome.events)
    finally:
        lock.release()
    if not outcome.finished:
        raise kopf.TemporaryError(outcome.message, delay=DELETION_RETRY_SECONDS)
    state.forget(name)
