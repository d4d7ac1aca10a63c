"""Every Prometheus metric the operator exports, one prefix, low-cardinality labels.

Reconcile code calls ``record_*``/``observe_*``; render never does. ``forget_platform`` drops a
platform's series when it is deleted. Tests pass their own CollectorRegistry to ``Metrics``.

Conventions (https://prometheus.io/docs/practices/naming/): base units (``_bytes``,
``_seconds``, ``_ratio`` for 0..1), points in time as ``_timestamp_seconds``, no ``_created``
series. Per-platform series carry a ``platform`` label; the GPU series describe the cluster, not
a platform, so they have none and are exported once however many platforms report them
(``GpuCollector``).

Cardinality: a platform adds about one series per condition type (``ConditionCollector``: only the
status a condition has) and a few gauges, at most ``SERIES_PER_PLATFORM``
(tests/unit/test_metrics_exposition.py counts them). The operator's own work (step durations and
errors, passes, API requests) has no ``platform`` label: its series do not grow with the number
of platforms. A platform's step timings go to the DEBUG log line of its pass (``record_pass``).
"""

from __future__ import annotations

import logging
import platform as _python
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from typing import TYPE_CHECKING, Any

import prometheus_client
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from tenant_platform import __version__

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

PREFIX = "tenant_platform"
SERIES_PER_PLATFORM = 20
"""The most series one more TenantPlatform may add to a scrape (the unit tests hold us to it)."""
PASS_KINDS = ("full", "partial")

log = logging.getLogger("tenant_platform.metrics")

# A `_created` series per counter and histogram child doubles the series count and means
# nothing to the alerts or the dashboard; switched off process-wide before any metric exists.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry
        self.build_info = Info(
            f"{PREFIX}_build",
            "The running operator's version (value always 1).",
            registry=registry,
        )
        self.build_info.info(build_labels())
        # One series per platform and condition type: the status it has (see ConditionCollector).
        self.conditions = ConditionCollector()
        registry.register(self.conditions)
        # The operator's own work: no platform label (a platform's timings: DEBUG log, record_pass).
        self.reconcile_duration = Histogram(
            f"{PREFIX}_reconcile_step_duration_seconds",
            "Time one reconcile step took, over every platform.",
            ["step"],
            registry=registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.reconcile_errors = Counter(
            f"{PREFIX}_reconcile_step_errors",
            "Reconcile steps that failed (API errors or crashes), over every platform.",
            ["step"],
            registry=registry,
        )
        self.passes = Counter(
            f"{PREFIX}_reconcile_passes",
            "Reconcile passes the operator ran, over every platform: full, or partial (GPU only).",
            ["kind"],
            registry=registry,
        )
        self.api_requests = Counter(
            f"{PREFIX}_api_requests",
            "Requests the operator's client sent to the Kubernetes API, by HTTP verb (WATCH: a watch) "
            "and response code (<error>: no response).",
            ["verb", "code"],
            registry=registry,
        )
        for kind in PASS_KINDS:  # at 0 from the start, so rate() sees the first pass
            self.passes.labels(kind)
        self.timings = StepTimings()
        self.last_success = Gauge(
            f"{PREFIX}_last_successful_reconcile_timestamp_seconds",
            "Unix time of the last reconcile in which every step ran.",
            ["platform"],
            registry=registry,
        )
        self.edge_certificate_expiry = Gauge(
            f"{PREFIX}_edge_certificate_expiry_timestamp_seconds",
            "Unix time the edge certificate expires (its notAfter), as of the last reconcile.",
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
        # Cluster-wide: no platform label, one copy of each series (see GpuCollector).
        self.gpu = GpuCollector()
        registry.register(self.gpu)

    def record_gpu(
        self,
        platform: str,
        *,
        nodes: Mapping[str, Mapping[str, float]],
        models: Mapping[str, Mapping[str, float]],
        blocking_locks: Mapping[str, bool],
    ) -> None:
        """The cluster's GPU capacity as ``platform``'s last pass computed it (see GpuCollector).

        ``nodes``: node -> {key of GPU_NODE_GAUGES: value}; ``models``: model -> {key of
        GPU_MODEL_GAUGES: value}; ``blocking_locks``: node -> whether its HAMi lock blocks binds
        until someone removes it (concerns/gpu/nodelocks.py ``blocks``).
        """
        self.gpu.record(platform, GpuSeries(dict(nodes), dict(models), dict(blocking_locks)))

    def forget_gpu(self, platform: str) -> None:
        """``platform`` no longer reports GPU capacity (HAMi reporting off, or deleted)."""
        self.gpu.forget(platform)

    def forget_platform(self, platform: str) -> None:
        """Drop every series of a deleted platform."""
        for metric in self._all():
            for labels in list(_label_sets(metric)):
                if labels.get("platform") == platform:
                    metric.remove(*labels.values())
        self.conditions.forget(platform)
        self.forget_gpu(platform)
        self.timings.forget(platform)

    def _all(self) -> Iterable[Any]:
        """The metrics with a ``platform`` label (the conditions have their own collector)."""
        yield self.last_success
        yield self.edge_certificate_expiry
        yield self.pod_guard_violations
        yield self.deletion_started


def build_labels() -> dict[str, str]:
    """The labels of ``tenant_platform_build_info``."""
    try:
        kopf_version = metadata.version("kopf")
    except metadata.PackageNotFoundError:
        kopf_version = "unknown"
    return {"version": __version__, "python_version": _python.python_version(), "kopf_version": kopf_version}


# -- conditions: one series per platform and condition type ----------------------------------------

CONDITION = f"{PREFIX}_condition"


class ConditionCollector(Collector):
    """``tenant_platform_condition{platform, type, status}``: 1, for the status each condition has.

    Only the current status has a series (not one per possible status, most of them 0): a
    platform's conditions are replaced as a whole by each pass (``record``), under a lock, and a
    scrape reads them as they are. So a status flip swaps the series in one step (no scrape sees
    both or neither), a condition type the platform no longer reports is gone, and ``forget``
    drops the platform.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_platform: dict[str, dict[str, str]] = {}  # platform -> type -> status

    def record(self, platform: str, statuses: Mapping[str, str]) -> None:
        with self._lock:
            self._by_platform[platform] = dict(statuses)

    def forget(self, platform: str) -> None:
        with self._lock:
            self._by_platform.pop(platform, None)

    def describe(self) -> Iterable[prometheus_client.Metric]:
        return [self._family()]

    def collect(self) -> Iterable[prometheus_client.Metric]:
        family = self._family()
        with self._lock:
            current = sorted((p, sorted(c.items())) for p, c in self._by_platform.items())
        for platform, conditions in current:
            for type_, status in conditions:
                family.add_metric([platform, type_, status], 1)
        return [family]

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            CONDITION,
            "1 for the status the TenantPlatform's condition has (True, False or Unknown); no series for the others.",
            labels=["platform", "type", "status"],
        )


class StepTimings:
    """Each platform's step timings of the pass under way, for the DEBUG line of the pass.

    A platform's passes never overlap (the pass lock), so one pending pass per platform; a step
    seen twice starts a new one (a pass that ended without ``take``). Bounded by platforms x steps.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, tuple[float, bool]]] = {}

    def note(self, platform: str, step: str, seconds: float, *, failed: bool) -> None:
        with self._lock:
            steps = self._pending.setdefault(platform, {})
            if step in steps:
                steps.clear()
            steps[step] = (seconds, failed)

    def take(self, platform: str) -> dict[str, tuple[float, bool]]:
        with self._lock:
            return self._pending.pop(platform, {})

    def forget(self, platform: str) -> None:
        self.take(platform)


# -- GPU: cluster-wide series -----------------------------------------------------------------------

GPU_NODE_GAUGES = {
    "cards": "GPU cards HAMi registers on the node.",
    "unhealthy_cards": "GPU cards HAMi reports unhealthy on the node.",
    "slots": "HAMi sharing slots on the node.",
    "slots_used": "HAMi sharing slots in use on the node.",
    "memory_total_bytes": "GPU memory of the node's schedulable cards, bytes.",
    "memory_used_bytes": "GPU memory HAMi allocated on the node, bytes.",
    "memory_free_bytes": "GPU memory not allocated on the node, bytes.",
    "cores_used_ratio": "Share of the node's GPU compute HAMi allocated, 0..1 (absent without schedulable cards).",
    "unparseable": "1 when HAMi's register annotation on the node cannot be parsed.",
}
GPU_MODEL_GAUGES = {
    "cards": "GPU cards of this model.",
    "memory_total_bytes": "GPU memory of this model's schedulable cards, bytes.",
    "memory_free_bytes": "GPU memory of this model not allocated, bytes.",
    "cores_used_ratio": "Share of this model's GPU compute HAMi allocated, 0..1.",
}
GPU_NODE_LOCK_BLOCKING = f"{PREFIX}_gpu_node_lock_blocking"


@dataclass(frozen=True)
class GpuSeries:
    """One pass's GPU values: node -> {gauge key: value}, model -> {...}, node -> lock blocking."""

    nodes: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    blocking_locks: Mapping[str, bool] = field(default_factory=dict)


class GpuCollector(Collector):
    """The GPU capacity series, read at scrape time, exported once.

    Every platform with HAMi reporting on computes the same cluster-wide capacity from the same
    watched snapshot; each pass hands its result here under the platform's name, and a scrape
    yields the most recent one only. So ``sum by (model)`` adds up whatever the number of
    platforms, one blocking lock is one alert, and a node or model that is gone is simply not
    yielded (no stale series to remove). The values go when the last platform reporting them
    stops (``forget``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_source: dict[str, GpuSeries] = {}  # insertion order: the latest last

    def record(self, source: str, series: GpuSeries) -> None:
        with self._lock:
            self._by_source.pop(source, None)
            self._by_source[source] = series

    def forget(self, source: str) -> None:
        with self._lock:
            self._by_source.pop(source, None)

    def current(self) -> GpuSeries | None:
        with self._lock:
            return next(reversed(self._by_source.values()), None)

    def describe(self) -> Iterable[prometheus_client.Metric]:
        return list(self._families(None))

    def collect(self) -> Iterable[prometheus_client.Metric]:
        return list(self._families(self.current()))

    def _families(self, series: GpuSeries | None) -> Iterator[GaugeMetricFamily]:
        data = series or GpuSeries()
        for key, help_ in GPU_NODE_GAUGES.items():
            family = GaugeMetricFamily(f"{PREFIX}_gpu_node_{key}", help_, labels=["node"])
            for node, values in sorted(data.nodes.items()):
                if key in values:
                    family.add_metric([node], values[key])
            yield family
        for key, help_ in GPU_MODEL_GAUGES.items():
            family = GaugeMetricFamily(f"{PREFIX}_gpu_model_{key}", help_, labels=["model"])
            for model, values in sorted(data.models.items()):
                if key in values:
                    family.add_metric([model], values[key])
            yield family
        lock = GaugeMetricFamily(
            GPU_NODE_LOCK_BLOCKING,
            "1 when the HAMi node lock on this node fails every GPU bind there until someone removes it "
            "(malformed: HAMi cannot read it); expired, dangling and leaked locks HAMi takes over itself.",
            labels=["node"],
        )
        for node, blocking in sorted(data.blocking_locks.items()):
            lock.add_metric([node], float(blocking))
        yield lock


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
    """One step of ``platform``'s pass: in the step's histogram (no platform label), and noted for
    the pass's DEBUG log line (``record_pass``)."""
    METRICS.reconcile_duration.labels(step).observe(seconds)
    # The error counter exists from the first pass at 0 (Prometheus' advice for labelled
    # counters), so a query or an alert on it has data, and rate() sees the first failure.
    errors = METRICS.reconcile_errors.labels(step)
    if failed:
        errors.inc()
    METRICS.timings.note(platform, step, seconds, failed=failed)


def record_pass(platform: str, *, partial: bool) -> None:
    """A pass of ``platform`` ended: count it (by kind, no platform label) and log its step
    timings at DEBUG, slowest first."""
    METRICS.passes.labels(PASS_KINDS[1] if partial else PASS_KINDS[0]).inc()
    timings = METRICS.timings.take(platform)
    if log.isEnabledFor(logging.DEBUG):
        ranked = sorted(timings.items(), key=lambda item: -item[1][0])
        steps = ", ".join(f"{step} {seconds:.3f}s{' (failed)' if failed else ''}" for step, (seconds, failed) in ranked)
        total = sum(seconds for seconds, _ in timings.values())
        log.debug(
            "%s pass of TenantPlatform %s: %.3fs in %d steps: %s",
            PASS_KINDS[1] if partial else PASS_KINDS[0],
            platform,
            total,
            len(timings),
            steps or "none",
        )


def record_api_request(verb: str, code: str) -> None:
    """One request to the Kubernetes API (kube/observed.py reports them; main wires this up)."""
    METRICS.api_requests.labels(verb, code).inc()


def record_conditions(platform: str, conditions: Iterable[dict[str, Any]]) -> None:
    """The platform's conditions as the pass left them (all of them: a type not given is gone)."""
    METRICS.conditions.record(platform, {str(c["type"]): str(c.get("status") or "Unknown") for c in conditions})


def record_success(platform: str, now: datetime) -> None:
    METRICS.last_success.labels(platform).set(now.timestamp())


def record_deletion_started(platform: str, since: datetime) -> None:
    """Called by the delete handler on every attempt; ``since`` is the CR's deletionTimestamp."""
    METRICS.deletion_started.labels(platform).set(since.timestamp())


def record_edge_certificate_expiry(platform: str, secret: str, not_after: datetime | None) -> None:
    """Set the expiry time of the platform's edge certificate (one series per platform).

    ``not_after`` None (no readable certificate) drops the series; a series for another Secret
    name (the spec changed) is dropped too.
    """
    gauge = METRICS.edge_certificate_expiry
    for labels in list(_label_sets(gauge)):
        if labels.get("platform") == platform and (not_after is None or labels.get("secret") != secret):
            gauge.remove(*labels.values())
    if not_after is not None:
        gauge.labels(platform, secret).set(not_after.timestamp())


def record_leader(leading: bool, *, renewed: datetime | None = None) -> None:
    METRICS.leader.set(1 if leading else 0)
    if renewed is not None:
        METRICS.lease_renewal.set(renewed.timestamp())


def forget_platform(platform: str) -> None:
    METRICS.forget_platform(platform)
    forget_gpu_share(platform)


def record_gpu(
    platform: str,
    *,
    nodes: Mapping[str, Mapping[str, float]],
    models: Mapping[str, Mapping[str, float]],
    blocking_locks: Mapping[str, bool],
) -> None:
    METRICS.record_gpu(platform, nodes=nodes, models=models, blocking_locks=blocking_locks)


def forget_gpu(platform: str) -> None:
    METRICS.forget_gpu(platform)


def serve(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> WSGIServer:
    """Expose /metrics on ``port`` from a daemon thread; return the server (``shutdown()`` stops it).

    ``port`` 0 picks a free port (``server.server_port``). ``registry`` defaults to the operator's.
    """
    from prometheus_client import start_http_server  # noqa: PLC0415 - only the operator process serves

    server, _thread = start_http_server(port, addr=addr, registry=METRICS.registry if registry is None else registry)
    return server


# -- the GPU share per platform (concerns/gpushare, docs/gpu.md) ---------------------------------
# A block of its own: one gauge, at most one series per platform and resource of its share (three).

QUOTA_USED_RATIO = f"{PREFIX}_quota_used_ratio"
_gpu_share_gauges: weakref.WeakKeyDictionary[CollectorRegistry, Gauge] = weakref.WeakKeyDictionary()


def gpu_share_gauge(m: Metrics | None = None) -> Gauge:
    """The GPU share gauge in ``m``'s registry (the operator's by default), made on first use."""
    registry = (m or METRICS).registry
    gauge = _gpu_share_gauges.get(registry)
    if gauge is None:
        gauge = Gauge(
            QUOTA_USED_RATIO,
            "What the platform's pods request of its GPU share, summed over its namespaces, per resource "
            "(1 is the whole share; above 1 with several namespaces: docs/gpu.md).",
            ["platform", "resource"],
            registry=registry,
        )
        _gpu_share_gauges[registry] = gauge
    return gauge


def record_gpu_share(platform: str, ratios: Mapping[str, float]) -> None:
    """The platform's used ratio per resource of its share (HAMi's name); a resource no longer in
    the share loses its series; empty ``ratios`` (no share) drops them all."""
    gauge = gpu_share_gauge()
    for labels in list(_label_sets(gauge)):
        if labels.get("platform") == platform and labels.get("resource") not in ratios:
            gauge.remove(*labels.values())
    for resource, ratio in ratios.items():
        gauge.labels(platform, resource).set(ratio)


def forget_gpu_share(platform: str) -> None:
    record_gpu_share(platform, {})
