"""The operator image as the Deployment runs it: non-root, read-only root filesystem, the deploy/
ServiceAccount's in-cluster credentials, against the session's control plane; Ready, /metrics and
/healthz served, a clean exit on SIGTERM. How the container is made: tests/image/conftest.py."""

from __future__ import annotations

import os
import re
import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.test_operator import sample
from tests.image.conftest import (
    IN_CLUSTER_ENV,
    Container,
    Image,
    ServiceForwarder,
    api_port,
    deployment,
    deployment_env,
    operator_container_spec,
    run_container,
    service_account_dir,
)

from tenant_platform.api import constants
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import OPERATOR_NAMESPACE
from tenant_platform.testing.wait import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def security_context() -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod securityContext, operator container securityContext) from deploy/base/deployment.yaml."""
    pod = deployment()["spec"]["template"]["spec"].get("securityContext") or {}
    return pod, operator_container_spec().get("securityContext") or {}


def ids() -> tuple[int, int]:
    pod, container = security_context()
    merged = {**pod, **container}
    return int(merged["runAsUser"]), int(merged["runAsGroup"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def proc_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def test_the_image_matches_the_deployments_security_context(image: Image) -> None:
    pod, container = security_context()
    assert pod["runAsNonRoot"] is True and container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False and container["capabilities"]["drop"] == ["ALL"]
    # runAsNonRoot is only verifiable with a numeric image user; it must be the Deployment's.
    uid, gid = ids()
    assert image.config["User"] == f"{uid}:{gid}" and uid != 0
    assert image.argv == ["tenant-platform", "run"] and operator_container_spec()["args"] == ["run"]


def test_version_runs_as_the_non_root_user(image: Image, work_dir: Path) -> None:
    container = run_container(image, ["tenant-platform", "--version"], {}, work_dir, uid=ids()[0], gid=ids()[1])
    assert container.process.wait(timeout=120) == 0, container.log()
    assert re.search(r"\d+\.\d+\.\d+", container.log()), container.log()


def test_the_root_filesystem_is_read_only_and_tmp_is_writable(image: Image, work_dir: Path) -> None:
    probe = (
        "import os, errno\n"
        "print('uid', os.getuid(), os.getgid(), os.getgroups())\n"
        "for path in ('/opt/venv/probe', '/probe', '/tmp/probe'):\n"
        "    try:\n"
        "        open(path, 'w').close(); print(path, 'written')\n"
        "    except OSError as e:\n"
        "        print(path, errno.errorcode[e.errno])\n"
    )
    container = run_container(image, ["python", "-c", probe], {}, work_dir, uid=ids()[0], gid=ids()[1])
    assert container.process.wait(timeout=120) == 0, container.log()
    log = container.log()
    uid, gid = ids()
    assert f"uid {uid} {gid} []" in log
    assert "/opt/venv/probe EROFS" in log and "/probe EROFS" in log and "/tmp/probe written" in log, log


@pytest.fixture(scope="module")
def operator_container(
    image: Image, crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Container, int, int]]:
    """`tenant-platform run` from the image, in-cluster, with the deploy/ ServiceAccount's token."""
    work_dir = tmp_path_factory.mktemp("image-operator")
    work_dir.chmod(0o755)
    sa = service_account_dir(control_plane, crd, work_dir)
    metrics_port, health_port = free_port(), free_port()
    env = {
        **deployment_env(OPERATOR_NAMESPACE),
        **IN_CLUSTER_ENV,
        "TENANT_PLATFORM_DRIFT_INTERVAL": "5",
        "TENANT_PLATFORM_METRICS_PORT": str(metrics_port),
        "TENANT_PLATFORM_HEALTH_PORT": str(health_port),
    }
    uid, gid = ids()
    service = ServiceForwarder(api_port(control_plane))
    container = run_container(image, image.argv, env, work_dir, sa_dir=sa, uid=uid, gid=gid)
    try:
        yield container, metrics_port, health_port
    finally:
        container.stop()
        service.close()


def ready(kube: Kube, name: str) -> bool:
    body = kube.get(constants.API_VERSION, constants.KIND, name) or {}
    status = body.get("status") or {}
    conds = {c["type"]: c for c in status.get("conditions") or []}
    cond = conds.get("Ready") or {}
    return cond.get("status") == "True" and status.get("observedGeneration") == body["metadata"]["generation"]


def test_the_operator_runs_in_the_image(
    operator_container: tuple[Container, int, int], crd: Kube, unique_name: str
) -> None:
    container, metrics_port, health_port = operator_container
    name = ns = unique_name

    def explain() -> str:
        body = crd.get(constants.API_VERSION, constants.KIND, name) or {}
        return f"{body.get('status')}\n--- container log ---\n{container.log()[-4000:]}"

    # PID 1 of its namespace, as the Deployment's user, without capabilities or a way to gain them.
    def entrypoint_started() -> int | None:
        if container.process.poll() is not None:
            raise AssertionError(f"the container exited:\n{container.log()[-4000:]}")
        pid = container.pid1()
        if pid is None:
            return None
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        return pid if b"/opt/venv/bin/tenant-platform" in cmdline else None  # past the launcher's exec

    pid = wait_for(entrypoint_started, "the image's entrypoint as PID 1", 30, interval=0.1)
    status = proc_status(pid)
    uid, gid = ids()
    assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(gid)] * 4
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0 and int(status["CapBnd"], 16) == 0
    assert status["NoNewPrivs"] == "1"
    assert status["NSpid"].split()[-1] == "1"
    mounts = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    root_mount = [m.split() for m in mounts if m.split()[4] == "/"][-1]
    assert "ro" in root_mount[5].split(","), root_mount

    crd.apply(sample(name, ns))
    try:
        wait_for(lambda: ready(crd, name), f"{name} Ready", 180, interval=1, context=explain)
        assert crd.get("v1", "Namespace", ns) is not None

        code, body = get(health_port, "/healthz")
        assert code == 200, body
        code, text = get(metrics_port, "/metrics")
        assert code == 200 and "tenant_platform_" in text, text[:2000]
    finally:
        crd.delete(constants.API_VERSION, constants.KIND, name)
        wait_for(lambda: crd.get(constants.API_VERSION, constants.KIND, name) is None, f"{name} deleted", 120)

    # SIGTERM to PID 1, as the kubelet does: kopf stops and the process exits 0 within the grace period.
    os.kill(pid, signal.SIGTERM)
    grace = int(deployment()["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30))
    assert container.process.wait(timeout=grace) == 0, container.log()[-4000:]
    assert "Traceback" not in container.log(), container.log()[-4000:]
