"""A real Kubernetes control plane on loopback: etcd, kube-apiserver and kube-controller-manager.

The binaries are compiled from the Go module proxy by ``hack/build-control-plane.sh`` (cached by
version, see docs/control-plane.md) or taken from ``TENANT_PLATFORM_BIN_DIR``. Every
``ControlPlane`` gets a fresh temporary directory holding its certificates, etcd data, logs and
kubeconfig, and its own free loopback ports, so several can run side by side. There is no kubelet
and no scheduler: pods are stored but never run.

    with ControlPlane() as cp:
        cp.kubectl("get", "namespaces")

Environment:
    TENANT_PLATFORM_BIN_DIR   prebuilt etcd, kube-apiserver, kube-controller-manager and kubectl
    TENANT_PLATFORM_CACHE     build cache of hack/build-control-plane.sh (~/.cache/tenant-platform)
    TENANT_PLATFORM_KEEP_CP   "1" keeps the temporary directory (logs, certs, data) after stop()

Faults: ``stop_component(name, kill=...)``, ``start_component(name)`` and ``restart_component``
stop and start one component (etcd, kube-apiserver, kube-controller-manager) with the same
flags, ports and data, for the fault tests (tests/e2e/test_faults.py, benchmarks/faults.py).

Teardown: ``stop()`` (also run by ``atexit``) sends SIGTERM to each child's process group, waits,
then SIGKILLs it. Children also get PR_SET_PDEATHSIG=SIGKILL on Linux, so they die with the Python
process even when it is killed and neither ``stop()`` nor ``atexit`` runs.

This module holds the ``ControlPlane`` class and the components' flags (``apiserver_flags`` and
``controller_manager_flags``, which testing/tenants.py uses too); the pieces it uses live
next to it: ``binaries`` (pinned versions, finding or building the binaries; ``find_bin_dir`` and
``ControlPlaneError`` are re-exported here), ``pki`` (certificates and kubeconfigs) and
``processes`` (spawning, stopping and sweeping).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import threading
import time
import types
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Self, TypeVar

from tenant_platform.testing.binaries import (
    ControlPlaneError,
    checked_bin_dir,
    find_bin_dir,
    first_build_seconds,
    help_text,
)
from tenant_platform.testing.pki import Pki, b64, write_kubeconfig, write_pki
from tenant_platform.testing.processes import (
    OWNER_FILE,
    WORK_DIR_PREFIX,
    Child,
    free_ports,
    process_identity,
    spawn,
    sweep_stale_work_dirs,
    tail,
    terminate,
)

__all__ = [
    "CONTROLLERS",
    "ENV_KEEP",
    "FIRST_SERVICE_IP",
    "SERVICE_ACCOUNT_ISSUER",
    "SERVICE_CLUSTER_IP_RANGE",
    "ControlPlane",
    "ControlPlaneError",
    "KubectlError",
    "Timings",
    "apiserver_flags",
    "controller_manager_flags",
    "find_bin_dir",
]

SERVICE_CLUSTER_IP_RANGE: Final = "10.0.0.0/24"
FIRST_SERVICE_IP: Final = "10.0.0.1"
SERVICE_ACCOUNT_ISSUER: Final = "https://kubernetes.default.svc.cluster.local"
# Only what a cluster without nodes needs. Leave out node-lifecycle, taint-eviction and
# pod-garbage-collector: they would taint fake nodes and evict or delete their pods.
CONTROLLERS: Final = (
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    # Fills the aggregated admin/edit/view ClusterRoles, which the installer RoleBinding uses.
    "clusterrole-aggregation-controller",
    # Reports type-checking warnings of ValidatingAdmissionPolicies in their status.
    "validatingadmissionpolicy-status-controller",
    # Computes ResourceQuota status (hard, used), which quota admission needs (the GPU share).
    "resourcequota-controller",
    # Lifts a PVC's kubernetes.io/pvc-protection finalizer once no pod uses it, so the storage
    # write test's PVCs (in the platform's namespace) go with their namespace.
    "persistentvolumeclaim-protection-controller",
)
ENV_KEEP: Final = "TENANT_PLATFORM_KEEP_CP"

_T = TypeVar("_T")


def apiserver_flags(*, etcd_url: str, port: int, cert_dir: Path, pki: Pki, etcd_prefix: str | None = None) -> list[str]:
    """The kube-apiserver flags of the session control plane and of every tenant API server
    (testing/tenants.py): one list, so the two cannot drift apart. ``etcd_prefix``: a tenant's
    key prefix in the shared etcd (None: kube-apiserver's default, /registry)."""
    return [
        f"--etcd-servers={etcd_url}",
        *([f"--etcd-prefix={etcd_prefix}"] if etcd_prefix is not None else []),
        f"--cert-dir={cert_dir}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--tls-cert-file={pki.apiserver_crt}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_crt}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
    ]


def controller_manager_flags(*, kubeconfig: Path, pki: Pki) -> list[str]:
    """The kube-controller-manager flags, shared the same way (``CONTROLLERS`` only)."""
    return [
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--secure-port=0",
        f"--controllers={','.join(CONTROLLERS)}",
        f"--root-ca-file={pki.ca_crt}",
        f"--service-account-private-key-file={pki.sa_key}",
    ]


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; unlike its base class, str() includes kubectl's stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr or ''}".rstrip()


@dataclasses.dataclass(frozen=True)
class Timings:
    """Wall-clock seconds of one ``ControlPlane.start()``, for docs and benchmarks.

    ``build_seconds`` is what this process spent finding or building the binaries (near zero when
    cached); ``first_build_seconds`` is the cached build's own duration, read from its STAMP file,
    or None when the binaries came from TENANT_PLATFORM_BIN_DIR without one.
    """

    build_seconds: float
    etcd_seconds: float
    apiserver_seconds: float
    controller_manager_seconds: float
    start_seconds: float
    first_build_seconds: int | None


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback, started by ``start()``.

    Usable as a context manager. After ``start()``: ``server``, ``kubeconfig_path`` (admin, a
    member of system:masters), ``ca_path``, ``bin_dir``, ``work_dir``, ``timings``. Every
    attribute raises ControlPlaneError before start. ``stop()`` is idempotent and also runs at exit.
    """

    def __init__(
        self,
        *,
        bin_dir: Path | None = None,
        controller_manager: bool = True,
        extra_apiserver_args: Sequence[str] = (),
        extra_controller_manager_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 15.0,
    ) -> None:
        self._bin_dir = bin_dir
        self._with_controller_manager = controller_manager
        self._extra_apiserver_args = tuple(extra_apiserver_args)
        self._extra_controller_manager_args = tuple(extra_controller_manager_args)
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._lock = threading.RLock()
        self._children: list[Child] = []
        self._work_dir: Path | None = None
        self._pki: Pki | None = None
        self._server: str | None = None
        self._kubeconfig_path: Path | None = None
        self._timings: Timings | None = None
        self._admin_opener: urllib.request.OpenerDirector | None = None
        # How each component was started and when it is ready, for stop_component/start_component.
        self._args: dict[str, list[str]] = {}
        self._ready: dict[str, tuple[str, Callable[[], bool]]] = {}
        self._etcd_url: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Self:
        """Start every component and wait until each is ready; on any failure stop what started.

        Raises ControlPlaneError with the tail of the failing component's log.
        """
        with self._lock:
            if self._work_dir is not None:
                raise ControlPlaneError("this ControlPlane was already started")
            atexit.register(self.stop)
            try:
                self._start()
            except BaseException:  # KeyboardInterrupt too: never leave children behind
                self.stop()
                raise
            return self

    def _start(self) -> None:
        began = time.monotonic()
        bin_dir = self._bin_dir = checked_bin_dir(self._bin_dir, origin="bin_dir") if self._bin_dir else find_bin_dir()
        build_seconds = time.monotonic() - began
        started = time.monotonic()
        sweep_stale_work_dirs()
        work_dir = self._work_dir = Path(tempfile.mkdtemp(prefix=WORK_DIR_PREFIX))
        if owner := process_identity(os.getpid()):
            (work_dir / OWNER_FILE).write_text(owner)
        (work_dir / "logs").mkdir()
        pki = self._pki = write_pki(work_dir / "pki", service_ip=FIRST_SERVICE_IP)
        etcd_port, peer_port, api_port = free_ports(3)
        self._server = f"https://127.0.0.1:{api_port}"
        self._kubeconfig_path = write_kubeconfig(
            work_dir / "admin.kubeconfig",
            server=self._server,
            ca=pki.ca_crt,
            user={
                "client-certificate-data": b64(pki.admin_crt),
                "client-key-data": b64(pki.admin_key),
            },
        )
        context = ssl.create_default_context(cafile=str(pki.ca_crt))
        context.load_cert_chain(str(pki.admin_crt), str(pki.admin_key))
        # NB: no ProxyHandler({}) would let http(s)_proxy from the environment capture loopback.
        self._admin_opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )

        etcd_url = self._etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd_args = [
            "--name=default",
            f"--data-dir={work_dir / 'etcd'}",
            "--log-level=warn",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=1",
            f"--quota-backend-bytes={2 * 1024**3}",
        ]
        if "--unsafe-no-fsync" in help_text(bin_dir / "etcd"):
            etcd_args.append("--unsafe-no-fsync=true")
        self._ready["etcd"] = ("etcd /health", lambda: self._etcd_healthy(f"{etcd_url}/health"))
        etcd = self._spawn("etcd", etcd_args)
        etcd_seconds = self._wait(etcd, *self._ready["etcd"])

        apiserver = self._spawn(
            "kube-apiserver",
            [
                *apiserver_flags(etcd_url=etcd_url, port=api_port, cert_dir=work_dir / "pki", pki=pki),
                *self._extra_apiserver_args,
            ],
        )
        self._ready["kube-apiserver"] = ("kube-apiserver /readyz", lambda: self._ok("/readyz"))
        apiserver_seconds = self._wait(apiserver, *self._ready["kube-apiserver"])
        apiserver_seconds += self._wait(apiserver, "namespace default", lambda: self._ok("/api/v1/namespaces/default"))

        controller_manager_seconds = 0.0
        if self._with_controller_manager:
            controller_manager = self._spawn(
                "kube-controller-manager",
                [
                    *controller_manager_flags(kubeconfig=self._kubeconfig_path, pki=pki),
                    *self._extra_controller_manager_args,
                ],
            )
            self._ready["kube-controller-manager"] = (
                "ServiceAccount default/default",
                lambda: self._ok("/api/v1/namespaces/default/serviceaccounts/default"),
            )
            controller_manager_seconds = self._wait(controller_manager, *self._ready["kube-controller-manager"])
        self._timings = Timings(
            build_seconds=round(build_seconds, 2),
            etcd_seconds=round(etcd_seconds, 2),
            apiserver_seconds=round(apiserver_seconds, 2),
            controller_manager_seconds=round(controller_manager_seconds, 2),
            start_seconds=round(time.monotonic() - started, 2),
            first_build_seconds=first_build_seconds(bin_dir),
        )

    def stop(self) -> None:
        """Stop every child (newest first) and remove the work dir unless TENANT_PLATFORM_KEEP_CP=1.

        Safe to call twice, before start, and from atexit.
        """
        with self._lock:
            while self._children:
                # Pop only after the child is gone, so an interrupted stop() can be resumed.
                terminate(self._children[-1], self._stop_timeout)
                self._children.pop()
            atexit.unregister(self.stop)
            if self._work_dir is None:
                return
            if os.environ.get(ENV_KEEP) == "1":
                # Without an owner the directory is never swept as stale.
                (self._work_dir / OWNER_FILE).unlink(missing_ok=True)
            else:
                shutil.rmtree(self._work_dir, ignore_errors=True)

    def _spawn(self, name: str, args: Sequence[str]) -> Child:
        assert self._bin_dir is not None and self._work_dir is not None
        self._args[name] = list(args)
        child = spawn(self._bin_dir / name, args, name=name, work_dir=self._work_dir)
        self._children.append(child)
        return child

    # -- faults: stopping and starting one component --------------------------------------------

    def stop_component(self, name: str, *, kill: bool = False) -> None:
        """Stop one component (``etcd``, ``kube-apiserver``, ``kube-controller-manager``):
        SIGTERM then SIGKILL after the stop timeout, or SIGKILL at once with ``kill``. Its data
        (etcd's data dir), ports and certificates stay, so ``start_component`` brings it back
        as it was. A no-op when it is not running."""
        with self._lock:
            child = next((c for c in self._children if c.name == name), None)
            if child is None:
                return
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)  # pgid == pid (its own session)
                child.popen.wait(timeout=self._stop_timeout)
                child.log.close()
            else:
                terminate(child, self._stop_timeout)
            self._children.remove(child)

    def start_component(self, name: str) -> float:
        """Start a component stopped by ``stop_component`` again with the same flags and wait
        until it is ready; returns the seconds that took."""
        with self._lock:
            if name not in self._args:
                raise ControlPlaneError(f"{name} was never started by this ControlPlane")
            if any(c.name == name for c in self._children):
                raise ControlPlaneError(f"{name} is running")
            child = self._spawn(name, self._args[name])
            what, ready = self._ready[name]
            return self._wait(child, what, ready)

    def restart_component(self, name: str, *, kill: bool = False) -> float:
        """``stop_component`` then ``start_component``; returns the seconds until it was ready again."""
        self.stop_component(name, kill=kill)
        return self.start_component(name)

    def _wait(self, child: Child, what: str, ready: Callable[[], bool]) -> float:
        began = time.monotonic()
        deadline = began + self._startup_timeout
        delay = 0.05
        while True:
            code = child.popen.poll()
            if code is not None:
                raise self._failure(child, f"{child.name} exited with code {code} before {what} was ready")
            try:
                if ready():
                    return time.monotonic() - began
            except (OSError, http.client.HTTPException, ValueError):
                pass  # not listening yet, or answering garbage while it starts
            if time.monotonic() > deadline:
                raise self._failure(child, f"timed out after {self._startup_timeout:.0f}s waiting for {what}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _failure(self, child: Child, message: str) -> ControlPlaneError:
        child.log.flush()
        keep = "" if os.environ.get(ENV_KEEP) == "1" else f" (set {ENV_KEEP}=1 to keep the logs)"
        return ControlPlaneError(f"{message}; last lines of {child.log_path.name}{keep}:\n{tail(child.log_path)}")

    def _etcd_healthy(self, url: str) -> bool:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=5) as response:
            return bool(json.load(response).get("health") == "true")

    def _ok(self, path: str) -> bool:
        try:
            self._admin_get(path, timeout=5)
        except urllib.error.HTTPError:
            return False
        return True

    def _admin_get(self, path: str, *, timeout: float = 30) -> bytes:
        if self._admin_opener is None:
            raise ControlPlaneError("the control plane is not started")
        with self._admin_opener.open(f"{self.server}{path}", timeout=timeout) as response:
            data: bytes = response.read()
            return data

    # -- public API -----------------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The apiserver URL, ``https://127.0.0.1:<port>``."""
        return _started(self._server)

    @property
    def etcd_url(self) -> str:
        """etcd's client URL (tenant API servers share it under their own prefix: testing/tenants.py)."""
        return _started(self._etcd_url)

    @property
    def kubeconfig_path(self) -> Path:
        """Admin kubeconfig (client certificate, group system:masters) with embedded data."""
        return _started(self._kubeconfig_path)

    @property
    def ca_path(self) -> Path:
        """PEM of the CA that signed the serving and client certificates."""
        return _started(self._pki).ca_crt

    @property
    def bin_dir(self) -> Path:
        """The directory holding etcd, kube-apiserver, kube-controller-manager and kubectl."""
        return _started(self._bin_dir)

    @property
    def work_dir(self) -> Path:
        """The temporary directory: pki/, etcd/, logs/<component>.log, admin.kubeconfig."""
        return _started(self._work_dir)

    @property
    def timings(self) -> Timings:
        """How long start() took, split by component."""
        return _started(self._timings)

    @property
    def pids(self) -> dict[str, int]:
        """Running children by component name (each is also its process group id)."""
        with self._lock:
            return {child.name: child.pid for child in self._children}

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl as admin; raises KubectlError (with stderr) on failure when ``check``."""
        command = [
            str(self.bin_dir / "kubectl"),
            f"--kubeconfig={self.kubeconfig_path}",
            f"--cache-dir={self.work_dir / 'kubectl-cache'}",
            *args,
        ]
        result = subprocess.run(command, capture_output=True, text=True, input=input, timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, command, result.stdout, result.stderr)
        return result

    def kubeconfig_for_token(self, token: str, path: Path | str) -> Path:
        """Write a kubeconfig for this server authenticating with a bearer ``token``; return it."""
        return write_kubeconfig(Path(path), server=self.server, ca=self.ca_path, user={"token": token})

    def metrics_text(self) -> str:
        """The apiserver's Prometheus /metrics, fetched as admin (e.g. apiserver_request_total)."""
        return self._admin_get("/metrics").decode()


def _started(value: _T | None) -> _T:
    if value is None:
        raise ControlPlaneError("the control plane is not started")
    return value
