"""Fixtures of the integration tests that more than one module uses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def dist(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """hack/release.sh's artifacts (without --image: tests/image/ builds the image), built once per
    session into a temporary dist/ (test_release.py checks them, test_install_uninstall.py installs
    from them). helm comes from hack/build-tools.sh, kubectl from the session's control plane."""
    out = tmp_path_factory.mktemp("release") / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        TENANT_PLATFORM_BIN_DIR=str(control_plane.bin_dir),
        TENANT_PLATFORM_HELM=str(tools.tool_path("helm")),
        PYTHON=sys.executable,
    )
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "release.sh"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out)
    return out
