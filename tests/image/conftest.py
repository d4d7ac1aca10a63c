"""The operator image, built by hack/build-image.sh and run the way deploy/base/deployment.yaml runs it.

There is no Docker daemon and no kubelet here, so the container is made by hand from the image's
unpacked root filesystem (``hack/build-image.sh --rootfs``), with util-linux only:

- ``unshare --mount --pid --fork``: a private mount namespace and a PID namespace, so the image's
  entrypoint is PID 1 and receives SIGTERM itself, as in a pod;
- the root filesystem bind-mounted onto itself and remounted read-only (``readOnlyRootFilesystem``),
  a tmpfs at /tmp (the Deployment's emptyDir), /proc, a /dev with the usual character devices, an
  /etc/hosts naming the API server's Service, and the ServiceAccount directory (token from a
  TokenRequest for the deploy/ ServiceAccount, the API server's CA, the namespace) bind-mounted
  read-only at /var/run/secrets/kubernetes.io/serviceaccount;
- then, as the last root step (``ENTER``, run by the host's Python): chroot into the image, empty
  the capability bounding set and set no_new_privs (``capabilities: drop [ALL]``,
  ``allowPrivilegeEscalation: false``), drop supplementary groups, switch to the Deployment's
  runAsGroup/runAsUser (which clears every remaining capability) and exec the image's entrypoint
  and command. (util-linux cannot do this order: ``setpriv`` with an empty bounding set leaves an
  exec'd root ``unshare --root`` without CAP_SYS_CHROOT.)

The network namespace is the host's (the control plane listens on loopback), so the metrics and
health ports are free ports passed through the operator's environment variables instead of the
defaults 8080/8081, and the `kubernetes` Service (https://kubernetes.default.svc, port 443, what
kopf's in-cluster login and the kubelet's KUBERNETES_SERVICE_HOST/PORT point at) is a relay on
127.0.0.1:443 to the API server's port (``ServiceForwarder``). Needs root (mount and PID
namespaces, buildah's vfs storage).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from tests.support import release_image

from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA, apply_file

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = REPO / "deploy" / "base" / "deployment.yaml"
SA_DIR = "run/secrets/kubernetes.io/serviceaccount"  # /var/run is a symlink to /run in Debian images
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

# Runs as root in the new mount and PID namespaces (PID 1 there until the final exec).
LAUNCH = r"""
set -eu
root=$1 sa=$2 uid=$3 gid=$4 sa_target=$5 devices=$6 python=$7 enter=$8 hosts=$9; shift 9
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o nosuid,nodev,mode=1777,size=64m tmpfs "$root/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount -t tmpfs -o nosuid,mode=755,size=64k tmpfs "$root/dev"
for d in $devices; do touch "$root/dev/$d"; mount --bind "/dev/$d" "$root/dev/$d"; done
mount --bind "$sa" "$root/$sa_target"
mount -o remount,bind,ro "$root/$sa_target"
mount --bind "$hosts" "$root/etc/hosts"
mount -o remount,bind,ro "$root/etc/hosts"
exec "$python" -c "$enter" "$root" "$uid" "$gid" "$@"
"""

ENTER = r"""
import ctypes, os, sys, warnings  # warnings: os.execvp imports it lazily, after the chroot
root, uid, gid, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
libc = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
os.chroot(root)
os.chdir("/")
last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
for cap in range(last_cap + 1):
    if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
os.execvp(argv[0], argv)
"""


# The kubelet writes /etc/hosts; cluster DNS would resolve the API server's Service name, which
# kopf's in-cluster login uses (https://kubernetes.default.svc, port 443). Here it is loopback,
# where ServiceForwarder stands in for the Service (127.0.0.1 and the name are in the serving cert).
HOSTS = "127.0.0.1\tlocalhost kubernetes.default.svc kubernetes.default.svc.cluster.local\n"
SERVICE_PORT = 443


class ServiceForwarder:
    """The `kubernetes` Service: 127.0.0.1:443 relayed to the API server's loopback port."""

    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind(("127.0.0.1", SERVICE_PORT))
        except OSError as error:
            self._listener.close()
            raise RuntimeError(f"127.0.0.1:{SERVICE_PORT} (the stand-in for the kubernetes Service): {error}") from None
        self._listener.listen(64)
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client, contextlib.suppress(OSError), socket.create_connection(self._target, timeout=10) as upstream:
            upstream.settimeout(None)
            peers = {client: upstream, upstream: client}
            with selectors.DefaultSelector() as selector:
                for sock in peers:
                    selector.register(sock, selectors.EVENT_READ)
                while not self._closed.is_set():
                    for key, _ in selector.select(timeout=1):
                        src = cast(socket.socket, key.fileobj)
                        data = src.recv(65536)
                        if not data:
                            return
                        peers[src].sendall(data)

    def close(self) -> None:
        self._closed.set()
        self._listener.close()


@dataclasses.dataclass(frozen=True)
class Image:
    """The built image: its unpacked root filesystem and its OCI config (User, Env, Entrypoint, Cmd)."""

    name: str
    rootfs: Path
    config: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env") or [])

    @property
    def argv(self) -> list[str]:
        return [*(self.config.get("Entrypoint") or []), *(self.config.get("Cmd") or [])]


@dataclasses.dataclass
class Container:
    """One run of the image: the outer ``unshare`` process and the container's log."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def pid1(self) -> int | None:
        """The host PID of the container's PID 1 (the only child of the outer unshare), None before the fork."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        if len(children) > 1:
            raise RuntimeError(f"expected one child of unshare, found {children}")
        return int(children[0]) if children else None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # kills the namespace's PID 1, and with it every process in it
            self.process.wait(timeout=30)


def deployment() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(DEPLOYMENT.read_text())
    return body


def operator_container_spec() -> dict[str, Any]:
    (container,) = [c for c in deployment()["spec"]["template"]["spec"]["containers"] if c["name"] == "operator"]
    return dict(container)


def deployment_env(namespace: str) -> dict[str, str]:
    """The operator container's env from deploy/base/deployment.yaml (fieldRef namespace resolved)."""
    env: dict[str, str] = {}
    for item in operator_container_spec().get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[item["name"]] = namespace
        elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[item["name"]] = "tenant-platform-operator-image-test"  # the pod's name (the Lease identity)
        else:
            raise AssertionError(f"unexpected env source in {DEPLOYMENT.name}: {item}")
    return env


def cache_dir() -> Path:
    return Path(os.environ.get("TENANT_PLATFORM_CACHE") or Path.home() / ".cache" / "tenant-platform")


@pytest.fixture(scope="session")
def image(dist: Path) -> Image:
    """The release's image, unpacked under the cache (kept while the image ID is the same).

    ``dist`` (tests/conftest.py) ran `hack/release.sh --image`, which built the image with
    hack/build-image.sh and pushed it into dist/'s OCI archive; the same script here finds that
    build up to date and unpacks it. Its image ID is the archive's config digest, which names the
    digest of every layer: what runs here is what the release ships."""
    if os.geteuid() != 0:
        pytest.fail("the image tests need root (buildah vfs storage, mount and PID namespaces)")
    rootfs = cache_dir() / "image" / "rootfs"
    result = subprocess.run(
        ["bash", str(REPO / "hack" / "build-image.sh"), "--rootfs", str(rootfs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if result.returncode != 0:
        pytest.fail(f"hack/build-image.sh failed ({result.returncode}):\n{result.stderr[-4000:]}")
    released = release_image(dist)
    image_id = Path(f"{rootfs}.image-id").read_text().strip()
    assert f"sha256:{image_id}" == released.config_digest, (
        f"the image tests would run image {image_id}, the release's archive holds {released.config_digest}"
    )
    config = json.loads(Path(f"{rootfs}.config.json").read_text())
    assert config == released.config["config"]
    # Mount points the runtime would create: none of them may go through a symlink out of the rootfs.
    assert (rootfs / "var" / "run").readlink() in (Path("/run"), Path("../run"))
    (rootfs / SA_DIR).mkdir(parents=True, exist_ok=True)
    (rootfs / "etc" / "hosts").touch()  # the runtime's, like /etc/resolv.conf; not in the image
    return Image(result.stdout.strip().splitlines()[-1], rootfs, config)


def run_container(
    image: Image,
    argv: Sequence[str],
    env: dict[str, str],
    work_dir: Path,
    *,
    sa_dir: Path | None = None,
    uid: int = 65532,
    gid: int = 65532,
) -> Container:
    """Start ``argv`` in the image as described in the module docstring; stdout+stderr to a log."""
    if sa_dir is None:
        sa_dir = work_dir / "no-serviceaccount"
        sa_dir.mkdir(exist_ok=True)
    hosts = work_dir / "hosts"
    hosts.write_text(HOSTS)
    hosts.chmod(0o644)
    log_path = work_dir / "container.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--propagation=private",
                "--pid",
                "--fork",
                "--kill-child",
                "--",
                "bash",
                "-c",
                LAUNCH,
                "launch",
                str(image.rootfs),
                str(sa_dir),
                str(uid),
                str(gid),
                SA_DIR,
                " ".join(DEVICES),
                sys.executable,
                ENTER,
                str(hosts),
                *argv,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **image.env, **env},
        )
    return Container(process, log_path)


def service_account_dir(control_plane: ControlPlane, admin: Kube, work_dir: Path) -> Path:
    """What the kubelet projects for the deploy/ ServiceAccount: token, ca.crt, namespace."""
    apply_file(admin, REPO / "deploy" / "base" / "namespace.yaml")
    apply_file(admin, REPO / "deploy" / "base" / "rbac.yaml")
    token, _ = admin.request_token(OPERATOR_NAMESPACE, OPERATOR_SA, expiration_seconds=3600)
    sa = work_dir / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(token)
    shutil.copyfile(control_plane.ca_path, sa / "ca.crt")
    (sa / "namespace").write_text(OPERATOR_NAMESPACE)
    for path in (sa, *sa.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return sa


def api_port(control_plane: ControlPlane) -> int:
    url = urllib.parse.urlsplit(control_plane.server)
    assert url.hostname == "127.0.0.1" and url.port is not None
    return url.port


# What the kubelet injects for the `kubernetes` Service (here: ServiceForwarder).
IN_CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(SERVICE_PORT)}


@pytest.fixture
def work_dir() -> Iterator[Path]:
    # Readable by the container's user (pytest's tmp_path is 0700 root).
    path = Path(tempfile.mkdtemp(prefix="tenant-platform-image-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
