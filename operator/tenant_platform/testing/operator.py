"""Run the operator as a separate process under the RBAC shipped in deploy/base/rbac.yaml.

Shared by the e2e tests and the benchmarks: the ServiceAccount, ClusterRole and binding are
applied exactly as shipped, and the operator gets a TokenRequest token for that ServiceAccount in
a kubeconfig, so a permission missing from deploy/ fails loudly.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

REPO = Path(__file__).resolve().parents[3]
OPERATOR_NAMESPACE = "tenant-platform-system"
OPERATOR_SA = "tenant-platform-operator"
IMAGE_ENV: Final = {"MALLOC_ARENA_MAX": "2"}
"""The allocator settings the image's Dockerfile sets (its ENV; tests/unit/test_dockerfile.py keeps
the two equal), so an operator started from source here (e2e tests, benchmarks) runs as the
image runs it."""


@dataclass
class RunningOperator:
    process: subprocess.Popen[bytes]
    log_path: Path
    kubeconfig: Path
    token: str
    metrics_port: int | None
    health_port: int | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        """The operator's own /metrics exposition."""
        if self.metrics_port is None:
            raise RuntimeError("started without metrics")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            return str(resp.read().decode())

    def health(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON report) of the operator's /healthz."""
        if self.health_port is None:
            raise RuntimeError("started without probes")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=10) as resp:
                return int(resp.status), json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), json.loads(exc.read())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def base_file(name: str) -> Path:
    """deploy/base/<name> of the checkout; installed without one (`tenant-platform dev
    --no-operator` from a wheel), the package's copy of it (data/base/, hack/sync-deploy.py)."""
    path = REPO / "deploy" / "base" / name
    if path.is_file():
        return path
    return Path(str(importlib.resources.files("tenant_platform").joinpath("data", "base", name)))


def apply_file(kube: Kube, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            kube.apply(doc)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def operator_kubeconfig(control_plane: ControlPlane, admin: Kube, path: Path) -> tuple[Path, str]:
    """Apply deploy/base's namespace and RBAC, mint a token for the operator's ServiceAccount and
    write a kubeconfig with it (context namespace: the operator's); returns (path, token)."""
    apply_file(admin, base_file("namespace.yaml"))
    apply_file(admin, base_file("rbac.yaml"))
    token, _ = admin.request_token(OPERATOR_NAMESPACE, OPERATOR_SA, expiration_seconds=6 * 3600)
    kubeconfig = control_plane.kubeconfig_for_token(token, path)
    doc: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    for ctx in doc.get("contexts", []):
        ctx["context"]["namespace"] = OPERATOR_NAMESPACE
    kubeconfig.write_text(yaml.safe_dump(doc))
    return kubeconfig, token


def start_operator(
    control_plane: ControlPlane,
    admin: Kube,
    work_dir: Path,
    *,
    drift_interval: float = 4,
    metrics: bool = False,
    health: bool = False,
    extra_env: dict[str, str] | None = None,
    credentials: tuple[Path, str] | None = None,
) -> RunningOperator:
    """Apply deploy/base RBAC, mint a token for the operator's ServiceAccount, start `tenant-platform run`.

    ``credentials`` (kubeconfig, token) from an earlier ``operator_kubeconfig`` skips the API
    calls, so an operator can be (re)started while the API server is down (the fault tests)."""
    if credentials is None:
        credentials = operator_kubeconfig(control_plane, admin, work_dir / "operator.kubeconfig")
    kubeconfig, token = credentials
    port = _free_port() if metrics else None
    health_port = _free_port() if health else None
    env = {
        **os.environ,
        **IMAGE_ENV,
        "KUBECONFIG": str(kubeconfig),
        "TENANT_PLATFORM_DRIFT_INTERVAL": str(drift_interval),
        "TENANT_PLATFORM_GPU_DEBOUNCE": "0.5",
        "TENANT_PLATFORM_METRICS_PORT": str(port or 0),
        "TENANT_PLATFORM_HEALTH_PORT": str(health_port or 0),
        "PYTHONPATH": str(REPO / "operator"),
        **(extra_env or {}),
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    args = [sys.executable, "-m", "tenant_platform.cli", "run", "--log-format", "json"]
    if not metrics:
        args.append("--no-metrics")
    if not health:
        args.append("--no-probes")
    log_path = work_dir / "operator.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    running = RunningOperator(process, log_path, kubeconfig, token, port, health_port)
    if port is not None:

        def serving() -> bool:
            try:
                running.metrics()
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(f"operator exited:\n{running.log()[-3000:]}") from None
                return False
            return True

        wait_for(serving, "the operator's /metrics endpoint", 30, interval=0.2, context=lambda: running.log()[-3000:])
    return running
