"""Two operator processes under deploy/ RBAC: the standby writes nothing (counted by the API
server), a dead leader is replaced within seconds, the leader killed with SIGKILL is replaced
and a platform change is reconciled afterwards; /healthz and /metrics say who leads; events
about the platform are listed back from the API server."""

from __future__ import annotations

import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.e2e.conftest import POLL
from tests.e2e.test_operator import delete_and_wait, explain, ready, sample

from tenant_platform import devmode
from tenant_platform.api import constants
from tenant_platform.kube.client import Kube
from tenant_platform.kube.lease import micro_time
from tenant_platform.main import LEASE_NAME
from tenant_platform.testing import seed
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.kubelet import StorageKubelet
from tenant_platform.testing.operator import OPERATOR_NAMESPACE, REPO, RunningOperator, apply_file, start_operator
from tenant_platform.testing.wait import wait_for

LEASE = ("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)
ELECTION = {
    "TENANT_PLATFORM_LEASE_DURATION": "4",
    "TENANT_PLATFORM_RENEW_DEADLINE": "3",
    "TENANT_PLATFORM_RETRY_PERIOD": "0.5",
}
WRITE_VERBS = {"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}
_LINE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def writes(control_plane: ControlPlane) -> Counter[str]:
    """Persisting requests the API server counted, by resource[/subresource]."""
    out: Counter[str] = Counter()
    for line in control_plane.metrics_text().splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        if labels.get("verb") in WRITE_VERBS and not labels.get("dry_run"):
            resource = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            out[resource] += int(float(match["value"]))
    return out


class FakeLeader:
    """Holds the Lease as an admin would, renewing it until ``die``; counts its own writes."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.renewals = 0
        self.stop = threading.Event()
        self.last_renewal = 0.0
        self.lock = threading.Lock()  # held while a renewal is in flight
        self.last_version = ""
        self.foreign_writes = 0  # the Lease changed between two of our renewals
        self.kube.delete(*LEASE)
        self._write()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        now = micro_time(datetime.now(UTC))
        spec = {"holderIdentity": "fake-leader", "leaseDurationSeconds": 4, "acquireTime": now, "renewTime": now}
        live = self.kube.get(*LEASE)
        if live is not None and self.last_version and live["metadata"]["resourceVersion"] != self.last_version:
            self.foreign_writes += 1
        if live is None:
            stored = self.kube.create(
                {
                    "apiVersion": LEASE[0],
                    "kind": "Lease",
                    "metadata": {"name": LEASE_NAME, "namespace": OPERATOR_NAMESPACE},
                    "spec": spec,
                }
            )
        else:
            live["spec"] = spec
            stored = self.kube.replace(live)
        self.last_version = stored["metadata"]["resourceVersion"]
        self.renewals += 1
        self.last_renewal = time.monotonic()

    def _loop(self) -> None:
        while not self.stop.wait(0.5):
            with self.lock:
                self._write()

    def die(self) -> float:
        self.stop.set()
        self.thread.join()
        return self.last_renewal


@pytest.fixture(scope="module")
def control_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane of this module's own (the session's binaries): the standby window counts
    every write the API server serves, so no other test's leftovers (namespaces still
    terminating, their pods) may write during it, whichever tests ran before on the session's."""
    with ControlPlane(bin_dir=control_plane.bin_dir) as own:
        yield own


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> Iterator[Kube]:
    """The module's control plane seeded, with the CRD, as the session's ``crd`` is."""
    api = seed.api_client_from_kubeconfig(control_plane.kubeconfig_path)
    try:
        seed.seed_cluster(api)
    finally:
        api.close()  # type: ignore[no-untyped-call]
    kube = Kube.from_kubeconfig(str(control_plane.kubeconfig_path))
    devmode.install_crd(kube)
    with StorageKubelet.for_kubeconfig(str(control_plane.kubeconfig_path)):
        yield kube


@pytest.fixture
def operators(
    crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[RunningOperator]]:
    apply_file(crd, REPO / "deploy" / "base" / "namespace.yaml")
    fake = FakeLeader(crd)
    running: list[RunningOperator] = []
    try:
        for name in ("op-a", "op-b"):
            running.append(
                start_operator(
                    control_plane,
                    crd,
                    Path(tmp_path_factory.mktemp(name)),
                    metrics=True,
                    health=True,
                    extra_env={**ELECTION, "TENANT_PLATFORM_IDENTITY": name},
                )
            )
        running[0].fake = fake  # type: ignore[attr-defined]
        yield running
    finally:
        fake.die()
        for op in running:
            op.stop()


def leader_gauge(op: RunningOperator) -> float:
    match = re.search(r"^tenant_platform_leader (\S+)$", op.metrics(), re.M)
    assert match, op.metrics()
    return float(match.group(1))


def holder(kube: Kube) -> str:
    return str(((kube.get(*LEASE) or {}).get("spec") or {}).get("holderIdentity") or "")


def test_standby_writes_nothing_then_the_survivor_takes_over_and_reconciles(
    operators: list[RunningOperator], crd: Kube, control_plane: ControlPlane, unique_name: str
) -> None:
    fake: FakeLeader = operators[0].fake  # type: ignore[attr-defined]
    by_name = {"op-a": operators[0], "op-b": operators[1]}
    name = unique_name
    # Both processes are up and standing by behind a leader that is not them.
    for op in operators:
        wait_for(
            lambda op=op: op.health()[1].get("holder") == "fake-leader", "standby sees the holder", 90, interval=POLL
        )
    crd.apply(sample(name, name))

    # -- a window of standing by: the API server counts no write by either operator ------------
    before = writes(control_plane)
    time.sleep(6)
    after = writes(control_plane)
    delta = {k: after[k] - before[k] for k in after if after[k] - before[k]}
    # Lease writes are not counted here (the API server renews its own identity Leases); the
    # Lease itself shows nobody but the fake leader wrote it.
    assert fake.foreign_writes == 0
    ours = {
        "tenantplatforms",
        "tenantplatforms/status",
        "namespaces",
        "events",
        "configmaps",
        "nodes",
        "serviceaccounts",
        "roles",
        "rolebindings",
        "secrets",
        "gateways",
        "pods",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
        "serviceaccounts/token",
    }
    assert not {k: v for k, v in delta.items() if k in ours}, delta
    body = crd.get(constants.API_VERSION, constants.KIND, name) or {}
    # The CRD defaults status to {observedGeneration: 0}; a reconcile would add conditions.
    unreconciled = not (body.get("status") or {}).get("conditions") and not body["metadata"].get("finalizers")
    assert unreconciled, "nobody reconciled"
    for op in operators:
        status, report = op.health()
        assert (status, report["role"]) == (200, "standby"), report
        assert leader_gauge(op) == 0

    # -- the leader dies: one of the two takes over within the lease duration and reconciles ----
    died = fake.die()
    wait_for(lambda: holder(crd) in by_name, "a takeover", 30, interval=POLL)
    takeover = time.monotonic() - died
    assert takeover < 4 + 3, takeover
    leader = by_name[holder(crd)]
    standby = next(op for op in operators if op is not leader)
    wait_for(lambda: ready(crd, name), f"{name} Ready", 120, interval=POLL, context=lambda: explain(crd, name, leader))
    assert leader.health()[1]["role"] == "leader" and leader_gauge(leader) == 1
    # The leader's own work, exported with bounded labels: its passes and its client's requests.
    scrape = leader.metrics()
    assert re.search(r'^tenant_platform_reconcile_passes_total\{kind="full"\} [1-9]', scrape, re.M), scrape
    assert re.search(r'^tenant_platform_api_requests_total\{code="200",verb="GET"\} [1-9]', scrape, re.M), scrape
    assert re.search(r'^tenant_platform_api_requests_total\{code="200",verb="WATCH"\} [1-9]', scrape, re.M), scrape
    status, report = standby.health()
    assert (status, report["role"]) == (200, "standby") and leader_gauge(standby) == 0
    events = crd.list("events.k8s.io/v1", "Event", namespace="default", field_selector=f"regarding.name={name}")
    assert any(e["reason"] for e in events), "the pass posted events"
    assert {e["reportingInstance"] for e in events} == {holder(crd)}

    # -- SIGKILL the leader: the standby takes over and reconciles a change made afterwards ------
    leader.process.send_signal(signal.SIGKILL)
    leader.process.wait(10)
    wait_for(lambda: holder(crd) == standby_name(by_name, standby), "the standby takes over", 30, interval=POLL)
    # How long it took is measured by benchmarks/faults.py (docs/reliability.md), not asserted here.
    crd.merge_patch(constants.API_VERSION, constants.KIND, name, {"spec": {"additionalNamespaces": [f"{name}-late"]}})
    wait_for(
        lambda: crd.get("v1", "Namespace", f"{name}-late") is not None,
        "the change reconciled",
        60,
        interval=POLL,
        context=lambda: explain(crd, name, standby),
    )
    wait_for(
        lambda: ready(crd, name), f"{name} Ready again", 120, interval=POLL, context=lambda: explain(crd, name, standby)
    )
    delete_and_wait(crd, name)

    # A graceful stop releases the Lease: the next operator need not wait for it to expire.
    standby.stop()
    assert holder(crd) == "", "\n".join(line for line in standby.log().splitlines() if "kopf.objects" not in line)[
        -4000:
    ]
    print(f"takeover after the holder died: {takeover:.1f}s")


def standby_name(by_name: dict[str, RunningOperator], op: RunningOperator) -> str:
    return next(k for k, v in by_name.items() if v is op)
