"""kopf wiring: thin adapters around ``reconcile.run`` and ``reconcile.cleanup``.

Design (see docs/architecture.md):
- the process state (``OperatorState``: settings, the API client, per-platform wakeups, the
  watched-cluster snapshot) is built at start-up from explicit Settings (``main.run`` installs
  it); importing this module only registers the kopf handlers;
- one async daemon per TenantPlatform runs the level-triggered reconcile loop, so passes of one
  object are serialised by construction; each pass runs in a bounded thread pool. The loop wakes
  on spec/annotation changes (watch events), on requests from steps (``requeue_after``), on
  watched cluster changes (``wake_all``), and on the drift interval;
- the watch handler never writes: kopf stores no progress or diff-base annotations for us;
- deletion runs ``reconcile.cleanup`` behind our finalizer (every step's cleanup, reverse order;
  it reports what blocks in status and gives up after a deadline); this module only turns its
  outcome into events and kopf's retry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

import kopf

from tenant_platform import handlers_gpu, reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.observe import cluster

log = logging.getLogger("tenant_platform.handlers")
Logger = logging.Logger | logging.LoggerAdapter[Any]

# How often an idle platform loop looks for a wakeup (no I/O: a flag check).
WAKEUP_POLL_SECONDS = 0.25
# A blocked deletion is retried this often (kopf.TemporaryError) until reconcile.cleanup gives up.
DELETION_RETRY_SECONDS = 10


class OperatorState:
    """Process-wide state shared by the handlers (one per operator process, see ``install``)."""

    def __init__(self, settings: Settings, *, kube: Kube | None = None) -> None:
        self.settings = settings
        self.kube = kube
        self.wakeups: dict[str, threading.Event] = {}
        self.seen: dict[str, tuple[int, str]] = {}
        self.lock = threading.Lock()
        # Returns the watched-cluster snapshot steps read (GPU nodes and HAMi pods); set by the
        # GPU watch wiring. None means "no snapshot": steps that need one load it themselves.
        self.observed_provider: Callable[[], Any] = lambda: None
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

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
            self.kube = Kube.from_kubeconfig(self.settings.kubeconfig)
        return self.kube

    def wakeup(self, name: str) -> threading.Event:
        with self.lock:
            return self.wakeups.setdefault(name, threading.Event())

    def wake(self, name: str) -> None:
        self.wakeup(name).set()

    def wake_all(self) -> None:
        with self.lock:
            events = list(self.wakeups.values())
        for event in events:
            event.set()

    def forget(self, name: str) -> None:
        """Drop a deleted platform's wakeup and fingerprint."""
        with self.lock:
            self.wakeups.pop(name, None)
            self.seen.pop(name, None)


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
    """Watch Nodes and Pods into the GPU snapshot; any change wakes every platform (debounced).

    NB: plain list-and-watch threads, not kopf handlers: at 2,000 nodes and 20,000 pods kopf's
    per-object machinery did not get through the initial listing (docs/gpu.md).
    """
    state = current()
    state.observed_provider = lambda: cluster.SNAPSHOT
    handlers_gpu.start(state.client(), on_change=state.wake_all, debounce=state.settings.gpu_debounce)


@kopf.on.cleanup()
def stop_cluster_watches(**_: Any) -> None:
    handlers_gpu.stop_all()


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
        state.wake(name)


def reconcile_once(name: str) -> float:
    """One pass for one platform (fresh read); returns seconds until the next pass."""
    state = current()
    kube = state.client()
    settings = state.settings
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    if body is None or body.get("metadata", {}).get("deletionTimestamp"):
        return settings.drift_interval
    outcome = reconcile.run(body, kube=kube, settings=settings, now=state.clock(), observed=state.observed_provider())
    _post_events(body, outcome.transitions, outcome.events)
    wait = settings.drift_interval
    if outcome.requeue_after is not None:
        wait = min(wait, max(outcome.requeue_after, 1.0))
    return wait


def _post_events(
    body: Mapping[str, Any], transitions: list[tuple[str, str, str]], extra: list[tuple[str, str, str]]
) -> None:
    ref = cast(kopf.Body, body)  # kopf only reads apiVersion, kind and metadata from it
    for type_, status, reason in transitions:
        if type_ == constants.RECONCILING:
            continue
        message = f"{type_} is now {status} ({reason})."
        if (status == "False" and type_ != constants.STALLED) or (type_ == constants.STALLED and status == "True"):
            kopf.warn(ref, reason=reason, message=message)
        else:
            kopf.info(ref, reason=reason, message=message)
    for kind, reason, message in extra:
        (kopf.warn if kind == "Warning" else kopf.info)(ref, reason=reason, message=message)


@kopf.daemon(*_resource(), cancellation_timeout=10.0)
async def platform_loop(name: str, stopped: kopf.DaemonStopped, logger: Logger, **_: Any) -> None:
    """The per-platform reconcile loop.

    NB: async on purpose. A sync daemon holds one of kopf's worker threads for the platform's
    whole life, so with more platforms than workers the rest would never start. Here a platform
    only takes a thread (from a bounded pool) while a pass runs.
    """
    state = current()
    wakeup = state.wakeup(name)
    wakeup.set()
    loop = asyncio.get_running_loop()
    while not stopped:
        if not await _wait(wakeup, stopped, state.settings.drift_interval):
            continue
        wakeup.clear()
        try:
            # In kopf's context: kopf.info/warn (the pass's Events) read kopf's settings from it.
            wait = await loop.run_in_executor(state.executor(), contextvars.copy_context().run, reconcile_once, name)
        except errors.KubeError as exc:
            logger.warning("reconcile of %s failed: %s; retrying", name, exc)
            wait = 10.0
        except Exception:
            logger.exception("reconcile of %s crashed; retrying", name)
            wait = 30.0
        await _wait(wakeup, stopped, wait, first_check=False)


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
    """Clean up (reconcile.cleanup); kopf retries while something blocks, until the deadline."""
    state = current()
    outcome = reconcile.cleanup(
        dict(body), kube=state.client(), settings=state.settings, now=state.clock(), logger=logger
    )
    _post_events(body, [], outcome.events)
    if not outcome.finished:
        raise kopf.TemporaryError(outcome.message, delay=DELETION_RETRY_SECONDS)
    state.forget(name)
