"""`tenant-platform dev`: the embedded default.

Starts the local control plane (testing/controlplane.py), installs the CRD, seeds a realistic
cluster (testing/seed.py: Istio CRDs, istiod, the ingress gateway Service, CoreDNS, a default
StorageClass, GPU nodes with HAMi annotations; the StorageClass's provisioner and kubelet played
for the storage write test, testing/kubelet.py), applies the sample TenantPlatform(s), runs the
operator in-process (``main.run`` in a thread, with Settings built here: the control plane's
kubeconfig and the demo's shorter intervals; the environment is read, never written) and prints
the resulting conditions.

``operator=False`` (`tenant-platform dev --no-operator`) stops after the cluster is seeded and the
sample applied: it writes a kubeconfig for the operator's own ServiceAccount under deploy/base's
RBAC (and the admin one), prints how to run `tenant-platform run` against it, and keeps the
cluster up until Ctrl-C, so the operator runs as its own process the way it does in production.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import importlib.resources
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tenant_platform.api import constants
from tenant_platform.config import Settings, load_settings
from tenant_platform.testing.wait import wait_for

# The demo converges faster with short intervals; the environment still wins.
DEV_DEFAULTS = {"TENANT_PLATFORM_DRIFT_INTERVAL": "30", "TENANT_PLATFORM_GPU_DEBOUNCE": "1"}


def dev_settings(kubeconfig: str) -> Settings:
    """The operator's settings in dev mode: the environment over DEV_DEFAULTS, our kubeconfig."""
    return dataclasses.replace(load_settings({**DEV_DEFAULTS, **os.environ}), kubeconfig=kubeconfig)


def _data(*parts: str) -> str:
    """A file the package ships under data/ (copies of crds/ and deploy/: hack/sync-deploy.py), so
    dev mode runs from a wheel as from a checkout."""
    return importlib.resources.files("tenant_platform").joinpath("data", *parts).read_text(encoding="utf-8")


def install_crd(kube: Any) -> None:
    """Server-side apply our CRD and wait until it is Established."""
    crd = yaml.safe_load(_data("crds", "tenancy.dev_tenantplatforms.yaml"))
    kube.apply(crd)

    def established() -> bool:
        live = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", constants.CRD_NAME) or {}
        return any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (live.get("status") or {}).get("conditions") or []
        )

    wait_for(established, f"CRD {constants.CRD_NAME} to become Established", 60, interval=0.2)


def format_status(body: dict[str, Any]) -> str:
    """A human table of a TenantPlatform's conditions plus its key facts."""
    status = body.get("status") or {}
    name = body["metadata"]["name"]
    rows = [("CONDITION", "STATUS", "REASON", "MESSAGE")]
    for cond in status.get("conditions") or []:
        message = str(cond.get("message", ""))
        if len(message) > 90:
            message = message[:87] + "..."
        rows.append((cond["type"], cond["status"], cond.get("reason", ""), message))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [
        f"TenantPlatform {name} (generation {body['metadata'].get('generation')}, "
        f"observedGeneration {status.get('observedGeneration')})"
    ]
    for row in rows:
        lines.append("  ".join(col.ljust(widths[i]) if i < 3 else col for i, col in enumerate(row)))
    gpu = (status.get("gpu") or {}).get("summary")
    if gpu:
        lines.append(f"GPUs: {gpu}")
    recorded = status.get("recorded") or {}
    if recorded:
        lines.append("Recorded: " + ", ".join(sorted(recorded)))
    return "\n".join(lines)


def _ready(body: dict[str, Any] | None) -> bool:
    if not body:
        return False
    status = body.get("status") or {}
    if status.get("observedGeneration") != body["metadata"].get("generation"):
        return False
    return any(c.get("type") == constants.READY and c.get("status") == "True" for c in status.get("conditions") or [])


def main(
    *,
    files: Sequence[str],
    once: bool,
    output: str,
    kubeconfig_out: str | None,
    timeout: float,
    operator: bool = True,
    tenant_clusters: int = 0,
) -> int:
    from tenant_platform.testing import seed  # noqa: PLC0415
    from tenant_platform.testing.controlplane import ControlPlane  # noqa: PLC0415
    from tenant_platform.testing.kubelet import StorageKubelet  # noqa: PLC0415

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    say("starting the local control plane (the first run builds it from the Go module proxy)...")
    with ControlPlane() as cp, contextlib.ExitStack() as tenants:
        say(f"control plane up at {cp.server} ({cp.timings.start_seconds:.1f}s)")
        if kubeconfig_out:
            shutil.copyfile(cp.kubeconfig_path, kubeconfig_out)
            say(f"admin kubeconfig written to {kubeconfig_out}; kubectl: {cp.bin_dir / 'kubectl'}")
        from tenant_platform.kube.client import Kube  # noqa: PLC0415

        kube = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        install_crd(kube)
        seed.seed_cluster(str(cp.kubeconfig_path))
        tenants.enter_context(StorageKubelet.for_kubeconfig(str(cp.kubeconfig_path)))
        say(
            "seeded: Istio CRDs, istiod, ingress gateway Service, CoreDNS, default StorageClass (its provisioner "
            "and kubelet played for the storage write test), GPU nodes"
        )
        names: list[str] = []
        for path in files:
            for doc in yaml.safe_load_all(Path(path).read_text(encoding="utf-8")):
                if doc and doc.get("kind") == constants.KIND:
                    kube.apply(doc)
                    names.append(doc["metadata"]["name"])
        if tenant_clusters:
            names += start_fleet(cp, kube, tenant_clusters, files, tenants, say=say)
        # The operator's namespace holds its leader-election Lease.
        for doc in yaml.safe_load_all(_data("base", "namespace.yaml")):
            kube.apply(doc)
        if not operator:
            return _cluster_only(cp, kube, names, once=once, say=say)
        say(f"applied TenantPlatform {', '.join(names)}; running the operator in-process")

        from tenant_platform.main import run  # noqa: PLC0415

        stop = threading.Event()
        settings = dev_settings(str(cp.kubeconfig_path))
        thread = threading.Thread(target=run, args=(settings,), kwargs={"stop_flag": stop}, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + timeout
            bodies: dict[str, Any] = {}
            while True:
                bodies = {n: kube.get(constants.API_VERSION, constants.KIND, n) for n in names}
                if all(_ready(b) for b in bodies.values()) or time.monotonic() > deadline:
                    break
                time.sleep(1)
            _print(bodies, output)
            ready = all(_ready(b) for b in bodies.values())
            if once:
                return 0 if ready else 1
            say("operator running; Ctrl-C to stop")
            last = json.dumps(bodies, sort_keys=True, default=str)
            while True:
                time.sleep(2)
                bodies = {n: kube.get(constants.API_VERSION, constants.KIND, n) for n in names}
                current = json.dumps({n: (b or {}).get("status") for n, b in bodies.items()}, sort_keys=True)
                if current != last:
                    last = current
                    _print(bodies, output)
        except KeyboardInterrupt:
            return 0
        finally:
            stop.set()
            thread.join(timeout=15)


FLEET_NAMESPACE = "fleet"


def start_fleet(
    cp: Any, kube: Any, count: int, files: Sequence[str], stack: contextlib.ExitStack, *, say: Any
) -> list[str]:
    """``--tenant-clusters N``: N tenant kube-apiservers over the control plane's etcd (each under
    its own prefix, as Kamaji shares a datastore) with a controller manager each, seeded like the
    main cluster; their admin
    kubeconfigs in Secrets ``fleet/tenant-<i>-kubeconfig`` key ``value`` (Cluster API's
    convention); and for each a copy of the first sample TenantPlatform targeting it."""
    from tenant_platform.testing import seed  # noqa: PLC0415
    from tenant_platform.testing.kubelet import StorageKubelet  # noqa: PLC0415
    from tenant_platform.testing.tenants import TenantAPIServer  # noqa: PLC0415

    sample = next(
        doc
        for path in files
        for doc in yaml.safe_load_all(Path(path).read_text(encoding="utf-8"))
        if doc and doc.get("kind") == constants.KIND
    )
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLEET_NAMESPACE}})
    names = []
    for i in range(1, count + 1):
        cluster = f"tenant-{i}"
        tenant = stack.enter_context(TenantAPIServer(cp, cluster, controller_manager=True))
        seed.seed_cluster(str(tenant.kubeconfig_path))
        stack.enter_context(StorageKubelet.for_kubeconfig(str(tenant.kubeconfig_path)))
        secret_name = f"{cluster}{constants.CLUSTER_API_KUBECONFIG_SUFFIX}"
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret_name, "namespace": FLEET_NAMESPACE},
                "type": "Opaque",
                "data": {constants.CLUSTER_API_KUBECONFIG_KEY: base64.b64encode(tenant.kubeconfig_bytes()).decode()},
            }
        )
        doc = copy.deepcopy(sample)
        name = f"{sample['metadata']['name']}-{cluster}"
        doc["metadata"] = {"name": name}
        doc["spec"]["domain"] = f"{name}.example.com"
        doc["spec"]["target"] = {"clusterAPI": {"namespace": FLEET_NAMESPACE, "cluster": cluster}}
        kube.apply(doc)
        names.append(name)
        say(f"tenant cluster {cluster} up at {tenant.server} ({tenant.start_seconds}s), prefix {tenant.etcd_prefix}")
    return names


def _cluster_only(cp: Any, kube: Any, names: Sequence[str], *, once: bool, say: Any) -> int:
    """The seeded cluster without an operator: print how to run one against it, wait for Ctrl-C."""
    from tenant_platform.testing.operator import operator_kubeconfig  # noqa: PLC0415

    operator_config, _ = operator_kubeconfig(cp, kube, cp.work_dir / "operator.kubeconfig")
    say(f"applied TenantPlatform {', '.join(names) or '(none)'}; no operator runs (--no-operator)")
    print(
        "The cluster is ready. Run the operator as its own process, under its deploy/base RBAC:\n"
        f"  tenant-platform run --kubeconfig {operator_config}\n"
        "(a second one started the same way stands by for the leader Lease; add --no-metrics\n"
        "--no-probes, or set TENANT_PLATFORM_METRICS_PORT/HEALTH_PORT, to run two on one machine)\n"
        f"Admin kubeconfig: {cp.kubeconfig_path}\n"
        f"kubectl: {cp.bin_dir / 'kubectl'} --kubeconfig {cp.kubeconfig_path} get tp",
        flush=True,
    )
    if once:
        return 0
    say("Ctrl-C stops the cluster")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


def _print(bodies: dict[str, Any], output: str) -> None:
    """The status: a table, or (json, yaml) the status object (one platform) or a name -> status map."""
    if output in ("json", "yaml"):
        payload = {n: (b or {}).get("status") for n, b in bodies.items()}
        shown = payload if len(payload) != 1 else next(iter(payload.values()))
        if output == "json":
            print(json.dumps(shown, indent=2), flush=True)
        else:
            print("---\n" + yaml.safe_dump(shown, sort_keys=False), end="", flush=True)
    else:
        for body in bodies.values():
            if body:
                print(format_status(body), flush=True)
