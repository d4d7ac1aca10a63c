"""`tenant-platform fit`, the pure parts: each node's first reason (concerns/gpu/nodefit.py), the
share check, the snapshot file round trip, and the command's exit codes on a snapshot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.support import platform_body

from tenant_platform import cli, fitcli
from tenant_platform.concerns.gpu.fit import GpuRequest
from tenant_platform.formats.hami import names
from tenant_platform.testing.manifests import gpu_node_manifest, gpu_pod_manifest, hami_device_uuid, node_manifest

NOW = datetime(2025, 5, 1, 12, 0, 0, tzinfo=UTC)


def gpu_node(name: str, cards: int = 2, **kw: Any) -> dict[str, Any]:
    return gpu_node_manifest(name, cards, "NVIDIA A100", 40000, now=NOW, **kw)


def on(node: str, index: int, mem: int, cores: int, *, name: str = "p") -> dict[str, Any]:
    devices = [(hami_device_uuid(node, index), mem, cores)]
    return gpu_pod_manifest(name, namespace="ml", node_name=node, devices=devices)


def inputs(
    nodes: list[dict[str, Any]],
    pods: Sequence[dict[str, Any]] = (),
    platforms: Sequence[dict[str, Any]] = (),
) -> fitcli.FitInputs:
    return fitcli.FitInputs(
        taken_at=NOW,
        nodes=tuple(fitcli.trim_node(n) for n in nodes),
        pods=tuple(p for p in (fitcli.trim_pod(p) for p in pods) if p is not None),
        platforms=tuple(fitcli.trim_platform(b) for b in platforms),
        source="test",
    )


def answer(report: fitcli.FitReport, node: str) -> tuple[bool, str | None]:
    found = next(a for a in report.nodes if a.node == node)
    return found.fits, found.reason


def with_annotation(node: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    node["metadata"]["annotations"][key] = value
    return node


def tainted(node: dict[str, Any], key: str, effect: str = "NoSchedule") -> dict[str, Any]:
    node.setdefault("spec", {})["taints"] = [{"key": key, "value": "x", "effect": effect}]
    return node


PAST_LOCK = (NOW - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ") + ",ml,gone"
ANY = GpuRequest(mem_mib=1)
CPU_LABELLED = node_manifest("n", now=NOW, labels={"nvidia.com/gpu.present": "true"})

# (case, the node, the pods on it, the request, fits, the first reason or a part of it)
CASES = [
    ("fits", gpu_node("n"), [], GpuRequest(mem_mib=20000, cores=30), True, None),
    ("memory", gpu_node("n"), [], GpuRequest(mem_mib=40001), False, "no card can take it (GPU-"),
    ("memory exact", gpu_node("n"), [], GpuRequest(mem_mib=40000), True, None),
    (
        "cores used",
        gpu_node("n", 1),
        [on("n", 0, 1000, 80)],
        GpuRequest(mem_mib=1, cores=30),
        False,
        "30% cores, 20% free",
    ),
    ("two cards", gpu_node("n"), [on("n", 0, 1000, 10)], GpuRequest(cards=2, cores=100), False, "needs 2 cards, 1 can"),
    ("two whole cards", gpu_node("n"), [], GpuRequest(cards=2, cores=100), True, None),
    ("more cards than the node", gpu_node("n"), [], GpuRequest(cards=3), False, "needs 3 cards, 2 can"),
    ("out of range", gpu_node("n"), [], GpuRequest(mem_mib=1, cores=101), False, "101% cores is out of range"),
    ("unhealthy", gpu_node("n", unhealthy=[0]), [], GpuRequest(cards=2), False, "the card is unhealthy"),
    ("slots", gpu_node("n", 1, split_count=1), [on("n", 0, 1000, 0)], ANY, False, "all 1 sharing slots are in use"),
    ("no register", CPU_LABELLED, [], GpuRequest(), False, "registers no devices"),
    ("unparseable", with_annotation(gpu_node("n"), names.ANNOTATION_REGISTER, "[{"), [], ANY, False, "invalid JSON"),
    ("no cards", with_annotation(gpu_node("n"), names.ANNOTATION_REGISTER, "[]"), [], ANY, False, "lists no cards"),
    ("taint", tainted(gpu_node("n"), "dedicated"), [], ANY, False, "taint dedicated=x:NoSchedule"),
    ("tolerated taint", tainted(gpu_node("n"), names.DEFAULT_NAMES.count), [], ANY, True, None),
    ("condition taint", tainted(gpu_node("n"), "node.kubernetes.io/unschedulable"), [], ANY, True, None),
    ("stale lock", with_annotation(gpu_node("n"), names.ANNOTATION_LOCK, PAST_LOCK), [], ANY, False, "lock is expired"),
]


@pytest.mark.parametrize(("case", "node", "pods", "request_", "fits", "reason"), CASES, ids=[c[0] for c in CASES])
def test_each_node_gets_the_first_reason(  # noqa: PLR0917
    case: str, node: dict[str, Any], pods: list[dict[str, Any]], request_: GpuRequest, fits: bool, reason: str | None
) -> None:
    report = fitcli.evaluate(inputs([node], pods), request_, memory_given=request_.mem_mib is not None)
    got_fits, got_reason = answer(report, "n")
    assert got_fits is fits, got_reason
    if reason is None:
        assert got_reason is None
    else:
        assert got_reason is not None and reason in got_reason, got_reason


def test_no_allocatable_count_is_a_reason() -> None:
    node = gpu_node("n")
    node["status"]["allocatable"][names.DEFAULT_NAMES.count] = "0"
    report = fitcli.evaluate(inputs([node]), GpuRequest(mem_mib=1))
    assert answer(report, "n") == (
        False,
        "it advertises no allocatable nvidia.com/gpu, so HAMi treats its devices as unhealthy",
    )


def test_an_active_lock_is_a_note_not_a_reason() -> None:
    pod = on("n", 0, 10, 0, name="binding")
    node = with_annotation(gpu_node("n"), names.ANNOTATION_LOCK, NOW.strftime("%Y-%m-%dT%H:%M:%SZ") + ",ml,binding")
    pod["metadata"]["annotations"][names.PREFIX + names.POD_BIND_PHASE] = "allocating"
    report = fitcli.evaluate(inputs([node], [pod]), GpuRequest(mem_mib=1))
    (found,) = report.nodes
    assert found.fits and found.reason is None
    assert "node lock is held" in found.notes[0]


def test_cpu_nodes_are_not_listed_and_nodes_come_in_name_order() -> None:
    report = fitcli.evaluate(
        inputs([gpu_node("b"), node_manifest("cpu", now=NOW), gpu_node("a")]), GpuRequest(mem_mib=1)
    )
    assert [a.node for a in report.nodes] == ["a", "b"]
    assert report.fitting == ["a", "b"]


# -- the share -----------------------------------------------------------------------------------

GPU, MEM, CORES = names.DEFAULT_NAMES.count, names.DEFAULT_NAMES.memory, names.DEFAULT_NAMES.cores


@pytest.mark.parametrize(
    ("hard", "used", "asked", "refused"),
    [
        ({GPU: 4}, {GPU: 3}, {GPU: 1}, None),
        ({GPU: 4}, {GPU: 4}, {GPU: 1}, f"{GPU} 4 used + 1 asked > 4"),
        ({GPU: 4, MEM: 20000}, {GPU: 0, MEM: 15000}, {GPU: 1, MEM: 6000}, f"{MEM} 15000 used + 6000 asked > 20000"),
        ({GPU: 4, MEM: 20000}, {}, {GPU: 1}, None),  # no memory asked: the memory bound does not count it
        ({GPU: 4, CORES: 100}, {CORES: 80}, {GPU: 1, CORES: 30}, f"{CORES} 80 used + 30 asked > 100"),
        ({GPU: 4, CORES: 100}, {CORES: 80}, {GPU: 1, CORES: 0}, None),
    ],
)
def test_share_refusal(hard: dict[str, int], used: dict[str, int], asked: dict[str, int], refused: str | None) -> None:
    got = fitcli.share_refusal("tp", "ns", hard, used, asked)
    if refused is None:
        assert got is None
    else:
        assert got is not None and refused in got and "platform tp" in got and "namespace ns" in got


def test_quota_counts_per_container_not_per_card() -> None:
    asked = fitcli.asked_of_quota(GpuRequest(cards=2, mem_mib=10000, cores=30), names.DEFAULT_NAMES, memory_given=True)
    assert asked == {GPU: 2, MEM: 10000, CORES: 30}
    assert MEM not in fitcli.asked_of_quota(GpuRequest(), names.DEFAULT_NAMES, memory_given=False)


def share_platform(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return platform_body(
        "tp", "vision", additionalNamespaces=["extra"], gpu={"share": {"cards": 2, "memoryMiB": 30000}}, status=status
    )


def test_a_refused_pod_fits_no_node_with_the_share_as_reason() -> None:
    status = {
        "gpuShare": {
            "namespaces": [
                {"namespace": "vision", "quota": "q", "hard": {GPU: 2, MEM: 30000}, "used": {GPU: 2, MEM: 2000}}
            ]
        }
    }
    report = fitcli.evaluate(
        inputs([gpu_node("n")], platforms=[share_platform(status)]), GpuRequest(mem_mib=1000), platform="tp"
    )
    assert report.share is not None and report.share.refused is not None
    assert answer(report, "n") == (False, report.share.refused)
    # Another namespace of the platform has its own quota, with nothing used yet.
    other = fitcli.evaluate(
        inputs([gpu_node("n")], platforms=[share_platform(status)]),
        GpuRequest(mem_mib=1000),
        platform="tp",
        namespace="extra",
    )
    assert answer(other, "n") == (True, None)
    assert other.notes == ("status.gpuShare reports no use in namespace extra yet: counted as none used",)


def test_platform_and_namespace_errors() -> None:
    data = inputs([gpu_node("n")], platforms=[share_platform()])
    with pytest.raises(fitcli.FitError, match="TenantPlatform other is not in test"):
        fitcli.evaluate(data, GpuRequest(), platform="other")
    with pytest.raises(fitcli.FitError, match="namespace kube-system is not one of platform tp's"):
        fitcli.evaluate(data, GpuRequest(), platform="tp", namespace="kube-system")
    with pytest.raises(fitcli.FitError, match="--namespace needs --platform"):
        fitcli.evaluate(data, GpuRequest(), namespace="vision")
    without = inputs([gpu_node("n")], platforms=[platform_body("bare", "bare")])
    assert fitcli.evaluate(without, GpuRequest(), platform="bare").notes[0].startswith("platform bare has no GPU share")


# -- the snapshot file -----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_snapshot_round_trip_gives_the_same_answer(tmp_path: Path, suffix: str) -> None:
    pod = on("n", 0, 30000, 50)
    pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "s3cr3t-value"}]
    data = inputs([gpu_node("n"), gpu_node("m", cards=1)], [pod], [share_platform()])
    path = tmp_path / f"snap{suffix}"
    fitcli.save_snapshot(data, path)
    assert "s3cr3t-value" not in path.read_text()  # only container names are kept of a pod spec
    loaded = fitcli.load_snapshot(path)
    request = GpuRequest(mem_mib=20000, cores=60)
    assert fitcli.to_json(fitcli.evaluate(loaded, request)) | {"source": ""} == fitcli.to_json(
        fitcli.evaluate(data, request)
    ) | {"source": ""}
    assert loaded.taken_at == NOW


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Pod\n", "not a GpuFitSnapshot"),
        ("[", "cannot read it"),
        (f"kind: {fitcli.SNAPSHOT_KIND}\napiVersion: v9\n", "apiVersion 'v9'"),
        (f"kind: {fitcli.SNAPSHOT_KIND}\napiVersion: {fitcli.SNAPSHOT_API_VERSION}\ntakenAt: never\n", "takenAt"),
        (
            f"kind: {fitcli.SNAPSHOT_KIND}\napiVersion: {fitcli.SNAPSHOT_API_VERSION}\n"
            "takenAt: '2025-01-01T00:00:00Z'\nnodes: 3\n",
            "nodes must be a list",
        ),
    ],
)
def test_bad_snapshot_files_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(fitcli.FitError, match=message):
        fitcli.load_snapshot(path)


def test_the_command_on_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "snap.yaml"
    fitcli.save_snapshot(inputs([gpu_node("n", cards=1)], [on("n", 0, 30000, 50)]), path)
    assert cli.main(["fit", "--snapshot", str(path), "--memory", "10000", "--cores", "50", "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fits"] == ["n"] and out["request"] == {"cards": 1, "memoryMiB": 10000, "coresPercent": 50}
    assert cli.main(["fit", "--snapshot", str(path), "--memory", "10001"]) == 1
    text = capsys.readouterr().out
    assert "n     no    no card can take it" in text and "0 of 1 GPU nodes can take it now." in text
    assert cli.main(["fit", "--snapshot", str(tmp_path / "none.yaml"), "--cards", "1"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        cli.main(["fit", "--snapshot", str(path)])
    assert usage.value.code == 2
