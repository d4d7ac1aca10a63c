"""The chart's README.md is generated from values.schema.json and values.yaml (hack/chart-readme.py):
committed up to date, one row per value, every value described. And what the chart tells users
(NOTES.txt, the default runbook URL) points at files that exist in this repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tenant-platform"


def test_committed_readme_matches_the_schema() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "chart-readme.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"run hack/chart-readme.py:\n{proc.stderr}"


def test_readme_lists_every_value_of_values_yaml() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    keys = set(re.findall(r"^\| `([^`]+)` \|", readme, re.M))
    for top in values:
        assert top in keys or any(k.startswith(f"{top}.") for k in keys), top
    assert {
        "serviceAccount.create",
        "serviceAccount.name",
        "serviceAccount.annotations",
        "podLabels",
        "podAnnotations",
        "topologySpreadConstraints",
        "probes.liveness.periodSeconds",
        "probes.readiness.failureThreshold",
        "extraObjects",
        "metrics.serviceMonitor.relabelings",
        "metrics.serviceMonitor.metricRelabelings",
        "metrics.prometheusRule.runbookURL",
    } <= keys


def test_every_schema_property_is_described() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    opaque = {"podSecurityContext", "securityContext"}  # described as a whole

    def walk(node: dict[str, object], path: str) -> list[str]:
        missing = []
        for key, child in (node.get("properties") or {}).items():  # type: ignore[attr-defined]
            name = f"{path}.{key}" if path else key
            if child.get("properties") and name not in opaque:
                missing += walk(child, name)
            elif "description" not in child:
                missing.append(name)
        return missing

    assert walk(schema, "") == []


def test_chart_metadata() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["home"].startswith("https://") and chart["sources"] and chart["maintainers"]
    assert chart["kubeVersion"] == ">=1.30.0-0" and chart["keywords"]


def test_notes_and_runbooks_point_at_files_that_exist() -> None:
    """NOTES.txt names no file of a checkout (a chart user has none) but URLs of this release's files."""
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    assert "deploy/samples" not in notes
    linked = re.findall(r'include "tenant-platform\.source" \(list \. "([^"]+)"\)', notes)
    rule = (CHART / "templates" / "prometheusrule.yaml").read_text()
    linked += re.findall(r'include "tenant-platform\.source" \(list \. "([^"]+)"\)', rule)
    assert "docs/uninstall.md" in linked and "docs/metrics-and-alerts.md" in linked
    for path in linked:
        assert (ROOT / path).is_file(), path
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert (
        "https://github.com/tenancy-dev/tenant-platform-operator/blob/v{{ (index . 0).Chart.AppVersion }}/" in helpers
    )
