"""Golden files: what `tenant-platform render` prints, pinned byte for byte, one file per manifest.

For the shipped sample (deploy/samples/tenantplatform.yaml, golden name ``sample``) and every spec
in specs/, ``tests/golden/<name>/`` holds each rendered manifest in its own file named
``<kind>_<namespace>_<name>.yaml`` (``<kind>_<name>.yaml`` when cluster-scoped), exactly as the
command prints it, and ``manifests.txt`` lists the files in render order. So a change to a policy,
the Gateway, the installer RBAC or the Corefile block shows up in review as a diff of one file.

tests/unit/test_golden.py compares; ``make golden`` (``python -m tests.golden.update``) regenerates.
"""

from __future__ import annotations

from pathlib import Path

from tenant_platform import cli
from tenant_platform.api import constants

GOLDEN = Path(__file__).resolve().parent
SAMPLE = cli.sample_path()
INDEX = "manifests.txt"


def specs() -> dict[str, Path]:
    """Golden name -> the TenantPlatform file it is rendered from."""
    return {"sample": SAMPLE, **{path.stem: path for path in sorted((GOLDEN / "specs").glob("*.yaml"))}}


def file_name(manifest: dict[str, object]) -> str:
    meta = manifest["metadata"]
    assert isinstance(meta, dict)
    parts = [str(manifest["kind"]).lower(), meta.get("namespace"), meta["name"]]
    return "_".join(str(p) for p in parts if p) + ".yaml"


def render(spec: Path) -> dict[str, str]:
    """File name -> content for every manifest rendered from ``spec``, in render order."""
    bodies = [d for d in cli.load_documents(spec) if d.get("kind") == constants.KIND]
    assert len(bodies) == 1, f"{spec}: one {constants.KIND} per golden spec"
    files: dict[str, str] = {}
    for manifest in cli.render_manifests(bodies[0]):
        name = file_name(manifest)
        assert name not in files, f"{spec}: two manifests would share {name}"
        files[name] = cli.dump_manifests([manifest])
    return files


def index(files: dict[str, str]) -> str:
    return "".join(f"{name}\n" for name in files)
