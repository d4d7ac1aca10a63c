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

Teardown: ``stop()`` (also run by ``atexit``) sends SIGTERM to each child's process group, waits,
then SIGKILLs it. Children also get PR_SET_PDEATHSIG=SIGKILL on Linux, so they die with the Python
process even when it is killed and neither ``stop()`` nor ``atexit`` runs.
"""

from __future__ import annotations

import atexit
import base64
import collections
import contextlib
import ctypes
import ctypes.util
import dataclasses
import datetime
import functools
import http.client
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final, Self, TypeVar

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BINARIES: Final = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
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
)
ENV_BIN_DIR: Final = "TENANT_PLATFORM_BIN_DIR"
ENV_KEEP: Final = "TENANT_PLATFORM_KEEP_CP"
BUILD_SCRIPT: Final = Path("hack") / "build-control-plane.sh"

_LOG_TAIL_LINES: Final = 60
_WORK_DIR_PREFIX: Final = "tenant-platform-cp-"
_OWNER_FILE: Final = "owner"
_PR_SET_PDEATHSIG: Final = 1
_CERT_VALIDITY: Final = datetime.timedelta(days=30)
_T = TypeVar("_T")


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or queried."""


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; unlike its base class, str() includes kubectl's stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr or ''}".rstrip()


@dataclasses.dataclass(frozen=True)
class Versions:
    """Versions pinned by hack/k8s/go.mod and hack/etcd/go.mod, e.g. ``v1.36.3`` and ``v3.6.16``."""

    kubernetes: str
    etcd: str


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


def repo_root() -> Path | None:
    """The repository this package was imported from, or None when installed without it."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / BUILD_SCRIPT).is_file() else None


def pinned_versions() -> Versions:
    """Read the pinned versions from the wrapper modules under hack/ (repository checkouts only)."""
    root = repo_root()
    if root is None:
        raise ControlPlaneError("the hack/ directory is not available: the package runs outside its repo")

    def required(go_mod: Path, module: str) -> str:
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(\S+)", go_mod.read_text(), re.M)
        if match is None:
            raise ControlPlaneError(f"{module} is not required in {go_mod.relative_to(root)}")
        return match.group(1)

    return Versions(
        kubernetes=required(root / "hack" / "k8s" / "go.mod", "k8s.io/kubernetes"),
        etcd=required(root / "hack" / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def find_bin_dir() -> Path:
    """Return a directory holding all of ``BINARIES``, building them if needed.

    TENANT_PLATFORM_BIN_DIR wins when set. Otherwise hack/build-control-plane.sh runs (it returns
    at once when its cache is complete, and serialises concurrent builds with flock); its progress
    goes to stderr. Raises ControlPlaneError with the build's last lines when it fails.
    """
    if env_dir := os.environ.get(ENV_BIN_DIR):
        return _checked_bin_dir(Path(env_dir), origin=ENV_BIN_DIR)
    root = repo_root()
    if root is None:
        raise ControlPlaneError(
            f"{BUILD_SCRIPT} was not found next to the tenant_platform package (is it installed "
            f"without its repository?); set {ENV_BIN_DIR} to a directory holding {', '.join(BINARIES)}"
        )
    script = root / BUILD_SCRIPT
    tail: collections.deque[str] = collections.deque(maxlen=_LOG_TAIL_LINES)
    with subprocess.Popen(
        ["bash", str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
    ) as build:
        assert build.stderr is not None and build.stdout is not None
        for line in build.stderr:
            tail.append(line)
            sys.stderr.write(line)
        stdout = build.stdout.read()
    if build.returncode != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {build.returncode}:\n{''.join(tail)}".rstrip())
    lines = stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{BUILD_SCRIPT} printed no bin directory")
    return _checked_bin_dir(Path(lines[-1]), origin=str(BUILD_SCRIPT))


def _checked_bin_dir(bin_dir: Path, *, origin: str) -> Path:
    missing = [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{origin}: {bin_dir} lacks executable {', '.join(missing)}")
    return bin_dir.resolve()


def _read_stamp(bin_dir: Path) -> int | None:
    stamp = bin_dir.parent / "STAMP"
    try:
        text = stamp.read_text()
    except OSError:
        return None
    match = re.search(r"^built_in_seconds=(\d+)$", text, re.M)
    return int(match.group(1)) if match else None


@functools.cache
def _help_text(binary: Path) -> str:
    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=False, timeout=30)
    return result.stdout + result.stderr


def _free_ports(count: int) -> list[int]:
    # Hold every socket until all are bound, so the ports differ. Another process may still take
    # one before the child binds it; that shows up as a startup error naming the port.
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _process_identity(pid: int) -> str | None:
    """``<pid namespace> <pid> <start time>`` from /proc (Linux), else None.

    A recycled pid does not repeat the start time; the namespace keeps containers that share a
    /tmp from judging each other's pids.
    """
    try:
        namespace = os.readlink("/proc/self/ns/pid")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 22 (starttime); split after the command name, which may contain spaces and parens.
    return f"{namespace} {pid} {stat.rsplit(')', 1)[1].split()[19]}"


def _sweep_stale_work_dirs() -> None:
    """Remove work dirs whose owning Python process died without stop() (SIGKILL, OOM kill).

    PR_SET_PDEATHSIG kills the children then, but nothing removes their directory, and etcd's
    preallocated WAL makes each about 120 MB. Directories without an owner file (kept with
    TENANT_PLATFORM_KEEP_CP=1, or on other systems) are never touched.
    """
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return  # not Linux: owner files are never written either
    for candidate in Path(tempfile.gettempdir()).glob(f"{_WORK_DIR_PREFIX}*"):
        try:
            owner = (candidate / _OWNER_FILE).read_text().strip()
        except OSError:
            continue
        match = re.fullmatch(r"(\S+) (\d+) \d+", owner)
        if match and match.group(1) == namespace and _process_identity(int(match.group(2))) != owner:
            shutil.rmtree(candidate, ignore_errors=True)


@functools.cache
def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn making the child receive SIGKILL when the Python process dies (Linux).

    NB: the kernel ties PDEATHSIG to the *thread* that forked, so start a ControlPlane from a
    thread that outlives it (the main thread in pytest).
    """
    libc = _libc()  # load before fork: the child should do as little as possible
    parent = os.getpid()

    def preexec() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


# -- certificates -------------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _sign(
    *,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    extensions: Sequence[tuple[x509.ExtensionType, bool]],
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _CERT_VALIDITY)
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256())


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


@dataclasses.dataclass(frozen=True)
class _Pki:
    ca_crt: Path
    apiserver_crt: Path
    apiserver_key: Path
    admin_crt: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def _write_pki(directory: Path) -> _Pki:
    """A CA, the apiserver's serving cert, an admin client cert and a service-account key pair.

    All ECDSA P-256, as envtest's tinyca does; the apiserver and KCM accept ECDSA SA keys (ES256).
    """
    directory.mkdir(mode=0o700)
    ca_key = _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tenant-platform-test-ca")])
    ca = _sign(
        subject=ca_name,
        key=ca_key,
        issuer=ca_name,
        issuer_key=ca_key,
        extensions=[
            (x509.BasicConstraints(ca=True, path_length=None), True),
            (_key_usage(cert_sign=True), True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ],
    )
    serving_key = _new_key()
    serving = _sign(
        subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        key=serving_key,
        issuer=ca_name,
        issuer_key=ca_key,
        extensions=[
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (_key_usage(cert_sign=False), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
            (
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName(name)
                        for name in (
                            "localhost",
                            "kubernetes",
                            "kubernetes.default",
                            "kubernetes.default.svc",
                            "kubernetes.default.svc.cluster.local",
                        )
                    ]
                    + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", FIRST_SERVICE_IP)]
                ),
                False,
            ),
        ],
    )
    admin_key = _new_key()
    admin = _sign(
        subject=x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
            ]
        ),
        key=admin_key,
        issuer=ca_name,
        issuer_key=ca_key,
        extensions=[
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (_key_usage(cert_sign=False), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
        ],
    )
    sa_key = _new_key()
    pki = _Pki(
        ca_crt=directory / "ca.crt",
        apiserver_crt=directory / "apiserver.crt",
        apiserver_key=directory / "apiserver.key",
        admin_crt=directory / "admin.crt",
        admin_key=directory / "admin.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    files = {
        pki.ca_crt: _pem_cert(ca),
        directory / "ca.key": _pem_key(ca_key),
        pki.apiserver_crt: _pem_cert(serving),
        pki.apiserver_key: _pem_key(serving_key),
        pki.admin_crt: _pem_cert(admin),
        pki.admin_key: _pem_key(admin_key),
        pki.sa_key: _pem_key(sa_key),
        pki.sa_pub: sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    }
    for path, data in files.items():
        path.write_bytes(data)
        path.chmod(0o600)
    return pki


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _write_kubeconfig(path: Path, *, server: str, ca: Path, user: dict[str, str]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}],
        "users": [{"name": "user", "user": user}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
        "current-context": "local",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


# -- processes ----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Child:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]

    @property
    def pid(self) -> int:
        return self.popen.pid


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode(errors="replace")
    except OSError as error:
        return f"(log unreadable: {error})"
    return "\n".join(text.splitlines()[-lines:])


def _terminate(child: _Child, timeout: float) -> None:
    """SIGTERM the child's process group, wait, SIGKILL the group if it lingers, and reap it."""
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, sig)  # pgid == pid: started with start_new_session
            try:
                child.popen.wait(timeout=timeout)
                break
            except subprocess.TimeoutExpired:
                continue  # NB: still alive after SIGKILL means stuck in the kernel; move on
        # NB: no killpg after the leader is reaped: its pid, and so the group id, may be reused.
        # The components fork nothing, so the group died with its leader.
    finally:
        child.log.close()


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
        self._children: list[_Child] = []
        self._work_dir: Path | None = None
        self._pki: _Pki | None = None
        self._server: str | None = None
        self._kubeconfig_path: Path | None = None
        self._timings: Timings | None = None
        self._admin_opener: urllib.request.OpenerDirector | None = None

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
        bin_dir = self._bin_dir = _checked_bin_dir(self._bin_dir, origin="bin_dir") if self._bin_dir else find_bin_dir()
        build_seconds = time.monotonic() - began
        started = time.monotonic()
        _sweep_stale_work_dirs()
        work_dir = self._work_dir = Path(tempfile.mkdtemp(prefix=_WORK_DIR_PREFIX))
        if owner := _process_identity(os.getpid()):
            (work_dir / _OWNER_FILE).write_text(owner)
        (work_dir / "logs").mkdir()
        pki = self._pki = _write_pki(work_dir / "pki")
        etcd_port, peer_port, api_port = _free_ports(3)
        self._server = f"https://127.0.0.1:{api_port}"
        self._kubeconfig_path = _write_kubeconfig(
            work_dir / "admin.kubeconfig",
            server=self._server,
            ca=pki.ca_crt,
            user={
                "client-certificate-data": _b64(pki.admin_crt),
                "client-key-data": _b64(pki.admin_key),
            },
        )
        context = ssl.create_default_context(cafile=str(pki.ca_crt))
        context.load_cert_chain(str(pki.admin_crt), str(pki.admin_key))
        # NB: no ProxyHandler({}) would let http(s)_proxy from the environment capture loopback.
        self._admin_opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
        )

        etcd_url = f"http://127.0.0.1:{etcd_port}"
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
        if "--unsafe-no-fsync" in _help_text(bin_dir / "etcd"):
            etcd_args.append("--unsafe-no-fsync=true")
        etcd = self._spawn("etcd", etcd_args)
        etcd_seconds = self._wait(etcd, "etcd /health", lambda: self._etcd_healthy(f"{etcd_url}/health"))

        apiserver = self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={work_dir / 'pki'}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
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
                *self._extra_apiserver_args,
            ],
        )
        apiserver_seconds = self._wait(apiserver, "kube-apiserver /readyz", lambda: self._ok("/readyz"))
        apiserver_seconds += self._wait(apiserver, "namespace default", lambda: self._ok("/api/v1/namespaces/default"))

        controller_manager_seconds = 0.0
        if self._with_controller_manager:
            controller_manager = self._spawn(
                "kube-controller-manager",
                [
                    f"--kubeconfig={self._kubeconfig_path}",
                    "--leader-elect=false",
                    "--secure-port=0",
                    f"--controllers={','.join(CONTROLLERS)}",
                    f"--root-ca-file={pki.ca_crt}",
                    f"--service-account-private-key-file={pki.sa_key}",
                    *self._extra_controller_manager_args,
                ],
            )
            controller_manager_seconds = self._wait(
                controller_manager,
                "ServiceAccount default/default",
                lambda: self._ok("/api/v1/namespaces/default/serviceaccounts/default"),
            )
        self._timings = Timings(
            build_seconds=round(build_seconds, 2),
            etcd_seconds=round(etcd_seconds, 2),
            apiserver_seconds=round(apiserver_seconds, 2),
            controller_manager_seconds=round(controller_manager_seconds, 2),
            start_seconds=round(time.monotonic() - started, 2),
            first_build_seconds=_read_stamp(bin_dir),
        )

    def stop(self) -> None:
        """Stop every child (newest first) and remove the work dir unless TENANT_PLATFORM_KEEP_CP=1.

        Safe to call twice, before start, and from atexit.
        """
        with self._lock:
            while self._children:
                # Pop only after the child is gone, so an interrupted stop() can be resumed.
                _terminate(self._children[-1], self._stop_timeout)
                self._children.pop()
            atexit.unregister(self.stop)
            if self._work_dir is None:
                return
            if os.environ.get(ENV_KEEP) == "1":
                # Without an owner the directory is never swept as stale.
                (self._work_dir / _OWNER_FILE).unlink(missing_ok=True)
            else:
                shutil.rmtree(self._work_dir, ignore_errors=True)

    def _spawn(self, name: str, args: Sequence[str]) -> _Child:
        assert self._bin_dir is not None and self._work_dir is not None
        log_path = self._work_dir / "logs" / f"{name}.log"
        log = log_path.open("ab")
        try:
            popen = subprocess.Popen(
                [str(self._bin_dir / name), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._work_dir,
                start_new_session=True,  # own process group: Ctrl-C in a terminal does not hit it
                # NB: preexec_fn is unsafe with threads in general; ours only calls prctl and
                # getppid, which take no locks.
                preexec_fn=_die_with_parent(),  # noqa: PLW1509
            )
        except BaseException:
            log.close()
            raise
        child = _Child(name=name, popen=popen, log_path=log_path, log=log)
        self._children.append(child)
        return child

    def _wait(self, child: _Child, what: str, ready: Callable[[], bool]) -> float:
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

    def _failure(self, child: _Child, message: str) -> ControlPlaneError:
        child.log.flush()
        keep = "" if os.environ.get(ENV_KEEP) == "1" else f" (set {ENV_KEEP}=1 to keep the logs)"
        return ControlPlaneError(f"{message}; last lines of {child.log_path.name}{keep}:\n{_tail(child.log_path)}")

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
        return _write_kubeconfig(Path(path), server=self.server, ca=self.ca_path, user={"token": token})

    def metrics_text(self) -> str:
        """The apiserver's Prometheus /metrics, fetched as admin (e.g. apiserver_request_total)."""
        return self._admin_get("/metrics").decode()


def _started(value: _T | None) -> _T:
    if value is None:
        raise ControlPlaneError("the control plane is not started")
    return value
