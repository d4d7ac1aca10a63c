"""`tenant-platform render` prints every manifest the operator would apply, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tenant_platform import cli

SAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "samples" / "tenantplatform.yaml"


def test_render_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["render", "-f", str(SAMPLE)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == [
        "ConfigMap",
        "Gateway",
        "Namespace",
        "Role",
        "RoleBinding",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    namespaces = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
    assert namespaces == ["kamiwaza", "kamiwaza-extensions"]
    for doc in docs:
        assert "PRIVATE KEY" not in yaml.safe_dump(doc)
        # Nothing applied by `render | kubectl apply` may hit the live CoreDNS ConfigMap.
        assert not (doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "coredns")


def test_render_keeps_cel_readable(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["render", "-f", str(SAMPLE)])
    out = capsys.readouterr().out
    assert "expression: |-" in out or "expression: |" in out


def test_render_rejects_invalid_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    body = yaml.safe_load(SAMPLE.read_text())
    body["spec"]["podGuard"]["enforcement"] = "Sometimes"
    bad.write_text(yaml.safe_dump(body))
    assert cli.main(["render", "-f", str(bad)]) == 2
    assert "spec.podGuard.enforcement" in capsys.readouterr().err


def test_render_never_marks_a_namespace_created_by_the_operator(capsys: pytest.CaptureFixture[str]) -> None:
    """Render cannot know which namespaces exist; `render | kubectl apply` must not make an existing
    namespace (and its data) deletable under deletionPolicy Delete. The operator annotates only the
    namespaces it creates itself (concerns/namespaces/verdict.py)."""
    from tenant_platform.concerns.namespaces.manifests import ANNOTATION_CREATED  # noqa: PLC0415

    assert cli.main(["render", "-f", str(SAMPLE)]) == 0
    namespaces = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d["kind"] == "Namespace"]
    assert namespaces
    for ns in namespaces:
        assert ANNOTATION_CREATED not in (ns["metadata"].get("annotations") or {}), ns
