"""The API addresses step's verdict, decided purely: no condition, the recorded addresses, and the
``status.checks.kubernetesAPI`` entry (one row per outcome: nothing to say, a note, a warning)."""

from __future__ import annotations

from typing import Any

import pytest

from tenant_platform.concerns.apiaddresses.verdict import CHECK_NAME, APIAddressesFacts, evaluate

SERVICE = {"spec": {"clusterIPs": ["10.0.0.1"], "ports": [{"port": 443, "targetPort": 6443}]}}


def eps(*endpoints: tuple[str, bool]) -> dict[str, Any]:
    return {
        "ports": [{"port": 6443}],
        "endpoints": [{"addresses": [a], "conditions": {"ready": ready}} for a, ready in endpoints],
    }


@pytest.mark.parametrize(
    ("service", "slices", "check", "fragment", "endpoints"),
    [
        pytest.param(SERVICE, [eps(("192.0.2.10", True))], None, "", ["192.0.2.10/32"], id="all well: no check"),
        pytest.param(
            SERVICE,
            [eps(("192.0.2.10", True), ("192.0.2.11", False))],
            "Pass",
            "Recorded although not ready: 192.0.2.11/32.",
            ["192.0.2.10/32", "192.0.2.11/32"],
            id="not ready: a note",
        ),
        pytest.param(
            SERVICE, [], "Warn", "No EndpointSlice labelled kubernetes.io/service-name=kubernetes", [], id="no slice"
        ),
        pytest.param(
            None,
            [eps(("192.0.2.10", True))],
            "Warn",
            "Service default/kubernetes does not exist",
            ["192.0.2.10/32"],
            id="no service",
        ),
    ],
)
def test_evaluate(service: Any, slices: list, check: str | None, fragment: str, endpoints: list[str]) -> None:
    verdict = evaluate(APIAddressesFacts(service=service, slices=slices))
    assert verdict.conditions == []
    recorded = verdict.recorded.dump()["kubernetesAPI"]
    assert recorded["endpointCIDRs"] == endpoints
    assert list(recorded) == ["serviceCIDRs", "endpointCIDRs", "servicePorts", "endpointPorts"]
    if check is None:
        assert verdict.sections == {}
        return
    entry = verdict.sections["checks"][CHECK_NAME]
    assert entry["result"] == check and fragment in entry["message"]
    assert set(entry) == {"result", "message"}
