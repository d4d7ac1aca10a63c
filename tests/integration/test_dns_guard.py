"""DNSReady's guard rails against the real API server: a domain another platform holds, or that the
cluster serves itself, never changes the cluster DNS, in any mode, and not on a retry either.

The TenantPlatforms are real objects (the guard lists them); every CoreDNS setup is a scratch one
(tests/integration/test_dns.py ``scratch``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from networking_support import run, writes
from test_dns import K3S_COREFILE, RacingKube, corefile_of, scratch  # noqa: F401 (scratch is a fixture)
from tests.support import sole_condition

from tenant_platform.api.reasons import DNS
from tenant_platform.concerns.dns.step import DnsStep
from tenant_platform.formats import corefile
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.seed import STOCK_COREFILE

HOST = "istio-ingressgateway.istio-system.svc.cluster.local"


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


def snapshot(kube: Kube, namespace: str) -> tuple[str, str, dict[str, str] | None]:
    """The Corefile, its resourceVersion and coredns-custom's data: byte-identical means untouched."""
    cm = kube.get("v1", "ConfigMap", "coredns", namespace)
    custom = kube.get("v1", "ConfigMap", "coredns-custom", namespace)
    return cm["data"]["Corefile"], cm["metadata"]["resourceVersion"], (custom or {}).get("data")


@pytest.mark.parametrize("distribution", ["corefile", "import"])
def test_a_second_platform_with_the_first_ones_domain_never_changes_the_dns(
    kube: Kube,
    scratch: Callable[..., DnsStep],  # noqa: F811
    make_platform: Callable[..., dict[str, Any]],
    unique_name: str,
    distribution: str,
) -> None:
    step = scratch(K3S_COREFILE, custom={}) if distribution == "import" else scratch()
    ns = step.target.namespace
    first = make_platform(f"{unique_name}-a", f"{unique_name}-a")
    domain = first["spec"]["domain"]
    second = make_platform(f"{unique_name}-b", f"{unique_name}-b", domain=domain)

    # Before the first has written anything, its earlier claim (spec.domain) already holds the domain.
    untouched = snapshot(kube, ns)
    for management in ("CoreDNS", "External", "Disabled"):
        second["spec"]["dns"] = {"management": management}
        before = writes(kube)
        status, reason, message = sole_condition(run(step, kube, second))
        assert (status, reason) == ("False", DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM), message
        assert f"TenantPlatform {first['metadata']['name']} was created earlier" in message
        assert writes(kube) == before and snapshot(kube, ns) == untouched

    assert sole_condition(run(step, kube, first))[:2] == ("True", DNS.CONFIGURED)
    written = snapshot(kube, ns)
    assert written != untouched

    # Once the first's rewrite is in place, that is what holds it.
    second["spec"]["dns"] = {"management": "CoreDNS"}
    before = writes(kube)
    status, reason, message = sole_condition(run(step, kube, second))
    assert (status, reason) == ("False", DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM), message
    assert f"TenantPlatform {first['metadata']['name']} already rewrites {domain}" in message
    assert writes(kube) == before and snapshot(kube, ns) == written
    # The first platform is not disturbed by the second one's claim.
    assert sole_condition(run(step, kube, first))[:2] == ("True", DNS.CONFIGURED)
    assert snapshot(kube, ns) == written


def test_the_guard_runs_again_on_a_retry_of_the_corefile_edit(
    kube: Kube,
    control_plane: ControlPlane,
    scratch: Callable[..., DnsStep],  # noqa: F811
    make_platform: Callable[..., dict[str, Any]],
    unique_name: str,
) -> None:
    """Another platform's rewrite of our domain lands between our read and our PUT (409): the retry
    re-reads, sees it, and gives up without writing."""
    step = scratch()
    ns = step.target.namespace
    platform = make_platform(unique_name, unique_name)
    domain = platform["spec"]["domain"]
    racing = RacingKube.from_kubeconfig(str(control_plane.kubeconfig_path))
    assert isinstance(racing, RacingKube)
    racing.other = kube
    racing.conflicts = []
    racing.race = lambda text: corefile.upsert_block(text, "intruder", domain, HOST)  # type: ignore[attr-defined]
    status, reason, message = sole_condition(run(step, racing, platform))
    assert len(racing.conflicts) == 1  # our first PUT lost the race
    assert (status, reason) == ("False", DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM), message
    assert "TenantPlatform intruder already rewrites" in message
    assert racing.counter.by_verb.get("PUT") == 1  # no second PUT
    text = corefile_of(kube, ns)
    assert corefile.platforms(text) == ["intruder"]
    assert text == corefile.upsert_block(STOCK_COREFILE, "intruder", domain, HOST)


def test_a_domain_inside_the_cluster_zone_is_refused(
    kube: Kube,
    scratch: Callable[..., DnsStep],  # noqa: F811
    make_platform: Callable[..., dict[str, Any]],
    unique_name: str,
) -> None:
    """The cluster domain is not always cluster.local: the CRD cannot know it, the Corefile does."""
    step = scratch(STOCK_COREFILE.replace("kubernetes cluster.local", "kubernetes corp.k8s"))
    ns = step.target.namespace
    platform = make_platform(unique_name, unique_name, domain=f"api.{unique_name}.corp.k8s")
    untouched = snapshot(kube, ns)
    before = writes(kube)
    status, reason, message = sole_condition(run(step, kube, platform))
    assert (status, reason) == ("False", DNS.RESERVED_DOMAIN), message
    assert "inside corp.k8s" in message
    assert writes(kube) == before and snapshot(kube, ns) == untouched
