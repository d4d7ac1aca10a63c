"""Operator start-up: ``run(settings)`` stands by for the leader Lease, then runs kopf while it leads.

Used by `tenant-platform run` (cli.py) and `tenant-platform dev` (devmode.py, in a thread), each
passing its Settings explicitly. ``run`` installs ``state.OperatorState(settings)`` before
kopf starts, so every handler (here and in handlers.py) reads the same settings and client.

Leader election (kube/lease.py, docs/reliability.md): every process first stands by, reading
the Lease ``tenant-platform-operator`` in the operator namespace. Only the process that acquires
it starts kopf, so no handler, watch or reconcile pass runs on a standby. The operator's client
is fenced by the election (``Kube.write_gate``): once the leader cannot renew for
``renew_deadline`` seconds it refuses every write before sending it, stops kopf and ``run``
returns 1 (the pod restarts and stands by). On a graceful stop (SIGTERM, ``stop_flag``) it stops
kopf, lets passes in flight end, and releases the Lease so a standby takes over at once.

The finalizer and storages are fixed here once (changing them later strands finalizers or
re-handles every object). Our handlers return None and use no kopf progress state except for
deletion, so kopf writes nothing to our objects but its finalizer and short-lived progress
annotations while a deletion is retried. kopf logs in with exactly our client's identity.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kopf

from tenant_platform import (
    handlers,  # noqa: F401  (importing it registers the kopf handlers)
    metrics,
)
from tenant_platform.api import constants
from tenant_platform.concerns.apiaddresses import verdict
from tenant_platform.concerns.dns import coredns
from tenant_platform.concerns.dns.coredns import DEFAULT_POD_LABELS, CoreDNSTarget
from tenant_platform.config import Settings
from tenant_platform.formats.hami import names
from tenant_platform.kube import observed
from tenant_platform.kube.cache import CachedKube, Scope, operator_scopes
from tenant_platform.kube.client import Kube
from tenant_platform.kube.lease import LeaderElector, LeaseConfig
from tenant_platform.state import OperatorState, current, install

log = logging.getLogger("tenant_platform.main")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = constants.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=constants.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=constants.GROUP, key="last-handled-configuration"
    )
    # Our own events go through kube.events (scheduler.post_events); kopf's would name a cluster-scoped
    # object from the operator's namespace, which the API server rejects.
    settings.posting.enabled = False
    state = current()
    # Threads for kopf's own sync handlers (platform loops are async and use their own pool).
    settings.execution.max_workers = state.settings.kopf_workers
    settings.watching.inactivity_timeout = 70
    settings.watching.client_timeout = 300
    settings.watching.server_timeout = 270
    state.client()
    log.info("tenant-platform operator configured (drift interval %ss)", state.settings.drift_interval)


@kopf.on.startup()
def start_cache(**_: Any) -> None:
    """Start the watch-fed read cache (when the client is one); reads fall through until synced."""
    kube = current().client()
    if isinstance(kube, CachedKube):
        kube.start()


@kopf.on.cleanup()
def stop_cache(**_: Any) -> None:
    kube = current().kube
    if isinstance(kube, CachedKube):
        kube.stop()


# The kinds of the children the steps write (labelled with our platform label). Secrets are left
# out: the operator may not list or watch them by default (docs/security.md), so they stay GETs by
# name, unless an admin grants list and watch of Secrets (SECRET_SCOPES below).
CHILD_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ServiceAccount"),
    ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("networking.istio.io/v1", "Gateway"),
    # The GPU share's quotas: the quota controller writes their status.used as pods come and go,
    # and that event wakes the platform, so status.gpuShare follows within seconds, not a drift
    # interval later (concerns/gpushare/).
    ("v1", "ResourceQuota"),
)


# Run only where the operator may list and watch every Secret (Helm value rbac.watchSecrets, or
# deploy/components/watch-secrets; kube/secretwatch.py asks, again after any RBAC change): our own
# Secrets held whole (self-signed edge certificates, kubeconfig Secrets; an event wakes the
# platform their label names), and which Secrets exist, names only (a name in neither is answered
# "absent"; an unlabelled Secret that exists, e.g. an admin's certificate, is still a GET).
SECRET_SCOPES: tuple[Scope, ...] = (
    Scope("v1", "Secret", labels=((constants.LABEL_PLATFORM, None),), role="child"),
    Scope("v1", "Secret", names_only=True, role="names"),
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
        # A platform writing its own block wakes only itself (not every platform: N^2 passes).
        Scope("v1", "ConfigMap", namespace=dns.namespace, name=dns.config_map, concerns=coredns.platforms_concerned),
        Scope("v1", "ConfigMap", namespace=dns.namespace, name=dns.custom_config_map),
        # GPUReady's health reads (concerns/gpu/healthreads.py): NVIDIA RuntimeClasses, every DaemonSet
        # (HAMi's device plugin and GPU device plugins anywhere; a few per cluster) and HAMi's
        # Deployments (its scheduler) per configured HAMi namespace.
        Scope("node.k8s.io/v1", "RuntimeClass"),
        Scope("apps/v1", "DaemonSet"),
        # Every pod guard policy and binding: the takeover of hand-made ones opted in (few objects).
        Scope("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
        Scope("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
        Scope("v1", "Pod", namespace=dns.namespace, labels=tuple(DEFAULT_POD_LABELS.items())),
        Scope("v1", "Service", namespace=verdict.SERVICE_NAMESPACE, name=verdict.SERVICE_NAME),
        Scope(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            namespace=verdict.SERVICE_NAMESPACE,
            labels=((verdict.SERVICE_NAME_LABEL, verdict.SERVICE_NAME),),
        ),
        # Which ConfigMaps exist (metadata only, names kept): a ConfigMap of ours not written yet
        # (the edge trust ConfigMap while there is no CA to publish) is then known absent without
        # a GET per pass, and a hand-made one of that name (the adoptable-by takeover, or a
        # Conflict) is still read. Its events wake nobody (role "names").
        Scope("v1", "ConfigMap", names_only=True, role="names"),
        # Which ResourceQuotas exist (names only, as above): the GPU share's quota, read in every
        # platform namespace on every pass, is known absent without a GET where there is no share.
        Scope("v1", "ResourceQuota", names_only=True, role="names"),
    ]
    for namespace in dict.fromkeys(settings.cache_hami_namespaces):
        facts.append(Scope("v1", "ConfigMap", namespace=namespace, name=names.CONFIG_MAP))
        if namespace != mesh:
            facts.append(Scope("apps/v1", "Deployment", namespace=namespace))
    return operator_scopes(child_kinds=CHILD_KINDS, fact_scopes=facts)


def cached_client(settings: Settings, state: OperatorState) -> CachedKube:
    """The operator's client with the watch-fed cache: a child's event wakes its platform, a
    fact's event wakes every platform (wakeups are flags; a pass with nothing to do is free)."""

    def on_child(name: str) -> None:
        if name in state.wakeups:
            state.wake(name)

    return CachedKube(
        Kube.from_kubeconfig(settings.kubeconfig, context=settings.kube_context),
        cache_scopes(settings),
        on_child=on_child,
        on_fact=state.wake_all,
        secret_scopes=SECRET_SCOPES,
    )


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo | None:
    """Log kopf in with exactly the identity our own client uses (one source of credentials)."""
    state = current()
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


@kopf.on.cleanup()
def set_stop_flag(**_: Any) -> None:
    """kopf stopped by itself (SIGTERM): set its stop flag too. NB: kopf waits for that flag in
    an executor thread, and asyncio.run's exit waits for that thread, so without this a SIGTERM
    left the process hanging until it was killed (and the Lease was never released)."""
    current().stopping.set()


LEASE_NAME = "tenant-platform-operator"
# kopf gets this long after it starts before a missing event-loop heartbeat fails /healthz.
KOPF_START_GRACE_SECONDS = 60.0
HEARTBEAT_STALE_SECONDS = 15.0
# On a graceful stop, passes in flight get this long to end before the Lease is released.
DRAIN_SECONDS = 10.0

TRIM_SECONDS = 30.0
"""How often the process hands freed heap memory back to the system (``malloc_trim``)."""


def malloc_trim() -> Callable[[], int] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


def trim_memory(stop: threading.Event, interval: float = TRIM_SECONDS, trim: Callable[[], int] | None = None) -> int:
    """Every ``interval`` seconds until ``stop``, give the heap's free pages back to the system.

    CPython frees objects into glibc's allocator, which keeps the pages of a passing burst (a
    fleet converging: thousands of bodies, responses and status documents) mapped, so the
    process's resident memory stays at its peak: measured at 500 platforms, 210 MiB before a trim
    and 199 MiB after (docs/performance.md). A trim takes milliseconds. Returns the number of trims."""
    trim = trim or malloc_trim()
    if trim is None:
        return 0
    done = 0
    while not stop.wait(interval):
        trim()
        done += 1
    return done


def default_identity() -> str:
    """The pod's name (its host name) plus a random suffix: unique even for two local runs."""
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


class Health:
    """What /healthz reports: the role, and checks of things that can really stop working."""

    def __init__(self, state: OperatorState, elector: LeaderElector) -> None:
        self.state = state
        self.elector = elector
        self.kopf_started: float | None = None

    def report(self) -> tuple[bool, dict[str, Any]]:
        now = time.monotonic()
        settings = self.state.settings
        leading = self.elector.is_leading()
        checks: dict[str, bool] = {}
        loop_age = now - self.elector.last_tick
        # One attempt (bounded by its request timeout) plus one retry period, with room to spare.
        checks["electionLoop"] = loop_age < settings.lease_duration + 2 * settings.retry_period
        report: dict[str, Any] = {
            "role": "leader" if leading else "standby",
            "identity": settings.identity,
            "holder": self.elector.holder,
            "electionLoopAgeSeconds": round(loop_age, 3),
        }
        if leading:
            renewal_age = now - self.elector.last_renewal
            checks["leaseRenewal"] = renewal_age < settings.renew_deadline
            report["leaseRenewalAgeSeconds"] = round(renewal_age, 3)
            beat = self.state.heartbeat
            if beat is not None:
                report["kopfLoopAgeSeconds"] = round(now - beat, 3)
                checks["kopfLoop"] = now - beat < HEARTBEAT_STALE_SECONDS
            else:
                checks["kopfLoop"] = self.kopf_started is None or now - self.kopf_started < KOPF_START_GRACE_SECONDS
            oldest = self.state.oldest_pass(now)
            report["oldestPassSeconds"] = round(oldest, 3)
            checks["passes"] = oldest < settings.stuck_pass_seconds
            if self.state.last_pass_end is not None:
                report["lastPassAgeSeconds"] = round(now - self.state.last_pass_end, 3)
        report["checks"] = checks
        healthy = all(checks.values())
        report["healthy"] = healthy
        return healthy, report


def serve_health(health: Health, port: int, addr: str = "0.0.0.0") -> ThreadingHTTPServer:
    """/healthz on ``port`` (200 healthy, 503 not; a JSON body either way), from a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/healthz", "/readyz"):
                self.send_error(404)
                return
            healthy, report = health.report()
            payload = json.dumps(report).encode()
            self.send_response(200 if healthy else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="healthz", daemon=True).start()
    return server


def run(
    settings: Settings,
    *,
    health_port: int | None = None,
    metrics_port: int | None = None,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
) -> int:
    """Run the operator with ``settings`` until stopped (blocking); 1 when leadership was lost."""
    if not settings.identity:
        settings = dataclasses.replace(settings, identity=default_identity())
    state = OperatorState(settings)
    if settings.cache:
        state.kube = cached_client(settings, state)
    install(state)
    kube = state.client()
    elector = LeaderElector(
        kube.sibling(),
        LeaseConfig(
            name=LEASE_NAME,
            namespace=settings.operator_namespace,
            identity=settings.identity,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
        ),
    )
    kube.write_gate = elector.is_leading
    metrics.METRICS.leader.set_function(lambda: 1.0 if elector.is_leading() else 0.0)
    metrics.METRICS.lease_renewal.set_function(
        lambda: time.time() - (time.monotonic() - elector.last_renewal) if elector.last_renewal else 0.0
    )
    health = Health(state, elector)
    servers: list[Any] = []
    if metrics_port:
        servers.append(metrics.serve(metrics_port))
    if health_port:
        servers.append(serve_health(health, health_port))

    stop = stop_flag or threading.Event()
    halt = state.stopping  # ends the election loop and kopf
    leading = threading.Event()
    lost = threading.Event()

    def bridge() -> None:
        stop.wait()
        halt.set()

    threading.Thread(target=bridge, name="stop-bridge", daemon=True).start()
    threading.Thread(target=trim_memory, args=(halt,), name="memory-trim", daemon=True).start()
    if threading.current_thread() is threading.main_thread():
        # Until kopf installs its own handlers: a standby stops cleanly on SIGTERM.
        signal.signal(signal.SIGTERM, lambda *_: halt.set())

    def elect() -> None:
        if elector.run(halt, on_started_leading=leading.set):
            lost.set()
        halt.set()

    # Every request of the operator's client (not kopf's own) in tenant_platform_api_requests_total.
    stop_counting = observed.observe(metrics.record_api_request)
    election = threading.Thread(target=elect, name="leader-election", daemon=True)
    election.start()
    try:
        while not leading.wait(0.2):
            if halt.is_set():
                return 0
        log.info("leading as %s: starting the operator", settings.identity)
        health.kopf_started = time.monotonic()
        # kopf names the process after POD_ID, else "user@host" with the user from the passwd
        # database, which has no entry for the image's numeric UID: kopf would crash at start.
        os.environ.setdefault("POD_ID", f"{settings.identity or os.getuid()}@{socket.gethostname()}")
        kopf.run(clusterwide=True, standalone=True, stop_flag=halt, ready_flag=ready_flag)
    except KeyboardInterrupt:
        pass
    finally:
        halt.set()
        elector.step_down()  # the fence closes: nothing this process still runs may write
        _drain(state)
        election.join(timeout=settings.retry_period * 2 + 5)
        if not lost.is_set():
            elector.release()
        for server in servers:
            server.shutdown()
        stop_counting()
        install(None)
    if lost.is_set():
        log.error("lost the lease: stopped the operator; exiting so that this process stands by again")
        return 1
    return 0


def _drain(state: OperatorState) -> None:
    """Let passes still running in the pool end (their writes are refused by now)."""
    deadline = time.monotonic() + DRAIN_SECONDS
    while state.running and time.monotonic() < deadline:
        time.sleep(0.05)
