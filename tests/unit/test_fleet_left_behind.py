"""What a deletion that gave up on an unreachable target names (reconcile.target.left_behind), and
what a target's read cache holds (targetwatch.target_cache_scopes). Pure: no cluster."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support import platform

from tenant_platform.concerns.target.step import left_behind
from tenant_platform.targetwatch import target_cache_scopes

TARGET = {"clusterAPI": {"namespace": "capi", "cluster": "lab"}}
RECORDED = {"recorded": {"target": {"server": "https://10.0.0.1:6443"}}}


@pytest.mark.parametrize(
    ("spec", "present", "absent"),
    [
        (
            {},
            ["https://10.0.0.1:6443", "namespaces kamiwaza (deletionPolicy Retain)", "Gateway istio-system/"],
            ["Secret istio-system/"],
        ),
        ({"edgeCertificate": {"issuer": "SelfSigned", "secretName": "tls"}}, ["Secret istio-system/tls"], []),
        ({"gateway": {"management": "External"}}, [], ["Gateway "]),
        ({"dns": {"management": "Disabled"}}, [], ["CoreDNS"]),
        ({"dns": {"management": "CoreDNS"}}, ["the CoreDNS rewrite of lab.example.com"], []),
        ({"deletionPolicy": "Delete"}, ["(deletionPolicy Delete)"], []),
        ({}, ["tenant-platform-lab-pod-guard-deny", "tenant-platform-lab-exec-guard-warn", "GPU node labels"], []),
    ],
)
def test_left_behind_names_every_kind_a_step_may_have_written(
    spec: dict[str, Any], present: list[str], absent: list[str]
) -> None:
    text = left_behind(platform("lab", "kamiwaza", uid="u", status=RECORDED, target=TARGET, **spec))
    for part in present:
        assert part in text, (part, text)
    for part in absent:
        assert part not in text, (part, text)


def test_target_cache_holds_gpu_health_facts_per_hami_namespace() -> None:
    scopes = {(s.kind, s.namespace, s.name) for s in target_cache_scopes(("kube-system", "hami"), "istio-system")}
    assert ("DaemonSet", None, None) in scopes
    assert ("RuntimeClass", None, None) in scopes
    assert ("Namespace", None, None) in scopes
    for ns in ("kube-system", "hami"):
        assert ("Deployment", ns, None) in scopes
        assert ("ConfigMap", ns, "hami-scheduler-device") in scopes
    assert not any(kind == "Secret" for kind, _, _ in scopes)
