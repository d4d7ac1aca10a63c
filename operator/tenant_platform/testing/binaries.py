"""The control plane's binaries: the pinned versions, and where the built (or given) binaries are.

``find_bin_dir`` returns a directory holding etcd, kube-apiserver, kube-controller-manager and
kubectl: ``TENANT_PLATFORM_BIN_DIR`` when set, else whatever ``hack/build-control-plane.sh``
prints (it builds from the Go module proxy into a cache keyed by version, see
docs/control-plane.md). ``TENANT_PLATFORM_K8S`` selects the Kubernetes minor (e.g. ``1.30``:
hack/k8s-1.30/go.mod; unset, or the newest: hack/k8s/go.mod); the build script reads it too.
``pinned_versions`` reads the versions from the wrapper modules under hack/, and ``repo_root``
finds the checkout they live in.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

BINARIES: Final = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
ENV_BIN_DIR: Final = "TENANT_PLATFORM_BIN_DIR"
ENV_K8S: Final = "TENANT_PLATFORM_K8S"
BUILD_SCRIPT: Final = Path("hack") / "build-control-plane.sh"
LOG_TAIL_LINES: Final = 60


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or queried."""


@dataclasses.dataclass(frozen=True)
class Versions:
    """Versions pinned by hack/k8s/go.mod and hack/etcd/go.mod, e.g. ``v1.36.3`` and ``v3.6.16``."""

    kubernetes: str
    etcd: str


def repo_root() -> Path | None:
    """The repository this package was imported from, or None when installed without it."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / BUILD_SCRIPT).is_file() else None


def _required(root: Path, go_mod: Path, module: str) -> str:
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(\S+)", go_mod.read_text(), re.M)
    if match is None:
        raise ControlPlaneError(f"{module} is not required in {go_mod.relative_to(root)}")
    return match.group(1)


def _minor(version: str) -> str:
    """``v1.30.14`` -> ``1.30``."""
    return ".".join(version.removeprefix("v").split(".")[:2])


def k8s_module(root: Path, selected: str | None = None) -> Path:
    """The wrapper module directory for the selected Kubernetes minor (``TENANT_PLATFORM_K8S``).

    Unset, or the minor hack/k8s pins (the newest): hack/k8s; otherwise hack/k8s-<minor>, which must
    exist (ControlPlaneError listing the selectable minors if not).
    """
    want = os.environ.get(ENV_K8S, "") if selected is None else selected
    default = root / "hack" / "k8s"
    if not want or want == _minor(_required(root, default / "go.mod", "k8s.io/kubernetes")):
        return default
    module = root / "hack" / f"k8s-{want}"
    if not (module / "go.mod").is_file():
        raise ControlPlaneError(f"{ENV_K8S}={want}: there is no hack/k8s-{want}/go.mod; selectable: {selectable(root)}")
    return module


def selectable(root: Path) -> str:
    """The Kubernetes minors hack/ pins, newest first, e.g. ``1.36, 1.30``."""
    modules = [root / "hack" / "k8s", *sorted((root / "hack").glob("k8s-*/"))]
    minors = {_minor(_required(root, m / "go.mod", "k8s.io/kubernetes")) for m in modules}
    return ", ".join(sorted(minors, key=lambda m: tuple(int(p) for p in m.split(".")), reverse=True))


def pinned_versions() -> Versions:
    """The versions the wrapper modules under hack/ pin (repository checkouts only), for the
    Kubernetes minor ``TENANT_PLATFORM_K8S`` selects."""
    root = repo_root()
    if root is None:
        raise ControlPlaneError("the hack/ directory is not available: the package runs outside its repo")
    return Versions(
        kubernetes=_required(root, k8s_module(root) / "go.mod", "k8s.io/kubernetes"),
        etcd=_required(root, root / "hack" / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def find_bin_dir(progress: Callable[[str], None] | None = None) -> Path:
    """Return a directory holding all of ``BINARIES``, building them if needed.

    TENANT_PLATFORM_BIN_DIR wins when set (and then TENANT_PLATFORM_K8S only names the versions
    the tests expect). Otherwise hack/build-control-plane.sh runs for the minor TENANT_PLATFORM_K8S
    selects (it returns at once when its cache is complete, and serialises concurrent builds with
    flock). Its progress (the step, and every 15 s the elapsed time and the step still running:
    hack/progress.sh) goes line by line to ``progress`` (default: stderr; pytest passes its
    terminal reporter, which captured stderr would hide). Raises ControlPlaneError with the
    build's last lines when it fails.
    """
    report = progress or _to_stderr
    if env_dir := os.environ.get(ENV_BIN_DIR):
        return checked_bin_dir(Path(env_dir), origin=ENV_BIN_DIR)
    root = repo_root()
    if root is None:
        raise ControlPlaneError(
            f"{BUILD_SCRIPT} was not found next to the tenant_platform package (is it installed "
            f"without its repository?); set {ENV_BIN_DIR} to a directory holding {', '.join(BINARIES)}"
        )
    k8s_module(root)  # an unknown TENANT_PLATFORM_K8S fails here, naming the selectable minors
    script = root / BUILD_SCRIPT
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)
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
            report(line.rstrip("\n"))
        stdout = build.stdout.read()
    if build.returncode != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {build.returncode}:\n{''.join(tail)}".rstrip())
    lines = stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{BUILD_SCRIPT} printed no bin directory")
    return checked_bin_dir(Path(lines[-1]), origin=str(BUILD_SCRIPT))


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def checked_bin_dir(bin_dir: Path, *, origin: str) -> Path:
    """``bin_dir`` resolved, after checking it holds every binary; ControlPlaneError naming ``origin`` if not."""
    missing = [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{origin}: {bin_dir} lacks executable {', '.join(missing)}")
    return bin_dir.resolve()


def first_build_seconds(bin_dir: Path) -> int | None:
    """How long the cached build took (``built_in_seconds`` in its STAMP), or None without one."""
    stamp = bin_dir.parent / "STAMP"
    try:
        text = stamp.read_text()
    except OSError:
        return None
    match = re.search(r"^built_in_seconds=(\d+)$", text, re.M)
    return int(match.group(1)) if match else None


@functools.cache
def help_text(binary: Path) -> str:
    """``binary --help`` (stdout and stderr), to probe for optional flags."""
    result = subprocess.run([str(binary), "--help"], capture_output=True, text=True, check=False, timeout=30)
    return result.stdout + result.stderr
