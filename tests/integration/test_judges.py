"""The verdicts GitOps tools compute for TenantPlatforms, from the tools' own code.

The judges (hack/judges, built from the Go module proxy by hack/build-tools.sh and cached):
``kstatus`` runs sigs.k8s.io/cli-utils' kstatus (kpt), Flux's fork of it (what Flux's
``healthChecks`` use) and Flux's ``healthCheckExprs`` status reader with the recipe shipped in
docs/gitops/flux-kustomizations.yaml; ``argocd-lua`` runs docs/gitops/argocd-health.lua in
gopher-lua, the Lua VM Argo CD runs health scripts in. The table they must agree with is in
docs/gitops.md ("What each tool shows").

Over the status fixtures (computed by the operator's code), then over platforms in each state on
the real API server: no status, invalid spec (before the operator runs), then with the operator
process running: Ready, waiting on a missing StorageClass before and after a tiny
spec.progressDeadlineSeconds and back to Ready once the class exists, and paused.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import find_condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import tools, wait
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.kubelet import SEEDED_PROVISIONER
from tenant_platform.testing.operator import RunningOperator, start_operator

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "status"
LUA = ROOT / "docs" / "gitops" / "argocd-health.lua"
FLUX = ROOT / "docs" / "gitops" / "flux-kustomizations.yaml"
SAMPLE = ROOT / "deploy" / "samples" / "tenantplatform.yaml"

Verdict = tuple[str, str, str, str]
"""(kstatus, Flux's kstatus, Flux healthCheckExprs, Argo CD health)."""
CURRENT: Verdict = ("Current", "Current", "Current", "Healthy")
IN_PROGRESS: Verdict = ("InProgress", "InProgress", "InProgress", "Progressing")
FAILED: Verdict = ("Failed", "Failed", "Failed", "Degraded")
PAUSED: Verdict = ("InProgress", "InProgress", "InProgress", "Suspended")

# The rows of the table in docs/gitops.md, one fixture each.
EXPECTED: dict[str, Verdict] = {
    "no-status": IN_PROGRESS,
    "stale-generation": IN_PROGRESS,
    "step-failed": IN_PROGRESS,
    "ready": CURRENT,
    "reconciling": IN_PROGRESS,
    "waiting": IN_PROGRESS,
    "not-yet-reported": IN_PROGRESS,
    "stalled-deadline": FAILED,
    "stalled-invalid-spec": FAILED,
    "paused": PAUSED,  # the kept conditions say Ready=False: InProgress to kstatus
}


def flux_exprs() -> list[dict[str, Any]]:
    """The healthCheckExprs entries of the shipped Flux example."""
    docs = list(yaml.safe_load_all(FLUX.read_text()))
    (exprs,) = [d["spec"]["healthCheckExprs"] for d in docs if "healthCheckExprs" in d.get("spec", {})]
    return list(exprs)


def judge(objects: list[dict[str, Any]]) -> list[tuple[Verdict, dict[str, str]]]:
    """Every judge's verdict on each object, and the messages by judge."""
    data = json.dumps(objects)
    kstatus = subprocess.run(
        [str(tools.tool_path("kstatus")), "-health-check-exprs", json.dumps(flux_exprs())],
        input=data,
        capture_output=True,
        text=True,
        check=True,
    )
    lua = subprocess.run(
        [str(tools.tool_path("argocd-lua")), str(LUA)], input=data, capture_output=True, text=True, check=True
    )
    out = []
    for k, a in zip(json.loads(kstatus.stdout), json.loads(lua.stdout), strict=True):
        verdict = (k["kstatus"]["status"], k["fluxKstatus"]["status"], k["fluxCEL"]["status"], a["status"])
        messages = {
            "kstatus": k["kstatus"]["message"],
            "fluxKstatus": k["fluxKstatus"]["message"],
            "fluxCEL": k["fluxCEL"]["message"],
            "argocd": a["message"],
        }
        out.append((verdict, messages))
    return out


def test_every_fixture_has_a_verdict() -> None:
    assert {p.stem for p in FIXTURES.glob("*.yaml")} == set(EXPECTED)


def test_judges_over_the_status_fixtures() -> None:
    names = sorted(EXPECTED)
    objects = [yaml.safe_load((FIXTURES / f"{n}.yaml").read_text()) for n in names]
    got = {n: v for n, (v, _) in zip(names, judge(objects), strict=True)}
    assert got == {n: EXPECTED[n] for n in names}


def test_messages_carry_the_blocking_reason() -> None:
    obj = yaml.safe_load((FIXTURES / "stalled-deadline.yaml").read_text())
    ((_, messages),) = judge([obj])
    assert "StorageClass fast" in messages["kstatus"]
    assert messages["argocd"].startswith("StorageClassNotFound: StorageReady: StorageClassNotFound")


def test_an_argocd_script_error_is_reported_not_hidden() -> None:
    # The judge itself: a script that does not return a health table is an error, as in Argo CD.
    broken = subprocess.run(
        [str(tools.tool_path("argocd-lua")), "/dev/null"], input="[{}]", capture_output=True, text=True, check=True
    )
    assert json.loads(broken.stdout)[0]["status"] == "Error"


# -- live: platforms in each state on the real API server -----------------------------------------


def sample(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"] = {"name": name}
    body["spec"].update(
        namespace=name,
        additionalNamespaces=[],
        domain=f"{name}.example.com",
        gateway={**body["spec"]["gateway"], "name": f"{name}-gateway"},
        edgeCertificate={**body["spec"]["edgeCertificate"], "secretName": f"{name}-edge-tls"},
        **spec,
    )
    return body


def live(kube: Kube, name: str) -> dict[str, Any]:
    obj = kube.get(constants.API_VERSION, constants.KIND, name)
    assert obj is not None
    return obj


def verdict_of(kube: Kube, name: str) -> tuple[Verdict, dict[str, str]]:
    ((verdict, messages),) = judge([live(kube, name)])
    return verdict, messages


@pytest.fixture
def platforms(crd: Kube) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        try:
            crd.merge_patch(constants.API_VERSION, constants.KIND, name, {"metadata": {"finalizers": None}})
            crd.delete(constants.API_VERSION, constants.KIND, name)
        except errors.NotFound:
            continue


# Without the operator (these run before the module's operator starts).


def test_live_no_status_is_in_progress(crd: Kube, platforms: list[str], unique_name: str) -> None:
    crd.create(sample(unique_name))
    platforms.append(unique_name)
    verdict, messages = verdict_of(crd, unique_name)
    assert verdict == IN_PROGRESS, messages
    assert "latest observed generation is 0" in messages["kstatus"]


def test_live_invalid_spec_is_failed(crd: Kube, platforms: list[str], unique_name: str) -> None:
    crd.create(sample(unique_name))
    platforms.append(unique_name)
    body = live(crd, unique_name)
    # As an older CRD version could have stored it: the model rejects it, the operator stalls.
    body["spec"]["podGuard"]["enforcement"] = "Sometimes"
    reconcile.run(body, kube=crd, settings=Settings(), now=datetime.now(UTC))
    verdict, messages = verdict_of(crd, unique_name)
    assert verdict == FAILED, messages
    assert "spec.podGuard.enforcement" in messages["argocd"]


# With the operator process (deploy/base RBAC), as in production.


@pytest.fixture(scope="module")
def operator(
    crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningOperator]:
    running = start_operator(control_plane, crd, tmp_path_factory.mktemp("operator"), drift_interval=4)
    try:
        yield running
    finally:
        running.stop()


def ready(obj: dict[str, Any]) -> bool:
    return (find_condition(obj.get("status"), "Ready") or {}).get("status") == "True"


def await_state(kube: Kube, name: str, operator: RunningOperator, what: str, test: Any) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = live(kube, name)
        current = obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"]
        return obj if current and test(obj) else None

    def explain() -> str:
        status = live(kube, name).get("status")
        return yaml.safe_dump(status) + "\n--- operator log tail ---\n" + operator.log()[-3000:]

    result: dict[str, Any] = wait.wait_for(check, f"{name}: {what}", 120, interval=0.5, context=explain)
    return result


def test_live_ready_is_current(operator: RunningOperator, crd: Kube, platforms: list[str], unique_name: str) -> None:
    crd.create(sample(unique_name))
    platforms.append(unique_name)
    await_state(crd, unique_name, operator, "Ready", ready)
    verdict, messages = verdict_of(crd, unique_name)
    assert verdict == CURRENT, messages


def test_live_missing_storage_class_waits_then_stalls_then_recovers(
    operator: RunningOperator, crd: Kube, platforms: list[str], unique_name: str
) -> None:
    storage_class = f"{unique_name}-sc"
    crd.create(sample(unique_name, storage={"storageClassName": storage_class}, progressDeadlineSeconds=15))
    platforms.append(unique_name)

    def waiting(o: dict[str, Any]) -> bool:
        reconciling = find_condition(o.get("status"), "Reconciling") or {}
        storage = find_condition(o.get("status"), constants.STORAGE_READY) or {}
        return reconciling.get("status") == "True" and storage.get("reason") == "StorageClassNotFound"

    def stalled(o: dict[str, Any]) -> bool:
        found = find_condition(o.get("status"), "Stalled") or {}
        return found.get("status") == "True" and "StorageReady: StorageClassNotFound" in found.get("message", "")

    obj = await_state(crd, unique_name, operator, "waiting for the class", waiting)
    ((verdict, messages),) = judge([obj])
    assert verdict == IN_PROGRESS, messages
    assert "StorageClassNotFound" in messages["argocd"]

    # The operator wakes itself at the deadline: no other trigger is needed.
    obj = await_state(crd, unique_name, operator, "Stalled", stalled)
    ((verdict, messages),) = judge([obj])
    assert verdict == FAILED, messages
    assert storage_class in messages["kstatus"] and storage_class in messages["fluxKstatus"]
    assert storage_class in messages["argocd"]

    # A person creates the class (of a provisioner that works: the one the session plays, see
    # testing/kubelet.py): Stalled clears by itself, the write test passes, and the platform becomes Ready.
    crd.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": storage_class},
            "provisioner": SEEDED_PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    try:
        await_state(crd, unique_name, operator, "Ready", ready)
        verdict, messages = verdict_of(crd, unique_name)
        assert verdict == CURRENT, messages
    finally:
        crd.delete("storage.k8s.io/v1", "StorageClass", storage_class)


def test_live_paused_is_suspended(operator: RunningOperator, crd: Kube, platforms: list[str], unique_name: str) -> None:
    body = sample(unique_name)
    body["metadata"]["annotations"] = {constants.ANNOTATION_PAUSED: "true"}
    crd.create(body)
    platforms.append(unique_name)

    def paused() -> dict[str, Any] | None:
        obj = live(crd, unique_name)
        return obj if (find_condition(obj.get("status"), "Reconciling") or {}).get("reason") == "Paused" else None

    obj = wait.wait_for(paused, f"{unique_name} paused", 60, interval=0.5)
    ((verdict, messages),) = judge([obj])
    assert verdict == PAUSED, messages
