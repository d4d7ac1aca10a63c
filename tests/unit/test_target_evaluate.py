"""TargetReachable (concerns/target/verdict.py): one row per reason; and the Secret conventions of spec.target."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pydantic
import pytest
from tests.support import platform

from tenant_platform.api.models import SecretRef
from tenant_platform.api.reasons import Target
from tenant_platform.concerns.target.verdict import TargetFacts, evaluate

REF = SecretRef(namespace="capi", name="lab-a-kubeconfig", key="value")
GOOD = TargetFacts(secret=REF, server="https://10.0.0.9:6443", version=(1, 31, "v1.31.2"), cluster_uid="u-1")


@dataclass(frozen=True)
class Row:
    facts: TargetFacts
    reason: Target
    status: str
    says: str


ROWS = [
    Row(GOOD, Target.REACHABLE, "True", "Reached https://10.0.0.9:6443 (Kubernetes v1.31.2)"),
    Row(replace(GOOD, secret_found=False), Target.SECRET_NOT_FOUND, "False", "capi/lab-a-kubeconfig does not exist"),
    Row(replace(GOOD, secret_forbidden=True), Target.SECRET_NOT_FOUND, "False", "may not read"),
    Row(replace(GOOD, key_present=False, keys=("admin.conf",)), Target.KEY_MISSING, "False", "its keys: admin.conf"),
    Row(
        replace(
            GOOD, kubeconfig_error="the kubeconfig's user uses an exec credential plugin, which the operator refuses"
        ),
        Target.INVALID_KUBECONFIG,
        "False",
        "exec credential plugin",
    ),
    Row(replace(GOOD, probe_status=0, probe_message="connection refused"), Target.UNREACHABLE, "False", "refused"),
    Row(replace(GOOD, probe_status=503, probe_message="unavailable"), Target.UNREACHABLE, "False", "did not answer"),
    Row(replace(GOOD, probe_status=401, probe_message="Unauthorized"), Target.UNAUTHORIZED, "False", "credentials"),
    Row(replace(GOOD, probe_status=403, probe_message="forbidden"), Target.UNAUTHORIZED, "False", "kube-system"),
    Row(replace(GOOD, version=(1, 29, "v1.29.9")), Target.VERSION_TOO_OLD, "False", "v1.29.9; the operator needs 1.30"),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.reason.value}-{r.says[:20]}")
def test_target_reachable(row: Row) -> None:
    verdict = evaluate(row.facts)
    assert verdict.condition.reason == row.reason
    assert verdict.condition.status == row.status
    assert row.says in verdict.condition.message
    assert verdict.reachable == (row.status == "True")
    assert (verdict.recorded is not None) == verdict.reachable


def test_reached_target_is_recorded_typed() -> None:
    recorded = evaluate(GOOD).recorded
    assert recorded is not None
    assert recorded.dump() == {
        "secret": "capi/lab-a-kubeconfig",
        "server": "https://10.0.0.9:6443",
        "version": "v1.31.2",
        "clusterUid": "u-1",
    }


CONVENTIONS = [
    (
        {"clusterAPI": {"namespace": "capi", "cluster": "lab-a"}},
        SecretRef(namespace="capi", name="lab-a-kubeconfig", key="value"),
    ),
    (
        {"kamaji": {"namespace": "tcp", "tenantControlPlane": "lab-b"}},
        SecretRef(namespace="tcp", name="lab-b-admin-kubeconfig", key="admin.conf"),
    ),
    (
        {"kamaji": {"namespace": "tcp", "tenantControlPlane": "lab-b", "key": "super-admin.conf"}},
        SecretRef(namespace="tcp", name="lab-b-admin-kubeconfig", key="super-admin.conf"),
    ),
    ({"kubeconfigSecret": {"namespace": "x", "name": "k"}}, SecretRef(namespace="x", name="k", key="value")),
]


@pytest.mark.parametrize(("target", "ref"), CONVENTIONS)
def test_secret_conventions(target: dict[str, object], ref: SecretRef) -> None:
    tp = platform("p", "t", domain="t.example.com", target=target)
    assert tp.spec.target is not None
    assert tp.spec.target.secret_ref() == ref


@pytest.mark.parametrize(
    "target",
    [
        {},
        {"clusterAPI": {"namespace": "capi", "cluster": "a"}, "kamaji": {"namespace": "t", "tenantControlPlane": "b"}},
        {"kubeconfigSecret": {"namespace": "x", "name": "k", "key": "../etc"}},
    ],
)
def test_target_needs_exactly_one_valid_source(target: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        platform("p", "t", domain="t.example.com", target=target)
