"""Session-wide fixtures: one real control plane per pytest session, started only when requested.

A test that needs the cluster asks for ``control_plane``, ``kube_api`` or ``seeded``; such tests get
the ``cluster`` marker automatically, so ``-m "not cluster"`` runs the rest without Go binaries.
If the control plane cannot start, every test that needs it errors with the component's log tail;
it is never skipped. The binaries are found (or built, the first time: minutes) right after
collection, so a first build does not count against a test's timeout.

``--k8s=1.30`` (or ``TENANT_PLATFORM_K8S=1.30``) selects the Kubernetes minor of the control
plane, from those hack/ pins (hack/k8s-<minor>/go.mod; the default is the newest, hack/k8s).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tenant_platform import devmode
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import binaries, controlplane, seed, tools
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.kubelet import StorageKubelet
from tests.support import platform_body

_CLUSTER_FIXTURES = frozenset({"control_plane", "kube_api", "seeded", "admin_kube", "crd", "make_platform"})
_BIN_DIR = pytest.StashKey[Path | controlplane.ControlPlaneError]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--k8s",
        default=None,
        metavar="MINOR",
        help=f"Kubernetes minor of the test control plane, e.g. 1.30 (default: ${binaries.ENV_K8S}, else the newest)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The build script and binaries.pinned_versions read the environment variable.
    if selected := config.getoption("--k8s"):
        os.environ[binaries.ENV_K8S] = selected


def pytest_report_header(config: pytest.Config) -> str | None:
    try:
        versions = binaries.pinned_versions()
    except controlplane.ControlPlaneError as error:
        return f"control plane: {error}"
    origin = f" ({binaries.ENV_K8S}={os.environ[binaries.ENV_K8S]})" if os.environ.get(binaries.ENV_K8S) else ""
    return f"control plane: Kubernetes {versions.kubernetes}, etcd {versions.etcd}{origin}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or not any("cluster" in item.keywords for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("control plane: finding binaries (the first build takes minutes)")
    try:
        session.config.stash[_BIN_DIR] = controlplane.find_bin_dir(reporter.write_line if reporter else None)
    except controlplane.ControlPlaneError as error:  # reported by the fixture, as a test error
        session.config.stash[_BIN_DIR] = error


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # A cluster test must never pass silently as skipped because the cluster is missing; an
    # explicit skip/skipif marker on the test still skips.
    deliberate = any(item.iter_markers("skip")) or any(item.iter_markers("skipif"))
    if call.when == "setup" and report.skipped and "cluster" in item.keywords and not deliberate:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"a cluster test may not be skipped ({reason})"
    return report


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver + kube-controller-manager for the whole session (see docs/control-plane.md).

    pytest caches a session fixture's error, so a failed start is tried once and every test
    that needs it reports the same error.
    """
    bin_dir = request.config.stash.get(_BIN_DIR, None)
    if isinstance(bin_dir, controlplane.ControlPlaneError):
        raise bin_dir
    cp = ControlPlane(bin_dir=bin_dir)
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kube_api(control_plane: ControlPlane) -> Iterator[kubernetes.client.ApiClient]:
    """An admin (system:masters) ApiClient for the session's control plane."""
    api = seed.api_client_from_kubeconfig(control_plane.kubeconfig_path)
    try:
        yield api
    finally:
        api.close()  # type: ignore[no-untyped-call]


@pytest.fixture(scope="session")
def seeded(control_plane: ControlPlane, kube_api: kubernetes.client.ApiClient) -> Iterator[ControlPlane]:
    """The session's control plane after ``seed_cluster`` (Istio CRDs, CoreDNS, GPU nodes, ...),
    with the seeded StorageClass's provisioner and kubelet played for the storage write test
    (testing/kubelet.py), so that a platform's storage is proven as on a real cluster."""
    seed.seed_cluster(kube_api)
    with StorageKubelet.for_kubeconfig(str(control_plane.kubeconfig_path)):
        yield control_plane


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A short DNS-1123 label unique to this test run, e.g. ``namespace-deletion-3fa2c1``."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower()).strip("-")
    return f"{base[:40].rstrip('-') or 't'}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def admin_kube(control_plane: ControlPlane) -> Kube:
    """The operator's own client wrapper, as admin (system:masters)."""
    return Kube.from_kubeconfig(str(control_plane.kubeconfig_path))


@pytest.fixture(scope="session")
def crd(admin_kube: Kube, seeded: ControlPlane) -> Kube:
    """The TenantPlatform CRD installed (and the cluster seeded); returns the admin client."""
    devmode.install_crd(admin_kube)
    return admin_kube


@pytest.fixture
def make_platform(crd: Kube) -> Iterator[Callable[..., dict[str, Any]]]:
    """Create TenantPlatforms through the real API (CRD defaults applied); deleted after the test.

    Deletion strips finalizers first, since no operator may be running in the test.
    """
    created: list[str] = []

    def make(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
        obj = crd.create(platform_body(name, namespace, **spec))
        created.append(name)
        return obj

    yield make
    for name in created:
        try:
            crd.merge_patch("tenancy.dev/v1alpha1", "TenantPlatform", name, {"metadata": {"finalizers": None}})
        except errors.NotFound:
            continue
        crd.delete("tenancy.dev/v1alpha1", "TenantPlatform", name)


@pytest.fixture(scope="module")
def as_operator(crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Kube:
    """The operator's own ServiceAccount under deploy/base/rbac.yaml (RBAC and the fences), as a client."""
    from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA, REPO, apply_file  # noqa: PLC0415

    apply_file(crd, REPO / "deploy" / "base" / "namespace.yaml")
    apply_file(crd, REPO / "deploy" / "base" / "rbac.yaml")
    token, _ = crd.request_token(OPERATOR_NAMESPACE, OPERATOR_SA, expiration_seconds=3600)
    path = control_plane.kubeconfig_for_token(token, tmp_path_factory.mktemp("op") / "kubeconfig")
    return Kube.from_kubeconfig(str(path))


@pytest.fixture(scope="session")
def dist(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`hack/release.sh --image`'s artifacts, built once per session into a temporary dist/:
    tests/integration/test_release.py checks them, test_install_uninstall.py installs from them, and
    tests/image/ runs the image the archive holds. The image is the image tests' own build
    (hack/build-image.sh, cached by its inputs), so a session builds it once. helm comes from
    hack/build-tools.sh, kubectl from the session's control plane. Needs root, as tests/image does
    (buildah's vfs storage)."""
    if os.geteuid() != 0:
        pytest.fail("hack/release.sh --image needs root (buildah's vfs storage), as tests/image/ does")
    # Once per run, not once per pytest-xdist worker: the first worker that asks builds into the
    # run's shared temporary directory under a lock; the others wait for it and read the result.
    shared = run_shared_dir(tmp_path_factory) / "release"
    shared.mkdir(exist_ok=True)
    out = shared / "dist"
    with exclusive(shared / "lock"):
        if (shared / "done").exists():
            return out
        shutil.rmtree(out, ignore_errors=True)
        _release(control_plane, out)
        (shared / "done").touch()
    return out


def _release(control_plane: ControlPlane, out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        TENANT_PLATFORM_BIN_DIR=str(control_plane.bin_dir),
        TENANT_PLATFORM_HELM=str(tools.tool_path("helm")),
        PYTHON=sys.executable,
    )
    proc = subprocess.run(
        ["bash", str(Path(__file__).resolve().parents[1] / "hack" / "release.sh"), "--image", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=1700,  # a cold image build (debootstrap, pip) takes about ten minutes
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out)


def run_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary directory shared by every pytest-xdist worker of this run (the session's own
    base directory when not distributed)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """An exclusive lock on a file, held for the block (across the run's worker processes)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
