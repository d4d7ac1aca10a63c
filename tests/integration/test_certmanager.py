"""edgeCertificate.issuer CertManager, judged by cert-manager itself.

cert-manager's own controllers (hack/judges/cert-manager: built from the Go module proxy by
hack/build-tools.sh, never skipped) run as a local process against the test control plane,
with cert-manager's CRDs from its module source (copied beside the binary by the build). The
edgecert step runs as the operator's ServiceAccount under deploy/base/rbac.yaml and its fences,
so the grants for Certificates and CertificateRequests are the ones shipped.

- before the CRDs are installed: CertManagerNotInstalled;
- a self-signed Issuer: the step makes the Certificate, the real controller issues it, and
  EdgeCertificateReady becomes True on the Secret cert-manager wrote (checked as any Secret);
  cleanup deletes our Certificate and Secret, never a hand-made one;
- an Issuer that does not exist: False, CertificatePending, with cert-manager's own words.

The CRDs are removed again when the module ends (the control plane is shared by the session).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from networking_support import context, delete_namespace, run
from tests.support import create_namespace, sole_condition

from tenant_platform.api import constants
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import EdgeCertificate as Reason
from tenant_platform.concerns.edgecert import certs, step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

SECRET = "edge-tls"
CM = "cert-manager.io/v1"
CRD_API = "apiextensions.k8s.io/v1"


def certificate_crds() -> list[dict[str, Any]]:
    binary = tools.tool_path("cert-manager")
    return [yaml.safe_load(path.read_text()) for path in tools.cert_manager_crds(binary)]


@pytest.fixture(scope="module")
def cert_manager(crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """cert-manager's CRDs installed and its controllers running; yields the controller's log."""
    docs = certificate_crds()
    for doc in docs:
        crd.create(doc)
    for doc in docs:
        name = doc["metadata"]["name"]
        wait_for(
            lambda name=name: any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in ((crd.get(CRD_API, "CustomResourceDefinition", name) or {}).get("status") or {}).get(
                    "conditions"
                )
                or []
            ),
            f"CRD {name} established",
        )
    wait_for(lambda: crd.served(CM, "Certificate"), "cert-manager.io/v1 Certificate served")
    log = tmp_path_factory.mktemp("cert-manager") / "controller.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(tools.tool_path("cert-manager")), f"--kubeconfig={control_plane.kubeconfig_path}", "-v=2"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: b"started controllers" in log.read_bytes() or proc.poll() is not None, "cert-manager start")
        assert proc.poll() is None, f"cert-manager exited {proc.returncode}:\n{tail(log)}"
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for doc in docs:
            with contextlib.suppress(errors.NotFound):
                crd.delete(CRD_API, "CustomResourceDefinition", doc["metadata"]["name"])


def tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def spaces(crd: Kube, unique_name: str) -> Iterator[tuple[str, str]]:
    """(tenant namespace, gateway namespace): the tenant one labelled as a platform's (the fences)."""
    tenant, gw = unique_name, f"{unique_name}-gw"
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": tenant, "labels": {constants.LABEL_PLATFORM: unique_name}},
        }
    )
    create_namespace(crd, gw)
    yield tenant, gw
    for ns in (tenant, gw):
        delete_namespace(crd, ns)


def make(make_platform: Any, name: str, spaces: tuple[str, str], issuer: str, kind: str = "Issuer") -> dict[str, Any]:
    tenant, gw = spaces
    return make_platform(  # type: ignore[no-any-return]
        name,
        tenant,
        domain=f"{name}.example.com",
        gateway={"namespace": gw, "name": name},
        edgeCertificate={"secretName": SECRET, "issuer": "CertManager", "issuerRef": {"name": issuer, "kind": kind}},
    )


def self_signed_issuer(kube: Kube, namespace: str, name: str = "selfsigned") -> None:
    kube.create(
        {
            "apiVersion": CM,
            "kind": "Issuer",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selfSigned": {}},
        }
    )


class Edge(NamedTuple):
    status: str
    reason: str
    message: str


def edge(kube: Kube, body: dict[str, Any]) -> Edge:
    """EdgeCertificateReady after one pass of the edgecert step."""
    return Edge(*sole_condition(run(step.STEP, kube, body), constants.EDGE_CERTIFICATE_READY))


def test_not_installed_before_the_crds(as_operator: Kube, crd: Kube, make_platform: Any, spaces: Any) -> None:
    """Runs first in this module: cert-manager's CRDs are not installed yet."""
    assert not crd.served(CM, "Certificate"), "cert-manager's CRDs are already installed in this session"
    body = make(make_platform, spaces[0], spaces, "selfsigned")
    cond = edge(as_operator, body)
    assert (cond.status, cond.reason) == ("False", Reason.CERT_MANAGER_NOT_INSTALLED), cond.message


def test_a_self_signed_issuer_issues_and_the_secret_is_valid(
    cert_manager: Path, as_operator: Kube, crd: Kube, make_platform: Any, spaces: tuple[str, str]
) -> None:
    tenant, gw = spaces
    self_signed_issuer(crd, gw)
    body = make(make_platform, tenant, spaces, "selfsigned")

    def ready() -> Any:
        cond = edge(as_operator, body)
        return cond if cond.status == "True" else None

    first = edge(as_operator, body)
    assert first.reason in (Reason.CERTIFICATE_PENDING, Reason.VALID), first.message
    cond = wait_for(
        ready,
        "EdgeCertificateReady True from cert-manager",
        timeout=90,
        interval=1.0,
        context=lambda: f"{edge(as_operator, body).message}\n--- cert-manager log ---\n{tail(cert_manager)}",
    )
    assert cond.reason == Reason.VALID, cond.message
    assert f"cert-manager Certificate {gw}/{SECRET} is Ready, from Issuer selfsigned (cert-manager.io)" in cond.message

    certificate = crd.get(CM, "Certificate", SECRET, gw)
    assert certificate is not None
    assert certificate["spec"]["dnsNames"] == [f"{tenant}.example.com"]
    assert certificate["metadata"]["labels"][constants.LABEL_PLATFORM] == tenant
    assert [o["uid"] for o in certificate["metadata"]["ownerReferences"]] == [body["metadata"]["uid"]]

    secret = crd.get("v1", "Secret", SECRET, gw)
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["annotations"]["cert-manager.io/certificate-name"] == SECRET
    assert secret["metadata"]["labels"][constants.LABEL_COMPONENT] == "edgecert"  # secretTemplate
    report = certs.analyze_secret(
        secret,
        domain=f"{tenant}.example.com",
        now=datetime.now(UTC),
        renew_before=timedelta(hours=720),
    )
    assert report.ok and report.facts is not None and report.facts.self_signed, report.message
    trust = crd.get("v1", "ConfigMap", f"{tenant}-edge-trust", tenant)
    assert trust is not None and "PRIVATE KEY" not in str(trust["data"])

    # A hand-made Secret elsewhere is never touched by cleanup; ours go, the Certificate first.
    crd.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hand-made", "namespace": gw}})
    result = step.STEP.cleanup(context(as_operator, body))
    assert result.done, result.message
    assert f"Certificate {gw}/{SECRET}" in result.message and f"Secret {gw}/{SECRET}" in result.message
    assert crd.get(CM, "Certificate", SECRET, gw) is None
    assert crd.get("v1", "Secret", SECRET, gw) is None
    assert crd.get("v1", "Secret", "hand-made", gw) is not None


def test_an_issuer_that_does_not_exist(
    cert_manager: Path, as_operator: Kube, crd: Kube, make_platform: Any, spaces: tuple[str, str]
) -> None:
    tenant, gw = spaces
    body = make(make_platform, tenant, spaces, "missing")

    def says_why() -> Any:
        cond = edge(as_operator, body)
        return cond if 'Referenced "Issuer" not found' in cond.message else None

    cond = wait_for(
        says_why,
        "cert-manager's reason in EdgeCertificateReady",
        timeout=60,
        interval=1.0,
        context=lambda: f"{edge(as_operator, body).message}\n--- cert-manager log ---\n{tail(cert_manager)}",
    )
    assert (cond.status, cond.reason) == ("False", Reason.CERTIFICATE_PENDING), cond.message
    assert f"CertificateRequest {gw}/{SECRET}-" in cond.message and "Pending" in cond.message
    assert crd.get("v1", "Secret", SECRET, gw) is None


def test_a_certificate_that_is_not_ours_is_left_alone(
    cert_manager: Path, as_operator: Kube, crd: Kube, make_platform: Any, spaces: tuple[str, str]
) -> None:
    tenant, gw = spaces
    self_signed_issuer(crd, gw)
    theirs = {
        "apiVersion": CM,
        "kind": "Certificate",
        "metadata": {"name": SECRET, "namespace": gw},
        "spec": {"secretName": SECRET, "dnsNames": ["theirs.example.com"], "issuerRef": {"name": "selfsigned"}},
    }
    crd.create(theirs)
    body = make(make_platform, tenant, spaces, "selfsigned")
    cond = edge(as_operator, body)
    assert (cond.status, cond.reason) == ("False", Common.CONFLICT), cond.message
    live = crd.get(CM, "Certificate", SECRET, gw)
    assert live is not None and live["spec"]["dnsNames"] == ["theirs.example.com"]
    step.STEP.cleanup(context(as_operator, body))
    assert crd.get(CM, "Certificate", SECRET, gw) is not None
