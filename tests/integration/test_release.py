"""The release: hack/release.sh --image builds every artifact into a directory, named with the one
version; the checksums hold; the wheel, sdist and chart carry what they must; the image's OCI
archive names the reference the chart and the install manifest deploy, its blobs are what their
digests say, and the SBOM names it by digest; the one install manifest is accepted by the real API
server (server-side dry run: the session's cluster is shared); and `tenant-platform version` reads
the version of the operator that manifest deploys. tests/image/ runs the archive's image (the same
build). helm comes from hack/build-tools.sh, kubectl from the session's control plane. The first
run needs PyPI once (the locked build backend, cached).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import release_image

from tenant_platform import __version__
from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane

# `dist` (tests/conftest.py): hack/release.sh --image's output, built once per session.

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
V = __version__
IMAGE = f"ghcr.io/tenancy-dev/tenant-platform-operator:{V}"
MANIFEST = "tenant-platform-operator.yaml"
ARTIFACTS = {
    f"tenant_platform_operator-{V}-py3-none-any.whl",
    f"tenant_platform_operator-{V}.tar.gz",
    f"tenant-platform-{V}.tgz",
    "tenancy.dev_tenantplatforms.yaml",
    MANIFEST,
    f"tenant-platform-operator-{V}.cdx.json",
    f"tenant-platform-operator-{V}.oci.tar",
    "SHA256SUMS",
}
PACKAGE_DATA = (
    "tenant_platform/data/crds/tenancy.dev_tenantplatforms.yaml",
    "tenant_platform/data/samples/tenantplatform.yaml",
    "tenant_platform/data/base/namespace.yaml",
    "tenant_platform/data/base/rbac.yaml",
)

Obj = dict[str, Any]


def docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_dist_holds_every_artifact_with_its_checksum(dist: Path) -> None:
    assert {p.name for p in dist.iterdir()} == ARTIFACTS
    sums = {}
    for line in (dist / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)  # sha256sum's text format: `sha256sum -c SHA256SUMS`
        sums[name] = digest
    assert set(sums) == ARTIFACTS - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_wheel_and_sdist(dist: Path) -> None:
    with zipfile.ZipFile(dist / f"tenant_platform_operator-{V}-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"tenant_platform_operator-{V}.dist-info/METADATA").decode()
        entry_points = wheel.read(f"tenant_platform_operator-{V}.dist-info/entry_points.txt").decode()
    assert set(PACKAGE_DATA) <= names
    assert f"tenant_platform_operator-{V}.dist-info/licenses/LICENSE" in names
    assert f"\nVersion: {V}\n" in metadata and "\nLicense-Expression: Apache-2.0\n" in metadata
    assert "tenant-platform = tenant_platform.cli:main" in entry_points
    with tarfile.open(dist / f"tenant_platform_operator-{V}.tar.gz") as sdist:
        members = {m.name.removeprefix(f"tenant_platform_operator-{V}/") for m in sdist.getmembers()}
        license_text = sdist.extractfile(f"tenant_platform_operator-{V}/LICENSE")
        assert license_text is not None
        assert license_text.read() == (ROOT / "LICENSE").read_bytes()
    assert {"pyproject.toml", "README.md", "LICENSE", "operator/tenant_platform/__init__.py"} <= members
    assert {f"operator/{p}" for p in PACKAGE_DATA} <= members
    assert not [m for m in members if "__pycache__" in m or m.startswith(("tests/", "hack/", ".git"))]


def test_chart_package(dist: Path) -> None:
    with tarfile.open(dist / f"tenant-platform-{V}.tgz") as chart:
        names = {m.name for m in chart.getmembers()}
        meta_file = chart.extractfile("tenant-platform/Chart.yaml")
        assert meta_file is not None
        meta = yaml.safe_load(meta_file.read())
    assert (meta["version"], meta["appVersion"]) == (V, V)
    assert "tenant-platform/templates/crd.yaml" in names and "tenant-platform/values.schema.json" in names
    assert not [n for n in names if n.startswith("tenant-platform/crds/")]
    helm = str(tools.tool_path("helm"))
    rendered = subprocess.run(
        [helm, "template", "tenant-platform", str(dist / f"tenant-platform-{V}.tgz"), "-n", "tenant-platform-system"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (deployment,) = [d for d in docs(rendered) if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    # Pinned by the digest of the release's image (values.yaml: image.digest), as docs/install.md shows.
    image = release_image(dist)
    pinned = subprocess.run(
        [
            helm,
            "template",
            "tenant-platform",
            str(dist / f"tenant-platform-{V}.tgz"),
            "--set",
            f"image.digest={image.digest}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (deployment,) = [d for d in docs(pinned) if d["kind"] == "Deployment"]
    repository = image.reference.rsplit(":", 1)[0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"{repository}@{image.digest}"


def test_the_image_archive(dist: Path) -> None:
    image = release_image(dist)
    assert image.archive.name == f"tenant-platform-operator-{V}.oci.tar"
    assert image.reference == IMAGE  # what the chart and the install manifest deploy (tests below)
    with tarfile.open(image.archive) as archive:
        layout = archive.extractfile("oci-layout")
        assert layout is not None and json.loads(layout.read()) == {"imageLayoutVersion": "1.0.0"}
        blobs = {m.name.removeprefix("blobs/sha256/"): m for m in archive.getmembers() if m.isfile()}
        # Every blob is what its name says, and the manifest, the config and the layers are all there.
        names = {image.digest, image.config_digest, *image.layers}
        assert {f"sha256:{name}" for name in blobs if name not in ("index.json", "oci-layout")} == names
        for name in names:
            member = archive.extractfile(blobs[name.removeprefix("sha256:")])
            assert member is not None
            assert f"sha256:{hashlib.file_digest(member, 'sha256').hexdigest()}" == name
    config = image.config["config"]
    assert (config["User"], config["Entrypoint"], config["Cmd"]) == ("65532:65532", ["tenant-platform"], ["run"])
    assert config["Labels"]["org.opencontainers.image.version"] == V
    assert config["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert len(image.config["rootfs"]["diff_ids"]) == len(image.layers)


def test_crd_and_sbom(dist: Path) -> None:
    assert (dist / "tenancy.dev_tenantplatforms.yaml").read_bytes() == (
        ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml"
    ).read_bytes()
    sbom = json.loads((dist / f"tenant-platform-operator-{V}.cdx.json").read_text())
    assert (sbom["bomFormat"], sbom["specVersion"]) == ("CycloneDX", "1.5")
    assert sbom["metadata"]["component"]["version"] == V
    components = {c["name"]: c for c in sbom["components"]}
    lock = (ROOT / "requirements.lock").read_text()
    for name in ("kopf", "kubernetes", "pydantic", "prometheus-client"):
        assert f"\n{name}=={components[name]['version']} " in lock, name
        assert components[name]["purl"] == f"pkg:pypi/{name}@{components[name]['version']}"
        assert components[name]["scope"] == "required" and components[name]["hashes"]
    assert components["setuptools"]["scope"] == "excluded"  # the build stage only
    # The image, by the digest of the archive's manifest, containing the project.
    image = release_image(dist)
    (container,) = [c for c in sbom["components"] if c["type"] == "container"]
    repository, tag = image.reference.rsplit(":", 1)
    assert (container["name"], container["version"]) == (repository, image.digest)
    assert container["purl"] == (
        f"pkg:oci/tenant-platform-operator@{image.digest.replace(':', '%3A')}?repository_url={repository}&tag={tag}"
    )
    assert container["hashes"] == [{"alg": "SHA-256", "content": image.digest.removeprefix("sha256:")}]
    dependencies = {d["ref"]: d["dependsOn"] for d in sbom["dependencies"]}
    assert dependencies[container["bom-ref"]] == [sbom["metadata"]["component"]["bom-ref"]]


def test_install_manifest_is_the_base_with_this_version(dist: Path, control_plane: ControlPlane) -> None:
    objs = docs((dist / MANIFEST).read_text())
    kinds = {d["kind"] for d in objs}
    assert {"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} <= kinds
    assert {"Role", "RoleBinding", "Deployment", "Service"} <= kinds
    base = docs(control_plane.kubectl("kustomize", str(ROOT / "deploy" / "base")).stdout)
    assert objs == base
    (deployment,) = [d for d in objs if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    (crd,) = [d for d in objs if d["kind"] == "CustomResourceDefinition"]
    assert crd == yaml.safe_load((ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml").read_text())


def test_install_manifest_applies_to_the_real_api_server(dist: Path, control_plane: ControlPlane) -> None:
    # The operator's namespace first (a dry run cannot create what the rest is placed in); other
    # tests apply the same Namespace from deploy/base.
    (namespace,) = [d for d in docs((dist / MANIFEST).read_text()) if d["kind"] == "Namespace"]
    control_plane.kubectl(
        "apply", "--server-side", "--field-manager=release-test", "-f", "-", input=yaml.safe_dump(namespace)
    )
    proc = control_plane.kubectl(
        "apply",
        "--server-side",
        "--field-manager=release-test",
        # A dry run judges the manifest, not who else manages a same-named object in the session's
        # cluster (the CRD and the operator's RBAC, applied by other tests).
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        str(dist / MANIFEST),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    applied = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(applied) == len(docs((dist / MANIFEST).read_text())), proc.stdout
    assert all(line.endswith("serverside-applied (server dry run)") for line in applied), proc.stdout


def test_version_reads_the_operator_the_manifest_deploys(
    dist: Path, control_plane: ControlPlane, unique_name: str, tmp_path: Path
) -> None:
    (deployment,) = [d for d in docs((dist / MANIFEST).read_text()) if d["kind"] == "Deployment"]
    deployment["metadata"]["namespace"] = unique_name
    control_plane.kubectl("create", "namespace", unique_name)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT / "operator"))

    kubeconfig = control_plane.kubeconfig_path

    def version(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tenant_platform.cli", "version", f"--kubeconfig={kubeconfig}", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=60,
        )

    try:
        proc = version("-n", unique_name)  # nothing deployed there yet
        assert proc.returncode == 0, proc.stderr
        label = "app.kubernetes.io/name=tenant-platform-operator"
        assert f"operator: not found (no operator Deployment ({label}) in namespace {unique_name})" in proc.stdout
        control_plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(deployment))
        proc = version("-n", unique_name, "-o", "json")
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["client"] == {"version": V}
        assert report["cluster"]["reachable"] is True and report["cluster"]["server"].startswith("v1.")
        assert report["cluster"]["operator"] == {
            "version": V,
            "image": IMAGE,
            "deployment": f"{unique_name}/tenant-platform-operator",
            "ready": f"0/{deployment['spec']['replicas']}",  # no kubelet in the test control plane
        }
        proc = version("-n", unique_name)
        assert proc.stdout.splitlines()[0] == f"client:   {V}"
        assert proc.stdout.splitlines()[2].startswith(f"operator: {V} (image {IMAGE}, ")
    finally:
        control_plane.kubectl("delete", "namespace", unique_name, "--wait=false")
