"""DNSReady judged by CoreDNS itself: the Corefile the operator leaves (or accepts) really resolves.

CoreDNS (hack/judges/coredns: upstream's main with the plugins cluster Corefiles use, built from
the Go module proxy by hack/build-tools.sh, never skipped) runs as a local process on free
loopback ports, its ``kubernetes`` plugin reading the test control plane as a least-privilege
ServiceAccount (kubeadm's ``system:coredns`` rules: list/watch endpoints, services, pods,
namespaces and EndpointSlices). It serves, after a reconcile of the DNS step, exactly the Corefile
in the cluster's CoreDNS ConfigMap for each variant the operator writes or accepts:

- our marked block, in the real kube-system/coredns (restored afterwards);
- the checklist's bare line (``rewrite name exact <domain> <gateway host>`` above the kubernetes
  plugin), accepted as it is, and taken over into our block when the admin opted the ConfigMap in;
- a k3s-style ``import /etc/coredns/custom/*.override`` with the ``coredns-custom`` keys as the
  imported files: our key, and an admin's own key;
- k0s: the ClusterConfig patch our message gives, applied to the ConfigMap as k0s applies it (a
  strategic merge of ``data.Corefile``), then accepted;
- RKE2: the HelmChartConfig our message describes (the chart's complete ``servers`` list with the
  rewrite entry before the ``kubernetes`` plugin), rendered into the chart's ConfigMap
  ``rke2-coredns-rke2-coredns`` as the chart renders it (``testing.rke2``), then accepted.

Each time: the platform's domain resolves to the gateway Service's ClusterIP (answered under the
domain's own name); ``kubernetes.default.svc.cluster.local`` still resolves to the kubernetes
Service's ClusterIP; a name under the domain and an unrelated external-looking name are not
rewritten (they reach the upstream unchanged), and the domain itself never reaches the upstream.

What a local process needs, and nothing else, is changed in the served Corefile (``adapt``), each
edit required to apply so a surprising Corefile fails instead of binding a shared port:

1. the server key's ``:53`` becomes a free loopback port (port 53 needs root and is the host's);
2. ``kubeconfig <file>`` goes first into the ``kubernetes`` block (outside a pod there is no
   in-cluster configuration; the file holds the ServiceAccount's token);
3. ``health``, ``ready`` and ``prometheus`` get free 127.0.0.1 ports (their defaults :8080, :8181
   and :9153 listen on every interface and collide on a shared machine); ``ready`` is what the test
   waits for, since it turns 200 only when the kubernetes plugin has synced;
4. ``forward . /etc/resolv.conf`` forwards to a stub resolver on loopback instead
   (``testing.dnswire.StubUpstream``): no query leaves the machine, and the stub records which
   names reached the upstream;
5. ``import /etc/coredns/custom/...`` reads the directory the test wrote the ``coredns-custom``
   keys into (k3s mounts that ConfigMap at /etc/coredns/custom).

``loop``, ``reload``, ``cache``, ``loadbalance``, ``errors`` and every ``rewrite`` line are served
as they are (``adapt`` asserts the rewrite lines are untouched).
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from networking_support import context, delete_namespace, run
from tests.support import create_namespace, platform_body, sole_condition

from tenant_platform.api import constants
from tenant_platform.api.reasons import DNS
from tenant_platform.api.status.dns import Mode
from tenant_platform.concerns.dns.coredns import CoreDNSTarget
from tenant_platform.concerns.dns.step import STEP, DnsStep
from tenant_platform.formats import corefile
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import dnswire, rke2, tools
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.seed import STOCK_COREFILE
from tenant_platform.testing.wait import wait_for

K3S_COREFILE = STOCK_COREFILE.replace(
    "    loadbalance\n", "    loadbalance\n    import /etc/coredns/custom/*.override\n"
)
K0S_LABELS = {"k0s.k0sproject.io/stack": "coredns"}
# kubeadm's ClusterRole system:coredns, verbatim: what CoreDNS's kubernetes plugin is granted.
COREDNS_RULES = [
    {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
]


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


# -- the judge: CoreDNS as a local process ------------------------------------------------------------


@pytest.fixture(scope="module")
def coredns_kubeconfig(
    crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A kubeconfig for a ServiceAccount holding only kubeadm's system:coredns rules."""
    name = f"coredns-judge-{uuid.uuid4().hex[:6]}"
    create_namespace(crd, name, wait_sa=True)
    crd.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": name}})
    crd.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": COREDNS_RULES,
        }
    )
    crd.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": name}],
        }
    )
    token, _ = crd.request_token(name, "coredns", expiration_seconds=3600)
    try:
        yield control_plane.kubeconfig_for_token(token, tmp_path_factory.mktemp("coredns") / "coredns.kubeconfig")
    finally:
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            with contextlib.suppress(errors.NotFound):
                crd.delete("rbac.authorization.k8s.io/v1", kind, name)
        delete_namespace(crd, name)


@pytest.fixture(scope="module")
def upstream() -> Iterator[dnswire.StubUpstream]:
    with dnswire.StubUpstream() as stub:
        yield stub


def free_port() -> int:
    """A loopback port free for both UDP and TCP (CoreDNS listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free loopback port for both UDP and TCP")


@dataclass(frozen=True)
class Ports:
    dns: int
    health: int
    ready: int
    metrics: int


def _edit(text: str, pattern: str, replacement: str | Callable[[re.Match[str]], str], what: str) -> str:
    out, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
    assert count >= 1, f"adapt: {what}: no line matched {pattern!r} in:\n{text}"
    return out


def rewrite_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip().startswith("rewrite")]


def adapt(text: str, *, ports: Ports, kubeconfig: Path, upstream: int, custom_dir: Path | None) -> str:
    """The Corefile as a local process can serve it: the module docstring's edits 1-5, nothing else."""
    out = _edit(text, r"^(\s*)\.:53(\s*\{)", rf"\g<1>.:{ports.dns}\g<2>", "1. server key .:53")

    def kubernetes(match: re.Match[str]) -> str:
        indent, line, brace = match.group(1), match.group(2), match.group(3)
        inner = indent + "   "
        if brace:
            return f"{indent}{line} {{\n{inner}kubeconfig {kubeconfig}"
        return f"{indent}{line} {{\n{inner}kubeconfig {kubeconfig}\n{indent}}}"

    out = _edit(out, r"^(\s*)(kubernetes\b[^{\n]*?)\s*(\{)?[ \t]*$", kubernetes, "2. kubeconfig")
    out = _edit(out, r"^(\s*)health\b[ \t]*", rf"\g<1>health 127.0.0.1:{ports.health} ", "3. health")
    out = _edit(out, r"^(\s*)ready\b[^\n{]*$", rf"\g<1>ready 127.0.0.1:{ports.ready}", "3. ready")
    out = _edit(out, r"^(\s*)prometheus\b[^\n{]*$", rf"\g<1>prometheus 127.0.0.1:{ports.metrics}", "3. prometheus")
    out = _edit(out, r"^(\s*)forward\s+\.\s+/etc/resolv\.conf\b", rf"\g<1>forward . 127.0.0.1:{upstream}", "4. forward")
    if custom_dir is not None:
        out = _edit(out, r"^(\s*)import\s+/etc/coredns/custom/", rf"\g<1>import {custom_dir}/", "5. import")
    assert rewrite_lines(out) == rewrite_lines(text), "adapt must never touch a rewrite line"
    return out


@dataclass(frozen=True)
class Served:
    port: int
    corefile: str
    log: Path

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def serve(coredns_kubeconfig: Path, upstream: dnswire.StubUpstream, tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start CoreDNS on a Corefile (and the coredns-custom keys, for an import); stopped after the test."""
    binary = tools.tool_path("coredns")
    procs: list[subprocess.Popen[bytes]] = []

    def start(text: str, custom: dict[str, str] | None = None) -> Served:
        work = tmp_path / f"coredns-{len(procs)}"
        work.mkdir()
        custom_dir = None
        if custom is not None:
            custom_dir = work / "custom"
            custom_dir.mkdir()
            for key, content in custom.items():  # as the kubelet projects the ConfigMap's keys
                (custom_dir / key).write_text(content)
        ports = Ports(free_port(), free_port(), free_port(), free_port())
        served = adapt(text, ports=ports, kubeconfig=coredns_kubeconfig, upstream=upstream.port, custom_dir=custom_dir)
        conf = work / "Corefile"
        conf.write_text(served)
        log = work / "coredns.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([str(binary), "-conf", str(conf)], cwd=work, stdout=out, stderr=subprocess.STDOUT)
        procs.append(proc)
        result = Served(ports.dns, served, log)

        def ready() -> bool:
            if proc.poll() is not None:
                return True
            url = f"http://127.0.0.1:{ports.ready}/ready"
            with contextlib.suppress(OSError, urllib.error.URLError), urllib.request.urlopen(url, timeout=1) as got:
                return bool(got.status == 200)
            return False

        wait_for(ready, "CoreDNS ready (kubernetes plugin synced)", timeout=60)
        assert proc.poll() is None, f"CoreDNS exited {proc.returncode} on\n{served}\n{result.tail()}"
        return result

    yield start
    for proc in procs:
        # SIGKILL: the health plugin's lameduck would hold a SIGTERM for 5 s, and nothing is judged here
        proc.kill()
        proc.wait(timeout=10)


# -- the cluster side ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    """A platform whose gateway Service exists, the addresses to expect, and a scratch namespace."""

    platform: dict[str, Any]
    domain: str
    gateway_host: str
    gateway_ip: str
    kubernetes_ip: str
    namespace: str


@pytest.fixture
def cluster(kube: Kube, unique_name: str) -> Iterator[Cluster]:
    """A gateway Service shaped like the seeded istio-ingressgateway, in a namespace of its own; the
    platform names it as spec.gateway.serviceHost. The namespace doubles as the scratch CoreDNS home."""
    ns = f"{unique_name}-dns"
    create_namespace(kube, ns)
    service = kube.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "gateway", "namespace": ns, "labels": {"app": "gateway", "istio": "ingressgateway"}},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": "gateway", "istio": "ingressgateway"},
                "ports": [
                    {"name": "http2", "port": 80, "targetPort": 8080, "protocol": "TCP"},
                    {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
                ],
            },
        }
    )
    host = f"gateway.{ns}.svc.cluster.local"
    platform = platform_body(unique_name, unique_name, gateway={"serviceHost": host})
    kubernetes_ip = kube.get("v1", "Service", "kubernetes", "default")["spec"]["clusterIP"]
    try:
        yield Cluster(platform, platform["spec"]["domain"], host, service["spec"]["clusterIP"], kubernetes_ip, ns)
    finally:
        delete_namespace(kube, ns)


def scratch_coredns(
    kube: Kube,
    cluster: Cluster,
    text: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    custom: dict[str, str] | None = None,
) -> DnsStep:
    """A CoreDNS ConfigMap (and coredns-custom) and Deployment in the cluster's scratch namespace."""
    ns = cluster.namespace
    meta = {"name": "coredns", "namespace": ns, "labels": labels or {}, "annotations": annotations or {}}
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"Corefile": text}})
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
            "metadata": {"name": "coredns", "namespace": ns, "labels": labels or {}},
            "spec": {
                "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                "template": {
                    "metadata": {"labels": {"k8s-app": "kube-dns"}},
                    "spec": {"containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.13.1"}]},
                },
            },
        }
    )
    return DnsStep(target=CoreDNSTarget(namespace=ns))


def corefile_of(kube: Kube, namespace: str) -> str:
    return str(kube.get("v1", "ConfigMap", "coredns", namespace)["data"]["Corefile"])


def checklist_line(cluster: Cluster) -> str:
    """The checklist's bare line (docs prerequisites #6), as an admin adds it."""
    return f"rewrite name exact {cluster.domain} {cluster.gateway_host}"


def with_line(cluster: Cluster, text: str = STOCK_COREFILE) -> str:
    above = f"    {checklist_line(cluster)}\n    kubernetes cluster.local"
    return text.replace("    kubernetes cluster.local", above, 1)


# -- the verdict of CoreDNS ---------------------------------------------------------------------------


def assert_resolves(served: Served, cluster: Cluster, upstream: dnswire.StubUpstream) -> None:
    """The domain resolves to the gateway's ClusterIP; other names are unchanged."""
    fqdn = cluster.domain + "."
    context_ = f"served Corefile:\n{served.corefile}\nlog:\n{served.tail()}"

    answer = dnswire.query_a(served.port, cluster.domain)
    assert answer.rcode == dnswire.NOERROR, context_
    assert answer.addresses == [(fqdn, cluster.gateway_ip)], context_  # under the domain's own name

    answer = dnswire.query_a(served.port, cluster.gateway_host)
    assert answer.addresses == [(cluster.gateway_host + ".", cluster.gateway_ip)], context_

    kubernetes = "kubernetes.default.svc.cluster.local"
    answer = dnswire.query_a(served.port, kubernetes)
    assert answer.addresses == [(kubernetes + ".", cluster.kubernetes_ip)], context_

    # Not rewritten: a name under the domain (the rule is exact) and an unrelated external name reach
    # the upstream as asked; the domain itself never does.
    for name in (f"www.{cluster.domain}", f"unrelated-{cluster.namespace}.example.org"):
        answer = dnswire.query_a(served.port, name)
        assert answer.addresses == [(name + ".", dnswire.UPSTREAM_ADDRESS)], context_
        assert name + "." in upstream.names(), context_
    assert fqdn not in upstream.names(), context_

    # A cluster name that does not exist is the kubernetes plugin's NXDOMAIN, not the gateway.
    answer = dnswire.query_a(served.port, f"missing.{cluster.namespace}.svc.cluster.local")
    assert (answer.rcode, answer.addresses) == (dnswire.NXDOMAIN, []), context_


def rewrites_of(text: str, domain: str) -> int:
    return sum(1 for line in rewrite_lines(text) if line.split()[:4] == ["rewrite", "name", "exact", domain])


# -- the variants ------------------------------------------------------------------------------------------


@pytest.fixture
def real_coredns(kube: Kube) -> Iterator[str]:
    """kube-system/coredns as seeded; whatever a test leaves in it is undone afterwards."""
    original = corefile_of(kube, "kube-system")
    yield original
    live = kube.get("v1", "ConfigMap", "coredns", "kube-system")
    if live["data"]["Corefile"] != original:
        live["data"]["Corefile"] = original
        kube.replace(live)


def test_our_marked_block_in_the_clusters_corefile_resolves(
    kube: Kube, real_coredns: str, cluster: Cluster, serve: Callable[..., Served], upstream: dnswire.StubUpstream
) -> None:
    platform = cluster.platform
    status, reason, message = sole_condition(run(STEP, kube, platform))
    assert (status, reason) == ("True", DNS.CONFIGURED), message
    text = corefile_of(kube, "kube-system")
    block = corefile.block_for(text, platform["metadata"]["name"])
    assert block is not None and block.body == [checklist_line(cluster)]
    assert rewrites_of(text, cluster.domain) == 1
    assert_resolves(serve(text), cluster, upstream)
    assert STEP.cleanup(context(kube, platform)).done


@pytest.mark.parametrize("opted_in", [False, True], ids=["accepted", "taken-over"])
def test_checklist_bare_line_resolves(
    kube: Kube, cluster: Cluster, serve: Callable[..., Served], upstream: dnswire.StubUpstream, opted_in: bool
) -> None:
    """The checklist's line as it is (not opted in: accepted, nothing written), and after the
    takeover into our block (the ConfigMap opted in with tenancy.dev/adoptable-by)."""
    name = cluster.platform["metadata"]["name"]
    annotations = {constants.ANNOTATION_ADOPTABLE: name} if opted_in else None
    step = scratch_coredns(kube, cluster, with_line(cluster), annotations=annotations)
    status, reason, message = sole_condition(run(step, kube, cluster.platform))
    expected = DNS.CONFIGURED if opted_in else DNS.REWRITE_FOUND
    assert (status, reason) == ("True", expected), message
    text = corefile_of(kube, cluster.namespace)
    assert rewrites_of(text, cluster.domain) == 1
    assert (corefile.block_for(text, name) is not None) is opted_in
    assert_resolves(serve(text), cluster, upstream)


@pytest.mark.parametrize("whose", ["ours", "admins"])
def test_coredns_custom_import_resolves(
    kube: Kube, cluster: Cluster, serve: Callable[..., Served], upstream: dnswire.StubUpstream, whose: str
) -> None:
    """k3s: the distribution's Corefile imports /etc/coredns/custom/*.override, the coredns-custom
    ConfigMap's keys. Our key beside someone's ``log``; or the admin's own key, accepted as it is."""
    custom = {"someone.override": "log\n"} if whose == "ours" else {"kamiwaza.override": checklist_line(cluster) + "\n"}
    step = scratch_coredns(
        kube,
        cluster,
        K3S_COREFILE,
        annotations={"objectset.rio.cattle.io/applied": "{}", "objectset.rio.cattle.io/id": ""},
        custom=custom,
    )
    result = run(step, kube, cluster.platform)
    status, reason, message = sole_condition(result)
    assert (status, reason) == ("True", DNS.CONFIGURED if whose == "ours" else DNS.REWRITE_FOUND), message
    if whose == "ours":
        assert result.recorded["dns"]["mode"] == Mode.IMPORT
    text = corefile_of(kube, cluster.namespace)
    assert text == K3S_COREFILE  # the distribution's Corefile is not touched
    keys: dict[str, str] = kube.get("v1", "ConfigMap", "coredns-custom", cluster.namespace)["data"]
    assert sum(rewrites_of(content, cluster.domain) for content in keys.values()) == 1
    assert_resolves(serve(text, custom=keys), cluster, upstream)


def k0s_patch(message: str) -> dict[str, Any]:
    """The ClusterConfig our ManagedByDistribution message tells the admin to add (step 3)."""
    match = re.search(r"^apiVersion: k0s\.k0sproject\.io/v1beta1\n.*?(?=^\d+\. )", message, flags=re.S | re.M)
    assert match, message
    config: dict[str, Any] = yaml.safe_load(match.group(0))
    (entry,) = config["spec"]["network"]["coreDNS"]["patches"]
    assert entry["patch"]["type"] == "StrategicMergePatch"
    return entry  # type: ignore[no-any-return]


def test_k0s_patch_result_resolves(
    kube: Kube, cluster: Cluster, serve: Callable[..., Served], upstream: dnswire.StubUpstream
) -> None:
    """k0s: the operator writes nothing and gives the ClusterConfig patch; k0s applies it to its
    ConfigMap (played here: the patch's content merged into the target, as k0s's StrategicMergePatch
    does); then DNSReady is True and CoreDNS serves the result."""
    step = scratch_coredns(kube, cluster, STOCK_COREFILE, labels=K0S_LABELS)
    status, reason, message = sole_condition(run(step, kube, cluster.platform))
    assert (status, reason) == ("False", DNS.MANAGED_BY_DISTRIBUTION), message
    entry = k0s_patch(message)
    target = entry["target"]
    assert (target["kind"], target["name"]) == ("ConfigMap", "coredns")
    content: dict[str, Any] = yaml.safe_load(entry["patch"]["content"])
    assert set(content) == {"data"} and set(content["data"]) == {"Corefile"}
    kube.merge_patch("v1", "ConfigMap", target["name"], content, namespace=cluster.namespace)

    status, reason, message = sole_condition(run(step, kube, cluster.platform))
    assert (status, reason) == ("True", DNS.REWRITE_FOUND), message
    text = corefile_of(kube, cluster.namespace)
    assert rewrites_of(text, cluster.domain) == 1
    assert_resolves(serve(text), cluster, upstream)


def rke2_entry(message: str) -> dict[str, Any]:
    """The servers[0].plugins entry our ManagedByDistribution message tells an RKE2 admin to add."""
    match = re.search(r"the entry (\{name: rewrite, parameters: [^}]*\})", message)
    assert match, message
    entry: dict[str, Any] = yaml.safe_load(match.group(1))
    return entry


def test_rke2_helmchartconfig_result_resolves(
    kube: Kube, cluster: Cluster, serve: Callable[..., Served], upstream: dnswire.StubUpstream
) -> None:
    """RKE2: no ``coredns`` ConfigMap; the chart's ConfigMap holds the Corefile its defaults render.
    The operator writes nothing and describes the HelmChartConfig entry; the admin writes the
    HelmChartConfig with the chart's complete servers list and that entry (as the message warns);
    RKE2's helm controller renders it into the chart's ConfigMap (played: ``testing.rke2``); then
    DNSReady is True and CoreDNS serves the rendered Corefile."""
    ns = cluster.namespace
    kube.create(rke2.chart_config_map("", ns))  # the chart's defaults, no HelmChartConfig yet
    step = DnsStep(target=CoreDNSTarget(namespace=ns))
    assert step.target.rke2_config_map == rke2.CONFIG_MAP
    before = kube.counter.snapshot()[1]
    status, reason, message = sole_condition(run(step, kube, cluster.platform))
    assert (status, reason) == ("False", DNS.MANAGED_BY_DISTRIBUTION), message
    entry = rke2_entry(message)
    assert entry == {"name": "rewrite", "parameters": checklist_line(cluster).removeprefix("rewrite ")}

    config = rke2.helm_chart_config(rke2.with_entry_before_kubernetes(rke2.DEFAULT_SERVERS, entry), ns)
    rendered = rke2.chart_config_map(config["spec"]["valuesContent"], ns)
    live = kube.get("v1", "ConfigMap", rke2.CONFIG_MAP, ns)
    live["data"] = rendered["data"]
    kube.replace(live)
    text = live["data"]["Corefile"]
    assert f"    rewrite   name exact {cluster.domain} {cluster.gateway_host}\n    kubernetes   cluster.local" in text

    status, reason, message = sole_condition(run(step, kube, cluster.platform))
    assert (status, reason) == ("True", DNS.REWRITE_FOUND), message
    assert kube.counter.snapshot()[1] == before + 1, "the only write is the helm controller's (played)"
    assert kube.get("v1", "ConfigMap", "coredns", ns) is None
    assert rewrites_of(text, cluster.domain) == 1
    assert_resolves(serve(text), cluster, upstream)


def test_adapt_changes_only_what_a_local_process_needs(tmp_path: Path) -> None:
    """The served Corefile differs from the cluster's in the five listed edits only."""
    ports = Ports(10053, 18080, 18181, 19153)
    text = with_line(
        Cluster({}, "a.example.com", "gw.ns.svc.cluster.local", "", "", "ns"),
        K3S_COREFILE,
    )
    served = adapt(text, ports=ports, kubeconfig=tmp_path / "k", upstream=15353, custom_dir=tmp_path / "c")
    assert served.count("\n") == text.count("\n") + 1  # the kubeconfig line
    assert f"kubeconfig {tmp_path / 'k'}" in served
    assert [line for line in served.splitlines() if "kubeconfig" not in line] == [
        line.replace(".:53 {", ".:10053 {")
        .replace("health {", "health 127.0.0.1:18080 {")
        .replace("    ready", "    ready 127.0.0.1:18181")
        .replace("prometheus :9153", "prometheus 127.0.0.1:19153")
        .replace("forward . /etc/resolv.conf", "forward . 127.0.0.1:15353")
        .replace("/etc/coredns/custom/", f"{tmp_path / 'c'}/")
        for line in text.splitlines()
    ]
    assert served != text
    assert rewrite_lines(served) == rewrite_lines(text)
