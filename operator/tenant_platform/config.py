"""Operator settings: a frozen Settings, passed explicitly to whatever needs it.

``load_settings`` reads the environment (the Helm chart and kustomize base set it) once, at
start-up, through pydantic-settings (``EnvironmentSettings``: one field per variable, with its
constraints and the expected form a wrong value is told about): `tenant-platform run` (cli.py,
then its flags on top) and `tenant-platform dev` (devmode.py, over its demo defaults) build
Settings and hand them to ``main.run``; `check` (preflight.py) reads them for its dry run unless
given some. Nothing reads the environment at import time, and nothing writes it to steer the
operator. A wrong value raises SettingsError (the variable, the value, the expected form): the CLI
exits 2 with it (cli_errors.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

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
PREFIX = "TENANT_PLATFORM_"


def _stripped_lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _flag(value: Any) -> Any:
    # The build scripts (hack/) read TENANT_PLATFORM_CACHE as their cache directory: a path there
    # means the default here, so one shell can build and run.
    if isinstance(value, str) and "/" in value:
        return True
    return _stripped_lower(value)


def _names_list(value: Any) -> Any:
    """A comma-separated list of names (blank entries dropped; an empty value is an empty list)."""
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    return value


def _seconds(name: str, default: float, *, zero_ok: bool = False) -> Any:
    expected = f"a number of seconds{' (0 or more)' if zero_ok else ' greater than 0'}, e.g. {default:g}"
    return Field(
        default,
        validation_alias=PREFIX + name,
        description=expected,
        allow_inf_nan=False,
        ge=0 if zero_ok else None,
        gt=None if zero_ok else 0,
    )


def _count(name: str, default: int, *, minimum: int = 1, maximum: int = 65535, note: str = "") -> Any:
    expected = f"a whole number from {minimum} to {maximum}{note}, e.g. {default}"
    return Field(default, validation_alias=PREFIX + name, description=expected, ge=minimum, le=maximum)


def _choice(name: str, default: str, choices: tuple[str, ...]) -> Any:
    return Field(default, validation_alias=PREFIX + name, description=f"one of {', '.join(choices)}")


def _text(variable: str, default: str = "") -> Any:
    return Field(default, validation_alias=variable, description="text")


Names = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_names_list)]
Flag = Annotated[bool, BeforeValidator(_flag)]
LogLevel = Annotated[Literal["debug", "info", "warning", "error"], BeforeValidator(_stripped_lower)]
LogFormat = Annotated[Literal["plain", "json"], BeforeValidator(_stripped_lower)]


class EnvironmentSettings(BaseSettings):
    """The operator's environment variables, as pydantic-settings reads and checks them. Each field
    names its variable (``validation_alias``) and, as its description, the form a wrong value is
    told to take (``SettingsError``). ``load_settings`` turns the result into ``Settings``."""

    model_config = SettingsConfigDict(case_sensitive=True, frozen=True, extra="ignore")

    drift_interval: float = _seconds("DRIFT_INTERVAL", 300.0)
    kopf_workers: int = _count("KOPF_WORKERS", 16, maximum=1024)
    reconcile_workers: int = _count("RECONCILE_WORKERS", 8, maximum=1024)
    gpu_debounce: float = _seconds("GPU_DEBOUNCE", 5.0, zero_ok=True)
    operator_namespace: str = _text(PREFIX + "NAMESPACE", "tenant-platform-system")
    log_format: LogFormat = _choice("LOG_FORMAT", "plain", LOG_FORMATS)
    log_level: LogLevel = _choice("LOG_LEVEL", "info", LOG_LEVELS)
    metrics_port: int = _count("METRICS_PORT", 8080, minimum=0, note=" (0: any free port)")
    health_port: int = _count("HEALTH_PORT", 8081, minimum=0, note=" (0: any free port)")
    kubeconfig: str = _text("KUBECONFIG")
    kube_context: str = _text(PREFIX + "KUBE_CONTEXT")
    kubernetes_service_host: str = _text("KUBERNETES_SERVICE_HOST")  # set by the kubelet in a pod
    protected_namespaces: Names = Field(
        DEFAULT_PROTECTED_NAMESPACES,
        validation_alias=PREFIX + "PROTECTED_NAMESPACES",
        description="names, comma separated",
    )
    identity: str = _text(PREFIX + "IDENTITY")
    retry_period: float = _seconds("RETRY_PERIOD", 2.0)
    renew_deadline: float = _seconds("RENEW_DEADLINE", 10.0)
    lease_duration: float = _seconds("LEASE_DURATION", 15.0)
    stuck_pass_seconds: float = _seconds("STUCK_PASS_SECONDS", 600.0)
    cache: Flag = Field(True, validation_alias=PREFIX + "CACHE", description="true or false")
    cache_mesh_namespace: str = _text(PREFIX + "CACHE_MESH_NAMESPACE", "istio-system")
    cache_hami_namespaces: Names = Field(
        ("kube-system",), validation_alias=PREFIX + "CACHE_HAMI_NAMESPACES", description="names, comma separated"
    )
    webhook_probe_interval: float = _seconds("WEBHOOK_PROBE_INTERVAL", 600.0, zero_ok=True)


class _EnvironmentSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of the process's own
    (``load_settings(environ)``: the tests, and dev mode's defaults under the environment)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self.env_vars = dict(environ)  # case sensitive: the names as the Deployment writes them


def _read(environ: Mapping[str, str]) -> EnvironmentSettings:
    class FromMapping(EnvironmentSettings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (_EnvironmentSource(settings_cls, environ),)

    return FromMapping()


def _field_of(variable: str) -> FieldInfo | None:
    for info in EnvironmentSettings.model_fields.values():
        if info.validation_alias == variable:
            return info
    return None


def _settings_error(error: ValidationError, environ: Mapping[str, str]) -> SettingsError:
    """The first wrong variable of a ValidationError, with its value and its field's expected form."""
    first = error.errors()[0]
    variable = str(first["loc"][0]) if first["loc"] else "?"
    info = _field_of(variable)
    expected = info.description if info is not None and info.description else first["msg"]
    return SettingsError(variable, environ.get(variable, ""), expected)


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment (``os.environ`` unless ``environ`` is given), every value
    checked: a value the operator cannot use raises SettingsError naming the variable and the
    expected form (the CLI exits 2 with it)."""
    env = os.environ if environ is None else environ
    try:
        read = _read(env)
    except ValidationError as error:
        raise _settings_error(error, env) from None
    election = (read.retry_period, read.renew_deadline, read.lease_duration)
    if not election[0] < election[1] < election[2]:
        raise SettingsError(
            f"{PREFIX}RETRY_PERIOD/RENEW_DEADLINE/LEASE_DURATION",
            ", ".join(f"{v:g}" for v in election),
            "retry period < renew deadline < lease duration (seconds), e.g. 2, 10, 15",
        )
    values = read.model_dump(exclude={"kubeconfig", "kube_context", "kubernetes_service_host"})
    return Settings(
        **values,
        kubeconfig=read.kubeconfig or None,
        kube_context=read.kube_context or None,
        in_cluster=bool(read.kubernetes_service_host),
    )
