"""The CLI as a package: the wheel, installed into a fresh virtual environment with the locked
dependencies, run from outside the checkout (no PYTHONPATH, another working directory, an empty
HOME). It must find what it ships as package data (the sample, the CRD, the operator's namespace
and RBAC) inside the installed package, render the sample as the checkout does, report its
version, and start `dev --once` against the cached control plane binaries
(TENANT_PLATFORM_BIN_DIR: an installed package has no hack/ to build them). Needs PyPI (the
build backend and the locked dependencies).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenant_platform import __version__, cli
from tenant_platform.testing.binaries import ENV_BIN_DIR, find_bin_dir

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DATA = {
    ("samples", "tenantplatform.yaml"): ROOT / "deploy" / "samples" / "tenantplatform.yaml",
    ("crds", "tenancy.dev_tenantplatforms.yaml"): ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml",
    ("base", "namespace.yaml"): ROOT / "deploy" / "base" / "namespace.yaml",
    ("base", "rbac.yaml"): ROOT / "deploy" / "base" / "rbac.yaml",
}


class Installed:
    def __init__(self, venv: Path, home: Path) -> None:
        self.venv = venv
        self.home = home
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "VIRTUAL_ENV", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", ENV_BIN_DIR}
        }
        self.env.update(HOME=str(home), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")

    def run(self, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "tenant-platform"), *args],
            cwd=self.home,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def python(self, code: str) -> str:
        proc = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", code],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout.strip()


def _pip(venv: Path, *args: str, env: dict[str, str]) -> None:
    proc = subprocess.run([str(venv / "bin" / "pip"), *args], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, f"pip {' '.join(args)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV", "VIRTUAL_ENV")}
    dist = work / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    assert wheel.name == f"tenant_platform_operator-{__version__}-py3-none-any.whl"
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, "install", "--require-hashes", "--no-deps", "-r", str(ROOT / "requirements.lock"), env=env)
    _pip(venv, "install", "--no-deps", str(wheel), env=env)
    home = work / "home"
    home.mkdir()
    return Installed(venv, home)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_wheel_runs_outside_the_checkout(installed: Installed) -> None:
    where = Path(installed.python("import tenant_platform; print(tenant_platform.__file__)"))
    assert where.is_relative_to(installed.venv), where  # the wheel, not the checkout

    proc = installed.run("--version")
    assert (proc.returncode, proc.stdout.strip()) == (0, __version__), proc.stderr
    metadata = installed.python("from importlib.metadata import version; print(version('tenant-platform-operator'))")
    assert metadata == __version__

    proc = installed.run("version")  # no cluster: says so, exit 0
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"client:   {__version__}",
        f"operator: not reachable (no kubeconfig found ({installed.home}/.kube/config) and not running in a pod: "
        "pass --kubeconfig PATH or set KUBECONFIG (for a local cluster: tenant-platform dev --kubeconfig PATH "
        "writes one).)",
    ]
    proc = installed.run("completion", "bash")
    assert proc.returncode == 0 and "complete -o default -F _tenant_platform tenant-platform" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_wheel_ships_its_data_and_renders_the_sample(installed: Installed) -> None:
    for parts, source in PACKAGE_DATA.items():
        path = Path(
            installed.python(
                f"import importlib.resources as r; print(r.files('tenant_platform').joinpath('data', *{parts!r}))"
            )
        )
        assert path.is_relative_to(installed.venv), path
        assert path.read_bytes() == source.read_bytes(), parts
    sample = Path(installed.python("from tenant_platform import cli; print(cli.sample_path())"))
    assert sample.is_relative_to(installed.venv) and sample.is_file()
    crd = Path(installed.python("from tenant_platform import cli; print(cli.crd_path())"))
    assert crd.is_relative_to(installed.venv) and crd.is_file()

    proc = installed.run("render", "-f", str(sample))
    assert proc.returncode == 0, proc.stderr
    (body,) = cli.load_documents(ROOT / "deploy" / "samples" / "tenantplatform.yaml")
    expected = cli.dump_manifests(cli.render_manifests(body))
    assert proc.stdout == expected


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_dev_finds_its_sample_and_runs_once(installed: Installed) -> None:
    # Without binaries and without hack/, dev gets past its sample (admitted before any start-up)
    # and says what it needs: exit 3 naming TENANT_PLATFORM_BIN_DIR, not a missing file.
    proc = installed.run("dev", "--once")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "TENANT_PLATFORM_BIN_DIR" in proc.stderr and "No such file" not in proc.stderr
    # With the control plane's binaries (built from the checkout, cached): the whole demo, from the
    # package's sample and CRD, to Ready.
    bin_dir = find_bin_dir()
    proc = installed.run("dev", "--once", "--timeout", "240", timeout=600, **{ENV_BIN_DIR: str(bin_dir)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Ready" in proc.stdout
