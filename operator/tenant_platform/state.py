"""The operator process's state: one ``OperatorState`` per process, built from explicit Settings
and installed by ``main.run`` before kopf starts (``install``, ``current``).

It holds the settings, the API client, the event recorder, the reconcile pool, each platform's
pass lock and wakeup (what asks its loop for a pass: ``wake``, ``wake_fresh``, ``wake_all``,
``wake_gpu``), what /healthz reads (passes running, the kopf heartbeat), the stop flag, and the
watches of target clusters (targetwatch.TargetSnapshots). The kopf handlers (handlers.py), the
platform loops (scheduler.py) and main.py read it; importing this module starts nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tenant_platform import targetwatch
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gpu import step
from tenant_platform.concerns.target.step import TargetConnection
from tenant_platform.config import Settings
from tenant_platform.kube.client import Kube
from tenant_platform.kube.events import EventRecorder
from tenant_platform.observe import cluster

REPORTING_CONTROLLER = f"{constants.GROUP}/tenant-platform-operator"


class Wakeup:
    """A platform's wakeup: a flag set from any thread (kopf's watch handlers, the cache's
    watches, the GPU refreshers) and awaited by the platform's loop on kopf's event loop
    (``listen``: an asyncio.Event that every ``set`` and ``notify`` sets, thread-safely)."""

    def __init__(self) -> None:
        self._flag = threading.Event()
        self._lock = threading.Lock()
        self._listener: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def is_set(self) -> bool:
        return self._flag.is_set()

    def set(self) -> None:
        self._flag.set()
        self.notify()

    def clear(self) -> None:
        self._flag.clear()

    def notify(self) -> None:
        """Make the loop awaiting ``listen()`` look again (at the flag, and at its stop flag)."""
        with self._lock:
            listener = self._listener
        if listener is None:
            return
        loop, event = listener
        with contextlib.suppress(RuntimeError):  # that event loop is closed: nobody listens any more
            loop.call_soon_threadsafe(event.set)

    def listen(self) -> asyncio.Event:
        """The asyncio.Event of the running event loop that ``set`` and ``notify`` set from now on
        (it may also be set when the flag is not: a waiter checks the flag after it fires)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._listener is None or self._listener[0] is not loop:
                self._listener = (loop, asyncio.Event())
            return self._listener[1]


class OperatorState:
    """Process-wide state shared by the handlers (one per operator process, see ``install``)."""

    def __init__(self, settings: Settings, *, kube: Kube | None = None) -> None:
        self.settings = settings
        self.kube = kube
        self.wakeups: dict[str, Wakeup] = {}
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
        self.targets = targetwatch.TargetSnapshots(
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

    def wakeup(self, name: str) -> Wakeup:
        with self.lock:
            return self.wakeups.setdefault(name, Wakeup())

    def wake(self, name: str) -> None:
        """Ask for a full pass of ``name``."""
        with self.lock:
            self.gpu_only.discard(name)
            self.wakeups.setdefault(name, Wakeup()).set()

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
        woken = [name for name in names if step.SCOPES.depends_on(name, changes.nodes(name), lookup)]
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
            event = self.wakeups.setdefault(name, Wakeup())
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


def installed() -> bool:
    """Whether an operator state is installed."""
    return bool(_installed)


def current() -> OperatorState:
    """The installed operator state; the handlers run only after ``main.run`` installed it."""
    if not _installed:
        raise RuntimeError("no operator state: start the operator with tenant_platform.main.run(settings)")
    return _installed[0]
