"""The common mistakes give one line on stderr naming the problem and the fix, and a distinct exit
code; never a traceback. Each row runs the real console entry point in a subprocess (the way a
person meets it). Cluster-side mistakes (401, 403, a TenantPlatform that does not exist) are in
tests/integration/test_cli_cluster_errors.py, against the real API server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenant_platform import cli_errors
from tenant_platform.cli_errors import Exit
from tenant_platform.kube import errors

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "deploy" / "samples" / "tenantplatform.yaml"

UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""


def run(*args: str, home: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "operator"))
    return subprocess.run(
        [sys.executable, "-m", "tenant_platform.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "not-yaml.yaml").write_text("spec: [1,\n")
    (tmp_path / "deployment.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    (tmp_path / "old-version.yaml").write_text(
        "apiVersion: tenancy.dev/v1\nkind: TenantPlatform\nmetadata: {name: x}\nspec: {namespace: a, domain: a.b}\n"
    )
    (tmp_path / "unknown-field.yaml").write_text(
        "apiVersion: tenancy.dev/v1alpha1\nkind: TenantPlatform\nmetadata: {name: x}\n"
        "spec: {namespace: a, domain: a.example.com, mesh: {colour: blue}}\n"
    )
    (tmp_path / "invalid.yaml").write_text(
        "apiVersion: tenancy.dev/v1alpha1\nkind: TenantPlatform\nmetadata: {name: x}\n"
        "spec: {namespace: kube-system, domain: a.example.com}\n"
    )
    (tmp_path / "kubeconfig").write_text(UNREACHABLE_KUBECONFIG)
    return tmp_path


# (arguments, exit code, text the one line must contain); {d} is the files directory.
ROWS = [
    (["render", "-f", "{d}/missing.yaml"], Exit.BAD_INPUT, "missing.yaml: no such file"),
    (["render", "-f", "{d}/not-yaml.yaml"], Exit.BAD_INPUT, "not valid YAML (line 2, column 1)"),
    (["render", "-f", "{d}/deployment.yaml"], Exit.BAD_INPUT, "no TenantPlatform in it (it holds Deployment)"),
    (["render", "-f", "{d}/old-version.yaml"], Exit.BAD_INPUT, "serves tenancy.dev/v1alpha1"),
    (["render", "-f", "{d}/unknown-field.yaml"], Exit.BAD_INPUT, "spec.mesh.colour: unknown field"),
    (["render", "-f", "{d}/invalid.yaml"], Exit.BAD_INPUT, "spec.namespace must not be a system namespace"),
    (["check", "-f", "{d}/invalid.yaml"], Exit.BAD_INPUT, "spec.namespace must not be a system namespace"),
    (["dev", "-f", "{d}/deployment.yaml"], Exit.BAD_INPUT, "no TenantPlatform in it"),
    (["check", "kamiwaza"], Exit.CLUSTER, "no kubeconfig found"),
    (["facts", "kamiwaza"], Exit.CLUSTER, "no kubeconfig found"),
    (["run", "--no-probes", "--no-metrics"], Exit.CLUSTER, "no kubeconfig found"),
    (["facts", "kamiwaza", "--kubeconfig", "{d}/nope"], Exit.CLUSTER, "--kubeconfig {d}/nope: no such file"),
    (["facts", "kamiwaza", "--kubeconfig", "{d}/kubeconfig"], Exit.CLUSTER, "cannot reach the Kubernetes API server"),
    (["check", "-f", str(SAMPLE), "--kubeconfig", "{d}/kubeconfig"], Exit.CLUSTER, "connection refused"),
    (["check", "x", "--kubeconfig", "{d}/kubeconfig", "--context", "prod"], Exit.BAD_INPUT, "--context prod: no such"),
    (["run", "--kubeconfig", "{d}/kubeconfig", "--context", "prod"], Exit.BAD_INPUT, "--context prod: no such"),
]


@pytest.mark.parametrize(("args", "code", "text"), ROWS, ids=[" ".join(r[0])[:60] for r in ROWS])
def test_one_line_and_an_exit_code(files: Path, args: list[str], code: Exit, text: str) -> None:
    result = run(*[a.format(d=files) for a in args], home=files / "home")
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"tenant-platform {args[0]}: "), result.stderr
    assert text.format(d=files) in first, result.stderr
    assert result.stdout == ""


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("check", home=tmp_path).returncode == Exit.BAD_INPUT
    assert run("render", home=tmp_path).returncode == Exit.BAD_INPUT
    assert run("render", "-f", str(SAMPLE), "-o", "table", home=tmp_path).returncode == Exit.BAD_INPUT


def test_render_reads_stdin_and_prints_json(tmp_path: Path) -> None:
    result = run("render", "-f", "-", "-o", "json", home=tmp_path, stdin=SAMPLE.read_text())
    assert result.returncode == 0, result.stderr
    assert '"kind": "List"' in result.stdout


def test_an_internal_error_is_one_line_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    def boom() -> int:
        raise KeyError("x")

    assert cli_errors.guard("render", boom) == Exit.INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: KeyError" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("error", "code", "text"),
    [
        (errors.Transient(0, "ConnectionError", "... [Errno 111] Connection refused"), Exit.CLUSTER, "refused"),
        (errors.Transient(0, "ConnectionError", "CERTIFICATE_VERIFY_FAILED"), Exit.CLUSTER, "TLS certificate"),
        (errors.Forbidden(401, "Unauthorized", "Unauthorized"), Exit.CLUSTER, "401 Unauthorized"),
        (errors.Forbidden(403, "Forbidden", "cannot get"), Exit.CLUSTER, "permission denied (403)"),
        (errors.Transient(503, "ServiceUnavailable", "etcd"), Exit.CLUSTER, "not answering properly"),
        (errors.Invalid(422, "Invalid", "spec.domain: bad"), Exit.BAD_INPUT, "spec.domain: bad"),
        (errors.Conflict(409, "Conflict", "x"), Exit.INTERNAL, "409"),
    ],
)
def test_api_errors(error: errors.KubeError, code: Exit, text: str) -> None:
    message, got = cli_errors.describe_kube_error(error, "https://k8s:6443")
    assert got == code
    assert text in message
    assert "\n" not in message
