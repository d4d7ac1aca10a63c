"""Cost of the shared pod guard's parameters, against the real local control plane.

The shared pod guard (concerns/podguard/manifests.py) takes every TenantPlatform as a parameter: the API
server evaluates each policy's ``matchCondition`` once per TenantPlatform for every pod request in
a claimed namespace (the validations only for the platform whose parameter lists the namespace).
This measures what that costs as the number of platforms grows.

For each stage it submits ``--requests`` server-side dry-run creates of a classic-injected pod
(istio-init, the shape the guard checks hardest) into one guarded namespace, one after another
from one client, and reports requests per second and the ratio to the same requests without the
guard (no policies at all). Stages: no guard; the guard with 1 TenantPlatform; then 100, 500 (or
``--counts``); the extra platforms each own a namespace of their own (their parameter lists it),
so every one of them is evaluated and rejected by the matchCondition. Counts and ratios, not
pass/fail timings: one machine, shared with other work, so indicative only.

    .venv/bin/python -m benchmarks.podguard_params [--requests 300] [--counts 1,100,500] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from tenant_platform import devmode
from tenant_platform.api import constants
from tenant_platform.concerns.podguard import manifests, step, verdict
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

NAMESPACE = "bench-guarded"
PROXY = "docker.io/istio/proxyv2:1.28.0"


def injected_pod(index: int) -> dict[str, Any]:
    """A pod as istiod injects it (classic sidecar), admitted by the guard."""
    init = {
        "name": "istio-init",
        "image": PROXY,
        "args": ["istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT"],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "runAsUser": 0,
            "runAsNonRoot": False,
        },
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{index}", "namespace": NAMESPACE},
        "spec": {
            "automountServiceAccountToken": False,
            "initContainers": [init],
            "containers": [
                {"name": "istio-proxy", "image": PROXY, "securityContext": {"runAsUser": 1337}},
                {"name": "app", "image": "registry.example.com/app:1"},
            ],
        },
    }


def platform_body(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.KIND,
        "metadata": {"name": name},
        "spec": {"namespace": namespace, "domain": f"{name}.example.com", "podGuard": {"enforcement": "Deny"}},
    }


def add_platform(kube: Kube, name: str, namespace: str) -> None:
    """A TenantPlatform whose parameter (``status.podGuard``) lists ``namespace`` at Deny."""
    kube.create(platform_body(name, namespace))
    value = manifests.GuardParam((namespace,), "Deny", ("docker.io/istio/proxyv2",))
    kube.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        name,
        {"status": {"podGuard": verdict.param_fields(value)}},
        subresource="status",
    )


def rate(kube: Kube, requests: int) -> dict[str, float]:
    """Dry-run creates, one after another: requests per second and the per-request median (ms)."""
    durations = []
    start = time.perf_counter()
    for i in range(requests):
        t0 = time.perf_counter()
        kube.create(injected_pod(i), dry_run=True)
        durations.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    return {"per_second": requests / elapsed, "median_ms": statistics.median(durations) * 1000}


def guard_denies(kube: Kube) -> bool:
    bad = injected_pod(0)
    bad["metadata"]["name"] = "bench-probe"
    bad["spec"]["hostPID"] = True
    try:
        kube.create(bad, dry_run=True)
    except errors.Forbidden:
        return True
    return False


def run(requests: int, counts: list[int]) -> dict[str, Any]:
    with ControlPlane(controller_manager=False) as cp:
        kube = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(kube)
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": NAMESPACE, "labels": {constants.LABEL_PLATFORM: "bench-0"}},
            }
        )
        kube.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NAMESPACE}}
        )
        rate(kube, 20)  # warm up
        stages: list[dict[str, Any]] = [{"platforms": 0, "guard": False, **rate(kube, requests)}]
        for obj in step.shared_objects():
            kube.apply(obj)
        add_platform(kube, "bench-0", NAMESPACE)
        wait_for(lambda: guard_denies(kube), "the shared guard to deny", 60, interval=0.2)
        have = 1
        for count in counts:
            for i in range(have, count):
                add_platform(kube, f"bench-{i}", f"bench-other-{i}")
            have = max(have, count)
            time.sleep(2)  # the parameter informer catches up
            rate(kube, 20)
            stages.append({"platforms": have, "guard": True, **rate(kube, requests)})
        base = stages[0]["per_second"]
        for stage in stages:
            stage["ratio_to_no_guard"] = stage["per_second"] / base
        return {"requests_per_stage": requests, "version": kube.server_version()[2], "stages": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--counts", default="1,100,500", help="TenantPlatform counts, in increasing order")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.requests, [int(c) for c in args.counts.split(",")])
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"Kubernetes {result['version']}, {result['requests_per_stage']} dry-run pod creates per stage")
    print("| TenantPlatforms (parameters) | guard | dry-run creates/s | median ms | ratio to no guard |")
    print("| --- | --- | --- | --- | --- |")
    for s in result["stages"]:
        print(
            f"| {s['platforms']} | {'yes' if s['guard'] else 'no'} | {s['per_second']:.0f} | "
            f"{s['median_ms']:.1f} | {s['ratio_to_no_guard']:.2f} |"
        )


if __name__ == "__main__":
    main()
