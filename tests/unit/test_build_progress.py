"""The first build of the control plane says what it is doing and for how long, every few seconds.

hack/build-control-plane.sh runs for real here, with a stand-in `go` on PATH that takes a few
seconds per build and writes the binaries, into an empty cache: the progress lines (hack/progress.sh)
are what a person sees during the minutes of a real first build. TENANT_PLATFORM_PROGRESS_SECONDS=1
stands in for the default 15.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_GO = """#!/usr/bin/env bash
# go build ... -o OUT PKG...: sleep, then write executables that print a version.
out=""; while [[ $# -gt 0 ]]; do [[ $1 == -o ]] && { out=$2; shift; }; shift; done
sleep 2.5
make() { printf '#!/bin/sh\\necho "$(basename "$1") fake"\\n' > "$1"; chmod +x "$1"; }
if [[ $out == */ ]]; then for b in kube-apiserver kube-controller-manager kubectl; do make "$out$b"; done
else make "$out"; fi
"""


def test_progress_lines_name_the_step_and_the_elapsed_time(tmp_path: Path) -> None:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(FAKE_GO)
    (bin_dir / "go").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TENANT_PLATFORM_CACHE": str(tmp_path / "cache"),
        "TENANT_PLATFORM_PROGRESS_SECONDS": "1",
    }
    result = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-control-plane.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip().splitlines()[-1], "kube-apiserver").is_file()
    lines = result.stderr.splitlines()
    ticks = [line for line in lines if line.endswith("(still running)")]
    assert any("building etcd" in line for line in ticks), lines
    assert any("building kube-apiserver" in line for line in ticks), lines
    for line in ticks:
        assert re.match(r"^\[build-control-plane \d+m\d\ds\] building ", line), line
    assert any(re.match(r"^\[build-control-plane \d+m\d\ds\] built$", line) for line in lines), lines
    # The ticker is gone with the script: nothing holds the pipes (the run returned), and a second
    # run finds the cache and prints nothing.
    again = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-control-plane.sh")], capture_output=True, text=True, env=env, check=False
    )
    assert again.returncode == 0 and again.stderr == ""
