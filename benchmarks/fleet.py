"""Fleet benchmark: one operator process (in-process passes) preparing N tenant clusters.

A management control plane and N tenant kube-apiservers sharing its etcd under their own prefix
(testing/tenants.py), each seeded; one TenantPlatform per tenant with a kubeconfig Secret (Cluster
API's convention). Reports counts and ratios, never a pass/fail timing:

  - seconds to start the tenants, and from the first pass until every platform is prepared
    (TargetReachable, NamespacesReady, PodGuardReady, DNSReady and GPUReady True; passes run
    sequentially in this process, as one reconcile worker would);
  - this process's resident memory before any target, after a pass per platform (one client
    each), and after starting the per-target GPU watches: bytes per target for each;
  - TCP connections this process holds to the tenants, per target, after passes and with watches;
  - API requests and seconds per no-op pass against a target (sequential, one worker), without
    and with the per-target GPU snapshot and read cache (targetwatch.TargetSnapshots).

    .venv/bin/python -m benchmarks.fleet [--tenants 5] [--json]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from tenant_platform import devmode, reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.target import step
from tenant_platform.config import Settings
from tenant_platform.kube import remote
from tenant_platform.kube.client import Kube
from tenant_platform.targetwatch import TargetSnapshots
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.tenants import TenantAPIServer

SAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "samples" / "tenantplatform.yaml"
PREPARED = (
    constants.TARGET_REACHABLE,
    constants.NAMESPACES_READY,
    constants.POD_GUARD_READY,
    constants.DNS_READY,
    constants.GPU_READY,
)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def connections_to(ports: set[int]) -> int:
    """ESTABLISHED TCP sockets of this process whose remote port is one of ``ports``."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            remote_port = int(cols[2].rsplit(":", 1)[1], 16)
            if cols[3] == "01" and cols[9] in inodes and remote_port in ports:
                count += 1
    return count


def platform(name: str, cluster: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    body["metadata"] = {"name": name}
    body["spec"]["domain"] = f"{name}.example.com"
    body["spec"]["target"] = {"clusterAPI": {"namespace": "fleet", "cluster": cluster}}
    return body


def prepared(kube: Kube, name: str) -> bool:
    body = kube.get(constants.API_VERSION, constants.KIND, name) or {}
    status = {c["type"]: c["status"] for c in (body.get("status") or {}).get("conditions") or []}
    return all(status.get(t) == "True" for t in PREPARED)


def run(count: int) -> dict[str, Any]:
    settings = Settings(drift_interval=30)
    with ControlPlane(controller_manager=False) as cp:
        kube = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(kube)
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
        began = time.monotonic()
        tenants = [TenantAPIServer(cp, f"t{i}").start() for i in range(count)]
        start_seconds = time.monotonic() - began
        try:
            for tenant in tenants:
                seed.seed_cluster(str(tenant.kubeconfig_path))
                data = base64.b64encode(tenant.kubeconfig_bytes()).decode()
                kube.apply(
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "metadata": {"name": f"{tenant.name}-kubeconfig", "namespace": "fleet"},
                        "data": {"value": data},
                    }
                )
                kube.apply(platform(f"p-{tenant.name}", tenant.name))
            ports = {int(t.server.rsplit(":", 1)[1]) for t in tenants}
            names = [f"p-{t.name}" for t in tenants]
            rss_before = rss_bytes()
            began = time.monotonic()
            rounds = 0
            while True:
                rounds += 1
                for name in names:
                    body = kube.get(constants.API_VERSION, constants.KIND, name)
                    assert body is not None
                    reconcile.run(body, kube=kube, settings=settings, now=datetime.now(UTC))
                if all(prepared(kube, n) for n in names) or rounds >= 10:
                    break
            converge_seconds = time.monotonic() - began
            all_prepared = all(prepared(kube, n) for n in names)
            rss_clients = rss_bytes()
            conns_passes = connections_to(ports)
            # One more no-op round: API requests per pass against a target.
            clients = [kube_ for _, _, kube_ in remote.CLIENTS.cached()]
            before = sum(c.counter.snapshot()[0] + c.counter.snapshot()[1] for c in clients)
            noop_began = time.monotonic()
            for name in names:
                body = kube.get(constants.API_VERSION, constants.KIND, name)
                assert body is not None
                reconcile.run(body, kube=kube, settings=settings, now=datetime.now(UTC))
            noop_seconds = time.monotonic() - noop_began
            after = sum(c.counter.snapshot()[0] + c.counter.snapshot()[1] for c in clients)
            snapshots = TargetSnapshots(wake=lambda _: None, debounce=1.0)

            def observe(p: TenantPlatform, c: step.TargetConnection) -> step.TargetObservation:
                assert c.kube is not None
                return snapshots.observe(p.name, c.key, c.resource_version, c.kube)

            for name in names:
                body = kube.get(constants.API_VERSION, constants.KIND, name)
                assert body is not None
                connection = step.connect(TenantPlatform.from_body(body), kube)
                assert connection.kube is not None
                seen = observe(TenantPlatform.from_body(body), connection)
                seen.observed.wait_synced(30)
                assert seen.kube is not None
                seen.kube.wait_synced(30)  # type: ignore[attr-defined]
            time.sleep(1)
            rss_watches = rss_bytes()
            conns_watches = connections_to(ports)
            # A no-op round with the per-target snapshot and read cache (as the operator runs).
            for name in names:  # one round to settle (the first pass with the watched snapshot)
                body = kube.get(constants.API_VERSION, constants.KIND, name)
                assert body is not None
                reconcile.run(body, kube=kube, settings=settings, now=datetime.now(UTC), observe_target=observe)
            cached_before = sum(c.counter.snapshot()[0] + c.counter.snapshot()[1] for c in clients)
            for name in names:
                body = kube.get(constants.API_VERSION, constants.KIND, name)
                assert body is not None
                reconcile.run(body, kube=kube, settings=settings, now=datetime.now(UTC), observe_target=observe)
            cached_after = sum(c.counter.snapshot()[0] + c.counter.snapshot()[1] for c in clients)
            snapshots.stop_all()
        finally:
            for tenant in tenants:
                tenant.stop()
    return {
        "tenants": count,
        "tenant_start_seconds": round(start_seconds, 1),
        "rounds": rounds,
        "all_prepared": all_prepared,
        "seconds_until_all_prepared": round(converge_seconds, 1),
        "rss_mib_before_targets": round(rss_before / 2**20, 1),
        "rss_kib_per_target_clients_and_passes": round((rss_clients - rss_before) / count / 1024),
        "rss_kib_per_target_with_watches": round((rss_watches - rss_before) / count / 1024),
        "connections_per_target_after_passes": round(conns_passes / count, 2),
        "connections_per_target_with_watches": round(conns_watches / count, 2),
        "requests_per_noop_pass_per_target": round((after - before) / count, 1),
        "requests_per_noop_pass_per_target_with_cache": round((cached_after - cached_before) / count, 1),
        "seconds_per_noop_pass": round(noop_seconds / count, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.tenants)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
