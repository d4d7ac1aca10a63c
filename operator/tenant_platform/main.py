"""Operator start-up: kopf settings and the entry point for `tenant-platform run`.

The finalizer and storages are fixed here once (changing them later strands finalizers or
re-handles every object). Our handlers return None and use no kopf progress state except for
deletion, so kopf writes nothing to our objects but its finalizer and short-lived progress
annotations while a deletion is retried.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import kopf

from tenant_platform import handlers, metrics
from tenant_platform.api import constants

log = logging.getLogger("tenant_platform.main")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = constants.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=constants.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=constants.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.INFO
    # Threads for kopf's own sync handlers (platform loops are async and use their own pool).
    settings.execution.max_workers = handlers.STATE.settings.kopf_workers
    settings.watching.inactivity_timeout = 70
    settings.watching.client_timeout = 300
    settings.watching.server_timeout = 270
    # Events for our cluster-scoped objects go to the operator's namespace (kopf uses the
    # kubeconfig context's namespace, or the pod's namespace in-cluster).
    handlers.STATE.client()
    log.info("tenant-platform operator configured (drift interval %ss)", handlers.STATE.settings.drift_interval)


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo | None:
    """Log kopf in with exactly the identity our own client uses (one source of credentials)."""
    if handlers.STATE.settings.in_cluster and not handlers.STATE.settings.kubeconfig:
        return kopf.login_with_service_account(**_)
    info = handlers.STATE.client().connection_info()
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
    return str(handlers.STATE.client().server)


def run(
    *,
    liveness_endpoint: str | None = None,
    metrics_port: int | None = None,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
) -> None:
    """Run the operator until stopped (blocking)."""
    if metrics_port:
        metrics.serve(metrics_port)
    kopf.run(
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness_endpoint,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
