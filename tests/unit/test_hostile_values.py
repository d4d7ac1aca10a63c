"""Hostile HAMi annotations (anyone who may create a pod may write them): one row per kind of
garbage. Every value is rejected per object with a short reason (HamiParseError, never another
exception), the pod or node is named in a bounded note, and what reaches status stays small.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from tests.hami_support import HamiPod, no_owner
from tests.support import platform

from tenant_platform.api import reasons
from tenant_platform.concerns.gpu import capacity, verdict
from tenant_platform.concerns.gpu.labels import LabelOutcome
from tenant_platform.concerns.gpu.verdict import GpuFacts
from tenant_platform.formats.hami import allocations, bounds, register
from tenant_platform.formats.hami.allocations import parse_pod_devices
from tenant_platform.formats.hami.locks import lock_state
from tenant_platform.formats.hami.names import HamiParseError
from tenant_platform.formats.hami.register import parse_register
from tenant_platform.observe import cluster

NOW = datetime(2025, 6, 1, 8, 20, 0, tzinfo=UTC)
FIVE_MIN = timedelta(minutes=5)
ONE_CARD = json.dumps(
    [{"id": "GPU-x", "count": 10, "devmem": 24576, "devcore": 100, "type": "NVIDIA L4", "health": True}]
)
GARBAGE_200K = "GPU-x,NVIDIA," + "9" * 200_000 + ",0:;"
# The longest error text a parser may produce (a note adds the pod name, capped at 200 characters).
MAX_REASON = 200

# (id, allocation annotation value, fragment of the reason)
HOSTILE_ALLOCATIONS = [
    ("unicode superscript digit", "GPU-x,NVIDIA,²,0:;", "memory '²' is not a non-negative integer"),
    ("fullwidth digits", "GPU-x,NVIDIA,\uff11\uff10\uff12\uff14,0:;", "is not a non-negative integer"),
    ("arabic-indic digits", "GPU-x,NVIDIA,1000,٣٠:;", "cores"),
    ("negative number", "GPU-x,NVIDIA,-1000,0:;", "memory '-1000'"),
    ("larger than int32", "GPU-x,NVIDIA,4294967296,0:;", "larger than 2147483647"),
    ("5000 digits (over Python's int limit)", "GPU-x,NVIDIA," + "9" * 5000 + ",0:;", "not a non-negative integer"),
    ("200 KB of garbage", GARBAGE_200K, "over the 65536 HAMi ever writes"),
    ("200 KB of separators", ";:" * 100_000, "over the 65536"),
    ("wrong separators", "GPU-x;NVIDIA;1000;0", "does not have 4 fields"),
    ("truncated", "GPU-x,NVIDIA,10", "does not have 4 fields"),
    ("no uuid", ",NVIDIA,1000,0:;", "no UUID"),
    ("control characters", "GPU-\x00x,NVIDIA,1000,0:;", "not printable"),
    ("JSON instead of CSV", '[{"id":"GPU-x"}]', "does not have 4 fields"),
    ("huge uuid", "G" * 1000 + ",NVIDIA,1000,0:;", "longer than 128"),
    ("too many devices", "GPU-x,NVIDIA,1,0:" * 3000 + ";", "devices allocated"),
]


# Pods default to the attacker's namespace here.
Pod = functools.partial(HamiPod, namespace="attacker", name="evil")


@pytest.mark.parametrize(("value", "fragment"), [pytest.param(v, f, id=i) for i, v, f in HOSTILE_ALLOCATIONS])
def test_hostile_allocation_is_rejected_with_a_short_reason(value: str, fragment: str) -> None:
    with pytest.raises(HamiParseError) as caught:
        parse_pod_devices(value)
    assert fragment in str(caught.value)
    assert len(str(caught.value)) <= MAX_REASON


@pytest.mark.parametrize(("value", "fragment"), [pytest.param(v, f, id=i) for i, v, f in HOSTILE_ALLOCATIONS])
def test_hostile_pod_is_ignored_and_named_the_node_keeps_its_capacity(value: str, fragment: str) -> None:
    good = Pod(name="good", namespace="ml", allocated="GPU-x,NVIDIA,1000,10:;")
    node = capacity.node_capacity(
        "gpu-1",
        register=ONE_CARD,
        pods=[good, Pod(allocated=value)],
        now=NOW,
        lock_timeout=FIVE_MIN,
        owner=no_owner,
    )
    assert node.unparseable is None
    assert node.pods == 1
    assert node.ignored_count == 1
    (note,) = node.ignored_pods
    assert note.startswith("attacker/evil: ")
    assert len(note) <= bounds.MAX_NOTE_CHARS
    assert node.totals().mem_used == 1000


# (id, register annotation value, fragment of the reason)
HOSTILE_REGISTERS = [
    ("truncated JSON", ONE_CARD[:-10], "invalid JSON"),
    ("deeply nested JSON", "[" * 100_000 + "]" * 100_000, "over the 65536"),
    ("nested JSON within the size limit", "[" * 30_000 + "]" * 30_000, "nested too deeply"),
    ("JSON number over int32", ONE_CARD.replace("24576", "99999999999"), "larger than 2147483647"),
    ("JSON number with 5000 digits", ONE_CARD.replace("24576", "9" * 5000), "invalid JSON"),
    ("JSON negative", ONE_CARD.replace("24576", "-1"), "not a non-negative integer"),
    ("JSON float", ONE_CARD.replace("24576", "1.5"), "not a non-negative integer"),
    ("JSON object", '{"id": "GPU-x"}', "not an array"),
    ("JSON huge model name", ONE_CARD.replace("NVIDIA L4", "L" * 5000), "longer than 128"),
    ("CSV unicode digit", "GPU-x,10,²,100,NVIDIA L4,0,true", "devmem '²'"),
    ("CSV negative", "GPU-x,-10,24576,100,NVIDIA L4,0,true", "count '-10'"),
    ("CSV wrong separators", "GPU-x;10;24576;100;NVIDIA L4;0;true", "fields"),
    ("200 KB of garbage", "x" * 200_000, "over the 65536"),
    (
        "too many cards",
        ":".join(f"GPU-{i},10,1,100,L4,0,true" for i in range(500)),
        "more than the 128",
    ),
]


@pytest.mark.parametrize(("value", "fragment"), [pytest.param(v, f, id=i) for i, v, f in HOSTILE_REGISTERS])
def test_hostile_register_makes_only_that_node_unparseable(value: str, fragment: str) -> None:
    with pytest.raises(HamiParseError) as caught:
        parse_register(value)
    assert fragment in str(caught.value)
    node = capacity.node_capacity("gpu-1", register=value, pods=[], now=NOW, lock_timeout=FIVE_MIN, owner=no_owner)
    assert node.unparseable is not None
    assert len(node.unparseable) <= bounds.MAX_NOTE_CHARS


# (id, lock annotation value, state, fragment of the reason)
HOSTILE_LOCKS = [
    ("200 KB", "2025-06-01T08:19:00Z,ml," + "p" * 200_000, "malformed", "over the 65536"),
    ("long owner", "2025-06-01T08:19:00Z,ml," + "p" * 1000, "malformed", "HAMi writes fewer than 400"),
    ("unicode digits in the time", "\uff12\uff10\uff12\uff15-06-01T08:19:00Z,ml,p", "malformed", "not RFC 3339"),
    ("owner that is no pod name", "2025-06-01T08:19:00Z,ML NS,p\x00", "malformed", "is not a pod name"),
    ("wrong separators", "2025-06-01T08:19:00Z;ml;p", "malformed", "not RFC 3339"),
    ("a lock from the far future", "9999-12-31T23:59:59Z,ml,p", "malformed", "in the future"),
]


@pytest.mark.parametrize(("value", "state", "fragment"), [pytest.param(v, s, f, id=i) for i, v, s, f in HOSTILE_LOCKS])
def test_hostile_lock_is_malformed_with_a_short_reason(value: str, state: str, fragment: str) -> None:
    lock = lock_state(value, now=NOW, timeout=FIVE_MIN, owner=no_owner)
    assert lock.state == state
    assert fragment in lock.reason
    assert len(json.dumps(lock.to_status().dump())) < 400


@pytest.mark.parametrize("value", ["²", "\uff11\uff10", "9" * 5000, "-3", "1e3", "NaN", "8Gi²"])
def test_quantity_int_never_raises(value: str) -> None:
    assert capacity.quantity_int(value) == 0


# -- the snapshot keeps bounded values --------------------------------------------------------------


def pod_body(annotations: dict[str, str], name: str = "evil") -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "attacker", "annotations": annotations},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }


def test_snapshot_keeps_a_marker_for_oversized_annotations() -> None:
    info = cluster.pod_info(
        pod_body(
            {
                "hami.io/vgpu-node": "gpu-1",
                "hami.io/vgpu-devices-allocated": GARBAGE_200K,
                "hami.io/bind-phase": "x" * 1000,
            }
        )
    )
    assert info is not None
    assert len(info.allocated) < 40
    assert len(info.bind_phase) <= 64
    with pytest.raises(HamiParseError, match="over the 65536"):
        parse_pod_devices(info.allocated)


def test_snapshot_drops_pods_placed_on_impossible_node_names() -> None:
    assert cluster.pod_info(pod_body({"hami.io/vgpu-node": "n" * 300})) is None


def test_snapshot_skips_an_unreadable_object_instead_of_failing_the_listing() -> None:
    snap = cluster.ClusterSnapshot()
    broken = {"metadata": "not a map"}
    good = pod_body({"hami.io/vgpu-node": "gpu-1", "hami.io/vgpu-devices-allocated": "GPU-x,NVIDIA,1,0:;"}, "good")
    snap.replace_pods([broken, good])
    assert snap.skipped == 1
    assert list(snap.view().pods) == [("attacker", "good")]


def test_snapshot_staleness_is_marked_and_cleared() -> None:
    times = iter([NOW, NOW + timedelta(seconds=10), NOW + timedelta(seconds=20)])
    snap = cluster.ClusterSnapshot(clock=lambda: next(times))
    assert snap.view().stale_since == NOW  # not listed yet
    snap.replace_all([], [])
    assert snap.view().stale_since is None
    snap.mark_stale("pods", "watching pods failed: 503")
    snap.mark_stale("pods", "later failure keeps the first time")
    view = snap.view()
    assert (view.stale_since, view.stale_why) == (NOW + timedelta(seconds=10), "watching pods failed: 503")
    snap.mark_current("pods")
    assert snap.view().stale_since is None


# -- parse caches are bounded in bytes --------------------------------------------------------------


def test_parse_cache_is_bounded_in_bytes() -> None:
    cache = bounds.ParseCache(allocations._parse_pod_devices, max_bytes=1_000_000)
    for i in range(200):
        value = f"GPU-{i},NVIDIA,{i},0:" * 200 + ";"  # ~4 KB each
        cache(value)
    assert cache.bytes <= 1_000_000
    assert 0 < len(cache) < 200
    with pytest.raises(HamiParseError):
        cache("GPU-x,NVIDIA,²,0:;")
    with pytest.raises(HamiParseError):
        cache("GPU-x,NVIDIA,²,0:;")  # the error is memoised too
    assert cache.hits >= 1


def test_module_caches_are_bounded_in_bytes() -> None:
    assert register.cache.max_bytes <= 64 * 1024 * 1024
    assert allocations.cache.max_bytes <= 64 * 1024 * 1024


# -- status stays small whatever the annotations say ----------------------------------------------


@dataclass(frozen=True)
class Node:
    name: str
    uid: str = "u"
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    capacity: dict[str, str] | None = None
    allocatable: dict[str, str] | None = None
    label_managers: dict[str, frozenset[str]] | None = None
    label_holders: dict[str, tuple[str, ...]] | None = None
    runtime_handlers: tuple[str, ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()


def worst_node(i: int) -> Node:
    cards = [
        {
            "id": f"GPU-{i}-{c}",
            "count": 10,
            "devmem": 1,
            "devcore": 100,
            "type": f"{'M' * 120}{c}",
            "health": c % 2 == 0,
        }
        for c in range(bounds.MAX_CARDS)
    ]
    return Node(
        name=f"{'n' * 240}-{i}",
        labels={"gpu": "on"},
        annotations={
            "hami.io/node-nvidia-register": json.dumps(cards),
            "hami.io/mutex.lock": f"2025-06-01T08:19:00Z,{'a' * 63},{'p' * 250}",
        },
        capacity={"nvidia.com/gpu": "8"},
        allocatable={"nvidia.com/gpu": "8"},
        label_managers={},
    )


def test_status_gpu_stays_small_with_many_worst_case_nodes_and_pods() -> None:
    nodes = {n.name: n for n in (worst_node(i) for i in range(600))}
    pods = {
        name: tuple(Pod(namespace="a" * 63, name=f"{'p' * 240}{j}", allocated=GARBAGE_200K) for j in range(20))
        for name in nodes
    }
    facts = GpuFacts(nodes=nodes, pods_by_node=pods, pod=lambda ns, n: None)  # type: ignore[arg-type]
    decided = verdict.evaluate(platform("p"), facts, labels=LabelOutcome(), now=NOW)
    size = len(json.dumps(decided.verdict.sections)) + len(json.dumps(decided.verdict.recorded.dump()))
    print("status.gpu + recorded bytes:", size)
    assert size < 450 * 1024, size  # far below etcd's 1.5 MiB request limit
    assert len(decided.verdict.condition.message) < 8 * 1024
    gpu = decided.verdict.sections["gpu"]
    assert gpu["ignoredPods"] == 600 * 20
    assert gpu["nodesOmitted"] > 0
    assert len(gpu["total"]["models"]) <= capacity.MAX_MODELS + 1
    assert decided.verdict.condition.reason != reasons.Common.INTERNAL_ERROR
