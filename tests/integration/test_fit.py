"""`tenant-platform fit` on the real control plane, seeded with the GPU nodes (testing/seed.py):
for each seeded GPU node it gives the verdict the gpu step reports in ``status.gpu.nodes[].fit``
(the largest free memory and cores on one card, the fully free cards), with a reason for each
node that cannot take the pod; offline from a saved snapshot it answers the same; with
``--platform`` a pod beyond the tenant's share fits nowhere, the share being the reason.

Pods HAMi "placed" on the seeded nodes (annotations only: no scheduler or kubelet runs) live in
the test's namespace and are force-deleted at the end, so other tests see the nodes as seeded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.support import create_namespace, platform

from tenant_platform import cli
from tenant_platform.concerns.gpu import step as gpu
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext
from tenant_platform.kube.client import Kube
from tenant_platform.observe import reflector
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.manifests import gpu_pod_manifest, hami_device_uuid
from tenant_platform.testing.steps import reconcile_step

pytestmark = pytest.mark.cluster

SEEDED = {node.name: node for node in seed.DEFAULT_GPU_NODES}


def hami_pod(name: str, namespace: str, node: str, card: int, mem: int, cores: int) -> dict[str, Any]:  # noqa: PLR0917
    return gpu_pod_manifest(
        name, namespace=namespace, node_name=node, devices=[(hami_device_uuid(node, card), mem, cores)]
    )


@pytest.fixture
def placed(crd: Kube, unique_name: str) -> Iterator[str]:
    """The test's namespace with HAMi pods on two seeded nodes (force-deleted afterwards)."""
    namespace = unique_name
    create_namespace(crd, namespace, wait_sa=True)
    node2, node3 = "gpu-node-2", "gpu-node-3"
    pods = [
        # gpu-node-3 (2 x L40S, 49140 MiB): card 0 holds 40000 MiB and 60 % cores.
        hami_pod("l40s", namespace, node3, 0, 40000, 60),
        # gpu-node-2 (4 x A100): a little on every card, so no card is free for a whole-card pod.
        *(hami_pod(f"a100-{i}", namespace, node2, i, 1000, 10) for i in range(SEEDED[node2].cards)),
    ]
    for pod in pods:
        crd.create(pod)
    try:
        yield namespace
    finally:
        for pod in pods:
            path = crd.path("v1", "Pod", pod["metadata"]["name"], namespace)
            crd.request("DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        crd.delete("v1", "Namespace", namespace)


def step_fits(kube: Kube, namespace: str) -> dict[str, dict[str, int]]:
    """The gpu step's status.gpu.nodes[].fit of the seeded nodes (a dry run: nothing is written)."""
    p = platform(f"{namespace}-tp", namespace, uid="u", generation=1, gpu={"hami": {"configMapNamespace": namespace}})
    ctx = StepContext(
        platform=p,
        kube=kube,
        settings=Settings(),
        now=datetime.now(UTC),
        dry_run=True,
        observed=reflector.load_from_api(kube),
    )
    result = reconcile_step(gpu.STEP, ctx)
    return {n["name"]: n["fit"] for n in result.status["gpu"]["nodes"] if n["name"] in SEEDED}


def run_fit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = cli.main(["fit", *args, "-o", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out)


def verdicts(out: dict[str, Any]) -> dict[str, tuple[bool, str | None]]:
    return {n["name"]: (n["fits"], n.get("reason")) for n in out["nodes"] if n["name"] in SEEDED}


def test_fit_gives_the_gpu_steps_verdict_per_seeded_node(  # noqa: PLR0917
    crd: Kube,
    seeded: ControlPlane,
    placed: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make_platform: Callable[..., dict[str, Any]],
) -> None:
    kubeconfig = str(seeded.kubeconfig_path)
    fits = step_fits(crd, placed)
    assert set(fits) == set(SEEDED)
    # What the pods left: gpu-node-3's free card 1 is whole, gpu-node-2 has no free card.
    assert fits["gpu-node-3"] == {"largestFreeMemoryMiB": 49140, "largestFreeCoresPercent": 100, "freeCards": 1}
    assert fits["gpu-node-2"]["freeCards"] == 0
    snapshot = tmp_path / "snapshot.yaml"
    assert cli.main(["fit", "--kubeconfig", kubeconfig, "--save-snapshot", str(snapshot)]) == 0
    assert "saved" in capsys.readouterr().err

    def both(*request: str) -> dict[str, tuple[bool, str | None]]:
        """The answer against the cluster, which the offline answer from the snapshot must equal."""
        _, live = run_fit(capsys, "--kubeconfig", kubeconfig, *request)
        _, offline = run_fit(capsys, "--snapshot", str(snapshot), *request)
        assert verdicts(offline) == verdicts(live), request
        assert offline["source"].startswith(f"snapshot {snapshot}")
        return verdicts(live)

    for node, fit in sorted(fits.items()):
        memory, cores, free = fit["largestFreeMemoryMiB"], fit["largestFreeCoresPercent"], fit["freeCards"]
        # The most memory one card has free fits; one MiB more fits no card.
        assert both("--memory", str(memory))[node] == (True, None)
        fits_not, reason = both("--memory", str(memory + 1))[node]
        assert not fits_not and reason is not None and reason.startswith("no card can take it (GPU-"), reason
        assert "MiB free" in reason
        # The most cores one card has free fit; one percent more (when that is a valid request) does not.
        assert both("--memory", "0", "--cores", str(cores))[node] == (True, None)
        if cores < 100:
            fits_not, reason = both("--memory", "0", "--cores", str(cores + 1))[node]
            assert not fits_not and reason is not None and "% free" in reason, reason
        # As many whole cards as are free fit; one more does not.
        if free:
            assert both("--cards", str(free), "--cores", "100")[node] == (True, None)
        fits_not, reason = both("--cards", str(free + 1), "--cores", "100")[node]
        assert not fits_not and reason is not None, reason
        assert reason.startswith("no card can take it" if free == 0 else f"needs {free + 1} cards, {free} can take it")

    # The tenant's share: a platform whose quota in its namespace is used up fits the pod nowhere.
    name = f"{placed}-share"
    make_platform(name, placed, gpu={"share": {"cards": 2, "memoryMiB": 20000}})
    quota = {
        "namespace": placed,
        "quota": "tenant-platform-gpu-share",
        "hard": {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 20000},
    }
    status = {"gpuShare": {"namespaces": [{**quota, "used": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 15000}}]}}
    crd.merge_patch("tenancy.dev/v1alpha1", "TenantPlatform", name, {"status": status}, subresource="status")
    code, out = run_fit(capsys, "--kubeconfig", kubeconfig, "--platform", name, "--memory", "6000")
    assert code == 1 and out["fits"] == []
    refused = out["share"]["refused"]
    assert "nvidia.com/gpumem 15000 used + 6000 asked > 20000" in refused
    assert all(n["reason"] == refused for n in out["nodes"])
    code, out = run_fit(capsys, "--kubeconfig", kubeconfig, "--platform", name, "--memory", "5000")
    assert code == 0 and "gpu-node-1" in out["fits"] and "refused" not in out["share"]
