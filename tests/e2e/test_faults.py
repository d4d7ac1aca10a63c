"""The fault suite, short (benchmarks/faults.py has the full size and the figures in
docs/reliability.md): two operator replicas under deploy/ RBAC on a control plane of its own;
a fault-free reference round, three SIGKILLs of the leader at random moments of the first
reconcile of three platforms, kube-apiserver stopped for 5 s, etcd killed and restarted. After
each: every platform converges (Ready, one Corefile block each, claims, GPU node labels,
policies at Deny, one kubeconfig and one certificate Secret, no unrecorded storage test
objects), deleting them leaves nothing, and a bystander's namespace, ConfigMap and node label
are untouched byte for byte."""

from __future__ import annotations

import pytest
from benchmarks import faults


@pytest.mark.cluster
def test_faults_short() -> None:
    results = faults.run_suite(kills=3, outage=5.0, etcd_restarts=1, platforms=3, seed_=13)
    report = faults.markdown(results, platforms=3)
    print(report)
    assert [r.fault for r in results] == ["none", "kill", "kill", "kill", "apiserver", "etcd"]
    details = "\n".join(f"round {i}: failures {r.failures}, leaks {r.leaks}" for i, r in enumerate(results))
    assert all(not r.failures for r in results), f"{report}\n{details}"
    assert all(not r.leaks for r in results), f"{report}\n{details}"
