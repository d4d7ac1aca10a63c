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
import os
import socket
import threading
from typing import Any

import kopf

from tenant_platform import handlers, metrics
from tenant_platform.api import constants
from tenant_platform.config import Settings

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
    handlers.install(handlers.OperatorState(settings))
    if metrics_port:
        metrics.serve(metrics_port)
    # kopf names the process (its identity) after POD_ID, else "user@host" with the user from the
    # passwd database, which has no entry for the image's numeric UID: kopf would crash at start.
    os.environ.setdefault("POD_ID", f"{os.getuid()}@{socket.gethostname()}")
    kopf.run(
        clusterwide=True,
        standalone=True,
        liveness_endpoint=liveness_endpoint,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
