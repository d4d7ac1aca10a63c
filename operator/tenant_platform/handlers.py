"""kopf wiring: thin adapters around reconcile.run and the steps' cleanup.

Design (see docs/architecture.md):
- one daemon thread per TenantPlatform runs the level-triggered reconcile loop, so reconciles of
  one object are serialised by construction; it wakes on spec/annotation changes (watch events),
  on requests from steps (``requeue_after``), on watched cluster changes (``wake_all``), and on
  the drift interval;
- the watch handler never writes: kopf stores no progress or diff-base annotations for us;
- deletion runs every step's cleanup (reverse order) behind our finalizer, reports what blocks it
  in status, and gives up after a deadline rather than hanging for ever.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import kopf

from tenant_platform import handlers_gpu, metrics, reconcile
from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings, load_settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.observe import cluster
from tenant_platform.reconcile import registry
from tenant_platform.reconcile.base import StepContext
from tenant_platform.status import conditions

log = logging.getLogger("tenant_platform.handlers")
Logger = logging.Logger | logging.LoggerAdapter[Any]

# How often an idle platform loop looks for a wakeup (no I/O: a flag check).
WAKEUP_POLL_SECONDS = 0.25
# Give up on cleanup after this long and release the finalizer (saying what was left behind).
DELETION_DEADLINE_SECONDS = 600.0


class OperatorState:
    """Process-wide state shared by the handlers (one per operator process)."""

    def __init__(self) -> None:
        self.settings: Settings = load_settings()
        self.kube: Kube | None = None
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


STATE = OperatorState()


@kopf.on.startup()
def start_cluster_watches(**_: Any) -> None:
    """Watch Nodes and Pods into the GPU snapshot; any change wakes every platform (debounced).

    NB: plain list-and-watch threads, not kopf handlers: at 2,000 nodes and 20,000 pods kopf's
    per-object machinery did not get through the initial listing (docs/gpu.md).
    """
    STATE.observed_provider = lambda: cluster.SNAPSHOT
    handlers_gpu.start(STATE.client(), on_change=STATE.wake_all, debounce=STATE.settings.gpu_debounce)


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
    if STATE.seen.get(name) != fingerprint:
        STATE.seen[name] = fingerprint
        STATE.wake(name)


def reconcile_once(name: str) -> float:
    """One pass for one platform (fresh read); returns seconds until the next pass."""
    kube = STATE.client()
    settings = STATE.settings
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    if body is None or body.get("metadata", {}).get("deletionTimestamp"):
        return settings.drift_interval
    outcome = reconcile.run(body, kube=kube, settings=settings, now=STATE.clock(), observed=STATE.observed_provider())
    _post_events(body, outcome.transitions, outcome.events)
    wait = settings.drift_interval
    if outcome.requeue_after is not None:
        wait = min(wait, max(outcome.requeue_after, 1.0))
    return wait


def _post_events(
    body: dict[str, Any], transitions: list[tuple[str, str, str]], extra: list[tuple[str, str, str]]
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
    wakeup = STATE.wakeup(name)
    wakeup.set()
    loop = asyncio.get_running_loop()
    while not stopped:
        if not await _wait(wakeup, stopped, STATE.settings.drift_interval):
            continue
        wakeup.clear()
        try:
            wait = await loop.run_in_executor(STATE.executor(), reconcile_once, name)
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
    """Run every step's cleanup, last step first. Idempotent; gives up after a deadline."""
    kube = STATE.client()
    try:
        platform = TenantPlatform.from_body(dict(body))
    except Exception:  # an invalid spec never wrote anything: nothing to clean up
        logger.info("TenantPlatform %s has an invalid spec; nothing to clean up", name)
        _forget(name)
        return
    ctx = StepContext(platform=platform, kube=kube, settings=STATE.settings, now=STATE.clock(), logger=logger)
    blocked: list[str] = []
    for step in reversed(registry.STEPS):
        try:
            result = step.cleanup(ctx)
        except errors.KubeError as exc:
            blocked.append(f"{step.name}: {exc.message or exc}")
            continue
        if not result.done:
            blocked.append(f"{step.name}: {result.message}")
    if not blocked:
        _forget(name)
        return
    message = "Deletion is waiting for cleanup: " + "; ".join(blocked) + "."
    started = _deletion_started(body)
    if started is not None:
        metrics.record_deletion_started(name, started)
    if started is not None and (STATE.clock() - started).total_seconds() > DELETION_DEADLINE_SECONDS:
        kopf.warn(body, reason=reasons.Summary.DELETION_BLOCKED, message="Gave up cleanup: " + message)
        logger.error("giving up cleanup of %s after the deadline: %s", name, message)
        _forget(name)
        return
    _set_deleting_status(kube, body, message)
    raise kopf.TemporaryError(message, delay=10)


def _deletion_started(body: kopf.Body) -> datetime | None:
    return conditions.parse_time(body.get("metadata", {}).get("deletionTimestamp"))


def _set_deleting_status(kube: Kube, body: kopf.Body, message: str) -> None:
    now = STATE.clock()
    generation = int(body.get("metadata", {}).get("generation") or 0)
    current = list((body.get("status") or {}).get("conditions") or [])
    updated = conditions.set_condition(
        current,
        conditions.false(constants.READY, reasons.Summary.DELETION_BLOCKED, message),
        now=now,
        generation=generation,
    )
    try:
        kube.merge_patch(
            constants.API_VERSION,
            constants.KIND,
            body["metadata"]["name"],
            {"status": {"conditions": conditions.order(updated)}},
            subresource="status",
        )
    except errors.KubeError as exc:
        log.warning("could not report deletion status: %s", exc)


def _forget(name: str) -> None:
    metrics.forget_platform(name)
    with STATE.lock:
        STATE.wakeups.pop(name, None)
        STATE.seen.pop(name, None)
