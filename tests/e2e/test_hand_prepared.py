"""A cluster prepared by hand exactly as the checklist says reaches Ready, following only our docs
(issue 24, "Done when"), per CoreDNS distribution: generic (kubeadm-style), k0s and RKE2, and in a
Kamaji tenant through ``spec.target`` (``test_a_hand_prepared_kamaji_tenant_...``).

By hand, as an admin's ``kubectl apply`` makes them (nothing of ours): the namespaces ``kamiwaza``
and ``kamiwaza-extensions`` with the checklist's labels; its installer ServiceAccount, Roles and
RoleBindings; its pod and exec guard (``kamiwaza-tenant-pod-guard``/``-exec-guard``, bindings by
name over both namespaces, ``[Deny, Audit]``); its Gateway ``kamiwaza-gateway`` with plain hosts;
its self-signed edge certificate Secret and trust ConfigMap; its CoreDNS rewrite where the
distribution puts it:

- **generic**: the checklist's line above the ``kubernetes`` plugin in ``kube-system/coredns``;
- **k0s**: the same line in the live Corefile (the ClusterConfig patch applied and k0scontroller
  restarted), the CoreDNS ConfigMap and Deployment labelled as k0s labels its stack;
- **rke2**: no ``coredns`` ConfigMap or Deployment; the chart's ConfigMap
  ``rke2-coredns-rke2-coredns`` as the chart renders the HelmChartConfig our DNSReady message
  describes (``testing.rke2``, the rendering the CoreDNS judge resolves).

Then docs/migration.md's "Step by step", command for command (read from the page): the opt-in
annotations, the TenantPlatform (the sample, ``issuer: External``), the pod guard's redundancy
command from its message, ``kubectl wait --for=condition=Ready``. The operator runs as a process
under deploy/ RBAC (tests/e2e/conftest.py). A prober submits a hostPID pod (server-side dry run)
and an exec into istio-init in both namespaces all along: every one is denied, first by the
hand-made guard, at the end by ours. At the end: Ready, every hand-made object the same object
(uid), and exactly one rewrite of the domain.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.checklist_support import (
    CHECKLIST_GUARD,
    CHECKLIST_NAMESPACES,
    VAP,
    Prober,
    by_hand,
    checklist_guard,
    summary,
)
from tests.checklist_support import wait_for_denial as wait_for_guard
from tests.e2e.conftest import POLL
from tests.integration.fleet_support import put_secret, tenant_servers

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import DNS, PodGuard
from tenant_platform.concerns.installer import manifests as installer_manifests
from tenant_platform.concerns.podguard import manifests as guard_manifests
from tenant_platform.core.identities import GuardNames
from tenant_platform.formats import corefile
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube
from tenant_platform.testing import certs, rke2
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.operator import RunningOperator
from tenant_platform.testing.tenants import TenantAPIServer
from tenant_platform.testing.wait import wait_for

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
MIGRATION = ROOT / "docs" / "migration.md"
SAMPLE = ROOT / "deploy" / "samples" / "tenantplatform.yaml"
NAME = "kamiwaza"
TENANT, EXTENSIONS = CHECKLIST_NAMESPACES
DOMAIN = "kamiwaza.example.com"
ISTIO = "istio-system"
GATEWAY = "kamiwaza-gateway"
GW = ("networking.istio.io/v1", "Gateway")
EDGE_SECRET = "kamiwaza-edge-tls"
TRUST = "kamiwaza-edge-trust"
HOST = "istio-ingressgateway.istio-system.svc.cluster.local"
LINE = f"rewrite name exact {DOMAIN} {HOST}"
K0S_LABELS = {"k0s.k0sproject.io/stack": "coredns"}
DISTRIBUTIONS = ["generic", "k0s", "rke2"]


# -- docs/migration.md, "Step by step" ----------------------------------------------------------------


def step_by_step() -> list[list[str]]:
    """The ``sh`` blocks of docs/migration.md's "Step by step", in order, one command per line."""
    text = MIGRATION.read_text()
    match = re.search(r"^## Step by step[^\n]*\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "docs/migration.md has no 'Step by step' section"
    blocks = re.findall(r"```sh\n(.*?)```", match.group(1), re.S)
    return [[" ".join(x.split()) for x in block.splitlines() if x.strip()] for block in blocks]


def kubectl(cp: ControlPlane, command: str, kubeconfig: Path | None = None) -> str:
    """One documented command, with the control plane's kubectl, as the admin of the cluster whose
    kubeconfig is given (default: the management cluster, where the TenantPlatform lives)."""
    args = shlex.split(command)
    assert args[0] == "kubectl", command
    proc = subprocess.run(
        [
            str(cp.bin_dir / "kubectl"),
            f"--kubeconfig={kubeconfig or cp.kubeconfig_path}",
            f"--cache-dir={cp.work_dir / 'kubectl-cache'}",
            *args[1:],
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert proc.returncode == 0, f"{command}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


# -- the cluster, by hand ---------------------------------------------------------------------------


def namespaces(kube: Kube) -> None:
    """Checklist #1: pre-created, injection on, PSA warn and audit restricted, no enforce label."""
    labels = {
        "istio-injection": "enabled",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    for ns in CHECKLIST_NAMESPACES:
        by_hand(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}})
    for ns in CHECKLIST_NAMESPACES:
        wait_for(lambda ns=ns: kube.get("v1", "ServiceAccount", "default", ns), f"{ns}/default", 60, interval=POLL)


def installer(kube: Kube, platform: TenantPlatform) -> list[dict[str, Any]]:
    """Checklist #2: the ServiceAccount, Roles and RoleBindings (the names docs/namespaces-and-installer.md lists)."""
    return [by_hand(kube, obj) for obj in installer_manifests.render_installer(platform)]


def gateway(kube: Kube) -> dict[str, Any]:
    """Checklist #4: a Gateway selecting the ingress gateway, HTTPS 443 with the edge certificate,
    port 80, hosts as the checklist writes them (plain: open to every namespace)."""
    return by_hand(
        kube,
        {
            "apiVersion": "networking.istio.io/v1",
            "kind": "Gateway",
            "metadata": {"name": GATEWAY, "namespace": ISTIO},
            "spec": {
                "selector": {"istio": "ingressgateway"},
                "servers": [
                    {
                        "port": {"number": 443, "name": "https", "protocol": "HTTPS"},
                        "hosts": [DOMAIN],
                        "tls": {"mode": "SIMPLE", "credentialName": EDGE_SECRET},
                    },
                    {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": [DOMAIN]},
                ],
            },
        },
    )


def edge_certificate(kube: Kube) -> dict[str, Any]:
    """Checklist #5: a self-signed certificate for the domain, and its public certificate as the
    trust ConfigMap in the tenant namespace."""
    leaf = certs.make_leaf([DOMAIN], now=dt.datetime.now(dt.UTC))
    secret = certs.tls_secret(EDGE_SECRET, ISTIO, chain=[leaf.cert], key=leaf.key)
    secret["metadata"].pop("labels")
    by_hand(kube, secret)
    trust = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TRUST, "namespace": TENANT},
        "data": {"ca-certificates.crt": certs.cert_pem(leaf.cert).decode()},
    }
    return by_hand(kube, trust)


def with_line(text: str) -> str:
    """The checklist's line, above the kubernetes plugin (checklist #6)."""
    assert "    kubernetes cluster.local" in text
    return text.replace("    kubernetes cluster.local", f"    {LINE}\n    kubernetes cluster.local", 1)


@pytest.fixture
def coredns(crd: Kube) -> Iterator[dict[str, Any]]:
    """kube-system's CoreDNS objects as seeded; put back exactly afterwards (whatever a test did)."""

    def bare(obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        keep = {k: meta[k] for k in ("name", "namespace", "labels", "annotations") if k in meta}
        return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": keep}

    seeded = {
        "configmap": bare(crd.get("v1", "ConfigMap", "coredns", "kube-system")),
        "deployment": bare(crd.get("apps/v1", "Deployment", "coredns", "kube-system")),
    }
    yield seeded
    with contextlib.suppress(errors.NotFound):
        crd.delete("v1", "ConfigMap", rke2.CONFIG_MAP, "kube-system")
    for key, (api, kind) in {"configmap": ("v1", "ConfigMap"), "deployment": ("apps/v1", "Deployment")}.items():
        with contextlib.suppress(errors.NotFound):
            crd.delete(api, kind, "coredns", "kube-system")
        wait_for(lambda a=api, k=kind: crd.get(a, k, "coredns", "kube-system") is None, f"{kind} gone", 30)
        crd.create(seeded[key])


def prepare_dns(crd: Kube, seeded: dict[str, Any], distribution: str) -> tuple[str, str]:
    """The rewrite where the distribution puts it; returns (the ConfigMap holding the live Corefile, its text)."""
    if distribution == "rke2":
        # RKE2 runs CoreDNS from its chart: no kubeadm objects, the chart's ConfigMap as it renders
        # the HelmChartConfig our DNSReady message describes (the chart's servers list, whole, with
        # the rewrite entry before the kubernetes plugin).
        crd.delete("v1", "ConfigMap", "coredns", "kube-system")
        crd.delete("apps/v1", "Deployment", "coredns", "kube-system")
        entry = {"name": "rewrite", "parameters": LINE.removeprefix("rewrite ")}
        config = rke2.helm_chart_config(rke2.with_entry_before_kubernetes(rke2.DEFAULT_SERVERS, entry))
        cm = rke2.chart_config_map(config["spec"]["valuesContent"], "kube-system")
        by_hand(crd, cm)
        return rke2.CONFIG_MAP, cm["data"]["Corefile"]
    live = crd.get("v1", "ConfigMap", "coredns", "kube-system")
    live["data"]["Corefile"] = with_line(seeded["configmap"]["data"]["Corefile"])
    if distribution == "k0s":  # k0s's stack label on what it applies (its ConfigMap and Deployment)
        live["metadata"].setdefault("labels", {}).update(K0S_LABELS)
        crd.merge_patch(
            "apps/v1", "Deployment", "coredns", {"metadata": {"labels": K0S_LABELS}}, namespace="kube-system"
        )
    crd.replace(live)
    return "coredns", live["data"]["Corefile"]


@pytest.fixture
def checklist_cluster(crd: Kube, coredns: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Nothing of the checklist's names left from elsewhere; everything removed afterwards, the
    TenantPlatform first (the operator's cleanup runs), then what the admin made. Yields kube-system's
    CoreDNS objects as seeded (``coredns``)."""
    for ns in CHECKLIST_NAMESPACES:
        assert crd.get("v1", "Namespace", ns) is None, f"namespace {ns} is left from another test"
    assert crd.get(constants.API_VERSION, constants.KIND, NAME) is None
    yield coredns
    with contextlib.suppress(errors.NotFound):
        crd.delete(constants.API_VERSION, constants.KIND, NAME)
    wait_for(lambda: crd.get(constants.API_VERSION, constants.KIND, NAME) is None, "TenantPlatform gone", 90)
    for kind in ("ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"):
        for name in CHECKLIST_GUARD:
            with contextlib.suppress(errors.NotFound):
                crd.delete(VAP, kind, name)
    for api, kind, name, ns in ((*GW, GATEWAY, ISTIO), ("v1", "Secret", EDGE_SECRET, ISTIO)):
        with contextlib.suppress(errors.NotFound):
            crd.delete(api, kind, name, ns)
    for ns in CHECKLIST_NAMESPACES:
        with contextlib.suppress(errors.NotFound):
            crd.delete("v1", "Namespace", ns)
    wait_for(
        lambda: all(crd.get("v1", "Namespace", ns) is None for ns in CHECKLIST_NAMESPACES),
        "the checklist's namespaces gone",
        120,
        interval=POLL,
    )


# -- the test ------------------------------------------------------------------------------------------


def the_platform(**spec: Any) -> str:
    """docs/migration.md step 3: the sample, with the hand-made certificate verified as it is."""
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    assert body["metadata"]["name"] == NAME and body["spec"]["namespace"] == TENANT
    assert body["spec"]["additionalNamespaces"] == [EXTENSIONS]
    body["spec"]["edgeCertificate"]["issuer"] = "External"
    body["spec"].update(spec)
    return yaml.safe_dump(body)


def conditions(kube: Kube) -> dict[str, dict[str, Any]]:
    body = kube.get(constants.API_VERSION, constants.KIND, NAME) or {}
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}


def explain(kube: Kube, operator: RunningOperator) -> str:
    body = kube.get(constants.API_VERSION, constants.KIND, NAME) or {}
    return yaml.safe_dump(body.get("status")) + "\n--- operator log tail ---\n" + operator.log()[-4000:]


def rewrites_of(text: str) -> int:
    return sum(1 for x in text.splitlines() if x.split()[:4] == ["rewrite", "name", "exact", DOMAIN])


@dataclass
class Story:
    """One cluster prepared by hand (``kube``, ``kubeconfig``: where the checklist was applied; the
    TenantPlatform lives in the management cluster), and what the admin made there."""

    operator: RunningOperator
    management: Kube
    cp: ControlPlane
    kube: Kube
    kubeconfig: Path
    target: bool = False
    hand: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    prober: Prober | None = None

    @property
    def ours(self) -> GuardNames:
        """Our guard at Deny: the shared one, or in a target the platform's own (docs/fleet.md)."""
        return guard_manifests.guard_names("Deny", NAME if self.target else "")

    def prepare(self) -> None:
        """The checklist, by hand (CoreDNS aside: per distribution)."""
        namespaces(self.kube)
        parsed = TenantPlatform.from_body(yaml.safe_load(the_platform()))
        for obj in installer(self.kube, parsed):
            self.hand[(obj["kind"], obj["metadata"]["name"])] = obj
        for ns in CHECKLIST_NAMESPACES:
            self.hand[("Namespace", ns)] = self.kube.get("v1", "Namespace", ns)
        checklist_guard(self.kube)
        self.hand[("Gateway", GATEWAY)] = gateway(self.kube)
        self.hand[("ConfigMap", TRUST)] = edge_certificate(self.kube)

    def follow_the_docs(self, platform: str, *, plain_coredns: bool, before_ready: Callable[[], None]) -> None:
        """docs/migration.md, step by step, with a prober all along; ``before_ready``: what the
        distribution's own DNS steps add before step 5."""
        opt_in, plain, read_message, wait_ready = step_by_step()
        self.prober = prober = Prober(self.kube, list(CHECKLIST_NAMESPACES))
        wait_for_guard(prober, *CHECKLIST_GUARD)  # the hand-made guard is in force before anything of ours
        prober.start()
        ours = self.ours
        try:
            for command in opt_in:  # 1. in the cluster the checklist prepared
                kubectl(self.cp, command, self.kubeconfig)
            if plain_coredns:  # 2. plain CoreDNS only; k0s and RKE2: nothing to do
                for command in plain:
                    kubectl(self.cp, command, self.kubeconfig)
            proc = self.cp.kubectl("apply", "-f", "-", input=platform)  # 3. where TenantPlatforms live
            assert proc.returncode == 0, proc.stderr

            def redundant() -> str | None:  # 4.
                guard = conditions(self.management).get("PodGuardReady") or {}
                if guard.get("reason") != PodGuard.HAND_MADE_GUARD_REDUNDANT:
                    return None
                return kubectl(self.cp, read_message[0])

            message = wait_for(
                redundant, "PodGuardReady HandMadeGuardRedundant", 180, interval=POLL, context=self.explain
            )
            command = message.split("an admin does: ", 1)[1].strip()
            assert command == (
                f"kubectl delete validatingadmissionpolicybinding {' '.join(sorted(CHECKLIST_GUARD))} && "
                f"kubectl delete validatingadmissionpolicy {' '.join(sorted(CHECKLIST_GUARD))}"
            ), message
            for part in command.split(" && "):
                kubectl(self.cp, part, self.kubeconfig)
            wait_for_guard(prober, ours.pod_guard, ours.exec_guard)
            before_ready()
            kubectl(self.cp, wait_ready[0])  # 5.
            wait_for(
                lambda: (
                    "hand-made"
                    not in (conditions(self.management).get("PodGuardReady") or {}).get("message", "hand-made")
                ),
                "PodGuardReady without the hand-made guard",
                60,
                interval=POLL,
                context=self.explain,
            )
        finally:
            prober.stop.set()
            prober.join(10)

    def explain(self) -> str:
        return explain(self.management, self.operator)

    def assert_taken_over(self) -> dict[str, Any]:
        """A guard denied at every moment; Ready; nothing recreated. Returns DNSReady."""
        prober = self.prober
        assert prober is not None
        assert not prober.gaps, (len(prober.gaps), prober.gaps[:3], summary(prober.trace)[:40])
        assert len(prober.denied_by) > 20
        assert set(CHECKLIST_GUARD) & set(prober.denied_by), "the hand-made guard denied first"
        assert {self.ours.pod_guard, self.ours.exec_guard} == set(prober.denied_by[-4:]), "ours deny at the end"
        assert all(self.kube.get(VAP, "ValidatingAdmissionPolicy", name) is None for name in CHECKLIST_GUARD)

        status = conditions(self.management)
        assert status["Ready"]["status"] == "True", self.explain()
        body = self.management.get(constants.API_VERSION, constants.KIND, NAME)
        assert body["status"]["observedGeneration"] == body["metadata"]["generation"]
        for (kind, name), made in self.hand.items():
            ns = made["metadata"].get("namespace")
            live = self.kube.get(made["apiVersion"], kind, name, ns)
            assert live is not None, (kind, name)
            assert live["metadata"]["uid"] == made["metadata"]["uid"], f"{kind} {name} was recreated"
            assert live["metadata"]["labels"][constants.LABEL_PLATFORM] == NAME, f"{kind} {name} is not ours"
        for concern, reason in (
            ("GatewayReady", "Programmed"),
            ("InstallerReady", None),
            ("EdgeCertificateReady", None),
        ):
            assert status[concern]["status"] == "True", status[concern]
            assert reason is None or status[concern]["reason"] == reason, status[concern]
        assert body["status"]["recorded"]["dns"], body["status"]["recorded"]
        return {**status["DNSReady"], "recorded": body["status"]["recorded"]["dns"]}


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_a_hand_prepared_cluster_reaches_ready_following_the_docs(
    operator: RunningOperator,
    crd: Kube,
    control_plane: ControlPlane,
    checklist_cluster: dict[str, Any],
    distribution: str,
) -> None:
    seeded = checklist_cluster
    story = Story(
        operator,
        crd,
        control_plane,
        Kube.from_kubeconfig(str(control_plane.kubeconfig_path)),
        control_plane.kubeconfig_path,
    )
    story.prepare()
    holder, text = prepare_dns(crd, seeded, distribution)
    story.follow_the_docs(the_platform(), plain_coredns=distribution == "generic", before_ready=lambda: None)
    dns = story.assert_taken_over()
    assert dns["recorded"]["distribution"] == distribution, dns

    # Exactly one rewrite of the domain, where the distribution keeps it.
    live = str(crd.get("v1", "ConfigMap", holder, "kube-system")["data"]["Corefile"])
    assert rewrites_of(live) == 1, live
    assert crd.get("v1", "ConfigMap", "coredns-custom", "kube-system") is None
    if distribution == "generic":  # taken over into our block, in one write
        assert dns["reason"] == DNS.CONFIGURED, dns
        assert live == corefile.upsert_block(seeded["configmap"]["data"]["Corefile"], NAME, DOMAIN, HOST)
    else:  # accepted as the distribution renders it; nothing written
        assert dns["reason"] == DNS.REWRITE_FOUND, dns
        assert live == text
    if distribution == "rke2":
        assert crd.get("v1", "ConfigMap", "coredns", "kube-system") is None


# -- a Kamaji tenant, through spec.target -----------------------------------------------------------------

SECRETS_NS = "hand-prepared-tenants"
TCP = "kamiwaza-lab"
KAMAJI_LABELS = {"kamaji.clastix.io/project": "kamaji"}


@pytest.fixture
def kamaji_tenant(seeded: ControlPlane, crd: Kube) -> Iterator[TenantAPIServer]:
    """A tenant control plane as Kamaji runs one (its own API server and controller manager over the
    shared etcd, seeded like a fresh cluster), its admin kubeconfig Secret where Kamaji writes it.
    The TenantPlatform is deleted (its cleanup runs in the tenant) before the tenant stops."""
    with tenant_servers(seeded, crd, (TCP,), secrets_namespace=SECRETS_NS, controller_manager=True) as started:
        tenant = started[TCP]
        put_secret(crd, SECRETS_NS, f"{TCP}-admin-kubeconfig", {"admin.conf": tenant.kubeconfig_bytes()})
        assert crd.get(constants.API_VERSION, constants.KIND, NAME) is None
        try:
            yield tenant
        finally:
            with contextlib.suppress(errors.NotFound):
                crd.delete(constants.API_VERSION, constants.KIND, NAME)
            wait_for(lambda: crd.get(constants.API_VERSION, constants.KIND, NAME) is None, "TenantPlatform gone", 90)
            with contextlib.suppress(errors.NotFound):
                crd.delete("v1", "Namespace", SECRETS_NS)


def test_a_hand_prepared_kamaji_tenant_reaches_ready_following_the_docs(
    operator: RunningOperator, crd: Kube, control_plane: ControlPlane, kamaji_tenant: TenantAPIServer
) -> None:
    """The checklist applied by hand in a Kamaji tenant, whose CoreDNS is Kamaji's add-on (its
    objects labelled by Kamaji) with the checklist's line edited in by hand (Kamaji would write it
    back). The TenantPlatform names the tenant (``spec.target.kamaji``). DNSReady says there is no
    durable way; the admin does what docs/networking.md says (removes the add-on, so Kamaji deletes
    its labelled objects; deploys CoreDNS with the checklist's line), then the plain CoreDNS step of
    docs/migration.md: Ready, one rewrite (our block, one write)."""
    tenant = Kube.from_kubeconfig(str(kamaji_tenant.kubeconfig_path))
    story = Story(operator, crd, control_plane, tenant, kamaji_tenant.kubeconfig_path, target=True)
    story.prepare()
    stock = {
        "configmap": tenant.get("v1", "ConfigMap", "coredns", "kube-system"),
        "deployment": tenant.get("apps/v1", "Deployment", "coredns", "kube-system"),
    }
    addon = stock["configmap"]
    seeded_corefile = addon["data"]["Corefile"]
    addon["metadata"].setdefault("labels", {}).update(KAMAJI_LABELS)
    addon["data"]["Corefile"] = with_line(addon["data"]["Corefile"])
    tenant.replace(addon)
    tenant.merge_patch(
        "apps/v1", "Deployment", "coredns", {"metadata": {"labels": KAMAJI_LABELS}}, namespace="kube-system"
    )

    def kamaji_dns() -> None:
        dns = wait_for(
            lambda: (c := conditions(crd).get("DNSReady")) and c["reason"] == DNS.MANAGED_BY_DISTRIBUTION and c,
            "DNSReady ManagedByDistribution (Kamaji's add-on)",
            90,
            interval=POLL,
            context=story.explain,
        )
        assert dns["status"] == "False" and "no durable way" in dns["message"], dns
        assert "remove spec.addons.coreDNS" in dns["message"], dns
        assert conditions(crd)["Ready"]["status"] == "False"
        # docs/networking.md: remove the add-on (Kamaji deletes its labelled objects), deploy CoreDNS
        # yourself: the kubeadm objects, with the checklist's line, made by hand.
        for api, kind in (("v1", "ConfigMap"), ("apps/v1", "Deployment")):
            tenant.delete(api, kind, "coredns", "kube-system")
            wait_for(lambda a=api, k=kind: tenant.get(a, k, "coredns", "kube-system") is None, f"{kind} gone", 30)
        for obj in stock.values():
            meta = obj["metadata"]
            obj["metadata"] = {"name": meta["name"], "namespace": meta["namespace"]}
            obj.pop("status", None)
        stock["configmap"]["data"]["Corefile"] = with_line(seeded_corefile)
        for obj in stock.values():
            by_hand(tenant, obj)
        _, plain, _, _ = step_by_step()  # 2. plain CoreDNS, now that it is the admin's
        for command in plain:
            kubectl(control_plane, command, kamaji_tenant.kubeconfig_path)

    platform = the_platform(target={"kamaji": {"namespace": SECRETS_NS, "tenantControlPlane": TCP}})
    story.follow_the_docs(platform, plain_coredns=False, before_ready=kamaji_dns)
    dns = story.assert_taken_over()
    assert (dns["reason"], dns["recorded"]["distribution"]) == (DNS.CONFIGURED, "generic"), dns
    live = str(tenant.get("v1", "ConfigMap", "coredns", "kube-system")["data"]["Corefile"])
    assert live == corefile.upsert_block(seeded_corefile, NAME, DOMAIN, HOST)
    assert rewrites_of(live) == 1, live
    # Nothing of it in the management cluster.
    for ns in CHECKLIST_NAMESPACES:
        assert crd.get("v1", "Namespace", ns) is None
