"""GPUShareReady, decided purely from our quotas as read: one row per reason, the chain's order,
the status section, the manifests (canonical quantities, HAMi's names) and the quantity parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.gpu import ResourceNamesStatus
from tenant_platform.concerns.gpushare import manifests, verdict
from tenant_platform.concerns.gpushare.manifests import ShareNames
from tenant_platform.concerns.gpushare.verdict import GpuShareFacts, QuotaFacts

R = reasons.GPUShare
SHARE = {"cards": 2, "memoryMiB": 20000, "coresPercent": 150}
HARD = {"requests.nvidia.com/gpu": "2", "requests.nvidia.com/gpumem": "20k", "requests.nvidia.com/gpucores": "150"}


def platform(share: dict[str, Any] | None = SHARE, additional: tuple[str, ...] = ()) -> TenantPlatform:
    gpu = {} if share is None else {"share": share}
    return TenantPlatform.from_body(
        {
            "metadata": {"name": "tp"},
            "spec": {
                "namespace": "ns",
                "additionalNamespaces": list(additional),
                "domain": "tp.example.com",
                "gpu": gpu,
            },
        }
    )


def quota(
    used: dict[str, str] | None = None, *, hard: dict[str, str] = HARD, status_hard: dict[str, str] | None = None
) -> dict[str, Any]:
    """Our quota as read: spec.hard, and a status only when the controller computed it (``used``)."""
    body: dict[str, Any] = {"metadata": {"name": manifests.QUOTA_NAME}, "spec": {"hard": dict(hard)}}
    if used is not None:
        body["status"] = {"hard": dict(hard if status_hard is None else status_hard), "used": used}
    return body


def used(gpu: str = "0", mem: str = "0", cores: str = "0") -> dict[str, str]:
    return {"requests.nvidia.com/gpu": gpu, "requests.nvidia.com/gpumem": mem, "requests.nvidia.com/gpucores": cores}


@dataclass(frozen=True)
class Row:
    id: str
    quotas: dict[str, dict[str, Any] | None]
    status: str
    reason: reasons.GPUShare
    fragment: str
    share: dict[str, Any] | None = field(default_factory=lambda: dict(SHARE))
    additional: tuple[str, ...] = ()
    progressing: bool = False


ROWS = [
    Row("no share", {"ns": None}, "True", R.NO_SHARE, "spec.gpu.share is not set", share=None),
    Row("not applied yet", {"ns": None}, "False", R.QUOTA_PENDING, "not applied yet", progressing=True),
    Row(
        "changed by hand",
        {"ns": quota(used(), hard={**HARD, "requests.nvidia.com/gpu": "8"})},
        "False",
        R.QUOTA_PENDING,
        "not applied yet (or changed by hand) in namespace ns",
        progressing=True,
    ),
    Row(
        "status not computed",
        {"ns": quota()},
        "False",
        R.QUOTA_PENDING,
        "the quota controller (kube-controller-manager) has not computed",
        progressing=True,
    ),
    Row(
        "status computed for the old share",
        {"ns": quota(used(), status_hard={**HARD, "requests.nvidia.com/gpu": "1"})},
        "False",
        R.QUOTA_PENDING,
        "in namespace ns the quota controller",
        progressing=True,
    ),
    Row(
        "above the share",
        {"ns": quota(used(gpu="3"))},
        "False",
        R.ABOVE_SHARE,
        "namespace ns uses 3 nvidia.com/gpu, above the share of 2. Running pods are not evicted",
    ),
    Row(
        "used up",
        {"ns": quota(used(gpu="1", mem="20k"))},
        "True",
        R.EXHAUSTED,
        "namespace ns uses all 20000 nvidia.com/gpumem of its share",
    ),
    Row(
        "enforced in two namespaces",
        {"ns": quota(used(gpu="1", mem="10k", cores="30")), "ml": quota(used(gpu="1", cores="50"))},
        "True",
        R.ENFORCED,
        "bounds each of its 2 namespaces to 2 nvidia.com/gpu, 20000 nvidia.com/gpumem, 150 nvidia.com/gpucores; "
        "in use: 2 nvidia.com/gpu, 10000 nvidia.com/gpumem, 80 nvidia.com/gpucores.",
        additional=("ml",),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_each_reason(row: Row) -> None:
    tp = platform(row.share, row.additional)
    facts = GpuShareFacts(tuple(QuotaFacts(ns, live) for ns, live in row.quotas.items()))
    decided = verdict.evaluate(tp, facts, ShareNames())
    cond = decided.condition
    assert (cond.type, cond.status, cond.reason) == (constants.GPU_SHARE_READY, row.status, row.reason), cond
    assert row.fragment in cond.message, cond.message
    assert decided.progressing is row.progressing
    assert (decided.requeue_after is not None) is row.progressing
    if row.share is None:
        assert decided.desired == [] and decided.sections == {}
    else:
        assert [q["metadata"]["namespace"] for q in decided.desired] == tp.spec.all_namespaces


def test_the_chain_order() -> None:
    assert verdict.CHECKS.names == ("quota not applied or not computed", "usage above the share", "share used up")
    # Above the share in one namespace and a quota still pending in another: pending first.
    tp = platform(additional=("ml",))
    facts = GpuShareFacts((QuotaFacts("ns", quota(used(gpu="3"))), QuotaFacts("ml", None)))
    assert verdict.evaluate(tp, facts, ShareNames()).condition.reason == R.QUOTA_PENDING
    # Above one resource and exhausted on another: above first.
    facts = GpuShareFacts((QuotaFacts("ns", quota(used(gpu="3", mem="20k"))), QuotaFacts("ml", quota(used()))))
    assert verdict.evaluate(tp, facts, ShareNames()).condition.reason == R.ABOVE_SHARE


def test_the_section_sums_the_namespaces() -> None:
    tp = platform(additional=("ml",))
    facts = GpuShareFacts(
        (QuotaFacts("ns", quota(used(gpu="1", mem="15k", cores="30"))), QuotaFacts("ml", quota(used(gpu="2"))))
    )
    section = verdict.evaluate(tp, facts, ShareNames()).sections["gpuShare"]
    assert section["resources"] == [
        {"resource": "nvidia.com/gpu", "share": 2, "used": 3, "usedRatio": 1.5},
        {"resource": "nvidia.com/gpumem", "share": 20000, "used": 15000, "usedRatio": 0.75},
        {"resource": "nvidia.com/gpucores", "share": 150, "used": 30, "usedRatio": 0.2},
    ]
    assert section["namespaces"][1] == {
        "namespace": "ml",
        "quota": manifests.QUOTA_NAME,
        "hard": {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 150},
        "used": {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 0, "nvidia.com/gpucores": 0},
    }
    # Before the controller computed anything: empty maps, zero use.
    pending = verdict.evaluate(tp, GpuShareFacts(), ShareNames()).sections["gpuShare"]
    assert pending["namespaces"][0] == {"namespace": "ns", "quota": manifests.QUOTA_NAME, "hard": {}, "used": {}}
    assert [r["used"] for r in pending["resources"]] == [0, 0, 0]


MANIFESTS = [
    pytest.param({"cards": 1}, ShareNames(), {"requests.nvidia.com/gpu": "1"}, id="cards only"),
    pytest.param(SHARE, ShareNames(), HARD, id="all three, canonical"),
    pytest.param(
        {"cards": 4000, "memoryMiB": 81920, "coresPercent": 400000},
        ShareNames(),
        {
            "requests.nvidia.com/gpu": "4k",
            "requests.nvidia.com/gpumem": "81920",
            "requests.nvidia.com/gpucores": "400k",
        },
        id="large amounts",
    ),
    pytest.param(
        {"cards": 2, "memoryMiB": 1000},
        manifests.names_from(
            ResourceNamesStatus(
                count="acme.com/vgpu",
                memory="acme.com/vmem",
                memory_percentage="x",
                cores="acme.com/vcore",
                priority="y",
            )
        ),
        {"requests.acme.com/vgpu": "2", "requests.acme.com/vmem": "1k"},
        id="the cluster's names",
    ),
]


@pytest.mark.parametrize(("share", "names", "hard"), MANIFESTS)
def test_the_quotas(share: dict[str, Any], names: ShareNames, hard: dict[str, str]) -> None:
    rendered = manifests.render(platform(share, ("ml",)), names)
    assert rendered == [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "tenant-platform-gpu-share", "namespace": ns},
            "spec": {"hard": hard},
        }
        for ns in ("ns", "ml")
    ]


def test_no_share_renders_nothing_and_defaults_are_hamis() -> None:
    assert manifests.render(platform(None)) == []
    assert manifests.names_from(None) == ShareNames("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", 2),
        ("20k", 20000),
        ("1500m", 2),
        ("1Ki", 1024),
        ("1e3", 1000),
        ("0", 0),
        ("", None),
        ("abc", None),
        ("1x", None),
        ("Inf", None),
        (None, None),
    ],
)
def test_quantity(text: Any, value: int | None) -> None:
    assert verdict.quantity(text) == value
    if value is not None and text and not text.endswith(("m", "i", "e3")):
        assert verdict.quantity(manifests.canonical(value)) == value
