"""The CLI's cluster-side mistakes against the real API server: one line, the documented code.

- credentials the API server refuses (401) and an identity without permission (403): exit 3;
- a TenantPlatform that does not exist, or has recorded nothing yet, for `facts` and `check`: exit 2;
- --context selects the kubeconfig's context; -o json/yaml for check and facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import create_namespace

from tenant_platform import cli
from tenant_platform.cli_errors import Exit
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_refused_credentials_exit_3(control_plane: ControlPlane, tmp_path: Path, capsys: Any) -> None:
    kubeconfig = control_plane.kubeconfig_for_token("not-a-token", tmp_path / "bad.kubeconfig")
    code, out, err = run(capsys, "facts", "kamiwaza", "--kubeconfig", str(kubeconfig))
    assert code == Exit.CLUSTER, err
    assert err.startswith("tenant-platform facts: the API server at ") and "401 Unauthorized" in err
    assert err.count("\n") == 1 and out == ""


def test_no_permission_exit_3(crd: Kube, control_plane: ControlPlane, tmp_path: Path, capsys: Any) -> None:
    """A ServiceAccount with no RBAC at all (its real token) may not read TenantPlatforms."""
    create_namespace(crd, "cli-nobody")
    crd.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": "cli-nobody"}})
    token, _ = crd.request_token("cli-nobody", "nobody", expiration_seconds=600)
    kubeconfig = control_plane.kubeconfig_for_token(token, tmp_path / "nobody.kubeconfig")
    for args in (["facts", "kamiwaza"], ["check", "kamiwaza"]):
        code, _, err = run(capsys, *args, "--kubeconfig", str(kubeconfig))
        assert code == Exit.CLUSTER, err
        assert "permission denied (403)" in err and "system:serviceaccount:cli-nobody:nobody" in err
        assert err.count("\n") == 1


def test_a_platform_that_does_not_exist_exit_2(crd: Kube, control_plane: ControlPlane, capsys: Any) -> None:
    kubeconfig = str(control_plane.kubeconfig_path)
    context = yaml.safe_load(Path(kubeconfig).read_text())["contexts"][0]["name"]
    for args in (["facts", "no-such-platform"], ["check", "no-such-platform"]):
        code, out, err = run(capsys, *args, "--kubeconfig", kubeconfig, "--context", context)
        assert code == Exit.BAD_INPUT, err
        assert "TenantPlatform no-such-platform not found" in err and err.count("\n") == 1 and out == ""


def test_facts_before_the_operator_ran_exit_2(make_platform: Any, control_plane: ControlPlane, capsys: Any) -> None:
    make_platform("cli-facts", "cli-facts")
    code, _, err = run(capsys, "facts", "cli-facts", "--kubeconfig", str(control_plane.kubeconfig_path))
    assert code == Exit.BAD_INPUT
    assert "has no recorded facts yet: is the operator running?" in err


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_check_output_formats(crd: Kube, control_plane: ControlPlane, tmp_path: Path, capsys: Any, output: str) -> None:
    spec = tmp_path / "tp.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "tenancy.dev/v1alpha1",
                "kind": "TenantPlatform",
                "metadata": {"name": "cli-output"},
                "spec": {"namespace": "cli-output", "domain": "cli-output.example.com"},
            }
        )
    )
    code, out, err = run(
        capsys, "check", "-f", str(spec), "--kubeconfig", str(control_plane.kubeconfig_path), "-o", output
    )
    assert code in (Exit.OK, Exit.FAILED), err
    rows = json.loads(out) if output == "json" else yaml.safe_load(out)
    assert {row["check"] for row in rows} >= {"NamespacesReady", "PodGuardReady"}
    assert code == (Exit.FAILED if any(row["result"] == "FAIL" for row in rows) else Exit.OK)
