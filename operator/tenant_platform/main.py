"""Operator start-up: ``run(settings)`` builds the process state and runs kopf until stopped.

Used by `tenant-platform run` (cli.py) and `tenant-platform dev` (devmode.py, in a thread), each
passing its Settings explicitly. ``run`` installs ``handlers.OperatorState(settings)`` before
kopf starts, so every handler (here and in handlers.py) reads the same settings and client.

The finalizer and storages are fixed here once (changing them later strands finalizers or
re-handles every object). Our handlers return None and use no kopf progress state except for
deletion, so kopf writes nothing to our objects but its finalizer and short-lived progress
annotations while a deletion is retried. kopf logs in with exactly our client's identity.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import kopf

from tenant_platform import handlers, metrics
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.hami import names as hami_names
from tenant_platform.kube.cache import CachedKube, Scope, operator_scopes
from tenant_platform.kube.client import Kube
from tenant_platform.status import apiaddresses
from tenant_platform.status.coredns import DEFAULT_POD_LABELS, CoreDNSTarget

log = logging.getLogger("tenant_platform.main")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = constants.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=constants.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=constants.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    state = handlers.current()
    # Threads for kopf's own sync handlers (platform loops are async and use their own pool).
    settings.execution.max_workers = state.settings.kopf_workers
    settings.watching.inactivity_timeout = 70
    settings.watching.client_timeout = 300
    settings.watching.server_timeout = 270
    # Events for our cluster-scoped objects go to the operator's namespace (kopf uses the
    # kubeconfig context's namespace, or the pod's namespace in-cluster).
    state.client()
    log.info("tenant-platform operator configured (drift interval %ss)", state.settings.drift_interval)


@kopf.on.startup()
def start_cache(**_: Any) -> None:
    """Start the watch-fed read cache (when the client is one); reads fall through until synced."""
    kube = handlers.current().client()
    if isinstance(kube, CachedKube):
        kube.start()


@kopf.on.cleanup()
def stop_cache(**_: Any) -> None:
    kube = handlers.current().kube
    if isinstance(kube, CachedKube):
        kube.stop()


# The kinds of the children the steps write (labelled with our platform label). Secrets are left
# out: the operator may not list or watch them (docs/security.md), so they stay GETs by name.
CHILD_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("networking.istio.io/v1", "Gateway"),
)


def cache_scopes(settings: Settings) -> list[Scope]:
    """What the operator's cache holds: children, TenantPlatforms, Namespaces, and the facts the
    steps verify (docs/architecture.md, "Reads from watches")."""
    dns = CoreDNSTarget()
    mesh = settings.cache_mesh_namespace
    facts = [
        Scope("storage.k8s.io/v1", "StorageClass"),
        Scope("apps/v1", "Deployment", namespace=mesh),
        Scope("v1", "Service", namespace=mesh),
        Scope("apps/v1", "Deployment", namespace=dns.namespace, name=dns.deployment),
        Scope("v1", "ConfigMap", namespace=dns.namespace, name=dns.config_map),
        Scope("v1", "ConfigMap", namespace=dns.namespace, name=dns.custom_config_map),
        Scope("v1", "ConfigMap", namespace=dns.namespace, name=hami_names.CONFIG_MAP),
        Scope("v1", "Pod", namespace=dns.namespace, labels=tuple(DEFAULT_POD_LABELS.items())),
        Scope("v1", "Service", namespace=apiaddresses.SERVICE_NAMESPACE, name=apiaddresses.SERVICE_NAME),
        Scope(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            namespace=apiaddresses.SERVICE_NAMESPACE,
            labels=((apiaddresses.SERVICE_NAME_LABEL, apiaddresses.SERVICE_NAME),),
        ),
    ]
    return operator_scopes(child_kinds=CHILD_KINDS, fact_scopes=facts)


def cached_client(settings: Settings, state: handlers.OperatorState) -> CachedKube:
    """The operator's client with the watch-fed cache: a child's event wakes its platform, a
    fact's event wakes every platform (wakeups are flags; a pass with nothing to do is free)."""

    def on_child(name: str) -> None:
        if name in state.wakeups:
            state.wake(name)

    return CachedKube(
        Kube.from_kubeconfig(settings.kubeconfig), cache_scopes(settings), on_child=on_child, on_fact=state.wake_all
    )


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo | None:
    """Log kopf in with exactly the identity our own client uses (one source of credentials)."""
    state = handlers.current()
    if state.settings.in_cluster and not state.settings.kubeconfig:
        return kopf.login_with_service_account(**_)
    info = state.client().connection_info()
    return kopf.ConnectionInfo(
        server=info["server"],
        ca_path=info["ca_path"],
        insecure=info["insecure"],
        certificate_path=info["certificate_path"],
        private_key_path=info["private_key_path"],
        token=info["token"],
        scheme="Bearer" if info["token"] else None,
        default_namespace=info["namespace"],
    )


@kopf.on.probe(id="lastReconcile")
def last_reconcile(**_: Any) -> str:
    """Liveness/readiness payload: the operator process can still reach the API."""
    return str(handlers.current().client().server)


def run(
    settings: Settings,
    *,
    liveness_endpoint: str | None = None,
    metrics_port: int | None = None,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
) -> None:
    """Run the operator with ``settings`` until stopped (blocking)."""
    state = handlers.OperatorState(settings)
    if settings.cache:
        state.kube = cached_client(settings, state)
    handlers.install(state)
    if metrics_port:
        metrics.serve(metrics_port)
    kopf.run(
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness_endpoint,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
