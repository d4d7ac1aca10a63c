"""`tenant-platform dev --no-operator`: the seeded cluster without an operator, and how to run one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_dev_no_operator_prints_how_to_run_the_operator(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenant_platform.cli",
            "dev",
            "--no-operator",
            "--once",
            "--kubeconfig",
            str(tmp_path / "admin"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tenant-platform run --kubeconfig " in proc.stdout
    assert "operator.kubeconfig" in proc.stdout
    assert "no operator runs" in proc.stderr
    assert "running the operator in-process" not in proc.stderr
    assert (tmp_path / "admin").exists()
