"""`pip install .` and `pip install -e .` in a fresh virtual environment print no warning from our
packaging metadata (pyproject.toml): no SetuptoolsDeprecationWarning (a license table or
classifier, package-data), nothing setuptools flags with its `!!` banners. The build backend comes
from PyPI at the newest version pyproject allows, as a user's pip would fetch it. Needs PyPI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Anything setuptools, pip or Python would flag; "byte-compiling is disabled" is the environment's
# PYTHONDONTWRITEBYTECODE (removed below), not our packaging.
WARNING = re.compile(r"\bwarning\b|\bdeprecat|^\s*!!", re.IGNORECASE)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("editable", [False, True], ids=["install", "editable"])
def test_install_prints_no_warning_from_our_packaging(tmp_path: Path, editable: bool) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")
    }
    target = ["-e", str(ROOT)] if editable else [str(ROOT)]
    proc = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--no-deps", "--verbose", *target],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    flagged = [line for line in output.splitlines() if WARNING.search(line)]
    assert flagged == [], "\n".join(flagged)
