"""The Argo CD health check against TenantPlatforms as the real API server stores them.

Each status fixture is written through the status subresource of a real TenantPlatform (so the
CRD's schema validates it and would prune anything it does not know), and the Lua runs on the
object the API server returns. Generations are real: the spec is changed once after creation.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51

from tenant_platform.api import constants
from tenant_platform.testing.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "gitops" / "argocd-health.lua"
FIXTURES = ROOT / "tests" / "fixtures" / "status"
CRD = ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml"

EXPECTED = {
    "no-status": "Progressing",
    "stale-generation": "Progressing",
    "step-failed": "Progressing",
    "stalled-invalid-spec": "Degraded",
    "stalled-deadline": "Degraded",
    "ready": "Healthy",
    "waiting": "Progressing",
    "reconciling": "Progressing",
    "not-yet-reported": "Progressing",
    "paused": "Suspended",
}


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals()["obj"] = lua.table_from(obj, recursive=True)
    hs = lua.execute(SCRIPT.read_text())
    return str(hs["status"]), str(hs["message"])


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{constants.CRD_NAME}")


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_health_of_stored_object(control_plane: ControlPlane, crd: None, unique_name: str, fixture: str) -> None:
    source = yaml.safe_load((FIXTURES / f"{fixture}.yaml").read_text())
    body = {
        "apiVersion": constants.API_VERSION,
        "kind": constants.KIND,
        "metadata": {"name": unique_name},
        "spec": source["spec"],
    }
    control_plane.kubectl("create", "-f", "-", input=json.dumps(body))
    try:
        # A spec change: generation 1 -> 2, as after an edit in Git.
        changed = control_plane.kubectl(
            "patch", "tp", unique_name, "--type=merge", "-p", '{"spec":{"imagePullSecrets":["regcred"]}}', "-o", "json"
        )
        live_generation = json.loads(changed.stdout)["metadata"]["generation"]
        assert live_generation == 2
        if source["status"].get("conditions"):
            # Keep the fixture's lag between generation and observedGeneration.
            shift = live_generation - source["metadata"]["generation"]
            status = copy.deepcopy(source["status"])
            status["observedGeneration"] += shift
            for cond in status["conditions"]:
                cond["observedGeneration"] = max(0, cond["observedGeneration"] + shift)
            # The patch's response is the stored object; nothing else can change it in between.
            stored = json.loads(
                control_plane.kubectl(
                    "patch",
                    "tp",
                    unique_name,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    json.dumps({"status": status}),
                    "-o",
                    "json",
                ).stdout
            )
            # The schema kept everything: the fixture is a valid status document.
            assert stored["status"] == status
        else:
            stored = json.loads(control_plane.kubectl("get", "tp", unique_name, "-o", "json").stdout)
            # Nothing wrote status: the API server serves the CRD's default, as in the fixture.
            assert stored["status"] == source["status"] == {"observedGeneration": 0}
        status_word, message = health(stored)
        assert status_word == EXPECTED[fixture], message
    finally:
        control_plane.kubectl("delete", "tp", unique_name, "--wait=false", "--ignore-not-found")
