"""spec.target: the Node and Pod watches and the read cache of each target cluster (docs/fleet.md).

``TargetSnapshots`` keeps one GPU snapshot (gpuwatch.start_watches, with its own debounced
refresher) and one read cache (``target_cache_scopes``) per target cluster the platforms reach;
the process state (state.OperatorState.targets) holds one, and a reconcile pass asks it for its
target's observation (``observe``). Nothing here writes to the API.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.concerns.target.step import TargetObservation
from tenant_platform.formats.hami import names
from tenant_platform.gpuwatch import GpuWatches, gpu_refresher, start_watches
from tenant_platform.kube import remote
from tenant_platform.kube.cache import CachedKube, Scope
from tenant_platform.kube.client import Kube
from tenant_platform.observe.cluster import ClusterSnapshot

# Targets watched at most per process; a platform past this reads nodes and pods per pass instead.
MAX_TARGET_WATCHES = 64


def target_cache_scopes(hami_namespaces: tuple[str, ...], mesh_namespace: str = "istio-system") -> list[Scope]:
    """What a target's read cache holds: the facts GPUReady's health check reads in each pass
    (concerns/gpu/healthreads.py: NVIDIA RuntimeClasses, every DaemonSet, HAMi's Deployments and
    ConfigMap per configured HAMi namespace), the Namespaces (the webhook verdict's input, and
    the pass's namespace claims) and the mesh namespace's Deployments and Services (as in the
    operator's own cache). Few objects per tenant; anything else is read from the API."""
    scopes = [
        Scope("v1", "Namespace"),
        Scope("node.k8s.io/v1", "RuntimeClass"),
        Scope("apps/v1", "DaemonSet"),
        Scope("apps/v1", "Deployment", namespace=mesh_namespace),
        Scope("v1", "Service", namespace=mesh_namespace),
    ]
    for namespace in dict.fromkeys(hami_namespaces):
        scopes.append(Scope("v1", "ConfigMap", namespace=namespace, name=names.CONFIG_MAP))
        if namespace != mesh_namespace:
            scopes.append(Scope("apps/v1", "Deployment", namespace=namespace))
    return scopes


@dataclass
class _TargetWatch:
    resource_version: str
    watches: GpuWatches
    users: set[str] = field(default_factory=set)
    cache: CachedKube | None = None


class TargetSnapshots:
    """The Node and Pod watches of each target cluster, started when a platform first reaches it,
    restarted when its kubeconfig Secret changes (credential rotation), stopped when no platform
    uses it any more (``release``). At most ``limit`` targets are watched; beyond that ``snapshot``
    returns None and the GPU step lists nodes and pods in each pass (bounded memory either way).
    A change in a target's snapshot wakes only the platforms using it (debounced, one refresher
    thread per target).
    """

    def __init__(
        self,
        *,
        wake: Callable[[str], None],
        debounce: float,
        limit: int = MAX_TARGET_WATCHES,
        watch_timeout: int = 300,
        hami_namespaces: tuple[str, ...] = ("kube-system",),
        mesh_namespace: str = "istio-system",
    ) -> None:
        self._wake = wake
        self._debounce = debounce
        self._limit = limit
        self._watch_timeout = watch_timeout
        self._scopes = target_cache_scopes(hami_namespaces, mesh_namespace)
        self._lock = threading.Lock()
        self._targets: dict[tuple[str, str, str], _TargetWatch] = {}

    def snapshot(self, platform: str, key: tuple[str, str, str], resource_version: str, kube: Kube) -> Any:
        """The snapshot of the target behind ``key`` for ``platform`` (None: read per pass)."""
        return self.observe(platform, key, resource_version, kube).observed

    def observe(self, platform: str, key: tuple[str, str, str], resource_version: str, kube: Kube) -> TargetObservation:
        """The snapshot and the read cache of the target behind ``key`` for ``platform`` (both
        None past the bound: the pass reads from the target's API)."""
        stale: _TargetWatch | None = None
        with self._lock:
            for other_key, other in self._targets.items():  # a platform uses one target
                if other_key != key:
                    other.users.discard(platform)
            entry = self._targets.get(key)
            if entry is not None and entry.resource_version == resource_version:
                entry.users.add(platform)
                return TargetObservation(entry.watches.snapshot, entry.cache)
            if entry is not None:  # rotated credentials: watch again with the new client
                stale = self._targets.pop(key)
            elif len(self._targets) >= self._limit:
                self._collect_locked()
                if len(self._targets) >= self._limit:
                    return TargetObservation(None, None)
            users = {platform} | (entry.users if entry is not None else set())
            watches, cache = self._start(key, kube)
            self._targets[key] = _TargetWatch(resource_version, watches, users, cache)
        if stale is not None:
            _stop(stale, timeout=0.1)
        return TargetObservation(watches.snapshot, cache)

    def _start(self, key: tuple[str, str, str], kube: Kube) -> tuple[GpuWatches, CachedKube]:
        watches = start_watches(kube.sibling(), ClusterSnapshot(), watch_timeout=self._watch_timeout)

        def wake_users(_changes: object = None) -> None:
            """Every platform on this target runs a full pass (no partial passes across clusters)."""
            with self._lock:
                entry = self._targets.get(key)
                names = sorted(entry.users) if entry is not None else []
            for name in names:
                self._wake(name)

        thread = threading.Thread(
            target=gpu_refresher,
            kwargs={
                "stopped": watches.stopped,
                "refresh": wake_users,
                "debounce": self._debounce,
                "snapshot": watches.snapshot,
            },
            name=f"gpu-refresher-{key[0]}/{key[1]}",
            daemon=True,
        )
        thread.start()
        watches.threads.append(thread)
        # The target's read cache: GPUReady's health facts from the target's own watches, so a
        # no-op pass asks the target nothing for them; a change there wakes this target's
        # platforms (and no other).
        cache = CachedKube(
            kube,
            self._scopes,
            on_fact=wake_users,
            watch_timeout=self._watch_timeout,
            watcher=remote.watch_client(kube, len(self._scopes) + 2),
        ).start()
        return watches, cache

    def _collect_locked(self) -> list[GpuWatches]:
        unused = [k for k, entry in self._targets.items() if not entry.users]
        stopped = [self._targets.pop(k) for k in unused]
        for entry in stopped:
            entry.watches.stopped.set()
            if entry.cache is not None:
                entry.cache.stop(timeout=0)
                remote.close(entry.cache.watcher)
        return [entry.watches for entry in stopped]

    def release(self, platform: str) -> None:
        """``platform`` is gone: stop the watches of targets no platform uses any more."""
        with self._lock:
            for entry in self._targets.values():
                entry.users.discard(platform)
            self._collect_locked()

    def watched(self) -> dict[tuple[str, str, str], int]:
        """Each watched target and how many platforms use it."""
        with self._lock:
            return {k: len(entry.users) for k, entry in self._targets.items()}

    def stop_all(self) -> None:
        with self._lock:
            entries = list(self._targets.values())
            self._targets.clear()
        for entry in entries:
            _stop(entry, timeout=0.5)


def _stop(entry: _TargetWatch, *, timeout: float) -> None:
    entry.watches.stop(timeout=timeout)
    if entry.cache is not None:
        entry.cache.stop(timeout=timeout)
        remote.close(entry.cache.watcher)
