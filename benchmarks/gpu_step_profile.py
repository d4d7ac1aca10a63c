"""Profile the pure parts of one GPU pass over a big in-process snapshot (no API server).

Builds Node and Pod bodies with benchmarks/gpu_scale.py's builders (``--nodes`` nodes with
``--cards`` cards each, HAMi v2.10 register annotation, ``--pods`` pods HAMi placed on them), fills
an ``observe.cluster.ClusterSnapshot`` with them, and times, each on its own:

- ``replace_all`` (the reflectors' first listing) and ``view()`` after a change (what a pass takes);
- the reflector's event apply path: one pod allocation change (``handle_pod_event`` of a MODIFIED
  pod), one node heartbeat that changes nothing kept, one node annotation change;
- the pure parts of the gpu step: ``GpuFacts.gpu_nodes`` (concerns/gpu/facts.py ``detect`` per
  node), ``plan_labels`` (concerns/gpu/labels.py), ``evaluate`` (concerns/gpu/verdict.py, which
  runs concerns/gpu/capacity.py per GPU node), cold (caches empty) and warm, and ``model_rollup``
  (the per-model gauges' sums);
- a whole pure pass (view -> facts -> gpu_nodes -> plan_labels -> evaluate) after one pod change,
  which is what a GPU-only pass costs besides its API reads and the status write;

and measures (tracemalloc) what one view allocates and what a cold pass leaves allocated once its
result is dropped (the parse and per-node caches). Then it profiles one pass with cProfile and
prints the top functions by cumulative time. The result's ``digest`` (a hash of the condition,
status.gpu and the recorded facts) lets a change be checked for identical output. The gpu step's
API reads (HAMi's ConfigMap, RuntimeClasses, the health reads, the dry-run pod) are not part of
this: HAMi's resource names are the defaults and the health facts empty. Nodes carry the
platform's label already (``--unlabelled``: they do not, as before a first pass).

    .venv/bin/python -m benchmarks.gpu_step_profile                       # 500 nodes, 5,000 pods
    .venv/bin/python -m benchmarks.gpu_step_profile --nodes 5000 --pods 50000
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import io
import json
import pstats
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from benchmarks.gpu_scale import POD_MIB, node_body, pod_body
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.gpu import capacity
from tenant_platform.concerns.gpu.facts import DETECTIONS, GpuFacts
from tenant_platform.concerns.gpu.gpustatus import ENTRIES
from tenant_platform.concerns.gpu.labels import LabelOutcome, plan_labels, value_manager
from tenant_platform.concerns.gpu.verdict import GpuVerdict, evaluate, wanted_labels
from tenant_platform.formats.hami import allocations, register
from tenant_platform.observe.cluster import ClusterSnapshot, ClusterView

PLATFORM = "gpu-bench"


def platform() -> TenantPlatform:
    return TenantPlatform.from_body(
        {
            "apiVersion": "tenancy.dev/v1alpha1",
            "kind": "TenantPlatform",
            "metadata": {"name": PLATFORM, "uid": "bench"},
            "spec": {"namespace": "gpu-bench-tenant", "domain": "gpu.example.com"},
        }
    )


def facts_of(view: ClusterView) -> GpuFacts:
    """What ``reconcile/gpu.gather`` builds from a view, without its API reads."""
    return GpuFacts.of_view(view)


def one_pass(snapshot: ClusterSnapshot, tp: TenantPlatform, now: datetime) -> GpuVerdict:
    """The pure part of one GPU pass (dry run: the plan's writes are not made)."""
    facts = facts_of(snapshot.view())
    wanted = wanted_labels(tp)
    plan = plan_labels(facts.nodes, set(facts.gpu_nodes), wanted, platform=PLATFORM, dry_run=False)
    outcome = LabelOutcome(conflicts=plan.conflicts, pending=plan.pending)
    return evaluate(tp, facts, labels=outcome, now=now)


def digest(decided: GpuVerdict) -> str:
    verdict = decided.verdict
    condition = verdict.conditions[0]
    doc = {
        "condition": [str(condition.type), str(condition.status), str(condition.reason), condition.message],
        "sections": verdict.sections,
        "recorded": verdict.recorded.dump(),
        "requeue": verdict.requeue_after,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """(median seconds of ``repeat`` calls, the last result)."""
    times = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def labelled(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the platform's first pass leaves it: each label applied under its shared value
    manager (concerns/gpu/labels.py), so the plan over it is a steady state's (no write)."""
    meta = body["metadata"]
    wanted = wanted_labels(platform())
    meta["labels"].update(wanted)
    meta["managedFields"] = [
        {
            "manager": value_manager(key, value),
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {f"f:{key}": {}}}},
        }
        for key, value in wanted.items()
    ]
    return body


def clear_caches() -> None:
    """Empty the process's parse and per-node caches (a cold pass)."""
    register.cache.clear()
    allocations.cache.clear()
    capacity.CACHE.clear()
    DETECTIONS.clear()
    ENTRIES.clear()


def retained_by_a_pass(snapshot: ClusterSnapshot, tp: TenantPlatform, now: datetime) -> float:
    """MiB a cold pass leaves allocated once its result is dropped (the caches; tracemalloc)."""
    clear_caches()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    one_pass(snapshot, tp, now)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return round((after - before) / 2**20, 1)


def modified_pod(index: int, args: argparse.Namespace, delta: int) -> dict[str, Any]:
    return pod_body(index, nodes=args.nodes, cards=args.cards, namespaces=args.namespaces, mem=POD_MIB + delta)


def run(args: argparse.Namespace) -> dict[str, Any]:
    args.namespaces = max(1, args.pods // 1000)
    out: dict[str, Any] = {"nodes": args.nodes, "cards_per_node": args.cards, "pods": args.pods}
    started = time.perf_counter()
    nodes = [
        labelled(node_body(i, args.cards)) if args.labelled else node_body(i, args.cards) for i in range(args.nodes)
    ]
    pods = [pod_body(i, nodes=args.nodes, cards=args.cards, namespaces=args.namespaces) for i in range(args.pods)]
    out["build_bodies_s"] = round(time.perf_counter() - started, 2)

    snapshot = ClusterSnapshot()
    seconds, _ = timed(lambda: snapshot.replace_all(nodes, pods))
    out["replace_all_s"] = round(seconds, 3)
    views = []
    for i in range(args.repeat):  # a view after a change (an unchanged snapshot may hand out the last one)
        snapshot.handle_pod_event("MODIFIED", modified_pod(i * 31 % args.pods, args, 2000 + i))
        started = time.perf_counter()
        snapshot.view()
        views.append(time.perf_counter() - started)
    out["view_after_a_change_ms"] = round(statistics.median(views) * 1e3, 2)
    snapshot.handle_pod_event("MODIFIED", modified_pod(3, args, 3000))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    taken = snapshot.view()
    out["view_mib"] = round((tracemalloc.get_traced_memory()[0] - before) / 2**20, 1)
    tracemalloc.stop()
    del taken

    # The reflector's event apply path, per event.
    events = min(args.events, args.pods)
    bodies = [modified_pod(i * 7919 % args.pods, args, 1 + i) for i in range(events)]
    started = time.perf_counter()
    applied = sum(snapshot.handle_pod_event("MODIFIED", b) for b in bodies)
    out["pod_event_us"] = round((time.perf_counter() - started) / events * 1e6, 1)
    assert applied == events, (applied, events)
    heartbeats = []
    for i in range(min(events, args.nodes)):
        body = nodes[i * 613 % args.nodes]
        body["status"]["conditions"][0]["lastHeartbeatTime"] = f"2030-01-01T00:00:{i % 60:02d}Z"
        heartbeats.append(body)
    started = time.perf_counter()
    changed = sum(snapshot.handle_node_event("MODIFIED", b) for b in heartbeats)
    out["node_heartbeat_event_us"] = round((time.perf_counter() - started) / len(heartbeats) * 1e6, 1)
    assert changed == 0, changed
    annotated = []
    for i, body in enumerate(heartbeats):
        copy = json.loads(json.dumps(body))
        copy["metadata"]["annotations"]["hami.io/mutex.lock"] = f"2030-01-01T00:00:{i % 60:02d}Z,ns,p{i}"
        annotated.append(copy)
    started = time.perf_counter()
    changed = sum(snapshot.handle_node_event("MODIFIED", b) for b in annotated)
    out["node_annotation_event_us"] = round((time.perf_counter() - started) / len(annotated) * 1e6, 1)
    # Put the nodes back as they were, so the passes below see the plain cluster.
    for body in heartbeats:
        snapshot.handle_node_event("MODIFIED", body)
    for listing in (nodes, pods, bodies, heartbeats, annotated):
        listing.clear()
    gc.collect()

    tp = platform()
    now = datetime.now(UTC)
    view = snapshot.view()
    wanted = wanted_labels(tp)

    def gpu_nodes() -> list[str]:
        return facts_of(view).gpu_nodes

    seconds, found = timed(gpu_nodes, args.repeat)
    out["gpu_nodes_ms"] = round(seconds * 1e3, 1)
    out["gpu_nodes_found"] = len(found)
    facts = facts_of(view)
    gpu_set = set(facts.gpu_nodes)
    seconds, plan = timed(
        lambda: plan_labels(facts.nodes, gpu_set, wanted, platform=PLATFORM, dry_run=False), args.repeat
    )
    out["plan_labels_ms"] = round(seconds * 1e3, 1)
    out["plan_label_jobs"] = len(plan.jobs)
    outcome = LabelOutcome(conflicts=plan.conflicts, pending=plan.pending)
    clear_caches()
    seconds, _ = timed(lambda: evaluate(tp, facts, labels=outcome, now=now))
    out["evaluate_cold_ms"] = round(seconds * 1e3, 1)
    seconds, decided = timed(lambda: evaluate(tp, facts_of(view), labels=outcome, now=now), args.repeat)
    out["evaluate_warm_ms"] = round(seconds * 1e3, 1)
    seconds, _ = timed(lambda: capacity.model_rollup(decided.capacities), args.repeat)
    out["model_rollup_ms"] = round(seconds * 1e3, 1)  # the per-model gauges (concerns/gpu/step.py record_metrics)
    condition = decided.verdict.conditions[0]
    out["condition"] = f"{condition.reason}: {condition.message[:120]}"

    # A whole pure pass after one allocation change (what a GPU-only pass computes).
    samples = []
    for i in range(args.repeat):
        snapshot.handle_pod_event("MODIFIED", modified_pod(i * 104729 % args.pods, args, 1000 + i))
        started = time.perf_counter()
        one_pass(snapshot, tp, now)
        samples.append(time.perf_counter() - started)
    out["pass_after_one_change_ms"] = [round(s * 1e3, 1) for s in samples]
    out["digest"] = digest(one_pass(snapshot, tp, now))

    out["retained_after_a_cold_pass_mib"] = retained_by_a_pass(snapshot, tp, now)
    snapshot.handle_pod_event("MODIFIED", modified_pod(2, args, 6000))
    one_pass(snapshot, tp, now)  # warm again before profiling

    profiler = cProfile.Profile()
    snapshot.handle_pod_event("MODIFIED", modified_pod(1, args, 5000))
    profiler.enable()
    one_pass(snapshot, tp, now)
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.strip_dirs().sort_stats("cumulative").print_stats(args.top)
    out["profile_cumulative"] = [line for line in text.getvalue().splitlines() if line.strip()][-args.top - 1 :]
    return out


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--cards", type=int, default=8)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions (the median is shown)")
    parser.add_argument("--events", type=int, default=1000, help="watch events applied for the per-event cost")
    parser.add_argument(
        "--unlabelled", dest="labelled", action="store_false", help="nodes without the platform's labels (a first pass)"
    )
    parser.add_argument("--top", type=int, default=25, help="profile lines shown")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(list(argv) if argv is not None else None)
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        if key == "profile_cumulative":
            print("profile of one pass (cumulative):")
            print("\n".join("  " + line for line in value))
        else:
            print(f"{key}: {json.dumps(value)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
