"""When each TenantPlatform's reconcile passes run, and running one (``reconcile_once``).

One async loop per platform (``platform_loop``; kopf runs it as a daemon, handlers.py), so passes
of one object are serialised by construction; each pass runs in the bounded thread pool of the
process state (state.OperatorState.executor). The next pass comes at the first of:
- a wakeup (state.Wakeup): the platform's spec or annotations changed (``wake_fresh``), a child
  or watched fact changed (``wake``, ``wake_all``), the GPU snapshot changed in a way its GPU
  result depends on (``wake_gpu``: a GPU-only pass, reconcile.run(only=GPU_ONLY));
- the time the last pass left: the drift interval, or sooner when a step asked
  (``requeue_after``), or the back-off after a failed pass.

Event-driven, not polled: wakeups come from other threads (kopf's sync handlers, the cache's
watches, the GPU refreshers), so a ``Wakeup`` is a thread-safe flag that also sets an
asyncio.Event on the loop's event loop (``call_soon_threadsafe``); the loop awaits that event
with the deadline computed from the timers, and kopf's stop flag (``stopped.wait()``) sets it too.
An idle platform costs no CPU. After a pass, a wakeup is honoured only once
``WAKEUP_SETTLE_SECONDS`` have passed since the pass ended (the timers are honoured on time), so
wakeups arriving during a pass and right after it (a burst of changes, the pass's own writes
coming back through the watches) cost one more pass, and a platform runs at most one
wakeup-driven pass per settle interval: the bound the former 0.25 s poll gave.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from tenant_platform import metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.gpu import step
from tenant_platform.kube import errors
from tenant_platform.kube.backoff import Backoff
from tenant_platform.kube.cache import CachedKube
from tenant_platform.state import OperatorState, Wakeup, current

log = logging.getLogger("tenant_platform.scheduler")
Logger = logging.Logger | logging.LoggerAdapter[Any]

# After a pass, how long a wakeup waits before the next pass (no timer waits for it).
WAKEUP_SETTLE_SECONDS = 0.25
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

GPU_ONLY: frozenset[str] = frozenset({step.COMPONENT})
"""The steps of the pass a GPU snapshot change asks for (the pipeline adds the hand-off when the
recorded GPU facts changed)."""


def retry_backoffs() -> tuple[Backoff, Backoff]:
    """A platform loop's back-offs: (after an API error, after a crash)."""
    return (
        Backoff(base=ERROR_RETRY_BASE_SECONDS, cap=ERROR_RETRY_SECONDS, floor=RETRY_FLOOR_SECONDS, rng=RETRY_RANDOM),
        Backoff(base=CRASH_RETRY_BASE_SECONDS, cap=CRASH_RETRY_SECONDS, floor=RETRY_FLOOR_SECONDS, rng=RETRY_RANDOM),
    )


class StopFlag(Protocol):
    """What kopf passes an async daemon as ``stopped``: falsy until the daemon is to stop;
    ``await stopped.wait()`` returns then."""

    def __bool__(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> Awaitable[object]: ...


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
    post_events(state, body, outcome.transitions, outcome.events)
    wait = settings.drift_interval
    if outcome.requeue_after is not None:
        wait = min(wait, max(outcome.requeue_after, 1.0))
    return wait, outcome.partial


def post_events(
    state: OperatorState,
    body: Mapping[str, Any],
    transitions: list[tuple[str, str, str]],
    extra: list[tuple[str, str, str]],
) -> None:
    """Post a pass's (or a deletion's) condition transitions and events through kube.events (any
    thread; never kopf.info/warn, whose context exists only in kopf's own tasks)."""
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


async def platform_loop(name: str, stopped: StopFlag, logger: Logger) -> None:
    """The reconcile loop of platform ``name`` until ``stopped``.

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
    # waits honour a wakeup only after WAKEUP_SETTLE_SECONDS, so a burst of changes costs one
    # more pass.
    # A GPU-only pass keeps the time the last full pass set for the next one (``due``), so GPU
    # churn never postpones the drift check. Secrets have a clock of their own (``fresh_due``): a
    # full pass before it (woken by an event: a child or fact changed; or a step's requeue) reuses
    # Secrets read within the drift interval and does not move it, so the drift timer's pass still
    # comes once per drift interval and reads them from the API (a Secret changed by someone else
    # is seen within one drift interval, as before), while a burst of events costs no Secret GETs.
    # A change of the platform itself (``wake_fresh``) reads them again at once.
    wait = state.settings.drift_interval
    due = fresh_due = time.monotonic()
    settle = 0.0
    on_error, on_crash = retry_backoffs()
    watcher = asyncio.create_task(_notify_when_stopped(stopped, wakeup))
    try:
        while not stopped:
            if not await wait_for_pass(wakeup, stopped, wait, settle=settle):
                break
            settle = WAKEUP_SETTLE_SECONDS
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
    finally:
        watcher.cancel()
        await asyncio.wait({watcher})


async def _notify_when_stopped(stopped: StopFlag, wakeup: Wakeup) -> None:
    await stopped.wait()
    wakeup.notify()


async def wait_for_pass(wakeup: Wakeup, stopped: StopFlag, seconds: float, *, settle: float = 0.0) -> bool:
    """Wait for a wakeup, at most ``seconds``; True when it is time for a pass (not stopped).

    A wakeup is honoured no sooner than ``settle`` seconds from now (0: at once); the deadline is
    always honoured. No polling: this awaits the wakeup's asyncio.Event (``Wakeup.listen``), which
    a wakeup from any thread and kopf's stop flag (``platform_loop``) set, until the computed time.
    """
    event = wakeup.listen()
    start = time.monotonic()
    deadline = start + seconds
    not_before = start + min(settle, seconds)
    while not stopped:
        event.clear()  # then look: a wakeup set from now on sets it again
        now = time.monotonic()
        if now >= deadline:
            return True
        if wakeup.is_set():
            if now >= not_before:
                return True
            until = not_before
        else:
            until = deadline
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), until - now)
    return False
