"""Tenant API servers that share a control plane's etcd, each under its own key prefix.

This is how Kamaji runs tenant control planes on a shared datastore: every tenant's
kube-apiserver stores its objects under its own ``--etcd-prefix``, with its own PKI (CA, serving
certificate, admin certificate, ServiceAccount keys), so one tenant's credentials mean nothing to
another, and no tenant sees another's objects. ``controller_manager=True`` also runs a
kube-controller-manager for the tenant (the controllers of ``controlplane.CONTROLLERS``: namespace
finalization, ServiceAccounts, the aggregated admin/edit/view roles the installer binds), as
Kamaji does; without it the tenant is an API server only (enough for most tests, and lighter).
Both run with the session control plane's flags (``controlplane.apiserver_flags`` and
``controller_manager_flags``), a tenant's own ports, directories, PKI and etcd prefix filled in.

    with ControlPlane() as cp, TenantAPIServer(cp, "lab-a") as tenant:
        tenant.kubeconfig_bytes()  # admin (system:masters) kubeconfig, data embedded

``stop()`` ends the process (the tenant becomes unreachable), ``start()`` brings it back on the
same port with the same PKI and data; both are idempotent.
"""

from __future__ import annotations

import atexit
import http.client
import re
import ssl
import threading
import time
import types
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self

import yaml

from tenant_platform.testing.binaries import ControlPlaneError
from tenant_platform.testing.controlplane import (
    FIRST_SERVICE_IP,
    ControlPlane,
    apiserver_flags,
    controller_manager_flags,
)
from tenant_platform.testing.pki import Pki, b64, write_kubeconfig, write_pki
from tenant_platform.testing.processes import Child, free_ports, spawn, tail, terminate

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class TenantAPIServer:
    """One tenant kube-apiserver on loopback over the management control plane's etcd."""

    def __init__(
        self, management: ControlPlane, name: str, *, controller_manager: bool = False, startup_timeout: float = 90.0
    ) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"tenant name {name!r} is not a DNS-1123 label")
        self.management = management
        self.name = name
        self.etcd_prefix = f"/tenants/{name}"
        self._timeout = startup_timeout
        self._lock = threading.RLock()
        self._child: Child | None = None
        self._controller_manager = controller_manager
        self._kcm: Child | None = None
        self._dir: Path | None = None
        self._pki: Pki | None = None
        self._port: int | None = None
        self.start_seconds: float | None = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *_: type[BaseException] | BaseException | types.TracebackType | None) -> None:
        self.stop()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Self:
        with self._lock:
            if self._child is not None:
                return self
            began = time.monotonic()
            if self._dir is None:
                self._dir = self.management.work_dir / "tenants" / self.name
                (self._dir / "logs").mkdir(parents=True)
                self._pki = write_pki(self._dir / "pki", service_ip=FIRST_SERVICE_IP)
                (self._port,) = free_ports(1)
            pki, port = self._pki, self._port
            assert pki is not None and port is not None
            self._child = spawn(
                self.management.bin_dir / "kube-apiserver",
                apiserver_flags(
                    etcd_url=self.management.etcd_url,
                    port=port,
                    cert_dir=self._dir / "pki",
                    pki=pki,
                    etcd_prefix=self.etcd_prefix,
                ),
                name=f"kube-apiserver-{self.name}",
                work_dir=self._dir,
            )
            atexit.register(self.stop)
            try:
                self._wait_ready()
                if self._controller_manager:
                    self._kcm = spawn(
                        self.management.bin_dir / "kube-controller-manager",
                        controller_manager_flags(kubeconfig=self.kubeconfig_path, pki=pki),
                        name=f"kube-controller-manager-{self.name}",
                        work_dir=self._dir,
                    )
            except BaseException:
                self.stop()
                raise
            self.start_seconds = round(time.monotonic() - began, 2)
            return self

    def stop(self) -> None:
        with self._lock:
            if self._kcm is not None:
                terminate(self._kcm, 15.0)
                self._kcm = None
            if self._child is not None:
                terminate(self._child, 15.0)
                self._child = None
            atexit.unregister(self.stop)

    @property
    def running(self) -> bool:
        return self._child is not None

    def _wait_ready(self) -> None:
        assert self._child is not None and self._pki is not None
        context = ssl.create_default_context(cafile=str(self._pki.ca_crt))
        context.load_cert_chain(str(self._pki.admin_crt), str(self._pki.admin_key))
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )
        deadline = time.monotonic() + self._timeout
        while True:
            if (code := self._child.popen.poll()) is not None:
                raise ControlPlaneError(
                    f"tenant {self.name}: kube-apiserver exited with {code}:\n{tail(self._child.log_path)}"
                )
            try:
                with opener.open(f"{self.server}/api/v1/namespaces/default", timeout=5):
                    return
            except (OSError, http.client.HTTPException, urllib.error.HTTPError):
                pass
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"tenant {self.name}: not ready after {self._timeout:.0f}s:\n{tail(self._child.log_path)}"
                )
            time.sleep(0.2)

    # -- access ---------------------------------------------------------------------------------

    @property
    def server(self) -> str:
        if self._port is None:
            raise ControlPlaneError(f"tenant {self.name} was never started")
        return f"https://127.0.0.1:{self._port}"

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    @property
    def kubeconfig_path(self) -> Path:
        """Admin (system:masters) kubeconfig with embedded data, written once."""
        assert self._dir is not None and self._pki is not None
        path = self._dir / "admin.kubeconfig"
        if not path.exists():
            user = {"client-certificate-data": b64(self._pki.admin_crt), "client-key-data": b64(self._pki.admin_key)}
            write_kubeconfig(path, server=self.server, ca=self._pki.ca_crt, user=user)
        return path

    def kubeconfig_bytes(self) -> bytes:
        return self.kubeconfig_path.read_bytes()

    def kubeconfig_for_token(self, token: str) -> bytes:
        """A kubeconfig for this tenant authenticating with a bearer ``token``."""
        assert self._pki is not None
        doc = yaml.safe_load(self.kubeconfig_bytes())
        doc["users"] = [{"name": "user", "user": {"token": token}}]
        return yaml.safe_dump(doc, sort_keys=False).encode()
