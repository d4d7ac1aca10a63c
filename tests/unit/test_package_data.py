"""What the `tenant-platform` command needs outside a checkout ships in the package (data/): the
CRD, the sample, the operator's namespace and RBAC, byte for byte the repository's files
(hack/sync-deploy.py copies them; this checks without helm). tests/packaging/test_wheel.py runs
the installed wheel outside the checkout."""

from __future__ import annotations

import importlib.util
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from types import ModuleType

from tenant_platform import cli

ROOT = Path(__file__).resolve().parents[2]


def sync_deploy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_deploy", ROOT / "hack" / "sync-deploy.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_package_copies_equal_their_sources() -> None:
    copies = sync_deploy().package_data()
    stale = [str(path) for path, content in copies.items() if (ROOT / path).read_bytes() != content]
    assert stale == [], f"out of date (run hack/sync-deploy.py): {stale}"


def test_the_cli_reads_the_package_copies() -> None:
    package = ROOT / "operator" / "tenant_platform"
    assert cli.sample_path() == package / "data" / "samples" / "tenantplatform.yaml"
    assert cli.crd_path() == package / "data" / "crds" / "tenancy.dev_tenantplatforms.yaml"
    assert cli.sample_path().read_bytes() == (ROOT / "deploy" / "samples" / "tenantplatform.yaml").read_bytes()
    assert cli.crd_path().read_bytes() == (ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml").read_bytes()


def test_package_data_globs_include_the_copies() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]["tenant_platform"]
    package = ROOT / "operator" / "tenant_platform"
    for copy in sync_deploy().PACKAGE_DATA.values():
        relative = str((ROOT / copy).relative_to(package))
        assert any(fnmatch(relative, glob) for glob in globs), relative
