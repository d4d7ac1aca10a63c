"""The GPU pass's caches give the same answers as computing afresh (pure, no cluster).

- concerns/gpu/capacity.py ``CapacityCache``: a node's capacity is reused only while its register and
  cordon values and its pods are equal; a changed value is parsed again; the lock is judged on
  every call; ``retain`` forgets nodes that are gone; the byte bound holds.
- ``NodeCapacity.model_sums`` (``model_rollup``) and concerns/gpu/gpustatus.py ``EntryMemo`` (listed
  node entries) equal what they replace.
- concerns/gpu/facts.py ``DetectionCache``: a node's detection is reused only for the same frozen node
  object and equal resource names and selectors.
- observe/cluster.py ``view()``: the same view until something changes; per-node pod tuples
  follow every pod change.
- concerns/gpu/verdict.py ``evaluate``: cold and warm caches give identical verdicts on the GPUReady table.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.hami_support import Pod, no_owner
from tests.unit.test_gpu_snapshot import node as node_body
from tests.unit.test_gpu_snapshot import pod as pod_body
from tests.unit.test_gpu_verdict import EVALUATE_ROWS, Node, demo, facts, gpu_node

from tenant_platform.concerns.gpu import capacity, health
from tenant_platform.concerns.gpu.capacity import CapacityCache, NodeCapacity
from tenant_platform.concerns.gpu.facts import DETECTIONS, DetectionCache, detect
from tenant_platform.concerns.gpu.gpustatus import ENTRIES, NodeExtras, listed
from tenant_platform.concerns.gpu.verdict import evaluate
from tenant_platform.formats.hami import allocations, register
from tenant_platform.formats.hami.names import DEFAULT_NAMES, ResourceNames
from tenant_platform.observe import cluster

NOW = datetime(2025, 6, 1, 8, 20, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)


def card(uuid: str, *, mem: int = 24576, healthy: bool = True, model: str = "NVIDIA L4") -> dict[str, Any]:
    return {"id": uuid, "count": 10, "devmem": mem, "devcore": 100, "type": model, "health": healthy}


def reg(*cards: dict[str, Any]) -> str:
    return json.dumps(list(cards))


TWO = reg(card("GPU-a"), card("GPU-b", healthy=False, model="NVIDIA A100"))
ONE = reg(card("GPU-a", mem=8000))
CSV = "GPU-a,10,24576,100,NVIDIA-T4,0,true:GPU-b,10,24576,100,NVIDIA-T4,0,false:"

# (id, register, cordon, lock, pods)
NODES: list[tuple[str, str | None, str | None, str | None, tuple[Pod, ...]]] = [
    ("no register", None, None, None, ()),
    ("empty register", "[]", None, None, (Pod(allocated="GPU-a,NVIDIA,10,1:;"),)),
    ("unparseable", "[", None, None, ()),
    ("oversized", "\x00oversized:99999", None, None, ()),
    ("two cards", TWO, None, None, (Pod(name="a", allocated="GPU-a,NVIDIA,4096,30:;"),)),
    ("csv", CSV, None, None, (Pod(name="a", allocated="GPU-a,NVIDIA,4096,30:;"),)),
    ("cordoned", TWO, "GPU-a", None, (Pod(name="a", allocated="GPU-a,NVIDIA,100,10:;"),)),
    (
        "malformed and ended pods",
        TWO,
        None,
        None,
        (
            Pod(name="bad", allocated="GPU-a,NVIDIA,lots,10:;"),
            Pod(name="done", phase="Succeeded", allocated="GPU-a,NVIDIA,9000,10:;"),
            Pod(name="elsewhere", allocated="GPU-z,NVIDIA,9000,10:;"),
        ),
    ),
    ("active lock", TWO, None, "2025-06-01T08:19:00Z", ()),
    ("dangling lock", TWO, None, "2025-06-01T08:19:00Z,ml,gone", ()),
    ("expired lock", ONE, None, "2025-06-01T07:00:00Z,ml,p", ()),
    ("malformed lock", ONE, None, "x,y", ()),
]


def compute(
    name: str, register: str | None, cordon: str | None, lock: str | None, pods: tuple[Pod, ...], **kw: Any
) -> NodeCapacity:
    return capacity.node_capacity(
        name,
        register=register,
        cordon=cordon,
        lock=lock,
        pods=pods,
        now=kw.pop("now", NOW),
        lock_timeout=FIVE_MIN,
        owner=no_owner,
        **kw,
    )


def uncached(*args: Any, **kw: Any) -> NodeCapacity:
    """The path without a cache: a cache that can hold nothing."""
    return compute(*args, cache=CapacityCache(max_bytes=0), **kw)


def seen(node: NodeCapacity) -> tuple[Any, ...]:
    """Everything a NodeCapacity says, derived values included."""
    return (
        node,
        node.to_status(labelled=True).dump(),
        node.totals(),
        node.fit.model_dump() if node.cards else None,
        node.models,
        node.main_model,
        node.unhealthy,
        node.cordoned,
        node.schedulable,
    )


@pytest.mark.parametrize("row", [pytest.param(row[1:], id=row[0]) for row in NODES])
def test_cached_capacity_equals_uncached(row: tuple[Any, ...]) -> None:
    cache = CapacityCache()
    first = compute("n", *row, cache=cache)
    second = compute("n", *row, cache=cache)
    assert seen(first) == seen(second) == seen(uncached("n", *row))
    if row[0] is not None:
        assert (cache.misses, cache.hits) == (1, 1)
        if row[2] is None:
            assert second is first  # the very object: its derived values are computed once


def test_every_row_in_turn_on_one_node_name() -> None:
    """One node name whose annotations and pods change at every step is recomputed every time."""
    cache = CapacityCache()
    for _ in range(2):
        for _, *row in NODES:
            assert seen(compute("n", *row, cache=cache)) == seen(uncached("n", *row))


def test_a_changed_register_is_parsed_again() -> None:
    cache = CapacityCache()
    pods = (Pod(allocated="GPU-a,NVIDIA,1000,10:;"),)
    two = compute("n", TWO, None, None, pods, cache=cache)
    assert len(two.cards) == 2
    one = compute("n", ONE, None, None, pods, cache=cache)
    assert [c.card.devmem for c in one.cards] == [8000]
    assert one.totals().mem_used == 1000
    assert compute("n", "[", None, None, pods, cache=cache).unparseable is not None
    assert seen(compute("n", TWO, None, None, pods, cache=cache)) == seen(two)
    assert cache.misses == 4


def test_changed_cordon_or_pods_are_counted_again() -> None:
    cache = CapacityCache()
    pod = Pod(name="a", allocated="GPU-a,NVIDIA,1000,10:;")
    base = compute("n", TWO, None, None, (pod,), cache=cache)
    assert base.totals().mem_used == 1000
    assert compute("n", TWO, "GPU-a", None, (pod,), cache=cache).totals().mem_total == 0
    more = compute("n", TWO, None, None, (pod, dataclasses.replace(pod, name="b")), cache=cache)
    assert more.totals().mem_used == 2000
    changed = compute("n", TWO, None, None, (dataclasses.replace(pod, allocated="GPU-a,NVIDIA,7,10:;"),), cache=cache)
    assert changed.totals().mem_used == 7
    ended = compute("n", TWO, None, None, (dataclasses.replace(pod, phase="Failed"),), cache=cache)
    assert (ended.pods, ended.totals().mem_used) == (0, 0)
    assert compute("n", TWO, None, None, [pod], cache=cache).totals().mem_used == 1000  # a list works too
    assert cache.misses == 6 and cache.hits == 0


def test_the_lock_is_judged_on_every_call() -> None:
    cache = CapacityCache()
    lock = "2025-06-01T08:19:00Z"
    active = compute("n", TWO, None, lock, (), cache=cache)
    later = compute("n", TWO, None, lock, (), cache=cache, now=NOW + timedelta(minutes=10))
    assert active.lock is not None and active.lock.state == "active"
    assert later.lock is not None and later.lock.state == "expired"
    assert cache.hits == 1
    released = compute("n", TWO, None, None, (), cache=cache)
    assert released.lock is None and released.cards == active.cards


def test_node_names_are_kept_apart() -> None:
    cache = CapacityCache()
    a = compute("a", TWO, None, None, (), cache=cache)
    b = compute("b", TWO, None, None, (), cache=cache)
    assert (a.name, b.name) == ("a", "b")
    assert cache.misses == 2


def test_retain_and_the_byte_bound() -> None:
    cache = CapacityCache()
    for name in ("a", "b", "c"):
        compute(name, TWO, None, None, (), cache=cache)
    assert cache.retain({"a": 1, "c": 2}) == 1
    assert len(cache) == 2
    compute("b", TWO, None, None, (), cache=cache)
    assert cache.misses == 4
    entry = cache.bytes // 3
    small = CapacityCache(max_bytes=2 * entry)
    for name in ("a", "b", "c"):
        compute(name, TWO, None, None, (), cache=small)
    assert len(small) == 2 and small.bytes <= small.max_bytes
    compute("a", TWO, None, None, (), cache=small)  # the least recently used went first
    assert small.misses == 4


def test_large_allocation_values_make_an_entry_expensive() -> None:
    """Pods with large (hostile) allocation values count in the byte bound: not kept past it."""
    cache = CapacityCache(max_bytes=50_000)
    big = tuple(Pod(name=f"p{i}", allocated="GPU-a,NVIDIA,1,1:" * 2000) for i in range(2))
    first = compute("n", TWO, None, None, big, cache=cache)
    assert len(cache) == 0 and cache.bytes == 0
    assert seen(compute("n", TWO, None, None, big, cache=cache)) == seen(first)


def test_totals_hands_out_a_copy() -> None:
    node = compute("n", TWO, None, None, (Pod(allocated="GPU-a,NVIDIA,1000,10:;"),))
    node.totals().mem_used += 99
    assert node.totals().mem_used == 1000
    assert capacity.total_status([node]).memory_mib is not None
    assert capacity.total_status([node]).memory_mib.used == 1000


def reference_rollup(nodes: list[NodeCapacity]) -> dict[str, dict[str, int]]:
    """``model_rollup`` as it was computed card by card, before the per-node sums."""
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        for state in node.cards:
            entry = out.setdefault(
                state.card.model, {"cards": 0, "memory_total_mib": 0, "memory_free_mib": 0, "cores_free_percent": 0}
            )
            entry["cards"] += 1
            if state.schedulable:
                entry["memory_total_mib"] += state.card.devmem
                entry["memory_free_mib"] += state.free_mem
                entry["cores_free_percent"] += state.free_cores
    ranked = sorted(out.items(), key=lambda kv: (-kv[1]["cards"], kv[0]))
    kept = dict(ranked[: capacity.MAX_MODELS])
    for _, rest in ranked[capacity.MAX_MODELS :]:
        other = kept.setdefault(capacity.OTHER_MODELS, dict.fromkeys(rest, 0))
        for key, value in rest.items():
            other[key] += value
    return dict(sorted(kept.items()))


def test_model_rollup_equals_card_by_card() -> None:
    many = reg(*(card(f"GPU-m{i}", model=f"model-{i % 11}", healthy=i % 5 != 0, mem=1000 + i) for i in range(30)))
    nodes = [uncached("n", *row) for _, *row in NODES]
    nodes.append(uncached("many", many, "GPU-m3,GPU-m4", None, (Pod(allocated="GPU-m1,NVIDIA,10,10:;"),)))
    for subset in (nodes, nodes[:5], nodes[-1:], []):
        assert capacity.model_rollup(subset) == reference_rollup(subset)


# -- detection ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class MutableNode:
    """A NodeLike that can change in place (not cached)."""

    name: str
    uid: str = "u"
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    capacity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    allocatable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    label_managers: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    runtime_handlers: tuple[str, ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()


DETECT_NODES = [
    gpu_node("registered"),
    gpu_node("no register", register=None),
    gpu_node("nothing", register=None, allocatable="0"),
    Node("labelled", labels={"nvidia.com/gpu.present": "true"}),
    Node("handler", runtime_handlers=("nvidia",)),
    Node("selected", labels={"pool": "gpu"}),
    Node("cpu", labels={"pool": "cpu"}),
    Node("renamed", capacity={"example.com/vgpu": "4"}),
]
SELECTORS = (health.Selector(health.NODE_SELECTOR, {"pool": "gpu"}),)
RENAMED = ResourceNames(count="example.com/vgpu")


def expected(nodes: Mapping[str, Any], names: ResourceNames, selectors: tuple[health.Selector, ...]) -> dict[str, Any]:
    return {n.name: found for n in nodes.values() if (found := detect(n, names, selectors))}


@pytest.mark.parametrize(
    ("names", "selectors"),
    [(DEFAULT_NAMES, ()), (DEFAULT_NAMES, SELECTORS), (RENAMED, ()), (RENAMED, SELECTORS)],
)
def test_detections_equal_detect(names: ResourceNames, selectors: tuple[health.Selector, ...]) -> None:
    cache = DetectionCache()
    nodes = {n.name: n for n in DETECT_NODES}
    assert cache.detections(nodes, names, selectors) == expected(nodes, names, selectors)
    assert cache.detections(nodes, names, selectors) == expected(nodes, names, selectors)
    assert cache.hits == len(nodes)


def test_detections_follow_changes() -> None:
    cache = DetectionCache()
    nodes = {n.name: n for n in DETECT_NODES}
    cache.detections(nodes, DEFAULT_NAMES, ())
    # A node the snapshot replaced (its register annotation and capacity gone) is detected again.
    nodes["registered"] = dataclasses.replace(gpu_node("registered", register=None, allocatable="0"), labels={})
    assert "registered" not in cache.detections(nodes, DEFAULT_NAMES, ())
    # Other selectors or names: everything is detected again.
    assert "selected" in cache.detections(nodes, DEFAULT_NAMES, SELECTORS)
    assert "renamed" in cache.detections(nodes, RENAMED, SELECTORS)
    assert "renamed" not in cache.detections(nodes, DEFAULT_NAMES, SELECTORS)
    # A deleted node is forgotten with the next pass.
    del nodes["cpu"]
    cache.detections(nodes, DEFAULT_NAMES, SELECTORS)
    assert len(cache) == len(nodes)


def test_a_node_changed_in_place_is_not_cached() -> None:
    cache = DetectionCache()
    node = MutableNode("m", capacity={"nvidia.com/gpu": "1"})
    assert cache.detections({"m": node}, DEFAULT_NAMES, ()) == {"m": ("capacity",)}
    node.capacity = {}
    assert cache.detections({"m": node}, DEFAULT_NAMES, ()) == {}
    assert len(cache) == 0


# -- evaluate: cold and warm caches ----------------------------------------------------------------------


def clear() -> None:
    register.cache.clear()
    allocations.cache.clear()
    capacity.CACHE.clear()
    DETECTIONS.clear()
    ENTRIES.clear()


def outcome(decided: Any) -> str:
    verdict = decided.verdict
    condition = verdict.condition
    return json.dumps(
        [condition.reason, condition.status, condition.message, verdict.sections, verdict.recorded.dump()],
        sort_keys=True,
        default=str,
    )


@pytest.mark.parametrize("row", [pytest.param(row, id=str(row[0])) for row in EVALUATE_ROWS])
def test_evaluate_cold_and_warm_agree(row: tuple[Any, ...]) -> None:
    _, nodes, tweaks, labels, _status, _reason, _fragment, *rest = row
    extra = rest[0] if rest else {}
    clear()
    cold = outcome(evaluate(demo(gpu=tweaks), facts(*nodes, **extra), labels=labels, now=NOW))
    warm = outcome(evaluate(demo(gpu=tweaks), facts(*nodes, **extra), labels=labels, now=NOW))
    assert cold == warm


# -- status.gpu.nodes entries ----------------------------------------------------------------------------


def test_listed_entries_equal_fresh_ones() -> None:
    cache = CapacityCache()
    nodes = [compute(f"n{i}", *row, cache=cache) for i, (_, *row) in enumerate(NODES)]
    labelled = frozenset(n.name for n in nodes[::2])
    extras = {"n4": NodeExtras(detected_by=("capacity",), taints=("a:NoSchedule",))}

    def fresh() -> list[Any]:
        ENTRIES.clear()
        return [e.dump() for e in listed(nodes, labelled, 500, extras=extras)]

    want = fresh()
    assert [e.dump() for e in listed(nodes, labelled, 500, extras=extras)] == want  # from the memo
    assert [e.dump() for e in listed(nodes, labelled, 3, budget=10_000, extras=extras)] == [
        e.dump() for e in listed(nodes, labelled, 3, budget=10_000, extras=extras)
    ]
    # labelled, extras and the capacity (a new object) each make the entry be built again
    other = frozenset(n.name for n in nodes[1::2])
    got = [e.dump() for e in listed(nodes, other, 500, extras={})]
    ENTRIES.clear()
    assert got == [e.dump() for e in listed(nodes, other, 500, extras={})]
    nodes[4] = compute("n4", ONE, None, None, (), cache=cache)
    assert [e["cards"] for e in (e.dump() for e in listed(nodes, labelled, 500)) if e["name"] == "n4"] == [1]


def test_a_held_lock_is_listed_as_of_now() -> None:
    lock = "2025-06-01T08:19:00Z,ml,p"
    first = listed([compute("n", TWO, None, lock, ())], frozenset(), 500)
    later = listed([compute("n", TWO, None, lock, (), now=NOW + timedelta(minutes=10))], frozenset(), 500)
    assert (first[0].dump()["lock"]["state"], later[0].dump()["lock"]["state"]) == ("dangling", "expired")


# -- the snapshot's views --------------------------------------------------------------------------------


def test_view_is_reused_until_something_changes() -> None:
    snap = cluster.ClusterSnapshot()
    snap.replace_all([node_body("gpu-1"), node_body("gpu-2")], [pod_body("a"), pod_body("b", node_name="gpu-2")])
    first = snap.view()
    assert snap.view() is first
    assert not snap.ingest_pod(pod_body("a"))  # nothing kept changed
    assert snap.view() is first
    snap.ingest_pod(pod_body("a", **{"hami.io/vgpu-devices-allocated": "GPU-a,NVIDIA,7,10:;"}))
    second = snap.view()
    assert second is not first and second.changes > first.changes
    assert [p.allocated for p in second.pods_by_node["gpu-1"]] == ["GPU-a,NVIDIA,7,10:;"]
    assert second.pods_by_node["gpu-2"] is first.pods_by_node["gpu-2"]  # untouched nodes keep their tuple
    assert [p.allocated for p in first.pods_by_node["gpu-1"]] == ["GPU-a,NVIDIA,100,10:;"]  # old views stay
    snap.mark_stale("pods", "watch failed")
    third = snap.view()
    assert third is not second and third.stale_why == "watch failed"
    snap.mark_current("pods")
    assert snap.view().stale_since is None


def test_pod_tuples_follow_every_change() -> None:
    """After any sequence of pod events the view equals one built from a fresh listing."""
    snap = cluster.ClusterSnapshot()
    snap.replace_all([node_body("gpu-1"), node_body("gpu-2")], [pod_body("a"), pod_body("b")])
    live = {"a": pod_body("a"), "b": pod_body("b")}
    steps: list[tuple[str, dict[str, Any]]] = [
        ("MODIFIED", pod_body("a", node_name="gpu-2")),  # moved
        ("ADDED", pod_body("c", node_name="gpu-2")),
        ("DELETED", pod_body("b")),
        ("MODIFIED", pod_body("c", phase="Succeeded")),  # ended: dropped
        ("MODIFIED", pod_body("a", node_name="gpu-1")),  # moved back
        ("ADDED", pod_body("d", node_name="gpu-1")),
    ]
    for kind, body in steps:
        snap.handle_pod_event(kind, body)
        name = body["metadata"]["name"]
        if kind == "DELETED" or body["status"]["phase"] == "Succeeded":
            live.pop(name, None)
        else:
            live[name] = body
        fresh = cluster.ClusterSnapshot()
        fresh.replace_all([node_body("gpu-1"), node_body("gpu-2")], list(live.values()))
        got, want = snap.view(), fresh.view()
        assert {n: sorted(p.name for p in ps) for n, ps in got.pods_by_node.items()} == {
            n: sorted(p.name for p in ps) for n, ps in want.pods_by_node.items()
        }
        assert dict(got.pods) == dict(want.pods)
