"""Cost of the shared pod guard per TenantPlatform, against the real local control plane: today's
guard (TenantPlatform parameters) beside the labelled one (no parameter), docs/performance.md.

Today's shared guard (concerns/podguard/manifests.py ``render``) takes every TenantPlatform as a
parameter: the API server evaluates each policy's ``matchCondition`` once per TenantPlatform for
every pod request in a claimed namespace. The labelled guard (``render_labelled``) has no
parameter: each enforcement's policies select the namespaces whose ``tenancy.dev/pod-guard`` label
says it, and istio-init's repositories come from the namespace's annotation (``namespaceObject``).

For each stage it submits ``--requests`` server-side dry-run creates of a classic-injected pod
(istio-init, the shape the guard checks hardest) into one guarded namespace, one after another
from one client, and reports requests per second and the median. For 1 TenantPlatform, 100, 500
(or ``--counts``): no guard (the bindings deleted), then each design in turn (``--designs``), the
shared names re-applied in place between them, ``--rounds`` times interleaved (a stage reports the
median of its rounds' medians, and its ratio to the same count's no-guard median). Every extra
platform owns a namespace of its own (its parameter lists it, its label says Deny), so the
parameter guard evaluates and rejects every one of them. Counts and ratios, not pass/fail
timings: one machine, shared with other work, so indicative only.

    .venv/bin/python -m benchmarks.podguard_params [--requests 300] [--counts 1,100,500] \
        [--designs params,labels] [--rounds 3] [--json]
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


LABELLED_ONLY_REPOSITORY = "bench.invalid/labelled/proxyv2"
"""Listed by the namespaces' annotation, not by the parameters: istio-init from it is admitted by
the labelled guard only, which tells which design is live."""
DESIGNS = ("params", "labels")


def platform_body(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.KIND,
        "metadata": {"name": name},
        "spec": {"namespace": namespace, "domain": f"{name}.example.com", "podGuard": {"enforcement": "Deny"}},
    }


def namespace_body(name: str, platform: str) -> dict[str, Any]:
    """A platform's namespace as both designs read it: the claim label (params), the guard label
    and the proxy repositories annotation (labels)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {constants.LABEL_PLATFORM: platform, manifests.GUARD_LABEL: "Deny"},
            "annotations": {manifests.GUARD_ANNOTATION: f"docker.io/istio/proxyv2,{LABELLED_ONLY_REPOSITORY}"},
        },
    }


def add_platform(kube: Kube, name: str, namespace: str) -> None:
    """A TenantPlatform whose parameter (``status.podGuard``) lists ``namespace`` at Deny, and that
    namespace labelled at Deny."""
    if kube.get("v1", "Namespace", namespace) is None:
        kube.create(namespace_body(namespace, name))
    kube.create(platform_body(name, namespace))
    value = manifests.GuardParam((namespace,), "Deny", ("docker.io/istio/proxyv2",))
    kube.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        name,
        {"status": {"podGuard": verdict.param_fields(value)}},
        subresource="status",
    )


def guard_objects(design: str) -> list[dict[str, Any]]:
    """The shared guard of one design, policies before bindings, with the step's labels."""
    objs = manifests.render_parameter_guard() if design == "params" else manifests.render_labelled()
    for obj in objs:
        obj["metadata"].setdefault("labels", {}).update(step.shared_labels())
    return objs


def live_design(kube: Kube) -> str:
    """Which design judges: istio-init from ``LABELLED_ONLY_REPOSITORY`` passes only the labelled one."""
    pod = injected_pod(0)
    pod["metadata"]["name"] = "bench-design"
    pod["spec"]["initContainers"][0]["image"] = f"{LABELLED_ONLY_REPOSITORY}:1.28.0"
    try:
        kube.create(pod, dry_run=True)
    except errors.Forbidden:
        return "params"
    return "labels"


def switch(kube: Kube, design: str) -> None:
    """The shared names re-applied in place as ``design`` (policies first), until it judges;
    ``none``: the bindings deleted, until nothing judges."""
    if design == "none":
        for obj in guard_objects("labels"):
            if obj["kind"] == manifests.BINDING_KIND:
                kube.delete(manifests.API_VERSION, manifests.BINDING_KIND, obj["metadata"]["name"])
        wait_for(lambda: not guard_denies(kube), "no guard", 60, interval=0.2)
        return
    for obj in guard_objects(design):
        kube.apply(obj)
    wait_for(lambda: live_design(kube) == design and guard_denies(kube), f"the {design} guard", 60, interval=0.2)


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


def run(requests: int, counts: list[int], designs: tuple[str, ...] = DESIGNS, rounds: int = 1) -> dict[str, Any]:
    """For each count: no guard, then each design, ``rounds`` times interleaved; a stage's median
    is the median of its rounds' medians, its ratio that over the same count's no-guard median."""
    with ControlPlane(controller_manager=False) as cp:
        kube = Kube.from_kubeconfig(str(cp.kubeconfig_path))
        devmode.install_crd(kube)
        kube.create(namespace_body(NAMESPACE, "bench-0"))
        kube.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": NAMESPACE}}
        )
        rate(kube, 20)  # warm up
        add_platform(kube, "bench-0", NAMESPACE)
        stages: list[dict[str, Any]] = []
        have = 1
        for count in counts:
            for i in range(have, count):
                add_platform(kube, f"bench-{i}", f"bench-other-{i}")
            have = max(have, count)
            measured: dict[str, list[dict[str, float]]] = {}
            for _ in range(rounds):
                for design in ("none", *designs):
                    switch(kube, design)
                    time.sleep(2)  # the parameter and namespace informers catch up
                    rate(kube, 20)
                    measured.setdefault(design, []).append(rate(kube, requests))
            base = statistics.median(m["median_ms"] for m in measured["none"])
            for design, runs in measured.items():
                median = statistics.median(m["median_ms"] for m in runs)
                stages.append(
                    {
                        "platforms": have,
                        "design": design,
                        "per_second": statistics.median(m["per_second"] for m in runs),
                        "median_ms": median,
                        "median_to_no_guard": median / base,
                        "round_medians_ms": [m["median_ms"] for m in runs],
                    }
                )
        return {"requests_per_stage": requests, "rounds": rounds, "version": kube.server_version()[2], "stages": stages}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--counts", default="1,100,500", help="TenantPlatform counts, in increasing order")
    parser.add_argument("--designs", default=",".join(DESIGNS), help="params, labels or both (comma-separated)")
    parser.add_argument("--rounds", type=int, default=1, help="measure every stage this many times, interleaved")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    designs = tuple(d for d in args.designs.split(",") if d)
    if not set(designs) <= set(DESIGNS):
        parser.error(f"--designs: one or more of {', '.join(DESIGNS)}")
    result = run(args.requests, [int(c) for c in args.counts.split(",")], designs, args.rounds)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"Kubernetes {result['version']}, {result['requests_per_stage']} dry-run pod creates per stage")
    print("| TenantPlatforms | guard | dry-run creates/s | median ms | median / no guard (same count) |")
    print("| --- | --- | --- | --- | --- |")
    for s in result["stages"]:
        print(
            f"| {s['platforms']} | {s['design']} | {s['per_second']:.0f} | "
            f"{s['median_ms']:.1f} | {s['median_to_no_guard']:.2f} |"
        )


if __name__ == "__main__":
    main()
