"""Tools for tests, built once by ``hack/build-tools.sh``: helm, promtool and the judges.

The script compiles them from the Go module proxy into a cache keyed by version
(``~/.cache/tenant-platform/tools``, or TENANT_PLATFORM_CACHE) and prints the binary's path;
TENANT_PLATFORM_HELM / _PROMTOOL / _KSTATUS / _ARGOCD_LUA / _COREDNS / _ISTIOCTL name prebuilt binaries instead
(TENANT_PLATFORM_CERT_MANAGER a directory laid out as the cache's: bin/cert-manager, crds/). The
judges are our own programs under hack/judges: ``kstatus`` prints what kstatus and Flux's
healthCheckExprs reader compute for objects, ``argocd-lua`` runs an Argo CD health script in
gopher-lua (Argo CD's VM), ``cert-manager`` runs cert-manager's own certificate and issuer
controllers against an API server (``cert_manager_crds`` lists the CRD files the build copied
from cert-manager's module source beside it), ``coredns`` is CoreDNS itself (upstream's main with
the plugins cluster Corefiles use), serving the Corefiles the operator leaves. A tool that
cannot be built raises ToolError with the build's last lines (tests then fail, never skip).
``cached_tool_path`` never builds: istioctl's cold build takes many minutes, so the suite uses it
only when it is already there (``hack/build-tools.sh istioctl`` builds it).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Final

from tenant_platform.testing.binaries import repo_root

BUILD_SCRIPT: Final = Path("hack") / "build-tools.sh"
TOOLS: Final = ("helm", "promtool", "kstatus", "argocd-lua", "cert-manager", "coredns", "istioctl")
_TAIL: Final = 40


class ToolError(RuntimeError):
    """A delivery tool could not be found or built."""


@functools.cache
def tool_path(name: str) -> Path:
    """Path of a working binary of one of ``TOOLS``, building it on first use."""
    if name not in TOOLS:
        raise ToolError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}")
    root = repo_root()
    if root is None:
        raise ToolError("hack/build-tools.sh is not available: the package runs outside its repo")
    proc = subprocess.run(
        ["bash", str(root / BUILD_SCRIPT), name], cwd=root, capture_output=True, text=True, check=False
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(proc.stderr.strip().splitlines()[-_TAIL:])
        raise ToolError(f"{BUILD_SCRIPT} {name} failed (exit {proc.returncode}):\n{tail}")
    path = Path(lines[-1])
    if not path.is_file():
        raise ToolError(f"{BUILD_SCRIPT} {name} printed {path}, which is not a file")
    return path


def cached_tool_path(name: str) -> Path | None:
    """Path of an already built tool (or the override's), None when it would have to be built."""
    if name not in TOOLS:
        raise ToolError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}")
    root = repo_root()
    if root is None:
        return None
    proc = subprocess.run(
        ["bash", str(root / BUILD_SCRIPT), "--cached", name], cwd=root, capture_output=True, text=True, check=False
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not Path(lines[-1]).is_file():
        return None
    return Path(lines[-1])


def cert_manager_crds(binary: Path) -> list[Path]:
    """cert-manager's CRD files beside its judge (``<dir>/crds/*.yaml`` for ``<dir>/bin/cert-manager``)."""
    crds = sorted((binary.parent.parent / "crds").glob("*.yaml"))
    if not crds:
        raise ToolError(f"no cert-manager CRDs beside {binary} (expected {binary.parent.parent / 'crds'}/*.yaml)")
    return crds
