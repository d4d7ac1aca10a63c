"""One version, one place: ``tenant_platform.__version__``. Everything that names the release
follows it: the package metadata (pyproject.toml reads it), the chart's version and appVersion,
the kustomize base's image tag, the Dockerfile's label, the Flux sources, the docs' examples,
``tenant_platform_build_info`` and ``tenant-platform --version``. Bump ``__version__`` and these
tests list every file still naming the old one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from tenant_platform import __version__, cli, metrics

ROOT = Path(__file__).resolve().parents[2]
SEMVER = r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?"
IMAGE = "tenant-platform-operator"
# Files that name versions of the past on purpose (release notes, upgrade steps from older
# releases).
HISTORY = {"CHANGELOG.md", "docs/upgrade.md", "docs/uninstall.md"}


def test_version_is_semver() -> None:
    assert re.fullmatch(SEMVER, __version__), __version__


def test_pyproject_reads_the_version_from_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "pyproject.toml must not repeat the version"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tenant_platform.__version__"}


def test_chart_version_and_app_version() -> None:
    chart = yaml.safe_load((ROOT / "deploy/helm/tenant-platform/Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (__version__, __version__)


def test_kustomize_base_runs_this_version() -> None:
    deployment = yaml.safe_load((ROOT / "deploy/base/deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].rpartition(":")[2] == __version__
    kustomization = yaml.safe_load((ROOT / "deploy/base/kustomization.yaml").read_text())
    for image in kustomization.get("images", []):  # an override of the tag must name it as well
        assert image.get("newTag", __version__) == __version__


def test_dockerfile_label() -> None:
    labels = dict(re.findall(r'(org\.opencontainers\.image\.[a-z]+)="([^"]*)"', (ROOT / "Dockerfile").read_text()))
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_build_info_and_cli_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert metrics.build_labels()["version"] == __version__
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == __version__


def _named_versions(text: str) -> list[str]:
    """Versions of this project a file names: image tags, release tags (``v``), kustomize
    ``newTag``, the chart as a dependency."""
    patterns = (
        rf"{IMAGE}:v?({SEMVER})\b",
        rf"\bnewTag:\s*\"?v?({SEMVER})",
        rf"\?ref=v({SEMVER})",
        rf"^\s*tag:\s*\"?v({SEMVER})",
        rf"name: tenant-platform\n\s+version:\s*\"?({SEMVER})",
        rf"/releases/download/v({SEMVER})/",
        rf"tenant_platform_operator-({SEMVER})[-.]",
    )
    return [m for p in patterns for m in re.findall(p, text, re.M)]


def _files() -> list[Path]:
    out = [ROOT / "Dockerfile", ROOT / "README.md"]
    for top in ("deploy", "docs", "hack", ".github"):
        out += [p for p in (ROOT / top).rglob("*") if p.suffix in {".md", ".yaml", ".yml", ".sh", ".py"}]
    return [p for p in out if p.is_file() and str(p.relative_to(ROOT)) not in HISTORY]


def test_every_file_names_this_version() -> None:
    stale = {
        f"{path.relative_to(ROOT)}: {found}"
        for path in _files()
        for found in _named_versions(path.read_text(encoding="utf-8"))
        if found != __version__
    }
    assert not stale, f"these name another version than {__version__}: {sorted(stale)}"


def test_the_scan_finds_the_places() -> None:
    """The scan above is not vacuous: the files it must cover name the version where it looks."""
    for rel in ("deploy/base/deployment.yaml", "deploy/flux/source.yaml", "docs/install.md"):
        assert __version__ in _named_versions((ROOT / rel).read_text()), rel
    assert _named_versions("image: x/tenant-platform-operator:9.9.9\n  tag: v1.2.3\n") == ["9.9.9", "1.2.3"]


def test_changelog_names_this_release_first() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(rf"^## \[({SEMVER})\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)
    assert releases[0] == __version__, releases
    assert "## [Unreleased]" in text and "[Keep a Changelog]" in text
    for release in releases:  # every heading has its link at the bottom
        assert re.search(rf"^\[{re.escape(release)}\]: https://", text, re.M), release


def test_license_matches_the_package_and_the_image() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in (ROOT / "Dockerfile").read_text()


def test_release_workflow_checks_the_tag_against_the_version() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yaml").read_text())
    assert workflow[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+*"]  # YAML 1.1 reads `on:` as True
    steps = workflow["jobs"]["release"]["steps"]
    commands = "\n".join(str(s.get("run", "")) for s in steps)
    assert "operator/tenant_platform/__init__.py" in commands and "hack/release.sh" in commands
    assert "cannot run" in (ROOT / ".github" / "workflows" / "release.yaml").read_text()
