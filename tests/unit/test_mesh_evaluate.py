"""concerns/mesh/verdict.py: MeshReady and the recorded sidecarStyle decided from facts alone, one row per reason."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import reasons
from tenant_platform.concerns.mesh.verdict import (
    CLASSIC,
    NAMESPACE_REQUEUE_SECONDS,
    NATIVE,
    UNKNOWN,
    MeshFacts,
    StyleProbe,
    evaluate,
    sidecar_style_of,
)

ALL_KINDS = {
    "networking.istio.io/v1": frozenset({"Gateway", "VirtualService", "DestinationRule"}),
    "networking.istio.io/v1alpha3": frozenset({"EnvoyFilter"}),
    "security.istio.io/v1": frozenset({"AuthorizationPolicy", "PeerAuthentication"}),
}
NATIVE_POD = {"spec": {"initContainers": [{"name": "istio-proxy", "restartPolicy": "Always"}], "containers": []}}
CLASSIC_POD = {"spec": {"initContainers": [{"name": "istio-init"}], "containers": [{"name": "istio-proxy"}]}}
PLAIN_POD = {"spec": {"containers": [{"name": "probe"}]}}


def deployment(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


# Istio in place, the installer allowed, the tenant namespace present.
GOOD = MeshFacts(
    deployments=(deployment("istiod", app="istiod"),),
    served=ALL_KINDS,
    cannot_create=(),
    namespace_labels={"istio-injection": "enabled"},
    probe=StyleProbe(returned=NATIVE_POD),
)


demo = partial(platform, "demo", namespace="kamiwaza", uid="u-1", domain="kamiwaza.example.com")


@dataclass(frozen=True)
class Row:
    name: str
    facts: MeshFacts
    spec: dict[str, Any]
    status: str
    reason: str
    fragment: str
    style: str


ROWS = [
    Row(
        "explicit style",
        GOOD,
        {"sidecarStyle": "Classic"},
        "True",
        reasons.Mesh.MESH_AVAILABLE,
        "istiod runs in istio-system, the Istio kinds the platform writes are served, the installer may create "
        "them in kamiwaza, and the sidecar style is Classic (as set in spec.mesh.sidecarStyle).",
        "Classic",
    ),
    Row(
        "detected style",
        GOOD,
        {"sidecarStyle": "Auto"},
        "True",
        reasons.Mesh.MESH_AVAILABLE,
        "the sidecar style is Native (detected with a dry-run pod).",
        "Native",
    ),
    Row(
        "no istiod",
        dataclasses.replace(GOOD, deployments=(deployment("other", app="web"),)),
        {"sidecarStyle": "Native"},
        "False",
        reasons.Mesh.ISTIOD_NOT_FOUND,
        "no istiod Deployment (labelled app=istiod or named istiod*) in namespace istio-system; install Istio",
        "Native",
    ),
    Row(
        "revision missing",
        dataclasses.replace(GOOD, deployments=(deployment("istiod-1-27", app="istiod", **{"istio.io/rev": "1-27"}),)),
        {"sidecarStyle": "Native", "injection": {"mode": "Revision", "revision": "1-28"}},
        "False",
        reasons.Mesh.REVISION_NOT_FOUND,
        "no istiod in istio-system has revision 1-28 (found: 1-27); fix spec.mesh.injection.revision",
        "Native",
    ),
    Row(
        "kinds not served",
        dataclasses.replace(GOOD, served={**ALL_KINDS, "networking.istio.io/v1alpha3": frozenset()}),
        {"sidecarStyle": "Native"},
        "False",
        reasons.Mesh.ISTIO_KINDS_NOT_SERVED,
        "the API server does not serve EnvoyFilter (networking.istio.io/v1alpha3); install or upgrade",
        "Native",
    ),
    Row(
        "installer may not create",
        dataclasses.replace(GOOD, cannot_create=("envoyfilters.networking.istio.io",)),
        {"sidecarStyle": "Native"},
        "False",
        reasons.Mesh.INSTALLER_CANNOT_CREATE_ISTIO_KINDS,
        "may not create envoyfilters.networking.istio.io in namespace kamiwaza (see InstallerReady)",
        "Native",
    ),
    Row(
        "ambient namespace",
        dataclasses.replace(GOOD, namespace_labels={"istio.io/dataplane-mode": "ambient"}),
        {"sidecarStyle": "Native"},
        "False",
        reasons.Mesh.AMBIENT_NOT_SUPPORTED,
        "namespace kamiwaza is labelled istio.io/dataplane-mode=ambient; the platform needs sidecar mode",
        "Native",
    ),
    Row(
        "probe rejected",
        dataclasses.replace(GOOD, probe=StyleProbe(rejected="pods is forbidden")),
        {"sidecarStyle": "Auto"},
        "False",
        reasons.Mesh.SIDECAR_STYLE_UNKNOWN,
        "the dry-run pod used to detect the sidecar style was rejected (pods is forbidden); set",
        "Unknown",
    ),
    Row(
        "pod guard denies the injected probe",
        dataclasses.replace(
            GOOD,
            probe=StyleProbe(
                rejected='pods "tenant-platform-sidecar-probe-x" is forbidden: ValidatingAdmissionPolicy '
                "'tenant-platform-pod-guard-deny' with binding 'tenant-platform-pod-guard-deny' denied request: "
                "the init container istio-init may add NET_ADMIN and NET_RAW only in the exact shape Istio "
                "injects: its image must start with one of the allowed prefixes"
            ),
        ),
        {"sidecarStyle": "Auto"},
        "False",
        reasons.Mesh.INJECTED_POD_DENIED,
        "the pod guard denied the dry-run pod as the sidecar injector returned it in namespace kamiwaza, so "
        "every injected workload there would be denied too: the init container istio-init may add",
        "Unknown",
    ),
    Row(
        "another platform's guard is a plain rejection",
        dataclasses.replace(
            GOOD,
            probe=StyleProbe(
                rejected="ValidatingAdmissionPolicy 'tenant-platform-other-pod-guard' with binding 'x' denied "
                "request: hostPID is not allowed"
            ),
        ),
        {"sidecarStyle": "Auto"},
        "False",
        reasons.Mesh.SIDECAR_STYLE_UNKNOWN,
        "the dry-run pod used to detect the sidecar style was rejected (",
        "Unknown",
    ),
    Row(
        "nothing injected",
        dataclasses.replace(GOOD, probe=StyleProbe(returned=PLAIN_POD)),
        {"sidecarStyle": "Auto"},
        "False",
        reasons.Mesh.SIDECAR_STYLE_UNKNOWN,
        "came back without an istio-proxy container: no sidecar injector acted on it",
        "Unknown",
    ),
    Row(
        "namespace missing",
        dataclasses.replace(GOOD, namespace_labels=None, probe=None),
        {"sidecarStyle": "Auto"},
        "False",
        reasons.Mesh.NAMESPACE_MISSING,
        "sidecarStyle Auto is detected with a dry-run pod in namespace kamiwaza, which does not exist yet.",
        "Unknown",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_condition(row: Row) -> None:
    verdict = evaluate(demo(mesh=row.spec), row.facts)
    cond = verdict.condition
    assert (cond.type, cond.status, cond.reason) == ("MeshReady", row.status, row.reason), cond.message
    assert row.fragment in cond.message
    assert verdict.recorded.dump() == {"sidecarStyle": row.style}
    waiting = row.reason == reasons.Mesh.NAMESPACE_MISSING
    assert (verdict.progressing, verdict.requeue_after) == (
        waiting,
        NAMESPACE_REQUEUE_SECONDS if waiting else None,
    )


def test_every_reason_has_a_row() -> None:
    assert {r.reason for r in ROWS} == set(reasons.Mesh)


def test_every_problem_is_listed_and_the_first_names_the_reason() -> None:
    broken = MeshFacts(deployments=(), served={}, cannot_create=("gateways.x",), namespace_labels=None)
    cond = evaluate(demo(mesh={"sidecarStyle": "Auto"}), broken).condition
    assert cond.reason == reasons.Mesh.ISTIOD_NOT_FOUND
    parts = cond.message.split("; ")
    assert parts[0].startswith("no istiod Deployment")
    assert any(
        p.startswith("the API server does not serve Gateway (networking.istio.io/v1), VirtualService") for p in parts
    )
    assert any("may not create gateways.x" in p for p in parts)
    assert cond.message.endswith("which does not exist yet.")


def test_istiod_found_by_name_and_default_revision() -> None:
    named = dataclasses.replace(GOOD, deployments=(deployment("istiod-canary"),))
    assert evaluate(demo(mesh={"sidecarStyle": "Native"}), named).condition.status == "True"
    default = evaluate(
        demo(mesh={"sidecarStyle": "Native", "injection": {"mode": "Revision", "revision": "default"}}), GOOD
    )
    assert default.condition.status == "True"


def test_sidecar_style_of_pod() -> None:
    assert sidecar_style_of(NATIVE_POD) == NATIVE
    assert sidecar_style_of(CLASSIC_POD) == CLASSIC
    assert sidecar_style_of(PLAIN_POD) == UNKNOWN
