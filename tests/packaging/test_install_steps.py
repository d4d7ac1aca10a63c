"""The Dockerfile's build stage, run step by step in a fresh virtual environment.

No container engine is available, so this is the image build minus the base image: the build
stage's COPY, ENV and RUN instructions are read from the Dockerfile and executed here, with
/opt/venv replaced by a temporary directory and only the files the Dockerfile copies in the
build context. The result must run the image's ENTRYPOINT + CMD (`tenant-platform run`) and hold
exactly the locked versions. Needs PyPI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def _stages() -> list[list[tuple[str, str]]]:
    text = "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#"))
    stages: list[list[tuple[str, str]]] = []
    for line in re.sub(r"\\\n", " ", text).splitlines():
        if not line.strip():
            continue
        word, _, rest = line.strip().partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word.upper(), " ".join(rest.split())))
    return stages


def _env_pairs(args: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in shlex.split(args))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_build_stage_installs_and_runs(tmp_path: Path) -> None:
    build, runtime = _stages()
    context = tmp_path / "context"
    context.mkdir()
    venv = tmp_path / "venv"
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("VIRTUAL_ENV", None)
    for instruction, args in build[1:]:
        if instruction == "ENV":
            env.update(_env_pairs(args))
        elif instruction == "COPY":
            *sources, dest = shlex.split(args)
            target = context / dest
            for source in sources:
                src = ROOT / source
                assert src.exists(), f"the Dockerfile copies {source}, which does not exist"
                if src.is_dir():
                    shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target / src.name)
        elif instruction == "RUN":
            command = args.replace("/opt/venv", str(venv))
            proc = subprocess.run(
                ["bash", "-c", command], cwd=context, env=env, capture_output=True, text=True, check=False
            )
            assert proc.returncode == 0, f"RUN {args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        else:
            assert instruction == "WORKDIR", f"unexpected build instruction {instruction}"

    # The runtime stage's command, as the container would start it (with --help: no cluster here).
    (entrypoint,) = [json.loads(a) for i, a in runtime if i == "ENTRYPOINT"]
    (cmd,) = [json.loads(a) for i, a in runtime if i == "CMD"]
    runtime_env = {**os.environ, **{k: v for i, a in runtime if i == "ENV" for k, v in _env_pairs(a).items()}}
    runtime_env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    runtime_env["HOME"] = runtime_env["TMPDIR"] = str(tmp_path)
    for argv in ([*entrypoint, "--help"], [*entrypoint, *cmd, "--help"]):
        argv[0] = str(venv / "bin" / argv[0])
        proc = subprocess.run(argv, env=runtime_env, capture_output=True, text=True, check=False, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "usage: tenant-platform" in proc.stdout

    # Exactly the lock, plus the project; the build backend was removed again.
    freeze = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, check=True
    )
    installed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(freeze.stdout)}
    locked = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.lock").read_text(), re.M))
    locked = {k.lower().replace("_", "-"): v for k, v in locked.items()}
    for name, version in locked.items():
        if name in {"setuptools", "wheel"}:
            assert name not in installed
        else:
            assert installed.get(name) == version, name
    assert set(installed) - set(locked) == {"pip", "tenant-platform-operator"}
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout
