"""`tenant-platform check` on a cluster without Istio: it lists exactly what is missing and
writes nothing, as the API server's own request metrics show.

The cluster is a second control plane (no controller manager, so nothing else writes) holding
what a target cluster has except Istio: our CRD, the stock CoreDNS, a default StorageClass, the
gateway Service and a valid edge certificate, but no Istio CRDs and no istiod.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from facts_support import b64, install_crd, kube_for
from tests.support import platform_body

from tenant_platform import preflight
from tenant_platform.api import constants
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane

pytestmark = pytest.mark.cluster

DOMAIN = "kamiwaza.example.com"
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
# Requests that store nothing, whatever their verb, and the API server's own lease heartbeat.
NOT_WRITES = {
    "subjectaccessreviews",
    "selfsubjectaccessreviews",
    "localsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "tokenreviews",
    "leases",
}


def edge_certificate(domain: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, domain)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(domain)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[ControlPlane]:
    with ControlPlane(controller_manager=False) as cp:
        install_crd(cp)
        kube = kube_for(cp)
        for obj in seed.cluster_manifests():
            if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "istiod":
                continue  # no Istio: neither istiod nor its CRDs
            kube.create(obj)
        crt, key = edge_certificate(DOMAIN)
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "kamiwaza-edge-tls", "namespace": seed.ISTIO_NAMESPACE},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": b64(crt.decode()), "tls.key": b64(key.decode())},
            }
        )
        yield cp


def write_requests(cp: ControlPlane) -> dict[tuple[str, str, str], float]:
    """Non-dry-run write requests the API server has served, by (verb, resource, subresource)."""
    counts: dict[tuple[str, str, str], float] = {}
    for line in cp.metrics_text().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("verb") not in WRITE_VERBS or labels.get("dry_run") or labels.get("resource") in NOT_WRITES:
            continue
        key = (labels["verb"], labels.get("resource", ""), labels.get("subresource", ""))
        counts[key] = counts.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_the_metric_tells_dry_run_writes_apart(cluster: ControlPlane) -> None:
    """The evidence below relies on apiserver_request_total labelling dry-run requests."""
    before = write_requests(cluster)
    cluster.kubectl("create", "configmap", "dry", "-n", "default", "--dry-run=server")
    assert write_requests(cluster) == before
    cluster.kubectl("create", "configmap", "wet", "-n", "default")
    after = write_requests(cluster)
    assert after[("POST", "configmaps", "")] == before.get(("POST", "configmaps", ""), 0) + 1


def test_check_lists_exactly_what_is_missing_and_writes_nothing(cluster: ControlPlane, tmp_path: Path) -> None:
    kube = kube_for(cluster)
    body = platform_body("kamiwaza", "kamiwaza")
    body["spec"]["domain"] = DOMAIN
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(body))

    before = write_requests(cluster)
    rows, code = preflight.run_check(kube, str(path))
    after = write_requests(cluster)

    assert after == before, (
        f"check wrote: { {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k)} }"
    )
    assert kube.counter.snapshot()[1] == 0
    assert code == 1
    result = {r["check"]: r["result"] for r in rows}
    assert {c for c, r in result.items() if r == preflight.FAIL} == {constants.MESH_READY, constants.GATEWAY_READY}
    mesh = next(r for r in rows if r["check"] == constants.MESH_READY)
    assert "istiod" in mesh["detail"] and "networking.istio.io" in mesh["detail"]
    assert mesh["fix"] and mesh["fix"] != preflight.GENERIC_FIX
    gateway = next(r for r in rows if r["check"] == constants.GATEWAY_READY)
    assert "networking.istio.io" in gateway["detail"]
    # What the operator would create itself is a warning, not a failure.
    assert result[constants.NAMESPACES_READY] == preflight.WARN
    for ok in (constants.STORAGE_READY, constants.PULL_SECRETS_READY, constants.OBJECT_STORE_READY):
        assert result[ok] == preflight.PASS, ok
    # Nothing of the platform exists afterwards.
    assert kube.get("v1", "Namespace", "kamiwaza") is None
    assert kube.get(constants.API_VERSION, constants.KIND, "kamiwaza") is None

    table = preflight.format_table(rows)
    assert table.splitlines()[-1].endswith("2 failed.")


def test_check_by_name_reads_the_live_object_and_leaves_its_status_alone(cluster: ControlPlane) -> None:
    kube = kube_for(cluster)
    body = platform_body("named", "named-ns", imagePullSecrets=["regcred"])
    body["spec"]["domain"] = DOMAIN
    kube.create(body)

    before = write_requests(cluster)
    rows, code = preflight.run_check(kube, "named")
    assert write_requests(cluster) == before
    assert code == 1
    pull = next(r for r in rows if r["check"] == constants.PULL_SECRETS_READY)
    assert pull["result"] == preflight.FAIL and "Secret regcred in namespace named-ns does not exist" in pull["detail"]
    assert "kubectl create secret docker-registry" in pull["fix"]
    live = kube.get(constants.API_VERSION, constants.KIND, "named")
    # Untouched: only the CRD's default status ({observedGeneration: 0}), no conditions written.
    assert live is not None and live.get("status") == {"observedGeneration": 0}

    with pytest.raises(preflight.PreflightError, match="not found"):
        preflight.run_check(kube, "no-such-platform")


def test_the_cli_prints_the_table_and_exits_non_zero(cluster: ControlPlane, tmp_path: Path) -> None:
    body = platform_body("cli", "cli-ns")
    body["spec"]["domain"] = DOMAIN
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(body))
    before = write_requests(cluster)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenant_platform.cli",
            "check",
            "-f",
            str(path),
            "--kubeconfig",
            str(cluster.kubeconfig_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2] / "operator",
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[0].split() == ["CHECK", "RESULT", "DETAIL", "FIX"]
    assert re.search(r"^MeshReady\s+FAIL", done.stdout, re.M)
    assert write_requests(cluster) == before
