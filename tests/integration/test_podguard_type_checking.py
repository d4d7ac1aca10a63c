"""The pod guard's policies type-check without warnings on the real API server (its
ValidatingAdmissionPolicy status controller), the pod guard also with every variable inlined
(the checker does not look into variables), and the harness catches a typo."""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from podguard_support import VAP

from tenant_platform import devmode
from tenant_platform.concerns.podguard import manifests
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.cluster

STATUS_CONTROLLER = "validatingadmissionpolicy-status-controller"


@pytest.fixture(scope="module")
def type_checking_cluster(control_plane: ControlPlane) -> Iterator[Kube]:
    """A control plane whose kube-controller-manager runs the policy status (type-checking) controller.

    The session's control plane is used when it runs that controller; otherwise a second one is
    started for this module (its --controllers list is appended to).
    """
    from tenant_platform.testing import controlplane as cp_module  # noqa: PLC0415

    if STATUS_CONTROLLER in cp_module.CONTROLLERS:
        yield Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
        return
    own = ControlPlane(
        bin_dir=control_plane.bin_dir, extra_controller_manager_args=[f"--controllers={STATUS_CONTROLLER}"]
    )
    own.start()
    try:
        yield Kube.from_kubeconfig(str(own.kubeconfig_path))
    finally:
        own.stop()


def type_check(kube: Kube, policy: dict[str, Any]) -> list[dict[str, Any]]:
    """Create ``policy`` and return the API server's type-checking warnings for it."""
    created = kube.create(policy)
    name = created["metadata"]["name"]
    try:

        def observed() -> dict[str, Any] | None:
            live = kube.get(VAP, "ValidatingAdmissionPolicy", name)
            return live if (live or {}).get("status", {}).get("observedGeneration") == 1 else None

        checked = wait_for(observed, f"type checking of {name}", 60, interval=0.2)
        return list(((checked.get("status") or {}).get("typeChecking") or {}).get("expressionWarnings") or [])
    finally:
        kube.delete(VAP, "ValidatingAdmissionPolicy", name)


def inlined(policy: dict[str, Any]) -> dict[str, Any]:
    """The pod guard with every variable inlined into validations, so the checker sees it all.

    NB: the API server type-checks validations, messageExpressions and matchConditions against
    the Pod schema, but not the variables themselves (a variable with a typo just becomes dyn).
    """
    found = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}

    def expand(expression: str) -> str:
        return re.sub(r"variables\.([A-Za-z0-9_]+)", lambda m: f"({expand(found[m.group(1)])})", expression)

    validations = [{"expression": f"[{expand(e)}].size() == 1", "message": n} for n, e in found.items()]
    validations += [
        {"expression": expand(v["expression"]), "messageExpression": expand(v["messageExpression"])}
        for v in policy["spec"]["validations"]
    ]
    out = copy.deepcopy(policy)
    out["metadata"]["name"] += "-inlined"
    out["spec"].pop("variables")
    out["spec"]["validations"] = validations
    return out


LITERAL = manifests.GuardParam(("tc",), "Deny", ("docker.io/istio/proxyv2",))


def test_policies_type_check_without_warnings(type_checking_cluster: Kube) -> None:
    devmode.install_crd(type_checking_cluster)  # the parameter's schema
    for policy in manifests.render()[:4] + manifests.render(LITERAL, "typecheck")[:4]:
        policy["metadata"]["name"] += f"-{uuid.uuid4().hex[:6]}"
        assert type_check(type_checking_cluster, policy) == [], policy["metadata"]["name"]
        if "-pod-guard-" in policy["metadata"]["name"]:
            assert type_check(type_checking_cluster, inlined(policy)) == [], policy["metadata"]["name"]


def test_the_type_check_harness_catches_a_typo(type_checking_cluster: Kube) -> None:
    devmode.install_crd(type_checking_cluster)
    pod_policy = manifests.render(LITERAL, f"typo-{uuid.uuid4().hex[:6]}")[0]
    for var in pod_policy["spec"]["variables"]:
        var["expression"] = var["expression"].replace(".?subPathExpr", ".?subPathExp")
    warnings = type_check(type_checking_cluster, inlined(pod_policy))
    assert any("undefined field 'subPathExp'" in w["warning"] for w in warnings), warnings
