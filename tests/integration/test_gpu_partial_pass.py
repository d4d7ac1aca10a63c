"""Partial (GPU-only) passes against the real API server: a HAMi allocation change makes exactly
one status write for a platform whose GPU result depends on it, reads and writes nothing of the
other steps (counted from the API server's own apiserver_request_total), keeps the other
concerns' conditions, and a platform with its GPU part turned off is not woken at all. A new GPU
node changes the recorded GPU facts, so the install-values hand-off runs too.

``reconcile.run(only=...)`` runs in-process with a ``CachedKube`` and the GPU snapshot's watches,
as the operator builds them (main.cache_scopes, gpuwatch.start_watches); the wake decision is
``concerns.gpu.step.SCOPES``, which the operator's refresher asks (state.OperatorState.wake_gpu).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support import condition

from tenant_platform import gpuwatch, main, reconcile, scheduler
from tenant_platform.api import constants
from tenant_platform.concerns.gpu import step
from tenant_platform.config import Settings
from tenant_platform.kube.cache import RBAC_SETTLE_SECONDS, CachedKube
from tenant_platform.kube.client import Kube
from tenant_platform.observe.cluster import ClusterSnapshot
from tenant_platform.testing import manifests
from tenant_platform.testing.apirequests import RequestCounter
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.wait import wait_for

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=3600)
NODE = "gpu-node-1"  # seeded: 8 cards
GPU_OFF = {"nodeLabels": {"enabled": False}, "hami": {"enabled": False}}
# What the gpu step itself reads from the API on a pass: nothing. RuntimeClasses, HAMi's Deployments
# and the DaemonSets come from the watch-fed cache, and the webhook dry run is repeated only when
# its inputs change or its verdict is older than webhook_probe_interval (concerns/gpu/healthreads.py).
GPU_STEP_READS: Counter[tuple[str, str]] = Counter()


@pytest.fixture
def cached(crd: Kube, as_operator: Kube) -> Iterator[CachedKube]:
    """The operator's cache as its own ServiceAccount (deploy/base/rbac.yaml), so its requests can
    be told apart from the control plane's (``operator_requests``)."""
    kube = CachedKube(as_operator.sibling(), main.cache_scopes(SETTINGS))
    kube.start()
    kube.snapshot = ClusterSnapshot()  # type: ignore[attr-defined]
    watches = gpuwatch.start_watches(kube, kube.snapshot)  # type: ignore[attr-defined]
    assert kube.wait_synced(30)
    assert kube.snapshot.wait_synced(30)  # type: ignore[attr-defined]
    yield kube
    watches.stop()
    kube.stop()


# What a partial pass may write, told apart; any other request of the operator counts as OTHER.
STATUS = ("patch", "tenantplatforms/status")
NODE_APPLY = ("patch", "nodes")
CONFIGMAP_APPLY = ("patch", "configmaps")


@pytest.fixture(scope="module")
def operator_requests(crd: Kube, as_operator: Kube, control_plane: ControlPlane) -> Iterator[RequestCounter]:
    """The operator ServiceAccount's own requests, classified by the API server (FlowSchemas that
    match that identity only): the namespace controller emptying an earlier test's namespace
    meanwhile is not counted (``apiserver_request_total`` has no client label)."""
    from tenant_platform.testing.operator import OPERATOR_NAMESPACE, OPERATOR_SA  # noqa: PLC0415

    counter = RequestCounter(
        crd,
        control_plane.metrics_text,
        namespace=OPERATOR_NAMESPACE,
        name=OPERATOR_SA,
        split=[STATUS, NODE_APPLY, CONFIGMAP_APPLY],
        prefix="test-gpu-partial",
    )
    counter.install(as_operator)
    yield counter
    counter.uninstall()


def snapshot(kube: Kube) -> ClusterSnapshot:
    snap: ClusterSnapshot = kube.snapshot  # type: ignore[attr-defined]
    return snap


def run(kube: Kube, name: str, only: frozenset[str] | None = None) -> reconcile.Outcome:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return reconcile.run(body, kube=kube, settings=SETTINGS, now=NOW, observed=snapshot(kube), only=only)


def converge(kube: Kube, name: str) -> reconcile.Outcome:
    for _ in range(30):
        outcome = run(kube, name)
        if condition(outcome.status, constants.RECONCILING)["status"] == "False" and not outcome.status_written:
            return outcome
        time.sleep(0.5)
    raise AssertionError(f"never converged: {condition(outcome.status, constants.READY)}")


def requests(counter: RequestCounter) -> Counter[tuple[str, str]]:
    """The operator's requests so far by (verb, resource) (``OTHER``: any other), watches left out."""
    return counter.snapshot()


def platform(make_platform: Any, name: str, **spec: Any) -> None:
    """A platform that converges on the seeded cluster: native sidecars (no probe pod), its own
    self-signed edge certificate and Gateway."""
    edge = {"secretName": f"{name}-tls"[:63], "issuer": "SelfSigned"}
    gateway = {"name": f"{name}-gw"[:63]}
    make_platform(name, name, mesh={"sidecarStyle": "Native"}, edgeCertificate=edge, gateway=gateway, **spec)


def settle(kube: Kube, since: int) -> frozenset[str] | None:
    """Wait for the snapshot to take in a change after ``since``; the nodes it touched."""
    snap = snapshot(kube)
    wait_for(lambda: snap.changes > since, "the snapshot to see the change", 30)
    time.sleep(0.5)  # let a burst of events (our own label writes) land
    return snap.changed_nodes(since)


def test_an_allocation_change_makes_one_status_write_and_touches_nothing_else(
    cached: CachedKube, admin_kube: Kube, make_platform: Any, unique_name: str, operator_requests: RequestCounter
) -> None:
    on, off = unique_name, f"{unique_name}-off"
    platform(make_platform, on)
    platform(make_platform, off, gpu=GPU_OFF)
    before_full = {name: converge(cached, name).status for name in (on, off)}
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    for name in (on, off):
        run(cached, name)  # fills the discovery and access-review answers

    # HAMi places a pod on a GPU node: 4,096 MiB and 10 % of one card.
    since = snapshot(cached).changes
    card = manifests.hami_device_uuid(NODE, 0)
    pod = manifests.gpu_pod_manifest(f"{on}-infer", namespace=on, node_name=NODE, devices=[(card, 4096, 10)])
    admin_kube.create(pod)
    changed = settle(cached, since)
    assert changed == {NODE}
    # The refresher's decision (state.OperatorState.wake_gpu asks exactly this).
    assert step.SCOPES.depends_on(on, changed, snapshot(cached).node)
    assert not step.SCOPES.depends_on(off, changed, snapshot(cached).node)

    last = cached.get(constants.API_VERSION, constants.KIND, on)
    assert last is not None
    before_full[on] = last["status"]  # as the last full pass left it
    before = requests(operator_requests)
    outcome = run(cached, on, only=scheduler.GPU_ONLY)
    delta = requests(operator_requests) - before
    assert outcome.partial and outcome.status_written
    assert set(outcome.results) == {step.COMPONENT}  # recorded GPU facts unchanged: no hand-off
    # One status write, the gpu step's own reads, and nothing of any other step (no Secret GETs,
    # no child, no access review): a full no-op pass would GET two Secrets and a ConfigMap.
    assert delta == GPU_STEP_READS + Counter({STATUS: 1}), delta
    after = outcome.status
    used = after["gpu"]["total"]["memoryMiB"]["used"]
    assert used == before_full[on]["gpu"]["total"]["memoryMiB"]["used"] + 4096
    for type_ in set(constants.CONCERN_TYPES) - {constants.GPU_READY}:
        assert condition(after, type_) == condition(before_full[on], type_), type_
    assert condition(after, constants.READY)["status"] == "True"
    assert after["observedGeneration"] == before_full[on]["observedGeneration"]

    # Nothing changed since: the same partial pass writes nothing.
    before = requests(operator_requests)
    again = run(cached, on, only=scheduler.GPU_ONLY)
    assert not again.status_written
    assert requests(operator_requests) - before == GPU_STEP_READS
    admin_kube.delete("v1", "Pod", pod["metadata"]["name"], on)


def test_a_new_gpu_node_changes_the_recorded_facts_so_the_hand_off_runs(
    cached: CachedKube, admin_kube: Kube, make_platform: Any, unique_name: str, operator_requests: RequestCounter
) -> None:
    platform(make_platform, unique_name)
    converge(cached, unique_name)
    time.sleep(RBAC_SETTLE_SECONDS + 0.5)
    run(cached, unique_name)
    node_name = f"{unique_name}-gpu"[:63]
    since = snapshot(cached).changes
    node = manifests.node_manifest(
        node_name,
        labels={"nvidia.com/gpu.present": "true"},
        annotations={
            "hami.io/node-nvidia-register": manifests.hami_register_annotation(
                node_name, cards=2, model="NVIDIA L4", mem_mib=23034
            )
        },
        extra_capacity={"nvidia.com/gpu": str(2 * manifests.DEFAULT_SPLIT_COUNT)},
    )
    admin_kube.create(node)
    try:
        changed = settle(cached, since)
        assert changed is not None and node_name in changed
        assert step.SCOPES.depends_on(unique_name, changed, snapshot(cached).node)  # a new GPU node
        before = requests(operator_requests)
        outcome = run(cached, unique_name, only=scheduler.GPU_ONLY)
        delta = requests(operator_requests) - before
        assert outcome.partial
        assert set(outcome.results) == {step.COMPONENT, "installvalues"}
        assert node_name in [n["name"] for n in outcome.status["recorded"]["gpuNodes"]]
        # Writes: the new node's label, the values ConfigMap, status; reads: the gpu step's own.
        assert delta == GPU_STEP_READS + Counter({NODE_APPLY: 1, CONFIGMAP_APPLY: 1, STATUS: 1}), delta
        values = cached.get("v1", "ConfigMap", f"{unique_name}-install-values", unique_name)
        assert values is not None and node_name in values["data"]["values.yaml"]
    finally:
        admin_kube.delete("v1", "Node", node_name)
