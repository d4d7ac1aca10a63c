"""Reconcile benchmark against the real local control plane, with the operator as a process
under its deploy/ RBAC (as in the e2e tests).

Reports, as counts and ratios rather than pass/fail timings:
  - seconds from apply to Ready for one TenantPlatform, and for N (default 50) applied at once;
  - API requests per converge (reads and writes apart), from apiserver_request_total;
  - API requests per no-op resync (writes must be 0), with the number of passes taken from the
    operator's own tenant_platform_reconcile_step_duration_seconds_count.

    .venv/bin/python -m benchmarks.reconcile_bench [--platforms 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks import apimetrics
from tenant_platform import devmode
from tenant_platform.api import constants
from tenant_platform.kube.client import Kube
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import start_operator
from tenant_platform.testing.wait import wait_for

SAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "samples" / "tenantplatform.yaml"


def platform(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"] = {"name": name}
    spec = body["spec"]
    spec["namespace"] = name
    spec["additionalNamespaces"] = []
    spec["domain"] = f"{name}.example.com"
    spec["gateway"]["name"] = f"{name}-gateway"
    spec["edgeCertificate"]["secretName"] = f"{name}-edge-tls"
    spec["installer"]["kubeconfigSecret"] = {"enabled": False}
    return body


def is_ready(body: dict[str, Any] | None) -> bool:
    if not body:
        return False
    status = body.get("status") or {}
    return status.get("observedGeneration") == body["metadata"]["generation"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def passes(operator_metrics: str) -> int:
    """Reconcile passes so far: one namespaces-step observation per pass."""
    total = 0.0
    for line in operator_metrics.splitlines():
        if line.startswith("tenant_platform_reconcile_step_duration_seconds_count") and 'step="namespaces"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def wait_ready(kube: Kube, names: list[str], timeout: float) -> tuple[float, int]:
    """Seconds until every platform is Ready, and how many LIST requests the wait itself made."""
    start = time.monotonic()
    polls = 0
    items: dict[str, Any] = {}

    def all_ready() -> bool:
        nonlocal polls, items
        polls += 1
        items = {i["metadata"]["name"]: i for i in kube.list(constants.API_VERSION, constants.KIND)}
        return all(is_ready(items.get(n)) for n in names)

    wait_for(
        all_ready,
        "every platform Ready",
        timeout,
        interval=0.25,
        context=lambda: [n for n in names if not is_ready(items.get(n))],
    )
    return time.monotonic() - start, polls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--platforms", type=int, default=50)
    parser.add_argument("--drift-interval", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=160.0, help="seconds to wait before the idle window")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"platforms": args.platforms, "driftIntervalSeconds": args.drift_interval}
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as work:
        admin = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(admin)
        seed.seed_cluster(str(cp.kubeconfig_path))
        operator = start_operator(cp, admin, Path(work), drift_interval=args.drift_interval, metrics=True)
        try:
            # One platform: converge.
            before = apimetrics.parse(cp.metrics_text())
            admin.apply(platform("bench-one"))
            seconds, polls = wait_ready(admin, ["bench-one"], 180)
            time.sleep(2)  # let the status write's own watch event settle
            converge = apimetrics.parse(cp.metrics_text()) - before
            results["one"] = {
                "secondsToReady": round(seconds, 2),
                "converge": {"reads": converge.reads - polls - 1, "writes": converge.writes - 1},
                "passes": passes(operator.metrics()),
            }
            # N platforms at once.
            names = [f"bench-{i:03d}" for i in range(args.platforms)]
            before = apimetrics.parse(cp.metrics_text())
            passes_before = passes(operator.metrics())
            for name in names:
                admin.apply(platform(name))
            seconds, polls = wait_ready(admin, names, 900)
            time.sleep(2)
            converge = apimetrics.parse(cp.metrics_text()) - before
            n_passes = passes(operator.metrics()) - passes_before
            results["many"] = {
                "secondsToAllReady": round(seconds, 2),
                "readsPerPlatform": round((converge.reads - polls) / args.platforms, 1),
                "writesPerPlatform": round((converge.writes - args.platforms) / args.platforms, 1),
                "passesPerPlatform": round(n_passes / args.platforms, 2),
            }
            # No-op resyncs: let time-driven transitions settle first (DNS reports ReloadPending for
            # 150 s after a Corefile change), then watch a few drift intervals with nothing changing.
            time.sleep(max(args.drift_interval, args.settle))
            before = apimetrics.parse(cp.metrics_text())
            passes_before = passes(operator.metrics())
            time.sleep(args.drift_interval * 2 + 1)
            idle = apimetrics.parse(cp.metrics_text()) - before
            n_passes = passes(operator.metrics()) - passes_before
            results["noOpResync"] = {
                "passes": n_passes,
                "writes": idle.writes,
                "controlPlaneComponentWrites": idle.control_plane_writes,
                "readsPerPass": round(idle.reads / max(n_passes, 1), 1),
                "writeRequests": {
                    f"{v} {r}": c for (v, r), c in idle.by_verb_resource.items() if v in apimetrics.WRITE_VERBS
                },
            }
            rss = _rss_kib(operator.process.pid)
            results["operatorRssMiB"] = round(rss / 1024, 1) if rss else None
        finally:
            operator.stop()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(yaml.safe_dump(results, sort_keys=False))


def _rss_kib(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(match.group(1)) if match else None


if __name__ == "__main__":
    main()
