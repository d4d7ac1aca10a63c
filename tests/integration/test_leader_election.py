"""Leader election (kube/lease.py) on the real API server, as the operator's own ServiceAccount
under deploy/base's RBAC: one leads, the other only reads; a dead leader is replaced after the
lease duration, a released Lease at once; two candidates racing for an expired Lease produce one
leader; the identity can touch no other Lease; and the write fence refuses before sending."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.kube.lease import LeaderElector, LeaseConfig
from tenant_platform.main import LEASE_NAME
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import OPERATOR_NAMESPACE, operator_kubeconfig

SHORT = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}


@pytest.fixture
def operator_identity(control_plane: ControlPlane, admin_kube: Kube, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for the operator's ServiceAccount; the Lease is removed before and after."""
    path, _ = operator_kubeconfig(control_plane, admin_kube, tmp_path / "operator.kubeconfig")
    admin_kube.delete("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)
    yield path
    admin_kube.delete("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)


def candidate(kubeconfig: Path, identity: str, **overrides: float) -> LeaderElector:
    config = LeaseConfig(LEASE_NAME, OPERATOR_NAMESPACE, identity, **{**SHORT, **overrides})
    return LeaderElector(Kube.from_kubeconfig(str(kubeconfig)), config)


def test_one_leads_the_other_only_reads_then_takes_over(operator_identity: Path, admin_kube: Kube) -> None:
    a, b = candidate(operator_identity, "a"), candidate(operator_identity, "b")
    assert a.try_acquire_or_renew()
    for _ in range(5):
        assert not b.try_acquire_or_renew()
        assert a.try_acquire_or_renew()  # renewals keep it
        time.sleep(0.1)
    reads, writes = b.kube.counter.snapshot()
    assert (reads, writes) == (5, 0), b.kube.counter.by_verb  # a standby only GETs the Lease
    assert b.holder == "a"

    # a dies (stops renewing): b may take over only once it saw no change for lease_duration.
    died = time.monotonic()
    while not b.try_acquire_or_renew():
        time.sleep(0.05)
    waited = time.monotonic() - died
    assert SHORT["lease_duration"] - 0.2 <= waited < SHORT["lease_duration"] + 1.0
    lease = admin_kube.get("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    # The old leader, back, finds the Lease held and stays out.
    assert not a.try_acquire_or_renew()
    assert a.holder == "b"


def test_the_run_loop_leads_loses_and_fences(operator_identity: Path, admin_kube: Kube) -> None:
    a = candidate(operator_identity, "a")
    stop = threading.Event()
    started = threading.Event()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(a.run(stop, on_started_leading=started.set)))
    thread.start()
    assert started.wait(10)
    assert a.is_leading()
    # Someone else (an admin, here) takes the Lease: a notices at its next renewal and stops.
    lease = admin_kube.get("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)
    assert lease is not None
    lease["spec"]["holderIdentity"] = "intruder"
    admin_kube.request(
        "PUT", admin_kube.path("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE), body=lease
    )
    thread.join(10)
    assert result == [True]  # lost
    assert not a.is_leading()

    # The fence: a client gated on a non-leader refuses writes before sending anything.
    fenced = Kube.from_kubeconfig(str(operator_identity))
    fenced.write_gate = a.is_leading
    with pytest.raises(errors.NotLeading):
        fenced.merge_patch("v1", "Namespace", "default", {"metadata": {"labels": {"x": "y"}}})
    assert fenced.counter.snapshot() == (0, 0)
    assert fenced.get("v1", "Namespace", "default") is not None  # reads still work


def test_release_hands_over_at_once(operator_identity: Path) -> None:
    a, b = candidate(operator_identity, "a"), candidate(operator_identity, "b", lease_duration=30, renew_deadline=20)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert not a.is_leading()
    assert b.try_acquire_or_renew()  # no 30 s wait: the holder is empty


def test_racing_candidates_produce_one_leader(operator_identity: Path) -> None:
    seed = candidate(operator_identity, "gone")
    assert seed.try_acquire_or_renew()
    racers = [candidate(operator_identity, f"r{i}") for i in range(4)]
    for racer in racers:
        assert not racer.try_acquire_or_renew()  # each sees the record once
    time.sleep(SHORT["lease_duration"] + 0.3)
    barrier = threading.Barrier(len(racers))
    won: list[str] = []

    def race(racer: LeaderElector) -> None:
        barrier.wait()
        if racer.try_acquire_or_renew():
            won.append(racer.config.identity)

    threads = [threading.Thread(target=race, args=(r,)) for r in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(won) == 1, won  # resourceVersion preconditions: one PUT wins, the rest get 409


def test_the_operator_identity_touches_no_other_lease(operator_identity: Path, admin_kube: Kube) -> None:
    """As the attacker holding the operator's token: only its own Lease, only get/create/update."""
    kube = Kube.from_kubeconfig(str(operator_identity))
    other = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-controller-manager", "namespace": "kube-system"},
        "spec": {"holderIdentity": "evil"},
    }
    with pytest.raises(errors.Forbidden):
        kube.create(other)
    admin_kube.create({**other, "metadata": {"name": "someone-else", "namespace": OPERATOR_NAMESPACE}})
    try:
        with pytest.raises(errors.Forbidden):
            kube.get("coordination.k8s.io/v1", "Lease", "someone-else", OPERATOR_NAMESPACE)
        with pytest.raises(errors.Forbidden):
            kube.merge_patch(
                "coordination.k8s.io/v1",
                "Lease",
                "someone-else",
                {"spec": {"holderIdentity": "evil"}},
                namespace=OPERATOR_NAMESPACE,
            )
    finally:
        admin_kube.delete("coordination.k8s.io/v1", "Lease", "someone-else", OPERATOR_NAMESPACE)
    assert candidate(operator_identity, "a").try_acquire_or_renew()
    with pytest.raises(errors.Forbidden):
        kube.delete("coordination.k8s.io/v1", "Lease", LEASE_NAME, OPERATOR_NAMESPACE)
    with pytest.raises(errors.Forbidden):
        kube.request("GET", kube.path("coordination.k8s.io/v1", "Lease", namespace=OPERATOR_NAMESPACE))  # list
