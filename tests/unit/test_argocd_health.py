"""The Argo CD health check (docs/gitops/argocd-health.lua) run by a real Lua 5.1 interpreter.

Argo CD evaluates health scripts with gopher-lua (Lua 5.1), so lupa's Lua 5.1 runtime runs it
here. The fixtures are TenantPlatforms whose status the operator's own code computed
(tests/fixtures/status/); tests/integration/test_argocd_health_live.py runs the same script
against objects read back from the API server.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import lua51
from tests.fixtures.status import update
from tests.support import condition

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "gitops" / "argocd-health.lua"
FIXTURES = ROOT / "tests" / "fixtures" / "status"

# fixture -> (health status, text the message must contain)
EXPECTED = {
    "no-status": ("Progressing", "Waiting for the operator to observe generation 1 (observed 0)"),
    "stale-generation": ("Progressing", "observe generation 4 (observed 3)"),
    "step-failed": ("Progressing", "observe generation 2 (observed 1)"),
    "stalled-invalid-spec": ("Degraded", "InvalidSpec: Invalid spec: spec.domain"),
    "stalled-deadline": ("Degraded", "StorageClassNotFound: StorageReady: StorageClassNotFound: StorageClass fast"),
    "ready": ("Healthy", "AllConcernsReady: Every prerequisite is in place."),
    "waiting": ("Progressing", "GatewayKindNotServed: Waiting for GatewayReady: GatewayKindNotServed"),
    "reconciling": ("Progressing", "Progressing: Waiting for NamespacesReady: Terminating"),
    "not-yet-reported": ("Progressing", "NotYetReported: Waiting for MeshReady: not yet reported"),
    "paused": ("Suspended", "Paused: Paused by annotation tenancy.dev/paused=true"),
}


def health(obj: dict[str, Any]) -> tuple[str, str]:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True)
    lua.globals()["obj"] = lua.table_from(obj, recursive=True)
    hs = lua.execute(SCRIPT.read_text())
    return str(hs["status"]), str(hs["message"])


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())


def test_every_fixture_has_an_expectation() -> None:
    assert {p.stem for p in FIXTURES.glob("*.yaml")} == set(EXPECTED)


@pytest.mark.parametrize(("fixture", "expected"), list(EXPECTED.items()), ids=list(EXPECTED))
def test_health_of_status_fixture(fixture: str, expected: tuple[str, str]) -> None:
    status, message = health(load(fixture))
    assert status == expected[0], message
    assert expected[1] in message


def test_stalled_wins_over_ready_true() -> None:
    # Not produced by the operator today, but the order is the contract: Degraded first.
    obj = load("ready")
    condition(obj["status"], "Stalled").update(status="True", reason="InvalidSpec", message="spec.domain is invalid.")
    assert health(obj) == ("Degraded", "InvalidSpec: spec.domain is invalid.")


def test_stale_generation_wins_over_stalled() -> None:
    obj = load("stalled-invalid-spec")
    obj["metadata"]["generation"] += 1  # the spec was fixed; the operator has not seen it yet
    assert health(obj)[0] == "Progressing"


def test_status_without_conditions_or_generation() -> None:
    obj = load("ready")
    del obj["status"]
    assert health(obj) == ("Progressing", "Waiting for the TenantPlatform operator to report status")
    obj = load("ready")
    del obj["status"]["observedGeneration"]
    assert health(obj)[0] == "Progressing"


def test_condition_without_message() -> None:
    obj = load("waiting")
    reconciling = condition(obj["status"], "Reconciling")
    del reconciling["message"]
    assert health(obj) == ("Progressing", "GatewayKindNotServed")


def test_paused_wins_over_a_stale_generation() -> None:
    # A paused platform never observes the new generation: it stays Suspended, not Progressing.
    obj = load("paused")
    obj["metadata"]["generation"] += 1
    assert health(obj)[0] == "Suspended"


def test_docs_embed_the_script_verbatim() -> None:
    """docs/gitops.md shows the argocd-cm snippet; its Lua must be the tested file."""
    doc = (ROOT / "docs" / "gitops.md").read_text()
    block = re.search(r"resource\.customizations\.health\.tenancy\.dev_TenantPlatform: \|\n((?:    .*\n|\n)+)", doc)
    assert block, "docs/gitops.md lacks the argocd-cm health customization"
    embedded = "\n".join(line[4:] for line in block.group(1).rstrip("\n").splitlines())
    assert embedded.strip() == SCRIPT.read_text().strip()


def test_fixtures_are_what_the_status_code_computes() -> None:
    """Each fixture is what tests/fixtures/status/update.py computes with the operator's code now."""
    assert set(update.FIXTURES) == set(EXPECTED)
    stale = [name for name in update.FIXTURES if (FIXTURES / f"{name}.yaml").read_text() != update.render(name)]
    assert not stale, f"run `python -m tests.fixtures.status.update`: {stale} are out of date"
