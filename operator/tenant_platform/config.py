"""Operator settings: a frozen Settings, passed explicitly to whatever needs it.

``load_settings`` reads the environment (the Helm chart and kustomize base set it) once, at
start-up: `tenant-platform run` (cli.py, then its flags on top) and `tenant-platform dev`
(devmode.py, over its demo defaults) build Settings and hand them to ``main.run``; `check`
(preflight.py) reads them for its dry run unless given some. Nothing reads the environment at
import time, and nothing writes it to steer the operator.
"""

from __future__ import annotations

import math
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
    log_level: str = "info"
    """debug, info, warning or error (``TENANT_PLATFORM_LOG_LEVEL``, ``--log-level``, chart ``logLevel``)."""
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


class SettingsError(ValueError):
    """A setting with a value the operator cannot use: names the variable and the expected form."""

    def __init__(self, variable: str, value: str, expected: str) -> None:
        super().__init__(f"{variable}={value!r}: expected {expected}")
        self.variable = variable


LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warning", "error")
LOG_FORMATS: tuple[str, ...] = ("plain", "json")
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class _Env:
    """Typed reads of the environment, each failing with a SettingsError naming its variable."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def text(self, name: str, default: str) -> str:
        return self._env.get(name, default)

    def optional(self, name: str) -> str | None:
        return self._env.get(name)

    def seconds(self, name: str, default: float, *, zero_ok: bool = False) -> float:
        raw = self._env.get(name)
        if raw is None:
            return default
        expected = f"a number of seconds{' (0 or more)' if zero_ok else ' greater than 0'}, e.g. {default:g}"
        try:
            value = float(raw.strip())
        except ValueError:
            raise SettingsError(name, raw, expected) from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            raise SettingsError(name, raw, expected)
        return value

    def count(self, name: str, default: int, *, minimum: int = 1, maximum: int = 65535, note: str = "") -> int:
        raw = self._env.get(name)
        if raw is None:
            return default
        expected = f"a whole number from {minimum} to {maximum}{note}, e.g. {default}"
        try:
            value = int(raw.strip())
        except ValueError:
            raise SettingsError(name, raw, expected) from None
        if not minimum <= value <= maximum:
            raise SettingsError(name, raw, expected)
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self._env.get(name)
        if raw is None:
            return default
        if raw.strip().lower() in _TRUE:
            return True
        if raw.strip().lower() in _FALSE:
            return False
        raise SettingsError(name, raw, "true or false")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        raw = self._env.get(name)
        if raw is None:
            return default
        if raw.strip().lower() not in choices:
            raise SettingsError(name, raw, f"one of {', '.join(choices)}")
        return raw.strip().lower()


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment, every value checked: a value the operator cannot use raises
    SettingsError naming the variable and the expected form (the CLI exits 2 with it)."""
    env = _Env(os.environ if environ is None else environ)
    election = (
        env.seconds("TENANT_PLATFORM_RETRY_PERIOD", 2.0),
        env.seconds("TENANT_PLATFORM_RENEW_DEADLINE", 10.0),
        env.seconds("TENANT_PLATFORM_LEASE_DURATION", 15.0),
    )
    if not election[0] < election[1] < election[2]:
        raise SettingsError(
            "TENANT_PLATFORM_RETRY_PERIOD/RENEW_DEADLINE/LEASE_DURATION",
            ", ".join(f"{v:g}" for v in election),
            "retry period < renew deadline < lease duration (seconds), e.g. 2, 10, 15",
        )
    return Settings(
        drift_interval=env.seconds("TENANT_PLATFORM_DRIFT_INTERVAL", 300.0),
        kopf_workers=env.count("TENANT_PLATFORM_KOPF_WORKERS", 16, maximum=1024),
        reconcile_workers=env.count("TENANT_PLATFORM_RECONCILE_WORKERS", 8, maximum=1024),
        gpu_debounce=env.seconds("TENANT_PLATFORM_GPU_DEBOUNCE", 5.0, zero_ok=True),
        operator_namespace=env.text("TENANT_PLATFORM_NAMESPACE", "tenant-platform-system"),
        log_format=env.choice("TENANT_PLATFORM_LOG_FORMAT", "plain", LOG_FORMATS),
        log_level=env.choice("TENANT_PLATFORM_LOG_LEVEL", "info", LOG_LEVELS),
        metrics_port=env.count("TENANT_PLATFORM_METRICS_PORT", 8080, minimum=0, note=" (0: any free port)"),
        health_port=env.count("TENANT_PLATFORM_HEALTH_PORT", 8081, minimum=0, note=" (0: any free port)"),
        kubeconfig=env.text("KUBECONFIG", "") or None,
        kube_context=env.text("TENANT_PLATFORM_KUBE_CONTEXT", "") or None,
        in_cluster=bool(env.text("KUBERNETES_SERVICE_HOST", "")),
        protected_namespaces=_names(env.optional("TENANT_PLATFORM_PROTECTED_NAMESPACES"), DEFAULT_PROTECTED_NAMESPACES),
        identity=env.text("TENANT_PLATFORM_IDENTITY", ""),
        retry_period=election[0],
        renew_deadline=election[1],
        lease_duration=election[2],
        stuck_pass_seconds=env.seconds("TENANT_PLATFORM_STUCK_PASS_SECONDS", 600.0),
        # The build scripts (hack/) read the same variable as their cache directory: a path there
        # means the default here, so one shell can build and run.
        cache=True if "/" in (env.optional("TENANT_PLATFORM_CACHE") or "") else env.flag("TENANT_PLATFORM_CACHE", True),
        cache_mesh_namespace=env.text("TENANT_PLATFORM_CACHE_MESH_NAMESPACE", "istio-system"),
        cache_hami_namespaces=_names(env.optional("TENANT_PLATFORM_CACHE_HAMI_NAMESPACES"), ("kube-system",)),
        webhook_probe_interval=env.seconds("TENANT_PLATFORM_WEBHOOK_PROBE_INTERVAL", 600.0, zero_ok=True),
    )


def _names(value: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list of names (None: ``default``)."""
    if value is None:
        return default
    return tuple(n.strip() for n in value.split(",") if n.strip())
