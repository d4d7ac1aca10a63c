"""HAMi parsers (hami/register, allocations, locks, config), capacity and fit checks: pure, table-driven."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from tests.hami_support import Pod, no_owner

from tenant_platform.concerns.gpu import capacity, fit
from tenant_platform.concerns.gpu.capacity import CardState
from tenant_platform.concerns.gpu.fit import GpuRequest
from tenant_platform.formats.hami import allocations, config, locks, names, register
from tenant_platform.formats.hami.allocations import CardUse, ContainerDevice
from tenant_platform.formats.hami.names import HamiParseError
from tenant_platform.formats.hami.register import Card

NOW = datetime(2025, 6, 1, 8, 20, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)

V24 = (
    "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
    "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
)
V25 = "GPU-fc28df76-54d2-c387-e52e-5f0a9495968c,10,49140,100,NVIDIA-NVIDIA L40S,0,true,0,hami-core:"
V210 = (
    '[{"id":"GPU-aaa","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB","mode":"hami-core",'
    '"health":true},{"id":"GPU-bbb","index":1,"count":10,"devmem":81920,"devcore":100,"type":"NVIDIA A100-SXM4-80GB",'
    '"numa":1,"mode":"hami-core"}]'
)
V28 = (
    '[{"id":"GPU-ccc","count":4,"devmem":24576,"devcore":100,"type":"NVIDIA L4","mode":"hami-core",'
    '"health":true,"devicepairscore":{}}]'
)


def card(
    id_: str = "GPU-aaa",
    *,
    count: int = 10,
    devmem: int = 81920,
    devcore: int = 100,
    model: str = "NVIDIA A100",
    healthy: bool = True,
    index: int = 0,
    mode: str = "hami-core",
) -> Card:
    return Card(id_, index, count, devmem, devcore, model, 0, healthy, mode)


def register_json(*cards: dict[str, object]) -> str:
    return json.dumps(list(cards))


# -- register --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fmt", "expected"),
    [
        pytest.param(
            V24,
            "csv",
            [
                card(
                    "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec",
                    devmem=32768,
                    model="NVIDIA-Tesla V100-PCIE-32GB",
                    mode="",
                ),
                card(
                    "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448",
                    devmem=32768,
                    model="NVIDIA-Tesla V100-PCIE-32GB",
                    index=1,
                    mode="",
                ),
            ],
            id="v2.4 csv, healthy",
        ),
        pytest.param(
            V25,
            "csv-index-mode",
            [card("GPU-fc28df76-54d2-c387-e52e-5f0a9495968c", devmem=49140, model="NVIDIA-NVIDIA L40S")],
            id="v2.5 csv with index and mode",
        ),
        pytest.param(
            "GPU-x,10,16384,100,NVIDIA-T4,0,false:",
            "csv",
            [Card("GPU-x", 0, 10, 16384, 100, "NVIDIA-T4", 0, False, "")],
            id="v2.4 csv, unhealthy",
        ),
        pytest.param(
            "GPU-x,10,16384,100,NVIDIA-T4,1,0,3,mig:",
            "csv-index-mode",
            [Card("GPU-x", 3, 10, 16384, 100, "NVIDIA-T4", 1, False, "mig")],
            id="v2.7 csv, Go bool 0 is unhealthy",
        ),
        pytest.param(
            V210,
            "json",
            [
                Card("GPU-aaa", 0, 10, 81920, 100, "NVIDIA A100-SXM4-80GB", 0, True, "hami-core"),
                Card("GPU-bbb", 1, 10, 81920, 100, "NVIDIA A100-SXM4-80GB", 1, False, "hami-core"),
            ],
            id="v2.10 json, missing health is unhealthy",
        ),
        pytest.param(
            V28,
            "json",
            [Card("GPU-ccc", 0, 4, 24576, 100, "NVIDIA L4", 0, True, "hami-core")],
            id="v2.8 json with devicepairscore",
        ),
        pytest.param(
            '[{"id":"GPU-m","devmem":40960,"devcore":100,"type":"NVIDIA A100","mode":"mig","health":true,'
            '"migProfiles":[{"name":"1g.10gb"}]}]',
            "json",
            [Card("GPU-m", 0, 0, 40960, 100, "NVIDIA A100", 0, True, "mig")],
            id="json mig card, omitted count is 0",
        ),
        pytest.param("", "empty", [], id="empty value"),
        pytest.param("[]", "json", [], id="empty json array"),
    ],
)
def test_parse_register(value: str, fmt: str, expected: list[Card]) -> None:
    parsed = register.parse_register(value)
    assert parsed.format == fmt
    assert list(parsed.cards) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("GPU-x,10,16384", "has 3 fields", id="csv too few fields"),
        pytest.param("GPU-x,10,16384,100,T4,0,true,0:", "has 8 fields", id="csv 8 fields"),
        pytest.param("GPU-x,ten,16384,100,T4,0,true:", "count 'ten'", id="csv non-numeric count"),
        pytest.param("GPU-x,10,16384,100,T4,0,yes:", "health 'yes'", id="csv bad health"),
        pytest.param(",10,16384,100,T4,0,true:", "no id", id="csv no id"),
        pytest.param("GPU-x,10,1,100,T4,0,true:GPU-y,10,1,100,T4,0,true,1,hami-core:", "mix", id="csv mixed versions"),
        pytest.param("GPU-x,10,1,100,T4,0,true:GPU-x,10,1,100,T4,0,true:", "listed twice", id="duplicate card"),
        pytest.param('[{"id":"GPU-x"', "invalid JSON", id="truncated json"),
        pytest.param('{"id":"GPU-x"}', "not an array", id="json object"),
        pytest.param('["GPU-x"]', "not an object", id="json string entry"),
        pytest.param('[{"count":10}]', "no id", id="json no id"),
        pytest.param('[{"id":"GPU-x","health":"true"}]', "health is not a boolean", id="json string health"),
        pytest.param('[{"id":"GPU-x","devmem":-1}]', "devmem", id="json negative memory"),
        pytest.param('[{"id":"GPU-x","devmem":"80G"}]', "devmem", id="json string memory"),
        pytest.param('[{"id":"GPU-x","count":true}]', "count", id="json bool count"),
        pytest.param('[{"id":"GPU-x","type":7}]', "must be strings", id="json numeric type"),
    ],
)
def test_parse_register_malformed(value: str, reason: str) -> None:
    with pytest.raises(HamiParseError, match=reason):
        register.parse_register(value)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({"hami.io/node-nvidia-register": "a"}, ("hami.io/node-nvidia-register", "a"), id="current"),
        pytest.param({"4pd.io/node-nvidia-register": "b"}, ("4pd.io/node-nvidia-register", "b"), id="legacy 4pd.io"),
        pytest.param(
            {"4pd.io/node-nvidia-register": "b", "hami.io/node-nvidia-register": "a"},
            ("hami.io/node-nvidia-register", "a"),
            id="hami.io wins",
        ),
        pytest.param({"other": "x"}, None, id="absent"),
    ],
)
def test_hami_annotation_prefixes(annotations: dict[str, str], expected: tuple[str, str] | None) -> None:
    assert names.hami_annotation(annotations, names.REGISTER) == expected


def test_legacy_prefix_node_is_parsed_like_current() -> None:
    legacy = capacity.node_capacity(
        "n",
        register=names.hami_annotation({"4pd.io/node-nvidia-register": V24}, names.REGISTER)[1],  # type: ignore[index]
        pods=[],
        now=NOW,
        lock_timeout=FIVE_MIN,
        owner=no_owner,
    )
    assert len(legacy.cards) == 2
    assert legacy.register_format == "csv"


# -- pod annotation ------------------------------------------------------------------------------


def dev(uuid: str, mem: int, cores: int) -> ContainerDevice:
    return ContainerDevice(uuid, "NVIDIA", mem, cores)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;",
            ((dev("GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448", 3000, 30),),),
            id="one card",
        ),
        pytest.param(
            "GPU-aaa,NVIDIA,3000,0:;GPU-aaa,NVIDIA,5000,0:;",
            ((dev("GPU-aaa", 3000, 0),), (dev("GPU-aaa", 5000, 0),)),
            id="two containers",
        ),
        pytest.param(
            "GPU-aaa,NVIDIA,81920,100:GPU-bbb,NVIDIA,81920,100:;",
            ((dev("GPU-aaa", 81920, 100), dev("GPU-bbb", 81920, 100)),),
            id="two cards",
        ),
        pytest.param(";GPU-aaa,NVIDIA,2048,50:;", ((), (dev("GPU-aaa", 2048, 50),)), id="init container without GPU"),
        pytest.param(";", ((),), id="to-allocate when done"),
        pytest.param("", (), id="empty"),
        pytest.param(
            "GPU-aaa[1g.10gb-0],NVIDIA,9728,0:;",
            ((dev("GPU-aaa", 9728, 0),),),
            id="mig suffix stripped",
        ),
        pytest.param("GPU-aaa,NVIDIA,3000,30:", ((dev("GPU-aaa", 3000, 30),),), id="missing final semicolon"),
    ],
)
def test_parse_pod_devices(value: str, expected: tuple[tuple[ContainerDevice, ...], ...]) -> None:
    assert allocations.parse_pod_devices(value) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("GPU-aaa,NVIDIA,3000:;", "4 fields", id="three fields"),
        pytest.param("GPU-aaa,NVIDIA,3000,30,1:;", "4 fields", id="five fields"),
        pytest.param("GPU-aaa,NVIDIA,3G,30:;", "memory '3G' is not a non-negative integer", id="memory with unit"),
        pytest.param("GPU-aaa,NVIDIA,3000,-5:;", "cores '-5' is not a non-negative integer", id="negative cores"),
        pytest.param(",NVIDIA,3000,30:;", "no UUID", id="no uuid"),
    ],
)
def test_parse_pod_devices_malformed(value: str, reason: str) -> None:
    with pytest.raises(HamiParseError, match=reason):
        allocations.parse_pod_devices(value)


@pytest.mark.parametrize(
    ("uuid", "expected"),
    [
        ("GPU-aaa[1g.10gb-0]", "GPU-aaa"),
        ("GPU-aaa[3]", "GPU-aaa"),
        ("GPU-aaa", "GPU-aaa"),
        ("MIG-abc", "MIG-abc"),
    ],
)
def test_strip_mig_suffix(uuid: str, expected: str) -> None:
    assert allocations.strip_mig_suffix(uuid) == expected


# -- per-pod usage with the init-container rule ----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "init", "apps", "exit_codes", "expected"),
    [
        pytest.param(
            "GPU-aaa,NVIDIA,3000,10:;GPU-aaa,NVIDIA,5000,20:;",
            0,
            2,
            (),
            {"GPU-aaa": CardUse(8000, 30, 2)},
            id="app containers add up",
        ),
        pytest.param(
            "GPU-aaa,NVIDIA,8000,50:;GPU-aaa,NVIDIA,2000,30:;",
            1,
            1,
            (None,),
            {"GPU-aaa": CardUse(8000, 50, 1)},
            id="init peak above app sum",
        ),
        pytest.param(
            "GPU-aaa,NVIDIA,1000,10:;GPU-aaa,NVIDIA,2000,30:;GPU-aaa,NVIDIA,2000,30:;",
            1,
            2,
            (None,),
            {"GPU-aaa": CardUse(4000, 60, 2)},
            id="app sum above init peak",
        ),
        pytest.param(
            "GPU-aaa,NVIDIA,6000,10:;GPU-aaa,NVIDIA,7000,20:;GPU-aaa,NVIDIA,1000,5:;",
            2,
            1,
            (0, None),
            {"GPU-aaa": CardUse(7000, 20, 1)},
            id="peak over several init containers",
        ),
        pytest.param(
            "GPU-bbb,NVIDIA,4000,20:;GPU-aaa,NVIDIA,2000,30:;",
            1,
            1,
            (None,),
            {"GPU-aaa": CardUse(2000, 30, 1), "GPU-bbb": CardUse(4000, 20, 1)},
            id="card used by init only takes one slot",
        ),
        pytest.param(
            "GPU-bbb,NVIDIA,4000,20:;GPU-aaa,NVIDIA,2000,30:;",
            1,
            1,
            (0,),
            {"GPU-aaa": CardUse(2000, 30, 1)},
            id="init exited 0: app only",
        ),
        pytest.param(
            "GPU-bbb,NVIDIA,4000,20:;GPU-aaa,NVIDIA,2000,30:;",
            1,
            1,
            (1,),
            {"GPU-aaa": CardUse(2000, 30, 1), "GPU-bbb": CardUse(4000, 20, 1)},
            id="init exited non-zero: still counted",
        ),
        pytest.param(
            ";GPU-aaa,NVIDIA,2048,50:;",
            1,
            1,
            (None,),
            {"GPU-aaa": CardUse(2048, 50, 1)},
            id="init container without GPU",
        ),
        pytest.param(
            "GPU-aaa,NVIDIA,2048,50:;",
            1,
            1,
            (None,),
            {"GPU-aaa": CardUse(2048, 50, 1)},
            id="before v2.9: app segments only",
        ),
    ],
)
def test_pod_card_usage(
    value: str, init: int, apps: int, exit_codes: tuple[int | None, ...], expected: dict[str, CardUse]
) -> None:
    usage = allocations.pod_card_usage(
        allocations.parse_pod_devices(value), init_containers=init, app_containers=apps, init_exit_codes=exit_codes
    )
    assert usage == expected


# -- node lock -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            "2025-06-01T08:15:30Z,default,gpu-pod",
            (datetime(2025, 6, 1, 8, 15, 30, tzinfo=UTC), "default", "gpu-pod"),
            id="utc",
        ),
        pytest.param(
            "2025-06-01T16:15:30+08:00,ml,train-0",
            (datetime(2025, 6, 1, 16, 15, 30, tzinfo=timezone(timedelta(hours=8))), "ml", "train-0"),
            id="offset",
        ),
        pytest.param("2025-06-01T08:15:30Z", (datetime(2025, 6, 1, 8, 15, 30, tzinfo=UTC), "", ""), id="legacy"),
    ],
)
def test_parse_lock(value: str, expected: tuple[datetime, str, str]) -> None:
    assert locks.parse_lock(value) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("2025-06-01T08:15:30Z,default", "2 comma-separated parts", id="two parts"),
        pytest.param("yesterday,default,pod", "not RFC 3339", id="bad time"),
        pytest.param("2025-06-01T08:15:30,default,pod", "no time zone", id="no zone"),
        pytest.param("2025-06-01T08:15:30Z,,", "names no pod", id="empty owner"),
    ],
)
def test_parse_lock_malformed(value: str, reason: str) -> None:
    with pytest.raises(HamiParseError, match=reason):
        locks.parse_lock(value)


OWNER_ALLOCATING = Pod(namespace="default", name="gpu-pod")


@pytest.mark.parametrize(
    ("value", "owner", "state"),
    [
        pytest.param("2025-06-01T08:19:00Z,default,gpu-pod", OWNER_ALLOCATING, "active", id="fresh, pod binding"),
        pytest.param("2025-06-01T08:14:59Z,default,gpu-pod", OWNER_ALLOCATING, "expired", id="older than timeout"),
        pytest.param("2025-06-01T08:15:00Z,default,gpu-pod", OWNER_ALLOCATING, "active", id="exactly the timeout"),
        pytest.param("2025-06-01T08:19:00Z,default,gpu-pod", None, "dangling", id="pod gone"),
        pytest.param(
            "2025-06-01T08:19:00Z,default,gpu-pod",
            Pod(namespace="default", name="gpu-pod", phase="Failed"),
            "dangling",
            id="pod failed",
        ),
        pytest.param(
            "2025-06-01T08:19:00Z,default,gpu-pod",
            Pod(namespace="default", name="gpu-pod", bind_phase="success"),
            "leaked",
            id="bind finished",
        ),
        pytest.param(
            "2025-06-01T08:19:00Z,default,gpu-pod",
            Pod(namespace="default", name="gpu-pod", phase="Running", bind_phase=""),
            "leaked",
            id="pod running",
        ),
        pytest.param("2025-06-01T08:19:00Z", None, "active", id="legacy, fresh"),
        pytest.param("2025-06-01T07:00:00Z", None, "expired", id="legacy, old"),
        pytest.param("2025-06-01T16:19:00+08:00,default,gpu-pod", OWNER_ALLOCATING, "active", id="offset clock"),
        pytest.param("garbage", None, "malformed", id="malformed"),
    ],
)
def test_lock_state(value: str, owner: Pod | None, state: str) -> None:
    def lookup(namespace: str, name: str) -> Pod | None:
        return owner if owner is not None and (owner.namespace, owner.name) == (namespace, name) else None

    lock = locks.lock_state(value, now=NOW, timeout=FIVE_MIN, owner=lookup)
    assert lock.state == state
    assert lock.stale is (state != "active")


def test_lock_status_and_expiry() -> None:
    lock = locks.lock_state(
        "2025-06-01T08:19:00Z,default,gpu-pod", now=NOW, timeout=FIVE_MIN, owner=lambda ns, n: OWNER_ALLOCATING
    )
    assert lock.to_status().dump() == {
        "held": True,
        "since": "2025-06-01T08:19:00Z",
        "pod": "default/gpu-pod",
        "state": "active",
        "stale": False,
    }
    assert locks.lock_expires_in(lock, now=NOW, timeout=FIVE_MIN) == 240.0
    expired = locks.lock_state("2025-06-01T08:00:00Z,default,gpu-pod", now=NOW, timeout=FIVE_MIN, owner=no_owner)
    assert expired.to_status().dump()["reason"] == "older than 5m"
    assert locks.lock_expires_in(expired, now=NOW, timeout=FIVE_MIN) is None
    malformed = locks.lock_state("a,b", now=NOW, timeout=FIVE_MIN, owner=no_owner)
    assert malformed.to_status().dump() == {
        "held": True,
        "pod": "",
        "state": "malformed",
        "stale": True,
        "reason": "lock value has 2 comma-separated parts; expected 1 or 3",
    }


# -- capacity --------------------------------------------------------------------------------------

ONE_CARD = register_json(
    {"id": "GPU-lab", "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "health": True}
)


def lab_node(*pods: Pod) -> capacity.NodeCapacity:
    return capacity.node_capacity("lab", register=ONE_CARD, pods=pods, now=NOW, lock_timeout=FIVE_MIN, owner=no_owner)


def test_lab_case_three_pods_at_30_percent() -> None:
    pods = [Pod(name=f"p{i}", allocated="GPU-lab,NVIDIA,2048,30:;") for i in range(3)]
    node = lab_node(*pods)
    status = node.to_status(labelled=True).dump()
    assert status["coresPercent"] == {"total": 100, "used": 90, "free": 10}
    assert status["memoryMiB"] == {"total": 24576, "used": 6144, "free": 18432}
    assert status["slots"] == {"total": 10, "used": 3}
    fourth = fit.node_fit(node, GpuRequest(mem_mib=2048, cores=30))
    assert not fourth.fits
    assert fourth.reasons == {"GPU-lab": "needs 30% cores, 10% free"}
    assert fit.node_fit(node, GpuRequest(mem_mib=2048, cores=10)).fits


def test_node_capacity_exact_status() -> None:
    register = register_json(
        {"id": "GPU-a", "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA A100", "health": True},
        {"id": "GPU-b", "index": 1, "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA A100"},
        {
            "id": "GPU-c",
            "index": 2,
            "count": 10,
            "devmem": 81920,
            "devcore": 100,
            "type": "NVIDIA A100",
            "health": True,
        },
        {"id": "GPU-d", "index": 3, "count": 5, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "health": True},
    )
    pods = [
        Pod(name="a1", allocated="GPU-a,NVIDIA,10000,30:;"),
        Pod(name="a2", allocated="GPU-a[1g.10gb-0],NVIDIA,5000,20:GPU-d,NVIDIA,1000,0:;"),
        Pod(name="on-bad-card", allocated="GPU-b,NVIDIA,9000,10:;"),  # unhealthy card: not in totals
        Pod(name="elsewhere", allocated="GPU-zzz,NVIDIA,9000,10:;"),  # not this node's card
        Pod(name="done", phase="Succeeded", allocated="GPU-a,NVIDIA,9000,10:;"),
        Pod(name="broken", allocated="GPU-a,NVIDIA,lots,10:;"),
        Pod(name="cordoned", allocated="GPU-c,NVIDIA,1000,10:;"),
    ]
    node = capacity.node_capacity(
        "n1",
        register=register,
        pods=pods,
        now=NOW,
        lock_timeout=FIVE_MIN,
        owner=no_owner,
        cordon="GPU-c",
    )
    assert node.to_status(labelled=True).dump() == {
        "name": "n1",
        "labelled": True,
        "registered": True,
        "cards": 4,
        "models": {"NVIDIA A100": 3, "NVIDIA L4": 1},
        "slots": {"total": 15, "used": 3},
        "memoryMiB": {"total": 106496, "used": 16000, "free": 90496},
        "coresPercent": {"total": 200, "used": 50, "free": 150},
        "unhealthyCards": 1,
        "pods": 5,
        "lock": {"held": False},
        "cordonedCards": 1,
        "ignoredPods": ["ml/broken: container 0: memory 'lots' is not a non-negative integer"],
        "ignoredPodCount": 1,
    }
    assert node.main_model == "NVIDIA A100"


@pytest.mark.parametrize(
    ("register", "expected"),
    [
        pytest.param(None, {"registered": False, "cards": 0}, id="no annotation"),
        pytest.param("[", {"registered": True, "cards": 0, "unparseable": "invalid JSON"}, id="unparseable"),
        pytest.param("[]", {"registered": True, "cards": 0}, id="empty list"),
    ],
)
def test_node_capacity_without_cards(register: str | None, expected: dict[str, object]) -> None:
    node = capacity.node_capacity(
        "n", register=register, pods=[Pod(allocated="x")], now=NOW, lock_timeout=FIVE_MIN, owner=no_owner
    )
    status = node.to_status(labelled=False).dump()
    for key, value in expected.items():
        if key == "unparseable":
            assert str(status[key]).startswith(str(value))
        else:
            assert status[key] == value
    assert status["memoryMiB"] == {"total": 0, "used": 0, "free": 0}


def test_totals_models_and_summary() -> None:
    a = lab_node(Pod(allocated="GPU-lab,NVIDIA,4096,50:;"))
    b = capacity.node_capacity(
        "b", register=V210, pods=[], now=NOW, lock_timeout=FIVE_MIN, owner=no_owner, lock="2025-06-01T08:00:00Z"
    )
    total = capacity.total_status([a, b])
    assert total.dump() == {
        "nodes": 2,
        "cards": 3,
        "models": {"NVIDIA A100-SXM4-80GB": 2, "NVIDIA L4": 1},
        "slots": {"total": 20, "used": 1},
        "memoryMiB": {"total": 106496, "used": 4096, "free": 102400},
        "coresPercent": {"total": 200, "used": 50, "free": 150},
        "unhealthyCards": 1,
    }
    assert capacity.summary_line(total) == "3 cards / 102400 MiB free"
    assert capacity.model_rollup([a, b]) == {
        "NVIDIA A100-SXM4-80GB": {
            "cards": 2,
            "memory_total_mib": 81920,
            "memory_free_mib": 81920,
            "cores_free_percent": 100,
        },
        "NVIDIA L4": {"cards": 1, "memory_total_mib": 24576, "memory_free_mib": 20480, "cores_free_percent": 50},
    }
    assert b.lock is not None and b.lock.state == "expired"


# -- fit -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "request_", "reason"),
    [
        pytest.param(CardState(card()), GpuRequest(mem_mib=1000, cores=30), None, id="empty card"),
        pytest.param(CardState(card(healthy=False)), GpuRequest(mem_mib=1), "unhealthy", id="unhealthy"),
        pytest.param(CardState(card(), cordoned=True), GpuRequest(mem_mib=1), "cordoned", id="cordoned"),
        pytest.param(
            CardState(card(count=2), used_slots=2, used_mem=2, used_cores=2),
            GpuRequest(mem_mib=1),
            "all 2 sharing slots are in use",
            id="slots full",
        ),
        pytest.param(
            CardState(card(), used_mem=80000, used_slots=1),
            GpuRequest(mem_mib=4000),
            "needs 4000 MiB, 1920 MiB free",
            id="memory",
        ),
        pytest.param(
            CardState(card(), used_mem=1, used_slots=1), GpuRequest(), "needs 81920 MiB", id="whole card by default"
        ),
        pytest.param(CardState(card()), GpuRequest(mem_percent=50), None, id="memory percentage fits"),
        pytest.param(
            CardState(card(), used_mem=50000, used_slots=1),
            GpuRequest(mem_percent=50),
            "needs 40960 MiB",
            id="memory percentage too big",
        ),
        pytest.param(
            CardState(card(), used_mem=1000, used_cores=10, used_slots=1),
            GpuRequest(mem_mib=1000, cores=100),
            "exclusive",
            id="exclusive needs unused card",
        ),
        pytest.param(
            CardState(card(), used_mem=1000, used_cores=100, used_slots=1),
            GpuRequest(mem_mib=1000, cores=0),
            "no cores are free",
            id="zero cores on full card",
        ),
        pytest.param(CardState(card()), GpuRequest(mem_mib=1000, cores=120), "out of range", id="cores above 100"),
    ],
)
def test_card_fit(state: CardState, request_: GpuRequest, reason: str | None) -> None:
    why = fit.card_fit(state, request_)
    if reason is None:
        assert why is None
    else:
        assert why is not None and reason in why


def test_node_fit_needs_distinct_cards() -> None:
    node = capacity.node_capacity("b", register=V210, pods=[], now=NOW, lock_timeout=FIVE_MIN, owner=no_owner)
    assert fit.node_fit(node, GpuRequest(cards=1, mem_mib=1000)).cards == ("GPU-aaa",)
    assert not fit.node_fit(node, GpuRequest(cards=2, mem_mib=1000)).fits


@pytest.mark.parametrize(
    ("limits", "names", "expected"),
    [
        pytest.param({"cpu": "1"}, names.DEFAULT_NAMES, None, id="no gpu"),
        pytest.param(
            {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"},
            names.DEFAULT_NAMES,
            GpuRequest(cards=2, mem_mib=3000, cores=30),
            id="all three",
        ),
        pytest.param(
            {"nvidia.com/gpucores": "30"}, names.DEFAULT_NAMES, GpuRequest(cards=1, cores=30), id="cores only: one card"
        ),
        pytest.param(
            {"nvidia.com/gpumem": "1000", "nvidia.com/gpumem-percentage": "50"},
            names.DEFAULT_NAMES,
            GpuRequest(mem_mib=1000),
            id="gpumem wins over percentage",
        ),
        pytest.param(
            {"example.com/vgpu": "1", "example.com/vmem": "2000"},
            names.ResourceNames(count="example.com/vgpu", memory="example.com/vmem"),
            GpuRequest(cards=1, mem_mib=2000),
            id="names from the ConfigMap",
        ),
    ],
)
def test_request_from_limits(limits: dict[str, str], names: names.ResourceNames, expected: GpuRequest | None) -> None:
    assert fit.request_from_limits(limits, names) == expected


# -- resource names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "nvidia:\n  resourceCountName: example.com/vgpu\n  resourceMemoryName: example.com/vmem\n"
            "  resourceMemoryPercentageName: example.com/vmem-pct\n  resourceCoreName: example.com/vcores\n"
            "  resourcePriorityName: example.com/prio\n  defaultMemory: 0\n",
            names.ResourceNames(
                "example.com/vgpu", "example.com/vmem", "example.com/vmem-pct", "example.com/vcores", "example.com/prio"
            ),
            id="all names",
        ),
        pytest.param(
            "nvidia:\n  resourceCoreName: example.com/vcores\n",
            names.ResourceNames(cores="example.com/vcores"),
            id="partial",
        ),
        pytest.param("", names.ResourceNames(), id="empty"),
        pytest.param("mlu:\n  resourceCountName: x/y\n", names.ResourceNames(), id="no nvidia section"),
    ],
)
def test_resource_names_from_config(text: str, expected: names.ResourceNames) -> None:
    assert config.resource_names_from_config(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("[1, 2]", id="list"),
        pytest.param("nvidia: [1]", id="nvidia not a mapping"),
        pytest.param("nvidia:\n  resourceCountName: 7\n", id="number name"),
        pytest.param("nvidia: {resourceCountName: ''}", id="empty name"),
        pytest.param("nvidia: {a: [}", id="invalid yaml"),
    ],
)
def test_resource_names_from_config_malformed(text: str) -> None:
    with pytest.raises(HamiParseError):
        config.resource_names_from_config(text)


# -- detection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "resources", "count", "expected"),
    [
        pytest.param({}, {}, {"nvidia.com/gpu": "80"}, "nvidia.com/gpu", True, id="capacity"),
        pytest.param({}, {}, {"nvidia.com/gpu": "0"}, "nvidia.com/gpu", False, id="zero capacity"),
        pytest.param({"nvidia.com/gpu.present": "true"}, {}, {}, "nvidia.com/gpu", True, id="nfd label"),
        pytest.param(
            {"feature.node.kubernetes.io/pci-10de.present": "true"}, {}, {}, "nvidia.com/gpu", True, id="pci label"
        ),
        pytest.param({"nvidia.com/gpu.present": "false"}, {}, {}, "nvidia.com/gpu", False, id="label false"),
        pytest.param({}, {"hami.io/node-nvidia-register": "[]"}, {}, "nvidia.com/gpu", True, id="register"),
        pytest.param({}, {"4pd.io/node-nvidia-register": ""}, {}, "nvidia.com/gpu", True, id="legacy register"),
        pytest.param({}, {}, {"example.com/vgpu": "8"}, "example.com/vgpu", True, id="renamed resource"),
        pytest.param({"gpu": "on"}, {}, {"example.com/other": "8"}, "nvidia.com/gpu", False, id="cpu node"),
    ],
)
def test_is_gpu_node(
    labels: dict[str, str], annotations: dict[str, str], resources: dict[str, str], count: str, expected: bool
) -> None:
    found = capacity.is_gpu_node(labels=labels, annotations=annotations, capacity=resources, count_resource=count)
    assert found is expected


@pytest.mark.parametrize(
    ("key", "forbidden"),
    [
        ("gpu", False),
        ("example.com/gpu", False),
        ("nvidia.com/gpu.present", True),
        ("feature.node.kubernetes.io/pci-10de.present", True),
        ("kubernetes.io/hostname", True),
        ("node-role.kubernetes.io/gpu", True),
        ("tenancy.dev/x", True),
    ],
)
def test_forbidden_label(key: str, forbidden: bool) -> None:
    assert names.forbidden_label(key) is forbidden


@pytest.mark.parametrize(("value", "expected"), [("8", 8), ("2k", 2000), ("1Ki", 1024), ("", 0), (None, 0), ("x", 0)])
def test_quantity_int(value: str | None, expected: int) -> None:
    assert capacity.quantity_int(value) == expected
