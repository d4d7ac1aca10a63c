"""DNSReady against the real API server.

The idempotence, coexistence and cleanup test edits the real kube-system/coredns ConfigMap (seeded
with kubeadm's stock Corefile) and restores it. Everything that needs a different CoreDNS setup
(k3s, k0s, a concurrent edit, running CoreDNS pods, a broken Corefile) gets a scratch namespace
of its own holding a ``coredns`` ConfigMap and Deployment, and a DnsStep pointed at it, so no
other test ever sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from networking_support import context, delete_namespace, run, writes
from tests.support import create_namespace, platform_body, sole_condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.api.reasons import DNS, Common
from tenant_platform.api.status.dns import Mode
from tenant_platform.concerns.dns.coredns import CoreDNSTarget
from tenant_platform.concerns.dns.step import STEP, DnsStep
from tenant_platform.config import Settings
from tenant_platform.formats import corefile
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.seed import STOCK_COREFILE

HOST = "istio-ingressgateway.istio-system.svc.cluster.local"
K3S_COREFILE = STOCK_COREFILE.replace(
    "    loadbalance\n", "    loadbalance\n    import /etc/coredns/custom/*.override\n"
)


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


def corefile_of(kube: Kube, namespace: str = "kube-system") -> str:
    return str(kube.get("v1", "ConfigMap", "coredns", namespace)["data"]["Corefile"])


@pytest.fixture
def real_coredns(kube: Kube) -> Iterator[str]:
    """kube-system/coredns as seeded; whatever a test leaves in it is undone afterwards."""
    original = corefile_of(kube)
    yield original
    live = kube.get("v1", "ConfigMap", "coredns", "kube-system")
    if live["data"]["Corefile"] != original:
        live["data"]["Corefile"] = original
        kube.replace(live)


@pytest.fixture
def scratch(kube: Kube, unique_name: str) -> Iterator[Callable[..., DnsStep]]:
    """Make a private CoreDNS setup in a scratch namespace; returns a DnsStep targeting it."""
    created: list[str] = []

    def make(
        text: str = STOCK_COREFILE,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        custom: dict[str, str] | None = None,
    ) -> DnsStep:
        ns = f"{unique_name}-dns"
        create_namespace(kube, ns)
        created.append(ns)
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "coredns",
                    "namespace": ns,
                    "labels": labels or {},
                    "annotations": annotations or {},
                },
                "data": {"Corefile": text},
            }
        )
        if custom is not None:
            kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "coredns-custom", "namespace": ns},
                    "data": custom,
                }
            )
        kube.create(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "coredns", "namespace": ns},
                "spec": {
                    "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    "template": {
                        "metadata": {"labels": {"k8s-app": "kube-dns"}},
                        "spec": {
                            "containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.13.1"}]
                        },
                    },
                },
            }
        )
        return DnsStep(target=CoreDNSTarget(namespace=ns))

    yield make
    for ns in created:
        delete_namespace(kube, ns)


def running_pod(kube: Kube, namespace: str, started: datetime) -> None:
    """Play the kubelet: a CoreDNS pod that has been Running since ``started``."""
    create_namespace(kube, namespace, wait_sa=True)
    pod = kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "coredns-", "namespace": namespace, "labels": {"k8s-app": "kube-dns"}},
            "spec": {"containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.13.1"}]},
        }
    )
    kube.merge_patch(
        "v1",
        "Pod",
        pod["metadata"]["name"],
        {"status": {"phase": "Running", "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}},
        namespace=namespace,
        subresource="status",
    )


# -- the real kube-system/coredns ------------------------------------------------------------------


def test_corefile_edit_is_idempotent_coexists_and_is_removed_cleanly(
    kube: Kube, real_coredns: str, unique_name: str
) -> None:
    a = platform_body(f"{unique_name}-a", "ns-a")
    b = platform_body(f"{unique_name}-b", "ns-b")

    before = writes(kube)
    status, reason, message = sole_condition(run(STEP, kube, a))
    assert (status, reason) == ("True", DNS.CONFIGURED), message
    assert "No CoreDNS pod is running" in message  # honest: nothing to ask on this control plane
    assert writes(kube) == before + 1
    text = corefile_of(kube)
    block = corefile.block_for(text, a["metadata"]["name"])
    assert block is not None and block.body == [f"rewrite name exact {a['spec']['domain']} {HOST}"]
    lines = text.splitlines()
    assert lines[block.end + 1].strip().startswith("kubernetes ")

    # Repeated reconciles: zero writes.
    before = writes(kube)
    for _ in range(3):
        assert sole_condition(run(STEP, kube, a))[0] == "True"
    assert writes(kube) == before

    # A second platform coexists.
    assert sole_condition(run(STEP, kube, b))[0] == "True"
    text = corefile_of(kube)
    assert corefile.platforms(text)[-2:] == [a["metadata"]["name"], b["metadata"]["name"]]
    before = writes(kube)
    run(STEP, kube, a)
    run(STEP, kube, b)
    assert writes(kube) == before

    # Deleting a removes only a's block; a second cleanup writes nothing.
    assert STEP.cleanup(context(kube, a)).done
    text = corefile_of(kube)
    assert corefile.block_for(text, a["metadata"]["name"]) is None
    assert corefile.block_for(text, b["metadata"]["name"]) is not None
    before = writes(kube)
    assert STEP.cleanup(context(kube, a)).done
    assert writes(kube) == before
    assert STEP.cleanup(context(kube, b)).done
    assert corefile_of(kube) == real_coredns


def test_demo_like_platform_reaches_ready_on_our_conditions(
    kube: Kube, control_plane: ControlPlane, real_coredns: str, unique_name: str, make_platform: Callable[..., Any]
) -> None:
    """The whole reconcile (every registered step), as the embedded demo's sample configures it."""
    platform = make_platform(
        unique_name,
        unique_name,
        gateway={"name": unique_name},
        mesh={"sidecarStyle": "Native"},
        edgeCertificate={"issuer": "SelfSigned", "secretName": f"{unique_name}-tls"},
    )
    try:
        outcome = reconcile.run(platform, kube=kube, settings=Settings(), now=datetime.now(UTC))
        live = kube.get(constants.API_VERSION, constants.KIND, unique_name)
        outcome = reconcile.run(live, kube=kube, settings=Settings(), now=datetime.now(UTC))
        status = {c["type"]: c for c in outcome.status["conditions"]}
        for type_ in (
            constants.MESH_READY,
            constants.GATEWAY_READY,
            constants.EDGE_CERTIFICATE_READY,
            constants.DNS_READY,
        ):
            assert status[type_]["status"] == "True", status[type_]
        recorded = outcome.status["recorded"]
        assert recorded["sidecarStyle"] == "Native"
        assert recorded["gateway"]["name"] == unique_name
        assert recorded["edgeCertificate"]["selfSigned"] is True
    finally:
        for step in reconcile.steps():
            step.cleanup(context(kube, kube.get(constants.API_VERSION, constants.KIND, unique_name) or platform))
        kube.delete("networking.istio.io/v1", "Gateway", unique_name, "istio-system")
        kube.delete("v1", "Secret", f"{unique_name}-tls", "istio-system")
        delete_namespace(kube, unique_name)


# -- scratch CoreDNS setups ------------------------------------------------------------------------


class RacingKube(Kube):
    """A Kube whose first Corefile PUT races with an edit made through another client.

    The edit lands between our read and our write, so the API server itself rejects our PUT
    with 409 (resourceVersion precondition); the step must re-read and retry. ``race`` (optional)
    is their edit of the Corefile text; by default they change ``cache 30`` to ``cache 31``.
    """

    other: Kube
    conflicts: list[errors.Conflict]

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        if not self.conflicts and obj.get("kind") == "ConfigMap":
            meta = obj["metadata"]
            theirs = self.other.get("v1", "ConfigMap", meta["name"], meta["namespace"])
            race = getattr(self, "race", None) or (lambda text: text.replace("cache 30", "cache 31"))
            theirs["data"]["Corefile"] = race(theirs["data"]["Corefile"])
            self.other.replace(theirs)
            try:
                return super().replace(obj)
            except errors.Conflict as exc:
                self.conflicts.append(exc)
                raise
        return super().replace(obj)


def test_concurrent_edit_is_retried_and_kept(
    kube: Kube, control_plane: ControlPlane, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    step = scratch()
    racing = RacingKube.from_kubeconfig(str(control_plane.kubeconfig_path))
    assert isinstance(racing, RacingKube)
    racing.other = kube
    racing.conflicts = []
    status, reason, message = sole_condition(run(step, racing, platform_body(unique_name, unique_name)))
    assert (status, reason) == ("True", DNS.CONFIGURED), message
    assert len(racing.conflicts) == 1 and racing.conflicts[0].status == 409
    assert racing.counter.by_verb.get("PUT") == 2
    text = corefile_of(kube, step.target.namespace)
    assert "cache 31" in text  # their edit survived
    assert corefile.block_for(text, unique_name) is not None  # and ours is in


def test_k3s_style_cluster_uses_coredns_custom(kube: Kube, scratch: Callable[..., DnsStep], unique_name: str) -> None:
    step = scratch(
        K3S_COREFILE,
        annotations={"objectset.rio.cattle.io/applied": "{}", "objectset.rio.cattle.io/id": ""},
        custom={"someone.override": "log\n"},
    )
    ns = step.target.namespace
    platform = platform_body(unique_name, unique_name)
    result = run(step, kube, platform)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", DNS.CONFIGURED), message
    assert "imports CoreDNS overrides" in message
    assert result.recorded["dns"]["mode"] == Mode.IMPORT
    custom = kube.get("v1", "ConfigMap", "coredns-custom", ns)["data"]
    key = f"tenant-platform-{unique_name}.override"
    assert custom[key].splitlines()[-1] == f"rewrite name exact {platform['spec']['domain']} {HOST}"
    assert custom["someone.override"] == "log\n"
    assert corefile_of(kube, ns) == K3S_COREFILE  # the distribution's Corefile is not touched

    before = writes(kube)
    run(step, kube, platform)
    assert writes(kube) == before

    assert step.cleanup(context(kube, platform)).done
    assert kube.get("v1", "ConfigMap", "coredns-custom", ns)["data"] == {"someone.override": "log\n"}


def test_k3s_style_cluster_without_the_custom_configmap_gets_it_created(
    kube: Kube, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    step = scratch(K3S_COREFILE)
    live = kube.get("apps/v1", "Deployment", "coredns", step.target.namespace)
    live["spec"]["template"]["spec"]["volumes"] = [
        {"name": "custom-config-volume", "configMap": {"name": "coredns-custom", "optional": True}}
    ]
    kube.replace(live)
    assert sole_condition(run(step, kube, platform_body(unique_name, unique_name)))[0] == "True"
    custom = kube.get("v1", "ConfigMap", "coredns-custom", step.target.namespace)
    assert list(custom["data"]) == [f"tenant-platform-{unique_name}.override"]


def test_k0s_style_cluster_is_not_edited_and_gets_the_patch(
    kube: Kube, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    step = scratch(labels={"k0s.k0sproject.io/stack": "coredns"})
    platform = platform_body(unique_name, unique_name)
    before = writes(kube)
    result = run(step, kube, platform)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("False", DNS.MANAGED_BY_DISTRIBUTION)
    assert writes(kube) == before
    assert corefile_of(kube, step.target.namespace) == STOCK_COREFILE
    assert "spec:\n  network:\n    coreDNS:\n      patches:" in message
    assert f"rewrite name exact {platform['spec']['domain']} {HOST}" in message
    # The checklist's k0s steps (issue 14): the ClusterConfig patch, then restart k0scontroller.
    assert "systemctl restart k0scontroller" in message
    assert result.recorded["dns"]["distribution"] == "k0s"


def test_stale_coredns_pods_are_detected(kube: Kube, scratch: Callable[..., DnsStep], unique_name: str) -> None:
    """Pods started before our change: without reload they must be restarted; with it, we wait."""
    step = scratch(STOCK_COREFILE.replace("    reload\n", ""))
    ns = step.target.namespace
    running_pod(kube, ns, datetime.now(UTC) - timedelta(hours=1))
    status, reason, message = sole_condition(run(step, kube, platform_body(unique_name, unique_name)))
    assert (status, reason) == ("False", DNS.RELOAD_PLUGIN_MISSING), message
    assert "rollout restart" in message

    # With the reload plugin the same pod picks it up by itself: pending, then done.
    live = kube.get("v1", "ConfigMap", "coredns", ns)
    live["data"]["Corefile"] = corefile.remove_block(STOCK_COREFILE, unique_name)
    kube.replace(live)
    result = run(step, kube, platform_body(unique_name, unique_name))
    status, reason, _ = sole_condition(result)
    assert (status, reason) == ("False", DNS.RELOAD_PENDING)
    assert result.progressing and result.requeue_after is not None
    later = datetime.now(UTC) + timedelta(minutes=5)
    assert sole_condition(run(step, kube, platform_body(unique_name, unique_name), now=later))[:2] == (
        "True",
        DNS.CONFIGURED,
    )


def test_corefile_without_kubernetes_plugin_is_refused(
    kube: Kube, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    text = ".:53 {\n    forward . /etc/resolv.conf\n}\n"
    step = scratch(text)
    before = writes(kube)
    status, reason, message = sole_condition(run(step, kube, platform_body(unique_name, unique_name)))
    assert (status, reason) == ("False", DNS.COREFILE_UNSUPPORTED)
    assert "kubernetes plugin" in message
    assert writes(kube) == before


def test_dry_run_reports_without_writing(kube: Kube, scratch: Callable[..., DnsStep], unique_name: str) -> None:
    step = scratch()
    before = writes(kube)
    status, reason, _ = sole_condition(run(step, kube, platform_body(unique_name, unique_name), dry_run=True))
    assert (status, reason) == ("False", DNS.WOULD_CONFIGURE)
    assert writes(kube) == before


def test_disabled_and_external_remove_our_rewrite(
    kube: Kube, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    step = scratch()
    ns = step.target.namespace
    assert sole_condition(run(step, kube, platform_body(unique_name, unique_name)))[0] == "True"
    assert corefile.block_for(corefile_of(kube, ns), unique_name) is not None

    status, reason, message = sole_condition(
        run(step, kube, platform_body(unique_name, unique_name, dns={"management": "Disabled"}))
    )
    assert (status, reason) == ("True", Common.DISABLED)
    assert "Removed the CoreDNS rewrite" in message
    assert corefile_of(kube, ns) == STOCK_COREFILE


def test_external_dns_is_verified_only_in_cluster(kube: Kube, unique_name: str) -> None:
    platform = platform_body(unique_name, unique_name, dns={"management": "External"})
    status, reason, _ = sole_condition(run(STEP, kube, platform))
    assert (status, reason) == ("Unknown", DNS.NOT_VERIFIABLE)

    cluster_ip = kube.get("v1", "Service", "istio-ingressgateway", "istio-system")["spec"]["clusterIP"]
    in_cluster = Settings(in_cluster=True)
    answers = {"gateway": [cluster_ip], "elsewhere": ["192.0.2.7"]}

    for answer, expected in (("gateway", DNS.RESOLVES), ("elsewhere", DNS.RESOLVES_ELSEWHERE)):
        step = DnsStep(resolver=lambda _host, a=answer: answers[a])
        assert sole_condition(run(step, kube, platform, settings=in_cluster))[1] == expected

    def fail(host: str) -> list[str]:
        raise OSError(f"Name or service not known: {host}")

    status, reason, _ = sole_condition(run(DnsStep(resolver=fail), kube, platform, settings=in_cluster))
    assert (status, reason) == ("False", DNS.DOES_NOT_RESOLVE)


# -- issue 24: the rewrite is live, however it got there -------------------------------------------


def checklist_line(platform: dict[str, Any]) -> str:
    """The checklist's bare line, as an admin adds it above the kubernetes plugin."""
    return f"    rewrite name exact {platform['spec']['domain']} {HOST}"


def with_line(platform: dict[str, Any], text: str = STOCK_COREFILE) -> str:
    return text.replace("    kubernetes cluster.local", checklist_line(platform) + "\n    kubernetes cluster.local", 1)


def rewrites_of(text: str, domain: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip().startswith(f"rewrite name exact {domain} "))


def test_k0s_cluster_with_the_patch_applied_is_ready(
    kube: Kube, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    """k0s labels its CoreDNS objects and the ClusterConfig patch left the checklist's line in the
    live Corefile: DNSReady True, nothing written."""
    platform = platform_body(unique_name, unique_name)
    text = with_line(platform)
    step = scratch(text, labels={"k0s.k0sproject.io/stack": "coredns"})
    before = writes(kube)
    result = run(step, kube, platform)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", DNS.REWRITE_FOUND), message
    assert writes(kube) == before
    assert corefile_of(kube, step.target.namespace) == text
    assert result.recorded["dns"]["distribution"] == "k0s"


def test_checklist_line_is_never_doubled(kube: Kube, scratch: Callable[..., DnsStep], unique_name: str) -> None:
    """A generic cluster with the checklist's bare line, not opted in: True, one rewrite of the
    domain, nothing written; a block of ours left beside it earlier is removed."""
    platform = platform_body(unique_name, unique_name)
    domain = platform["spec"]["domain"]
    text = with_line(platform)
    step = scratch(text)
    ns = step.target.namespace
    before = writes(kube)
    status, reason, message = sole_condition(run(step, kube, platform))
    assert (status, reason) == ("True", DNS.REWRITE_FOUND), message
    assert f"tenancy.dev/adoptable-by={unique_name}" in message
    assert writes(kube) == before
    assert rewrites_of(corefile_of(kube, ns), domain) == 1

    live = kube.get("v1", "ConfigMap", "coredns", ns)
    live["data"]["Corefile"] = corefile.upsert_block(text, unique_name, domain, HOST)
    kube.replace(live)
    result = run(step, kube, platform)
    assert sole_condition(result)[:2] == ("True", DNS.REWRITE_FOUND)
    assert corefile_of(kube, ns) == text, "only the hand-made line is left"
    assert [e[1] for e in result.events] == ["CorefileUpdated"]


def test_rke2_helmchartconfig_result_is_ready(kube: Kube, unique_name: str) -> None:
    """RKE2: no coredns ConfigMap; the chart's ConfigMap holds the rewrite the HelmChartConfig added."""
    platform = platform_body(unique_name, unique_name)
    ns = f"{unique_name}-dns"
    create_namespace(kube, ns)
    try:
        step = DnsStep(target=CoreDNSTarget(namespace=ns))
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": step.target.rke2_config_map, "namespace": ns},
            "data": {"Corefile": STOCK_COREFILE},
        }
        kube.create(cm)
        status, reason, message = sole_condition(run(step, kube, platform))
        assert (status, reason) == ("False", DNS.MANAGED_BY_DISTRIBUTION)
        assert "Helm replaces a list value whole" in message

        live = kube.get("v1", "ConfigMap", step.target.rke2_config_map, ns)
        live["data"]["Corefile"] = with_line(platform)
        kube.replace(live)
        before = writes(kube)
        status, reason, message = sole_condition(run(step, kube, platform))
        assert (status, reason) == ("True", DNS.REWRITE_FOUND), message
        assert writes(kube) == before
    finally:
        delete_namespace(kube, ns)


def test_an_import_key_of_the_admin_is_never_doubled(
    kube: Kube, scratch: Callable[..., DnsStep], unique_name: str
) -> None:
    platform = platform_body(unique_name, unique_name)
    step = scratch(K3S_COREFILE, custom={"kamiwaza.override": checklist_line(platform).strip() + "\n"})
    before = writes(kube)
    status, reason, message = sole_condition(run(step, kube, platform))
    assert (status, reason) == ("True", DNS.REWRITE_FOUND), message
    assert writes(kube) == before
    custom = kube.get("v1", "ConfigMap", "coredns-custom", step.target.namespace)["data"]
    assert list(custom) == ["kamiwaza.override"]


def test_kamaji_addon_is_not_fought(kube: Kube, scratch: Callable[..., DnsStep], unique_name: str) -> None:
    """Kamaji's CoreDNS add-on writes its Corefile back (clastix/kamaji#742): no durable way, said in
    the condition; the operator writes nothing, pass after pass (no write loop)."""
    platform = platform_body(unique_name, unique_name)
    step = scratch(labels={"kamaji.clastix.io/project": "kamaji"})
    before = writes(kube)
    for _ in range(2):
        status, reason, message = sole_condition(run(step, kube, platform))
        assert (status, reason) == ("False", DNS.MANAGED_BY_DISTRIBUTION), message
        assert "no durable way" in message and "clastix/kamaji#742" in message
    assert writes(kube) == before
    assert corefile_of(kube, step.target.namespace) == STOCK_COREFILE


def test_external_counts_external_ips_and_load_balancer_names(kube: Kube, unique_name: str) -> None:
    """The checklist exposes the gateway Service with externalIPs (a node address), or a cloud load
    balancer publishes a host name: a resolver answering with those is the gateway."""
    platform = platform_body(unique_name, unique_name, dns={"management": "External"})
    ns = f"{unique_name}-gw"
    create_namespace(kube, ns)
    try:
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "gateway", "namespace": ns},
                "spec": {
                    "type": "LoadBalancer",
                    "ports": [{"name": "https", "port": 443}],
                    "externalIPs": ["192.0.2.44"],
                },
            }
        )
        kube.merge_patch(
            "v1",
            "Service",
            "gateway",
            {"status": {"loadBalancer": {"ingress": [{"hostname": "lb-1.example.net"}]}}},
            namespace=ns,
            subresource="status",
        )
        platform["spec"]["gateway"] = {"serviceHost": f"gateway.{ns}.svc.cluster.local"}
        answers = {"node": ["192.0.2.44"], "lb": ["198.51.100.7"]}
        for answer in ("node", "lb"):
            table = {platform["spec"]["domain"]: answers[answer], "lb-1.example.net": ["198.51.100.7"]}
            step = DnsStep(resolver=lambda host, t=table: t[host])
            status, reason, message = sole_condition(run(step, kube, platform, settings=Settings(in_cluster=True)))
            assert (status, reason) == ("True", DNS.RESOLVES), (answer, message)
    finally:
        delete_namespace(kube, ns)
