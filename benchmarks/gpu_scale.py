"""GPU scale benchmark against the real local API server: many HAMi GPU nodes and allocated pods.

Creates ``--nodes`` GPU nodes (``--cards`` cards each, HAMi v2.10 register annotation, NFD label,
``nvidia.com/gpu`` capacity) and ``--pods`` pods HAMi placed on them (annotations and
``spec.nodeName``; they stay Pending: no scheduler or kubelet runs), in parallel threads. Then it
starts the GPU part of the operator in a child process: the list-and-watch reflectors the
operator's startup starts (``gpuwatch.start_watches``) feed the snapshot, and a kopf daemon
per TenantPlatform runs ``gpu_refresher``, which calls ``reconcile.run`` with only the gpu step
registered. It reports:

- the child's memory (VmRSS / VmHWM) once in sync and at the end, plus the snapshot's own size
  (tracemalloc, measured in this process on an identical snapshot);
- seconds from the child's start to the first complete status, and from one pod allocation
  change (a patched ``hami.io/vgpu-devices-allocated``) to status (several samples);
- the gpu step's time over the whole snapshot (cold and warm parse caches);
- API requests the child made: its Kube.counter (the step) and apiserver_request_total deltas
  (kopf's lists and watches included), with this driver's own requests listed apart.
- with ``--profile``: the child's refreshes after the first under cProfile (top functions by
  cumulative time, in ``child.refresh_profile_cumulative``).

    .venv/bin/python -m benchmarks.gpu_scale            # 2,000 nodes x 8 cards, 20,000 pods
    .venv/bin/python -m benchmarks.gpu_scale --quick    # 100 nodes, 1,000 pods
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import apimetrics
from tenant_platform.api import constants
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import manifests
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step
from tenant_platform.testing.wait import wait_for

CRD_FILE = Path(__file__).resolve().parents[1] / "crds" / "tenancy.dev_tenantplatforms.yaml"
PLATFORM = "gpu-bench"
MODEL = "NVIDIA H100 80GB HBM3"
CARD_MIB = 81559
POD_MIB = 4096
POD_CORES = 10


# -- driver ---------------------------------------------------------------------------------------------


def parallel(what: str, items: list[Any], fn: Callable[[Any], None], threads: int) -> float:
    started = time.monotonic()
    done = 0
    lock = threading.Lock()

    def run(item: Any) -> None:
        nonlocal done
        for attempt in range(5):
            try:
                fn(item)
                break
            except errors.Conflict:
                break  # already exists (a retry after a timeout)
            except errors.Transient:
                time.sleep(0.5 * (attempt + 1))
        with lock:
            done += 1
            if done % max(1, len(items) // 10) == 0:
                print(f"  {what}: {done}/{len(items)} ({time.monotonic() - started:.0f}s)", file=sys.stderr)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(run, items))
    return time.monotonic() - started


def node_name(index: int) -> str:
    return f"gpu-{index:05d}"


def node_body(index: int, cards: int) -> dict[str, Any]:
    name = node_name(index)
    return manifests.node_manifest(
        name,
        labels={"nvidia.com/gpu.present": "true"},
        annotations={
            "hami.io/node-nvidia-register": manifests.hami_register_annotation(
                name, cards=cards, model=MODEL, mem_mib=CARD_MIB
            )
        },
        extra_capacity={"nvidia.com/gpu": str(cards * manifests.DEFAULT_SPLIT_COUNT)},
        address=f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}",
    )


def pod_body(index: int, *, nodes: int, cards: int, namespaces: int, mem: int = POD_MIB) -> dict[str, Any]:
    node = index % nodes
    card = (index // nodes) % cards
    return manifests.gpu_pod_manifest(
        f"infer-{index:06d}",
        namespace=f"bench-{index % namespaces:03d}",
        node_name=node_name(node),
        devices=[(manifests.hami_device_uuid(node_name(node), card), mem, POD_CORES)],
        bind_phase="success",
    )


def proc_memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


def status_total(kube: Kube) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, PLATFORM) or {}
    return ((body.get("status") or {}).get("gpu") or {}).get("total") or {}


def wait_status(kube: Kube, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> tuple[float, int]:
    """Seconds until the status total satisfies ``predicate``, and the GETs it took."""
    started = time.monotonic()
    polls = 0

    def converged() -> bool:
        nonlocal polls
        polls += 1
        return predicate(status_total(kube))

    wait_for(converged, "the GPU status to converge", timeout, interval=0.02, context=lambda: status_total(kube))
    return time.monotonic() - started, polls


def snapshot_footprint(kube: Kube) -> dict[str, Any]:
    """The snapshot's own size and the gpu step's time over it, measured in this process."""
    from tenant_platform.api.models import TenantPlatform  # noqa: PLC0415
    from tenant_platform.concerns.gpu import capacity  # noqa: PLC0415
    from tenant_platform.concerns.gpu import step as gpu  # noqa: PLC0415
    from tenant_platform.concerns.gpu.facts import DETECTIONS  # noqa: PLC0415
    from tenant_platform.concerns.gpu.gpustatus import ENTRIES  # noqa: PLC0415
    from tenant_platform.config import Settings  # noqa: PLC0415
    from tenant_platform.formats.hami import allocations, register  # noqa: PLC0415
    from tenant_platform.framework.base import StepContext  # noqa: PLC0415
    from tenant_platform.observe import cluster  # noqa: PLC0415

    nodes = kube.list("v1", "Node")
    pods = kube.list("v1", "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    snapshot = cluster.ClusterSnapshot()
    snapshot.replace_all(nodes, pods)
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del nodes, pods
    body = kube.get(constants.API_VERSION, constants.KIND, PLATFORM)
    assert body is not None
    platform = TenantPlatform.from_body(body)
    timings = []
    register.cache.clear()
    allocations.cache.clear()
    capacity.CACHE.clear()
    DETECTIONS.clear()
    ENTRIES.clear()
    for _ in range(3):
        ctx = StepContext(
            platform=platform, kube=kube, settings=Settings(), now=datetime.now(UTC), dry_run=True, observed=snapshot
        )
        started = time.monotonic()
        reconcile_step(gpu.STEP, ctx)
        timings.append(round(time.monotonic() - started, 3))
    return {"snapshot_mib": round(size / 2**20, 1), "step_seconds_cold_then_warm": timings}


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--cards", type=int, default=8)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--threads", type=int, default=16, help="client threads creating objects")
    parser.add_argument("--debounce", type=float, default=1.0, help="settings.gpu_debounce for the child")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the child's refreshes after the first (top functions in child)"
    )
    parser.add_argument("--samples", type=int, default=5, help="allocation changes timed")
    parser.add_argument("--quick", action="store_true", help="100 nodes, 1,000 pods")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    parser.add_argument("--operator-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--stats", help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.operator_child:
        run_child(args.kubeconfig, args.stats, args.debounce, profile=args.profile)
        return
    if args.quick:
        args.nodes, args.pods = 100, 1000
    result = run(args)
    if not args.json:
        print(render(result), file=sys.stderr)
    print(json.dumps(result, indent=2))


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "nodes": args.nodes,
        "cards_per_node": args.cards,
        "pods": args.pods,
        "debounce_seconds": args.debounce,
    }
    with ControlPlane() as cp:
        kube = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        result["kubernetes"] = kube.server_version()[2]
        cp.kubectl("apply", "--server-side", "-f", str(CRD_FILE))
        cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{constants.CRD_NAME}")
        namespaces = max(1, args.pods // 1000)
        for i in range(namespaces):
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bench-{i:03d}"}})
        for i in range(namespaces):
            while kube.get("v1", "ServiceAccount", "default", f"bench-{i:03d}") is None:
                time.sleep(0.2)
        print(f"creating {args.nodes} nodes and {args.pods} pods", file=sys.stderr)
        result["create_nodes_seconds"] = round(
            parallel("nodes", list(range(args.nodes)), lambda i: kube.create(node_body(i, args.cards)), args.threads), 1
        )
        result["create_pods_seconds"] = round(
            parallel(
                "pods",
                list(range(args.pods)),
                lambda i: kube.create(pod_body(i, nodes=args.nodes, cards=args.cards, namespaces=namespaces)),
                args.threads,
            ),
            1,
        )
        kube.create(
            {
                "apiVersion": constants.API_VERSION,
                "kind": constants.KIND,
                "metadata": {"name": PLATFORM},
                "spec": {"namespace": "gpu-bench-tenant", "domain": "gpu.example.com"},
            }
        )
        expected_cards = args.nodes * args.cards
        expected_used = args.pods * POD_MIB

        before = apimetrics.parse(cp.metrics_text())
        driver_before = dict(kube.counter.by_verb)
        stats_path = Path(tempfile.mkdtemp(prefix="gpu-bench-")) / "stats.json"
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig_path)}
        command = [
            sys.executable,
            "-m",
            "benchmarks.gpu_scale",
            "--operator-child",
            "--kubeconfig",
            str(cp.kubeconfig_path),
            "--stats",
            str(stats_path),
            "--debounce",
            str(args.debounce),
            *(["--profile"] if args.profile else []),
        ]
        started = time.monotonic()
        child = subprocess.Popen(command, env=env, cwd=Path(__file__).resolve().parents[1])
        try:
            wait_status(
                kube,
                lambda t: t.get("cards") == expected_cards and (t.get("memoryMiB") or {}).get("used") == expected_used,
                timeout=1800,
            )
            result["first_complete_status_seconds"] = round(time.monotonic() - started, 1)
            time.sleep(2)
            result["child_memory_in_sync_mib"] = proc_memory(child.pid)

            latencies = []
            used = expected_used
            for sample in range(args.samples):
                index = sample * 7919 % args.pods
                delta = sample + 1
                body = pod_body(index, nodes=args.nodes, cards=args.cards, namespaces=namespaces, mem=POD_MIB + delta)
                meta = body["metadata"]
                allocated = meta["annotations"]["hami.io/vgpu-devices-allocated"]
                used += delta
                target = used
                t0 = time.monotonic()
                kube.merge_patch(
                    "v1",
                    "Pod",
                    meta["name"],
                    {"metadata": {"annotations": {"hami.io/vgpu-devices-allocated": allocated}}},
                    namespace=meta["namespace"],
                )
                wait_status(kube, lambda t, target=target: (t.get("memoryMiB") or {}).get("used") == target, 120)
                latencies.append(round(time.monotonic() - t0, 2))
                time.sleep(args.debounce + 1)
            result["allocation_change_to_status_seconds"] = latencies
            result["child_memory_end_mib"] = proc_memory(child.pid)
        finally:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        time.sleep(1)
        after = apimetrics.parse(cp.metrics_text())
        delta = after - before
        driver = {
            k: v - driver_before.get(k, 0) for k, v in kube.counter.by_verb.items() if v - driver_before.get(k, 0)
        }
        result["apiserver_requests_during_child"] = {
            "reads": delta.reads,
            "writes": delta.writes,
            "watches": delta.watches,
            "by_verb_resource": {f"{v} {r}": n for (v, r), n in sorted(delta.by_verb_resource.items())},
        }
        result["driver_requests_in_that_window"] = driver
        if stats_path.exists():
            result["child"] = json.loads(stats_path.read_text())
        result["in_process"] = snapshot_footprint(kube)
    return result


def render(result: dict[str, Any]) -> str:
    lines = [f"{k}: {json.dumps(v)}" for k, v in result.items()]
    return "\n".join(lines)


# -- child: the GPU part of the operator ---------------------------------------------------------------


def run_child(kubeconfig: str, stats_path: str, debounce: float, *, profile: bool = False) -> None:
    """The GPU part of the operator: the snapshot's watches (gpuwatch.start_watches, as the
    operator's startup does) and the debounced gpu_refresher calling reconcile.run with only the
    gpu step registered (one refresher per platform here, so each platform's latency is timed)."""
    import logging  # noqa: PLC0415

    import kopf  # noqa: PLC0415

    from tenant_platform import gpuwatch, reconcile  # noqa: PLC0415
    from tenant_platform.concerns.gpu import step as gpu  # noqa: PLC0415
    from tenant_platform.config import Settings  # noqa: PLC0415
    from tenant_platform.observe import cluster  # noqa: PLC0415
    from tenant_platform.reconcile import registry  # noqa: PLC0415
    from tenant_platform.testing.steps import NoHandoff  # noqa: PLC0415

    logging.basicConfig(level=logging.WARNING)
    registry.STEPS[:] = [gpu.STEP]
    registry.HANDOFF = NoHandoff()  # the GPU part alone: no values ConfigMap
    kube = Kube.from_kubeconfig(kubeconfig)
    settings = Settings(gpu_debounce=debounce)
    refreshes: list[float] = []
    profiler = cProfile.Profile() if profile else None
    lock = threading.Lock()
    started = time.monotonic()
    synced_after: list[float] = []

    def refresh(name: str) -> None:
        with lock:  # serialised per platform, as the operator's loop is
            began = time.monotonic()
            body = kube.get(constants.API_VERSION, constants.KIND, name)
            if body is not None:
                if profiler is not None and refreshes:  # every refresh after the first
                    profiler.enable()
                    try:
                        reconcile.run(
                            body, kube=kube, settings=settings, now=datetime.now(UTC), observed=cluster.SNAPSHOT
                        )
                    finally:
                        profiler.disable()
                else:
                    reconcile.run(body, kube=kube, settings=settings, now=datetime.now(UTC), observed=cluster.SNAPSHOT)
            refreshes.append(round(time.monotonic() - began, 3))

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.persistence.finalizer = constants.FINALIZER

    @kopf.daemon(constants.GROUP, constants.VERSION, constants.PLURAL, cancellation_timeout=5)
    def gpu_daemon(name: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        cluster.SNAPSHOT.wait_synced(600)
        synced_after.append(round(time.monotonic() - started, 2))
        since = cluster.SNAPSHOT.changes  # changes during the first pass trigger the next one
        refresh(name)
        gpuwatch.gpu_refresher(
            stopped=stopped, refresh=lambda _changes: refresh(name), debounce=settings.gpu_debounce, since=since
        )

    # The operator's startup handler starts the same watches (handlers.start_cluster_watches);
    # keep a handle on them for their counters.
    watches: list[gpuwatch.GpuWatches] = []

    @kopf.on.startup()
    def start_cluster_watches(**_: Any) -> None:
        watches.append(gpuwatch.start_watches(kube))

    kopf.run(standalone=True, clusterwide=True)
    reflectors = {r.kind: r for w in watches for r in w.reflectors}
    top: list[str] = []
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("cumulative").print_stats(40)
        top = [line for line in text.getvalue().splitlines() if line.strip()][-41:]
    Path(stats_path).write_text(
        json.dumps(
            {
                "kube_counter_step": {
                    "reads": kube.counter.reads,
                    "writes": kube.counter.writes,
                    **kube.counter.by_verb,
                },
                "snapshot_synced_after_seconds": synced_after[:1],
                "refreshes": len(refreshes),
                "refresh_seconds_first": refreshes[:1],
                "refresh_seconds_max_after_first": max(refreshes[1:], default=0),
                "snapshot_objects": len(cluster.SNAPSHOT),
                "refresh_profile_cumulative": top,
                "reflectors": {
                    kind: {"lists": r.lists, "watches": r.watches, "events": r.events, "errors": r.errors}
                    for kind, r in reflectors.items()
                },
            }
        )
    )


if __name__ == "__main__":
    main()
