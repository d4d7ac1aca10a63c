"""Reconcile benchmark against the real local control plane, with the operator as a process
under its deploy/ RBAC (as in the e2e tests).

Reports, as counts and ratios rather than pass/fail timings:
  - seconds from apply to Ready for one TenantPlatform, and for N (default 50) applied at once;
  - API requests per converge (reads and writes apart; SubjectAccessReviews also on their own),
    from apiserver_request_total;
  - API requests per no-op resync (writes must be 0), with the number of passes taken from the
    operator's own tenant_platform_reconcile_passes_total (full passes, over every platform;
    per platform: divided by the platforms).

With ``--sizes 50,500`` the platforms are added in stages on one operator (side by side in one
run): per stage the seconds until all are Ready, then, after ``--settle`` seconds, API requests
per minute in steady state over ``--window`` seconds (default: one drift interval) and the
operator's VmRSS. ``--kubectl`` first times ``kubectl apply --server-side`` of the manifests
``tenant-platform render`` prints for one platform, on a control plane of its own.
``--grant-secret-watches``: once a stage's platforms are Ready, grant the operator ``list`` and
``watch`` of the two Secrets each reads (the edge certificate, the kubeconfig Secret's name) by
name, as docs/security.md's sample Role does, so the steady state shows the operator with its
Secrets watched (kube/secretwatch.py) instead of read with a GET per pass.
``--grant-secret-list``: before the operator starts, grant it ``list`` and ``watch`` of every
Secret (deploy/components/watch-secrets, the chart's ``rbac.watchSecrets``), so every stage runs
with the two cluster-wide Secret informers (our Secrets by label, every Secret's name) instead;
the steady state then also reports the Secret watches open on the API server.
Each stage also times one scrape of the operator's ``/metrics`` (seconds, bytes, series, of them
with a ``platform`` label). ``--tracemalloc N``: the operator runs under tracemalloc (N frames,
benchmarks/memtrace.py) and each stage reports its traced memory by structure, and the growth per
platform added by structure against the stage before (CPU and memory of tracing are extra: the
VmRSS and timings of such a run are not the ones to quote). ``--malloc-trim``: after each stage,
the operator's VmRSS before and after glibc's ``malloc_trim(0)`` in its process (how much of
its resident memory is freed heap not given back to the system).

    .venv/bin/python -m benchmarks.reconcile_bench [--platforms 50] [--json]
    .venv/bin/python -m benchmarks.reconcile_bench --sizes 50,500 --drift-interval 300 --kubectl
    .venv/bin/python -m benchmarks.reconcile_bench --sizes 50,200 --tracemalloc 12 --settle 20 --window 30
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from benchmarks import apimetrics, memtrace
from tenant_platform import cli, devmode
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube.client import Kube
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA, REPO, apply_file, start_operator
from tenant_platform.testing.wait import wait_for

SAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "samples" / "tenantplatform.yaml"
WATCH_SECRETS = REPO / "deploy" / "components" / "watch-secrets" / "rbac.yaml"


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
    # The storage write test (on by default) needs a provisioner and kubelet, which this control
    # plane does not play (testing/kubelet.py): off, as in the figures before it was the default.
    spec["storage"] = {**(spec.get("storage") or {}), "verify": False}
    return body


def is_ready(body: dict[str, Any] | None) -> bool:
    if not body:
        return False
    status = body.get("status") or {}
    return status.get("observedGeneration") == body["metadata"]["generation"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def passes(operator_metrics: str, kind: str = "full") -> int:
    """Reconcile passes of ``kind`` (full, or partial: GPU only) so far, over every platform (the
    counter has no platform label: a stage's passes per platform are this over its platforms)."""
    total = 0.0
    for line in operator_metrics.splitlines():
        if line.startswith("tenant_platform_reconcile_passes_total{") and f'kind="{kind}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


STEP_SERIES = re.compile(
    r"^tenant_platform_reconcile_step_duration_seconds_(?P<kind>sum|count)\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)
CONFLICT_RETRY_LOG = "changed while we edited it; retrying"


def step_totals(operator_metrics: str) -> dict[str, tuple[float, float]]:
    """Per step, over every platform: (seconds spent, observations) from the operator's
    tenant_platform_reconcile_step_duration_seconds histogram (labelled by step only)."""
    totals: dict[str, tuple[float, float]] = {}
    for line in operator_metrics.splitlines():
        match = STEP_SERIES.match(line)
        if not match:
            continue
        step = re.search(r'step="([^"]*)"', match["labels"])
        if not step:
            continue
        seconds, count = totals.get(step.group(1), (0.0, 0.0))
        if match["kind"] == "sum":
            seconds += float(match["value"])
        else:
            count += float(match["value"])
        totals[step.group(1)] = (seconds, count)
    return totals


def step_report(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Per step during a window: seconds in total, runs, and mean milliseconds per run, most first."""
    rows = []
    for step, (seconds, count) in after.items():
        s0, c0 = before.get(step, (0.0, 0.0))
        rows.append((step, seconds - s0, count - c0))
    rows.sort(key=lambda r: -r[1])
    return {
        step: {"seconds": round(sec, 1), "runs": int(n), "meanMs": round(1000 * sec / n, 1) if n else None}
        for step, sec, n in rows
    }


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of process ``pid`` so far (/proc/<pid>/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def operator_metrics(operator: Any, attempts: int = 3) -> str:
    """The operator's /metrics text; a scrape timing out (a busy 2-core machine) is tried again."""
    for attempt in range(attempts):
        try:
            return str(operator.metrics())
        except TimeoutError:
            if attempt == attempts - 1:
                raise
            time.sleep(5)
    raise AssertionError("unreachable")


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
    parser.add_argument("--sizes", help="comma-separated platform counts, added in stages (e.g. 50,500)")
    parser.add_argument("--drift-interval", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=160.0, help="seconds to wait before the idle window")
    parser.add_argument("--window", type=float, help="steady-state window in seconds (default: one drift interval)")
    parser.add_argument("--kubectl", action="store_true", help="also time kubectl apply --server-side")
    parser.add_argument("--grant-secret-watches", action="store_true", help="grant list/watch of each Secret by name")
    parser.add_argument(
        "--grant-secret-list", action="store_true", help="grant list/watch of every Secret (rbac.watchSecrets)"
    )
    parser.add_argument("--tracemalloc", type=int, metavar="FRAMES", help="trace the operator's memory by structure")
    parser.add_argument(
        "--malloc-trim", action="store_true", help="after each stage, VmRSS before and after glibc's malloc_trim(0)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")] if args.sizes else [args.platforms]
    results: dict[str, Any] = {
        "sizes": sizes,
        "driftIntervalSeconds": args.drift_interval,
        "secretWatchesGranted": args.grant_secret_watches,
        "secretListGranted": args.grant_secret_list,
        "machine": machine(),
    }
    if args.kubectl:
        results["kubectlApplyServerSide"] = kubectl_apply()
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as work:
        admin = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(admin)
        seed.seed_cluster(str(cp.kubeconfig_path))
        if args.grant_secret_list:
            apply_file(admin, WATCH_SECRETS)
        extra_env = {}
        if args.tracemalloc or args.malloc_trim:
            traces = Path(work) / "memtrace"
            traces.mkdir()
            extra_env = {
                memtrace.ENV: str(traces),
                memtrace.FRAMES_ENV: str(args.tracemalloc or 1),
                "PYTHONPATH": os.pathsep.join([str(memtrace.HOOK_DIR), str(REPO), str(REPO / "operator")]),
            }
            args.traces = traces
        operator = start_operator(
            cp, admin, Path(work), drift_interval=args.drift_interval, metrics=True, extra_env=extra_env
        )
        try:
            if args.tracemalloc:
                memtrace.start(args.traces)
            # One platform: converge.
            before = apimetrics.parse(cp.metrics_text())
            admin.apply(platform("bench-one"))
            seconds, polls = wait_ready(admin, ["bench-one"], 180)
            time.sleep(2)  # let the status write's own watch event settle
            converge = apimetrics.parse(cp.metrics_text()) - before
            results["one"] = {
                "secondsToReady": round(seconds, 2),
                "converge": {"reads": converge.reads - polls - 1, "writes": converge.writes - 1},
                "passes": passes(operator_metrics(operator)),
            }
            names: list[str] = []
            results["stages"] = []
            for size in sizes:
                results["stages"].append(stage(cp, admin, operator, names, size=size, args=args))
                print(yaml.safe_dump(results["stages"][-1], sort_keys=False), flush=True)
            if len(sizes) == 1:  # the single-size report, as before
                results["many"] = results["stages"][0]["converge"]
                results["noOpResync"] = results["stages"][0]["steadyState"]
                results["operatorRssMiB"] = results["stages"][0]["operatorRssMiB"]
        except Exception:
            print("operator log (end):\n" + operator.log()[-6000:], flush=True)
            raise
        finally:
            operator.stop()
    results["machine"]["loadAverageAtEnd"] = os.getloadavg()
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(yaml.safe_dump(results, sort_keys=False))


def stage(cp: ControlPlane, admin: Kube, operator: Any, names: list[str], *, size: int, args: Any) -> dict[str, Any]:
    """Add platforms up to ``size`` at once; time until all Ready; then the steady state."""
    new = [f"bench-{i:03d}" for i in range(len(names), size)]
    names.extend(new)
    api_before = cp.metrics_text()
    before = apimetrics.parse(api_before)
    conflicts_before = apimetrics.by_code(api_before, "409")
    operator_before = operator_metrics(operator)
    passes_before = passes(operator_before)
    steps_before = step_totals(operator_before)
    cpu_before = cpu_seconds(operator.process.pid)
    retries_before = operator.log().count(CONFLICT_RETRY_LOG)
    for name in new:
        admin.apply(platform(name))
    seconds, polls = wait_ready(admin, names, 3600)
    time.sleep(2)
    api_after = cp.metrics_text()
    converge = apimetrics.parse(api_after) - before
    conflicts = apimetrics.by_code(api_after, "409")
    conflicts.subtract(conflicts_before)
    operator_after = operator_metrics(operator)
    cpu_after = cpu_seconds(operator.process.pid)
    if args.grant_secret_watches:
        grant_secret_watches(admin, new)
    n_passes = passes(operator_metrics(operator)) - passes_before
    out: dict[str, Any] = {"platforms": size, "added": len(new)}
    out["converge"] = {
        "secondsToAllReady": round(seconds, 2),
        "readsPerPlatform": round((converge.reads - polls) / len(new), 1),
        "writesPerPlatform": round((converge.writes - len(new)) / len(new), 1),
        "passesPerPlatform": round(n_passes / len(new), 2),
        "accessReviewsPerPlatform": round(apimetrics.access_reviews(converge) / len(new), 1),
        "operatorCpuSeconds": round(cpu_after - cpu_before, 1) if cpu_after is not None and cpu_before else None,
        "corefileWrites": converge.by_verb_resource.get(("PUT", "configmaps"), 0),
        "conflicts409": {k: v for k, v in sorted(conflicts.items()) if v},
        "corefileConflictRetries": operator.log().count(CONFLICT_RETRY_LOG) - retries_before,
        "stepSeconds": step_report(steps_before, step_totals(operator_after)),
    }
    # Steady state: let time-driven transitions settle first (DNS reports ReloadPending for 150 s
    # after a Corefile change), then count over a window with nothing changing.
    time.sleep(max(args.drift_interval if args.window is None else 0.0, args.settle))
    window = args.window or args.drift_interval
    before = apimetrics.parse(cp.metrics_text())
    passes_before = passes(operator_metrics(operator))
    time.sleep(window)
    idle = apimetrics.parse(cp.metrics_text()) - before
    n_passes = passes(operator_metrics(operator)) - passes_before
    per_minute = 60.0 / window
    out["steadyState"] = {
        "windowSeconds": window,
        "passes": n_passes,
        "requestsPerMinute": round((idle.reads + idle.writes) * per_minute, 1),
        "readsPerMinute": round(idle.reads * per_minute, 1),
        "writesPerMinute": round(idle.writes * per_minute, 1),
        "readsPerPass": round(idle.reads / max(n_passes, 1), 1),
        "writes": idle.writes,
        "controlPlaneComponentWrites": idle.control_plane_writes,
        "requests": {f"{v} {r}": c for (v, r), c in sorted(idle.by_verb_resource.items()) if v != "WATCH" and c},
        "secretWatchesOpen": open_watches(cp.metrics_text(), "secrets"),
    }
    rss = _rss_kib(operator.process.pid)
    out["operatorRssMiB"] = round(rss / 1024, 1) if rss else None
    out["metricsScrape"] = scrape(operator)
    if args.malloc_trim:
        out["mallocTrim"] = memtrace.trim(args.traces)
    if args.tracemalloc:
        traced = memtrace.take(args.traces, f"stage-{size}")
        out["tracemalloc"] = {
            "tracedMiB": traced.get("tracedMiB"),
            "structures": {k: v["KiB"] for k, v in (traced.get("structures") or {}).items()},
            "sitesKiB": {k: v["KiB"] for k, v in list((traced.get("sites") or {}).items())[:15]},
        }
        previous = getattr(args, "previous_trace", None)
        if previous is not None:
            out["tracemallocGrowth"] = memtrace.slope(previous[1], previous[0], traced, size + 1)
        args.previous_trace = (size + 1, traced)  # + bench-one
    out["gpuNodes"] = node_managers(admin)
    out["loadAverage"] = os.getloadavg()
    return out


def scrape(operator: Any) -> dict[str, Any]:
    """One scrape of the operator's /metrics: seconds, bytes, series, series with a platform label."""
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics_port}/metrics", timeout=120) as resp:
        body = resp.read()
    seconds = time.monotonic() - started
    lines = [line for line in body.decode().splitlines() if line and not line.startswith("#")]
    return {
        "seconds": round(seconds, 3),
        "bytes": len(body),
        "series": len(lines),
        "platformSeries": sum(1 for line in lines if 'platform="' in line),
    }


def open_watches(metrics_text: str, resource: str) -> int:
    """Watches of ``resource`` open on the API server now (apiserver_longrunning_requests)."""
    total = 0.0
    for line in metrics_text.splitlines():
        watch = line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line
        if watch and f'resource="{resource}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def node_managers(admin: Kube) -> dict[str, Any]:
    """On the nodes carrying our labels: our field managers (most on one node) and the largest
    managedFields (entries, and bytes as JSON): what every node event carries to every watcher."""
    ours, entries, size = 0, 0, 0
    for node in admin.list("v1", "Node"):
        managed = node["metadata"].get("managedFields") or []
        mine = [m for m in managed if str(m.get("manager", "")).startswith(constants.FIELD_MANAGER + "/")]
        if mine:
            ours = max(ours, len(mine))
            entries = max(entries, len(managed))
            size = max(size, len(json.dumps(managed)))
    return {"ourLabelManagersMax": ours, "managedFieldsEntriesMax": entries, "managedFieldsBytesMax": size}


def grant_secret_watches(admin: Kube, names: list[str]) -> None:
    """A Role per namespace with ``list, watch`` on the Secrets the platforms read there, by name."""
    wanted: dict[str, set[str]] = {}
    for name in names:
        model = TenantPlatform.from_body({**platform(name), "metadata": {"name": name, "uid": ""}})
        wanted.setdefault(model.spec.gateway.namespace, set()).add(model.spec.edge_certificate.secret_name)
        wanted.setdefault(model.spec.namespace, set()).add(model.kubeconfig_secret_name)
    role = "bench-watch-secrets"
    for namespace, secrets in sorted(wanted.items()):
        rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}
        admin.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": role, "namespace": namespace},
                "rules": [{**rule, "resourceNames": sorted(secrets | _granted(admin, namespace, role))}],
            }
        )
        admin.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": OPERATOR_NAMESPACE}],
            }
        )


def _granted(admin: Kube, namespace: str, role: str) -> set[str]:
    live = admin.get("rbac.authorization.k8s.io/v1", "Role", role, namespace) or {}
    return {n for rule in live.get("rules") or [] for n in rule.get("resourceNames") or []}


def kubectl_apply() -> dict[str, Any]:
    """``kubectl apply --server-side`` of what ``tenant-platform render`` prints for one platform
    (on a seeded control plane of its own, so its CoreDNS ConfigMap clobbers nothing measured)."""
    manifests = cli.render_manifests(platform("bench-kubectl"))
    text = yaml.safe_dump_all(manifests, sort_keys=False)
    with ControlPlane() as cp:
        admin = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(admin)
        seed.seed_cluster(str(cp.kubeconfig_path))
        started = time.monotonic()
        cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text, timeout=300)
        seconds = time.monotonic() - started
    return {"manifests": len(manifests), "seconds": round(seconds, 2)}


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "loadAverageAtStart": os.getloadavg()}


def _rss_kib(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(match.group(1)) if match else None


if __name__ == "__main__":
    main()
