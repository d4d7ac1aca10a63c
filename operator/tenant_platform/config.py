"""Operator settings: a frozen Settings, passed explicitly to whatever needs it.

``load_settings`` reads the environment (the Helm chart and kustomize base set it) once, at
start-up: `tenant-platform run` (cli.py, then its flags on top) and `tenant-platform dev`
(devmode.py, over its demo defaults) build Settings and hand them to ``main.run``; `check`
(preflight.py) reads them for its dry run unless given some. Nothing reads the environment at
import time, and nothing writes it to steer the operator.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# Namespaces of well-known cluster tools a TenantPlatform may never create or adopt (on top of
# ``default``, ``kube-*``, the operator's own and the mesh's, which are always refused).
DEFAULT_PROTECTED_NAMESPACES: tuple[str, ...] = (
    "istio-system",
    "istio-ingress",
    "flux-system",
    "argocd",
    "cert-manager",
    "gatekeeper-system",
    "kyverno",
    "monitoring",
    "kube-prometheus-stack",
    "hami-system",
    "gpu-operator",
    "local-path-storage",
)


@dataclass(frozen=True)
class Settings:
    drift_interval: float = 300.0
    """Seconds between level-triggered resyncs of every TenantPlatform."""
    kopf_workers: int = 16
    """Threads kopf uses for its synchronous handlers (watch events, deletion)."""
    reconcile_workers: int = 8
    """Reconcile passes that may run at once (each holds one thread while it runs)."""
    gpu_debounce: float = 5.0
    """Seconds GPU status changes are gathered before one status write (busy clusters)."""
    operator_namespace: str = "tenant-platform-system"
    log_format: str = "plain"
    metrics_port: int = 8080
    health_port: int = 8081
    kubeconfig: str | None = None
    kube_context: str | None = None
    """The kubeconfig context to use (``--context``, ``TENANT_PLATFORM_KUBE_CONTEXT``; None: its current one)."""
    in_cluster: bool = False
    """True when running in a pod (enables best-effort probes such as DNS resolution)."""
    protected_namespaces: tuple[str, ...] = DEFAULT_PROTECTED_NAMESPACES
    """Namespaces no platform may create or adopt (``TENANT_PLATFORM_PROTECTED_NAMESPACES``, comma
    separated, replaces this list; ``default``, ``kube-*``, the operator's and the mesh's own
    namespaces are refused whatever it says)."""
    identity: str = ""
    """This process's name in the leader-election Lease (empty: the host name plus a random suffix)."""
    lease_duration: float = 15.0
    """Seconds a standby waits, after it last saw the Lease change, before taking it over."""
    renew_deadline: float = 10.0
    """Seconds the leader keeps leading without a successful renewal; then it stops writing and
    exits. Must be shorter than ``lease_duration`` (the margin keeps two leaders from overlapping)."""
    retry_period: float = 2.0
    """Seconds between attempts to acquire (standby) or renew (leader) the Lease."""
    stuck_pass_seconds: float = 600.0
    """/healthz fails when one reconcile pass has been running longer than this."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry_period < renew_deadline < lease_duration, got "
                f"{self.retry_period}, {self.renew_deadline}, {self.lease_duration}"
            )

    cache: bool = True
    """Serve reads from watch-fed caches (kube/cache.py): a no-op pass makes no API request."""
    cache_mesh_namespace: str = "istio-system"
    """The namespace whose Deployments and Services are cached as mesh facts (istiod, gateway)."""
    cache_hami_namespaces: tuple[str, ...] = ("kube-system",)
    """Namespaces whose Deployments and HAMi ConfigMap are cached for GPUReady (HAMi's
    ``spec.gpu.hami.configMapNamespace``; ``TENANT_PLATFORM_CACHE_HAMI_NAMESPACES``, comma
    separated). A platform naming another namespace still works: its reads are API requests."""
    webhook_probe_interval: float = 600.0
    """Seconds a dry-run GPU pod's verdict (HAMi's mutating webhook) is kept while its inputs (HAMi's
    Deployments and DaemonSets, the tenant namespace) are unchanged; 0 checks on every pass."""


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    return Settings(
        drift_interval=float(env.get("TENANT_PLATFORM_DRIFT_INTERVAL", "300")),
        kopf_workers=int(env.get("TENANT_PLATFORM_KOPF_WORKERS", "16")),
        reconcile_workers=int(env.get("TENANT_PLATFORM_RECONCILE_WORKERS", "8")),
        gpu_debounce=float(env.get("TENANT_PLATFORM_GPU_DEBOUNCE", "5")),
        operator_namespace=env.get("TENANT_PLATFORM_NAMESPACE", "tenant-platform-system"),
        log_format=env.get("TENANT_PLATFORM_LOG_FORMAT", "plain"),
        metrics_port=int(env.get("TENANT_PLATFORM_METRICS_PORT", "8080")),
        health_port=int(env.get("TENANT_PLATFORM_HEALTH_PORT", "8081")),
        kubeconfig=env.get("KUBECONFIG") or None,
        kube_context=env.get("TENANT_PLATFORM_KUBE_CONTEXT") or None,
        in_cluster=bool(env.get("KUBERNETES_SERVICE_HOST")),
        protected_namespaces=_names(env.get("TENANT_PLATFORM_PROTECTED_NAMESPACES"), DEFAULT_PROTECTED_NAMESPACES),
        identity=env.get("TENANT_PLATFORM_IDENTITY", ""),
        lease_duration=float(env.get("TENANT_PLATFORM_LEASE_DURATION", "15")),
        renew_deadline=float(env.get("TENANT_PLATFORM_RENEW_DEADLINE", "10")),
        retry_period=float(env.get("TENANT_PLATFORM_RETRY_PERIOD", "2")),
        stuck_pass_seconds=float(env.get("TENANT_PLATFORM_STUCK_PASS_SECONDS", "600")),
        cache=env.get("TENANT_PLATFORM_CACHE", "true").lower() not in ("false", "0", "no"),
        cache_mesh_namespace=env.get("TENANT_PLATFORM_CACHE_MESH_NAMESPACE", "istio-system"),
        cache_hami_namespaces=_names(env.get("TENANT_PLATFORM_CACHE_HAMI_NAMESPACES"), ("kube-system",)),
        webhook_probe_interval=float(env.get("TENANT_PLATFORM_WEBHOOK_PROBE_INTERVAL", "600")),
    )


def _names(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list of names (None: ``default``)."""
    if value is None:
        return default
    return tuple(n.strip() for n in value.split(",") if n.strip())
