"""Every Prometheus metric the operator exports, one prefix, low-cardinality labels.

Reconcile code calls ``record_*``/``observe_*``; render never does. ``forget_platform`` drops a
platform's series when it is deleted. Tests pass their own CollectorRegistry to ``Metrics``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

PREFIX = "tenant_platform"


class Metrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.condition = Gauge(
            f"{PREFIX}_condition",
            "1 when the TenantPlatform's condition has this status, else 0.",
            ["platform", "type", "status"],
            registry=registry,
        )
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_step_duration_seconds",
            "Time one reconcile step took.",
            ["platform", "step"],
            registry=registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_step_errors",
            "Reconcile steps that failed (API errors or crashes).",
            ["platform", "step"],
            registry=registry,
        )
        self.last_success = Gauge(
            f"{PREFIX}_last_successful_reconcile_timestamp_seconds",
            "Unix time of the last reconcile in which every step ran.",
            ["platform"],
            registry=registry,
        )
        self.edge_certificate_expiry = Gauge(
            f"{PREFIX}_edge_certificate_expiry_seconds",
            "Seconds until the edge certificate expires (negative when expired).",
            ["platform", "secret"],
            registry=registry,
        )
        self.pod_guard_violations = Gauge(
            f"{PREFIX}_pod_guard_pods_would_be_denied",
            "Existing pods the pod guard would deny (staged enforcement).",
            ["platform"],
            registry=registry,
        )
        self.deletion_started = Gauge(
            f"{PREFIX}_deletion_started_timestamp_seconds",
            "Unix time deletion of the TenantPlatform was requested; present until its cleanup finishes.",
            ["platform"],
            registry=registry,
        )
        self.leader = Gauge(
            f"{PREFIX}_leader",
            "1 while this operator process holds the leader Lease (and reconciles), 0 while it stands by.",
            registry=registry,
        )
        self.lease_renewal = Gauge(
            f"{PREFIX}_lease_last_renewal_timestamp_seconds",
            "Unix time this process last acquired or renewed the leader Lease (0: never).",
            registry=registry,
        )
        self._gpu_lock = threading.Lock()
        self.gpu_node = {
            key: Gauge(f"{PREFIX}_gpu_node_{key}", help_, ["platform", "node"], registry=registry)
            for key, help_ in _GPU_NODE_GAUGES.items()
        }
        self.gpu_model = {
            key: Gauge(f"{PREFIX}_gpu_model_{key}", help_, ["platform", "model"], registry=registry)
            for key, help_ in _GPU_MODEL_GAUGES.items()
        }
        self.gpu_node_lock_stale = Gauge(
            f"{PREFIX}_gpu_node_lock_stale",
            "1 when the HAMi node lock on this node is stale (expired, dangling or leaked).",
            ["platform", "node"],
            registry=registry,
        )

    def record_gpu(
        self,
        platform: str,
        *,
        nodes: Mapping[str, Mapping[str, float]],
        models: Mapping[str, Mapping[str, float]],
        stale_locks: Mapping[str, bool],
    ) -> None:
        """Set one platform's GPU gauges and drop its series of nodes and models now gone.

        ``nodes``: node -> {key of _GPU_NODE_GAUGES: value}; ``models``: model -> {key of
        _GPU_MODEL_GAUGES: value}; ``stale_locks``: node -> whether its HAMi lock is stale.
        """
        with self._gpu_lock:
            for key, gauge in self.gpu_node.items():
                _set_series(gauge, platform, {n: v[key] for n, v in nodes.items() if key in v})
            for key, gauge in self.gpu_model.items():
                _set_series(gauge, platform, {m: v[key] for m, v in models.items() if key in v})
            _set_series(self.gpu_node_lock_stale, platform, {n: float(s) for n, s in stale_locks.items()})

    def forget_gpu(self, platform: str) -> None:
        """Drop one platform's GPU series (GPU reporting turned off)."""
        self.record_gpu(platform, nodes={}, models={}, stale_locks={})

    def forget_platform(self, platform: str) -> None:
        """Drop every series of a deleted platform."""
        for metric in self._all():
            for labels in list(_label_sets(metric)):
                if labels.get("platform") == platform:
                    metric.remove(*labels.values())

    def _all(self) -> Iterable[Any]:
        yield self.condition
        yield self.reconcile_duration
        yield self.reconcile_errors
        yield self.last_success
        yield self.edge_certificate_expiry
        yield self.pod_guard_violations
        yield self.gpu_node_lock_stale
        yield self.deletion_started
        yield from self.gpu_node.values()
        yield from self.gpu_model.values()


_GPU_NODE_GAUGES = {
    "cards": "GPU cards HAMi registers on the node.",
    "unhealthy_cards": "GPU cards HAMi reports unhealthy on the node.",
    "slots_total": "HAMi sharing slots on the node.",
    "slots_used": "HAMi sharing slots in use on the node.",
    "memory_total_mib": "GPU memory on the node, MiB.",
    "memory_used_mib": "GPU memory allocated by HAMi on the node, MiB.",
    "memory_free_mib": "GPU memory not allocated on the node, MiB.",
    "cores_total_percent": "GPU compute on the node, percent of one card per card.",
    "cores_used_percent": "GPU compute allocated on the node, percent.",
    "cores_free_percent": "GPU compute not allocated on the node, percent.",
    "unparseable": "1 when HAMi's register annotation on the node cannot be parsed.",
}
_GPU_MODEL_GAUGES = {
    "cards": "GPU cards of this model.",
    "memory_total_mib": "GPU memory of this model, MiB.",
    "memory_free_mib": "GPU memory of this model not allocated, MiB.",
    "cores_free_percent": "GPU compute of this model not allocated, percent.",
}


def _set_series(gauge: Gauge, platform: str, values: Mapping[str, float]) -> None:
    """Set ``gauge{platform, <second label>}`` for each item; remove the platform's other series."""
    for labels in list(_label_sets(gauge)):
        if labels.get("platform") == platform and list(labels.values())[1] not in values:
            gauge.remove(*labels.values())
    for second, value in values.items():
        gauge.labels(platform, second).set(value)


def _label_sets(metric: Any) -> Iterable[dict[str, str]]:
    # NB: prometheus_client keeps children in a private dict; reading it is the only way to
    # enumerate label sets without collecting samples.
    names = metric._labelnames
    with metric._lock:
        keys = list(metric._metrics.keys())
    for values in keys:
        yield dict(zip(names, values, strict=True))


# The process-wide instance the operator uses.
METRICS = Metrics()


def observe_step(platform: str, step: str, seconds: float, *, failed: bool) -> None:
    METRICS.reconcile_duration.labels(platform, step).observe(seconds)
    if failed:
        METRICS.reconcile_errors.labels(platform, step).inc()


def record_conditions(platform: str, conditions: Iterable[dict[str, Any]]) -> None:
    for cond in conditions:
        for status in ("True", "False", "Unknown"):
            METRICS.condition.labels(platform, cond["type"], status).set(1 if cond.get("status") == status else 0)


def record_success(platform: str, now: datetime) -> None:
    METRICS.last_success.labels(platform).set(now.timestamp())


def record_deletion_started(platform: str, since: datetime) -> None:
    """Called by the delete handler on every attempt; ``since`` is the CR's deletionTimestamp."""
    METRICS.deletion_started.labels(platform).set(since.timestamp())


def record_edge_certificate_expiry(platform: str, secret: str, seconds: float | None) -> None:
    """Set seconds-to-expiry for the platform's edge certificate (one series per platform).

    ``seconds`` None (no readable certificate) drops the series; a series for another Secret name
    (the spec changed) is dropped too.
    """
    gauge = METRICS.edge_certificate_expiry
    for labels in list(_label_sets(gauge)):
        if labels.get("platform") == platform and (seconds is None or labels.get("secret") != secret):
            gauge.remove(*labels.values())
    if seconds is not None:
        gauge.labels(platform, secret).set(seconds)


def record_leader(leading: bool, *, renewed: datetime | None = None) -> None:
    METRICS.leader.set(1 if leading else 0)
    if renewed is not None:
        METRICS.lease_renewal.set(renewed.timestamp())


def forget_platform(platform: str) -> None:
    METRICS.forget_platform(platform)


def record_gpu(
    platform: str,
    *,
    nodes: Mapping[str, Mapping[str, float]],
    models: Mapping[str, Mapping[str, float]],
    stale_locks: Mapping[str, bool],
) -> None:
    METRICS.record_gpu(platform, nodes=nodes, models=models, stale_locks=stale_locks)


def forget_gpu(platform: str) -> None:
    METRICS.forget_gpu(platform)


def serve(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> WSGIServer:
    """Expose /metrics on ``port`` from a daemon thread; return the server (``shutdown()`` stops it).

    ``port`` 0 picks a free port (``server.server_port``). ``registry`` defaults to the operator's.
    """
    from prometheus_client import start_http_server  # noqa: PLC0415 - only the operator process serves

    server, _thread = start_http_server(port, addr=addr, registry=METRICS.registry if registry is None else registry)
    return server
