"""The Helm chart and the kustomize base: generated from one source, equivalent, and accepted by
the real API server (server-side dry run).

helm is built by hack/build-tools.sh; kustomize is kubectl's (`kubectl kustomize`), from the
control plane's build. The chart's RBAC is generated from deploy/base/rbac.yaml, the RBAC the
e2e tests run the operator under (hack/sync-deploy.py); these tests prove the rendered RBAC is
that file, whatever the release namespace.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenant_platform import __version__
from tenant_platform.config import Settings
from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane, find_bin_dir

# The first test to need helm or promtool builds it (minutes on a cold Go cache).
pytestmark = pytest.mark.timeout(1500)

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "tenant-platform"
BASE = ROOT / "deploy" / "base"
BASE_NAMESPACE = "tenant-platform-system"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")

Obj = dict[str, Any]


def helm_template(namespace: str, *values: str, api_versions: Iterable[str] = (), extra: Iterable[str] = ()) -> str:
    args = [str(tools.tool_path("helm")), "template", "tenant-platform", str(CHART), "--namespace", namespace]
    args += ["--include-crds", *extra]
    for api in api_versions:
        args += ["--api-versions", api]
    for value in values:
        args += ["--set", value]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize() -> list[Obj]:
    kubectl = find_bin_dir() / "kubectl"
    proc = subprocess.run([str(kubectl), "kustomize", str(BASE)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return docs(proc.stdout)


def key(obj: Obj) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def by_key(objs: Iterable[Obj]) -> dict[tuple[str, str, str], Obj]:
    return {key(o): o for o in objs}


def move_namespace(objs: Iterable[Obj], old: str, new: str) -> list[Obj]:
    """What `helm template --namespace new` does to our namespaced objects and subjects."""
    out = []
    for obj in copy.deepcopy(list(objs)):
        if obj["kind"] == "Namespace" and obj["metadata"]["name"] == old:
            obj["metadata"]["name"] = new
        if obj["metadata"].get("namespace") == old:
            obj["metadata"]["namespace"] = new
        for subject in obj.get("subjects") or []:
            if subject.get("namespace") == old:
                subject["namespace"] = new
        out.append(obj)
    return out


def without_labels(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("labels", None)
    return obj


def base_rbac() -> list[Obj]:
    text = (BASE / "rbac.yaml").read_text() + "\n---\n" + (BASE / "api-roles.yaml").read_text()
    return [d for d in docs(text) if d["kind"] in RBAC_KINDS]


WATCH_SECRETS = ROOT / "deploy" / "components" / "watch-secrets"


def watch_secrets_rbac() -> list[Obj]:
    return docs((WATCH_SECRETS / "rbac.yaml").read_text())


# -- generated files --------------------------------------------------------------------------


def test_generated_files_are_in_sync() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "sync-deploy.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"run hack/sync-deploy.py:\n{proc.stderr}"


def test_crd_copy_is_byte_identical() -> None:
    source = ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml"
    assert [p.name for p in (BASE / "crds").iterdir()] == [source.name]
    assert (BASE / "crds" / source.name).read_bytes() == source.read_bytes()


def test_chart_crd_is_the_source_as_a_template() -> None:
    """The chart's CRD is templates/crd.yaml (upgraded with the release, kept on uninstall), not
    crds/ (which Helm installs once and never upgrades); crds.install=false leaves it out."""
    assert not (CHART / "crds").exists()
    source = yaml.safe_load((ROOT / "crds" / "tenancy.dev_tenantplatforms.yaml").read_text())
    (crd,) = docs(helm_template("ops", extra=["--show-only", "templates/crd.yaml"]))
    assert crd == source
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/prune"] == "disabled"
    off = docs(helm_template("ops", "crds.install=false"))
    assert "CustomResourceDefinition" not in [d["kind"] for d in off]


def test_helm_lint() -> None:
    proc = subprocess.run(
        [str(tools.tool_path("helm")), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_values_schema_rejects_bad_values() -> None:
    helm = str(tools.tool_path("helm"))
    for bad, complaint in [
        ("operator.logFormat=xml", "value must be one of 'json', 'plain'"),
        ("operator.driftInterval=1", "minimum"),
        ("metrics.prometheusRule.deletionStuckAfter=soon", "does not match pattern"),
        ("nonsense=1", "additional properties 'nonsense' not allowed"),
        ("global=1", "got number, want object"),
        ("enabled=maybe", "got string, want boolean"),
        ("crds.install=yes", "got string, want boolean"),
        ("crds.keep=false", "additional properties 'keep' not allowed"),
        ("podSecurityContext.runAsUser=-1", "minimum"),
        ("podSecurityContext.fsGroup=root", "got string, want null or integer"),
        ("securityContext.readOnlyRootFilesystem=no", "got string, want null or boolean"),
        ("openshift.adaptSecurityContext=true", "value must be one of 'auto', 'force', 'disabled'"),
        ("podDisruptionBudget.maxUnavailable=half", "does not match pattern"),
        ("podDisruptionBudget.minAvailable=-1", "minimum: got -1"),
        ("networkPolicy.apiServer.cidrs={10.0.0.1}", "does not match pattern"),
        ("networkPolicy.apiServer.ports={0}", "minimum"),
        ("networkPolicy.dns.podSelector.app=dns", "additional properties 'app' not allowed"),
        ("networkPolicy.metrics.from=anyone", "got string, want array"),
        ("serviceAccount.name=Not_A_Name", "does not match pattern"),
        ("serviceAccount.create=maybe", "got string, want boolean"),
        ("serviceAccount.annotations.a=null", "got null, want string"),
        ("probes.liveness.periodSeconds=0", "minimum"),
        ("probes.liveness.successThreshold=2", "value must be 1"),
        ("probes.readiness.exec=x", "additional properties 'exec' not allowed"),
        ("topologySpreadConstraints[0].maxSkew=1", "missing properties 'topologyKey', 'whenUnsatisfiable'"),
        ("metrics.serviceMonitor.relabelings=drop", "got string, want array"),
        ("metrics.prometheusRule.runbookURL=docs/metrics-and-alerts.md", "does not match pattern"),
        ("extraObjects=x", "got string, want array"),
    ]:
        proc = subprocess.run(
            [helm, "template", "x", str(CHART), "--set", bad], capture_output=True, text=True, check=False
        )
        assert proc.returncode != 0, bad
        assert complaint in proc.stderr, (bad, proc.stderr)


# -- RBAC: one source ---------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [BASE_NAMESPACE, "platform-operators"])
def test_chart_rbac_is_base_rbac(namespace: str) -> None:
    rendered = [d for d in docs(helm_template(namespace)) if d["kind"] in RBAC_KINDS]
    expected = move_namespace(base_rbac(), BASE_NAMESPACE, namespace)
    assert sorted(map(key, rendered)) == sorted(map(key, expected))
    rendered_by_key = by_key(rendered)
    for obj in expected:
        got = rendered_by_key[key(obj)]
        assert without_labels(got) == without_labels(obj), key(obj)
        # The chart's labels include the base's.
        assert obj["metadata"].get("labels", {}).items() <= got["metadata"]["labels"].items()


def test_kustomize_rbac_is_base_rbac() -> None:
    rendered = [d for d in kustomize() if d["kind"] in RBAC_KINDS]
    assert by_key(rendered) == by_key(base_rbac())


def test_rbac_has_no_wildcards_or_escalate() -> None:
    for obj in [*base_rbac(), *watch_secrets_rbac()]:
        for rule in obj.get("rules") or []:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), (obj["metadata"]["name"], rule)
            assert "escalate" not in rule["verbs"]
            assert "impersonate" not in rule["verbs"]
            if "bind" in rule["verbs"]:
                assert rule.get("resourceNames"), "bind must be limited to named roles"


def test_base_rbac_does_not_list_or_watch_secrets() -> None:
    """Listing or watching Secrets is the opt-in below, never the default."""
    for obj in base_rbac():
        for rule in obj.get("rules") or []:
            if "secrets" in rule.get("resources", []) and not rule.get("resourceNames"):
                assert not {"list", "watch"} & set(rule["verbs"]), (obj["metadata"]["name"], rule)


@pytest.mark.parametrize("namespace", [BASE_NAMESPACE, "platform-operators"])
def test_watch_secrets_value_renders_the_component(namespace: str) -> None:
    """rbac.watchSecrets=true adds exactly deploy/components/watch-secrets (list and watch of
    Secrets, bound to the operator's ServiceAccount in the release namespace); off by default."""
    default = by_key(docs(helm_template(namespace)))
    on = by_key(docs(helm_template(namespace, "rbac.watchSecrets=true")))
    expected = move_namespace(watch_secrets_rbac(), BASE_NAMESPACE, namespace)
    assert set(on) - set(default) == set(map(key, expected))
    for obj in expected:
        got = on[key(obj)]
        assert without_labels(got) == without_labels(obj), key(obj)
    (role,) = [o for o in expected if o["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}]
    (binding,) = [o for o in expected if o["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "tenant-platform-operator", "namespace": namespace}
    ]


def test_watch_secrets_component_in_an_overlay(tmp_path: Path) -> None:
    """The kustomize component adds the same two objects to deploy/base, which stays unchanged."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{os.path.relpath(BASE, overlay)}]\n"
        f"components: [{os.path.relpath(WATCH_SECRETS, overlay)}]\n"
    )
    kubectl = find_bin_dir() / "kubectl"
    proc = subprocess.run([str(kubectl), "kustomize", str(overlay)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    rendered = by_key(docs(proc.stdout))
    base = by_key(kustomize())
    assert set(rendered) - set(base) == set(map(key, watch_secrets_rbac()))
    assert {k: rendered[k] for k in base} == base


# -- the chart's defaults are the kustomize base -------------------------------------------------


def test_chart_defaults_and_kustomize_render_the_same_objects() -> None:
    chart = by_key(docs(helm_template(BASE_NAMESPACE)))
    base = by_key(kustomize())
    # Helm does not create the release namespace (helm install --create-namespace, or by hand
    # with the Pod Security labels of deploy/base/namespace.yaml; docs/install.md).
    assert set(base) - set(chart) == {("Namespace", "", BASE_NAMESPACE)}
    assert set(chart) - set(base) == set()
    assert (
        chart[("CustomResourceDefinition", "", "tenantplatforms.tenancy.dev")]
        == base[("CustomResourceDefinition", "", "tenantplatforms.tenancy.dev")]
    )


def test_monitoring_objects_need_the_flag_and_the_api() -> None:
    api = ["monitoring.coreos.com/v1"]
    on = ["metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"]
    assert not [d for d in docs(helm_template("ops", *on)) if d["kind"] in MONITORING_KINDS]
    assert not [d for d in docs(helm_template("ops", api_versions=api)) if d["kind"] in MONITORING_KINDS]
    objs = docs(helm_template("ops", *on, "metrics.serviceMonitor.labels.release=prom", api_versions=api))
    (monitor,) = [d for d in objs if d["kind"] == "ServiceMonitor"]
    (rule,) = [d for d in objs if d["kind"] == "PrometheusRule"]
    (service,) = [d for d in objs if d["kind"] == "Service"]
    (deployment,) = [d for d in objs if d["kind"] == "Deployment"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["ops"]}
    # The ServiceMonitor selects the metrics Service and scrapes its named port.
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert [p["name"] for p in service["spec"]["ports"]] == ["metrics"]
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 8080} in container["ports"]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert rule["metadata"]["namespace"] == "ops"


def test_chart_values_reach_the_deployment() -> None:
    objs = docs(
        helm_template(
            "ops",
            "operator.driftInterval=120",
            "operator.logFormat=plain",
            "metrics.port=9100",
            "image.digest=sha256:" + "a" * 64,
            "resources.limits.memory=1Gi",
        )
    )
    (deployment,) = [d for d in objs if d["kind"] == "Deployment"]
    (service,) = [d for d in objs if d["kind"] == "Service"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TENANT_PLATFORM_DRIFT_INTERVAL"] == "120"
    assert env["TENANT_PLATFORM_LOG_FORMAT"] == "plain"
    assert env["TENANT_PLATFORM_METRICS_PORT"] == "9100"
    assert {"name": "metrics", "containerPort": 9100} in container["ports"]
    assert service["spec"]["ports"][0]["port"] == 9100
    assert container["image"] == "ghcr.io/tenancy-dev/tenant-platform-operator@sha256:" + "a" * 64
    assert container["resources"]["limits"]["memory"] == "1Gi"
    # What the image and leader election need, whatever the values.
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    identity = next(e for e in container["env"] if e["name"] == "TENANT_PLATFORM_IDENTITY")
    assert identity["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["TENANT_PLATFORM_LEASE_DURATION"] == "15"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["args"] == ["run"]


PARITY_VALUES: Obj = {
    "serviceAccount": {"create": True, "name": "tp-operator", "annotations": {"iam.example.com/role": "tp"}},
    "podLabels": {"team": "platform"},
    "podAnnotations": {"example.com/scrape": "true"},
    "probes": {"liveness": {"timeoutSeconds": 5, "failureThreshold": 6}, "readiness": {"periodSeconds": 7}},
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ],
    "extraObjects": [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n  drift: {{ .Values.operator.driftInterval | quote }}\n",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "as-object", "namespace": "{{ .Release.Namespace }}"},
            "data": {"a": "b"},
        },
    ],
}


def parity_render(tmp_path: Path, namespace: str, values: Obj = PARITY_VALUES, *args: str) -> list[Obj]:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return docs(helm_template(namespace, extra=["-f", str(path), *args]))


def test_chart_parity_values_reach_their_objects(tmp_path: Path) -> None:
    """serviceAccount, pod labels and annotations, probes, topology spread and extraObjects."""
    objs = parity_render(tmp_path, "ops")
    by = by_key(objs)
    (account,) = [d for d in objs if d["kind"] == "ServiceAccount"]
    assert account["metadata"]["name"] == "tp-operator"
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "tp"}
    subjects = [s for d in objs for s in d.get("subjects") or [] if s["kind"] == "ServiceAccount"]
    assert subjects and all(
        s == {"kind": "ServiceAccount", "name": "tp-operator", "namespace": "ops"} for s in subjects
    )
    # The admission fences match the renamed identity (and no longer the default one).
    fences = [d for d in objs if d["kind"] == "ValidatingAdmissionPolicy"]
    assert len(fences) == 4
    for fence in fences:
        text = json.dumps(fence["spec"])
        assert ':tp-operator\\"' in text and ':tenant-platform-operator\\"' not in text, fence["metadata"]["name"]
    pod = by[("Deployment", "ops", "tenant-platform-operator")]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "tp-operator"
    assert pod["metadata"]["labels"] == {"app.kubernetes.io/name": "tenant-platform-operator", "team": "platform"}
    assert pod["metadata"]["annotations"] == {"example.com/scrape": "true"}
    container = pod["spec"]["containers"][0]
    assert container["livenessProbe"] == {
        "httpGet": {"path": "/healthz", "port": "health"},
        "initialDelaySeconds": 15,
        "periodSeconds": 20,
        "timeoutSeconds": 5,
        "failureThreshold": 6,
    }
    assert container["readinessProbe"] == {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 7}
    assert pod["spec"]["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "tenant-platform-operator"}},
        }
    ]
    assert by[("ConfigMap", "ops", "tenant-platform-extra")]["data"] == {"drift": "300"}
    assert by[("ConfigMap", "ops", "as-object")]["data"] == {"a": "b"}
    # serviceAccount.create=false: no ServiceAccount, every reference still to the named one.
    byo = parity_render(tmp_path, "ops", {"serviceAccount": {"create": False, "name": "mine"}})
    assert "ServiceAccount" not in [d["kind"] for d in byo]
    (deployment,) = [d for d in byo if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "mine"
    assert {s["name"] for d in byo for s in d.get("subjects") or []} == {"mine"}


def test_service_monitor_relabelings() -> None:
    relabel = "metrics.serviceMonitor.relabelings[0]"
    objs = docs(
        helm_template(
            "ops",
            "metrics.serviceMonitor.enabled=true",
            f"{relabel}.targetLabel=cluster",
            f"{relabel}.replacement=east",
            "metrics.serviceMonitor.metricRelabelings[0].action=drop",
            "metrics.serviceMonitor.metricRelabelings[0].sourceLabels={__name__}",
            "metrics.serviceMonitor.metricRelabelings[0].regex=go_.*",
            api_versions=["monitoring.coreos.com/v1"],
        )
    )
    (monitor,) = [d for d in objs if d["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["relabelings"] == [{"targetLabel": "cluster", "replacement": "east"}]
    assert endpoint["metricRelabelings"] == [{"action": "drop", "sourceLabels": ["__name__"], "regex": "go_.*"}]
    (default,) = [
        d
        for d in docs(
            helm_template("ops", "metrics.serviceMonitor.enabled=true", api_versions=["monitoring.coreos.com/v1"])
        )
        if d["kind"] == "ServiceMonitor"
    ]
    assert "relabelings" not in default["spec"]["endpoints"][0]


# -- the real API server -------------------------------------------------------------------------


def dry_run(cp: ControlPlane, objs: list[Obj]) -> list[Obj]:
    """Server-side apply with --dry-run=server; the objects as the API server would store them."""
    result = cp.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=deploy-manifests-test",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        "-",
        input=yaml.safe_dump_all(objs),
    )
    out = json.loads(result.stdout)
    return out["items"] if out.get("kind") == "List" else [out]


def normalized_deployment(obj: Obj) -> Obj:
    """The pod template, with env entries equal to the operator's built-in defaults dropped."""
    spec = copy.deepcopy(obj["spec"])
    spec["template"]["metadata"].pop("labels", None)
    defaults = Settings()
    implicit = {
        "TENANT_PLATFORM_METRICS_PORT": str(defaults.metrics_port),
        "TENANT_PLATFORM_HEALTH_PORT": str(defaults.health_port),
    }
    for container in spec["template"]["spec"]["containers"]:
        container["env"] = [e for e in container.get("env", []) if implicit.get(e["name"], object()) != e.get("value")]
    spec.pop("selector", None)
    return spec


def test_chart_and_kustomize_apply_with_server_dry_run(control_plane: ControlPlane, unique_name: str) -> None:
    namespace = unique_name
    control_plane.kubectl("create", "namespace", namespace)
    try:
        chart = [d for d in docs(helm_template(namespace)) if d["kind"] != "Namespace"]
        base = [
            d for d in move_namespace(kustomize(), BASE_NAMESPACE, namespace) if key(d) != ("Namespace", "", namespace)
        ]
        chart_stored = by_key(dry_run(control_plane, chart))
        base_stored = by_key(dry_run(control_plane, base))
        assert set(chart_stored) == set(base_stored) == set(by_key(chart))
        deployment = ("Deployment", namespace, "tenant-platform-operator")
        assert normalized_deployment(chart_stored[deployment]) == normalized_deployment(base_stored[deployment])
        service = ("Service", namespace, "tenant-platform-operator-metrics")
        for stored in (chart_stored[service], base_stored[service]):
            for field in ("clusterIP", "clusterIPs"):
                stored["spec"].pop(field, None)
        assert chart_stored[service]["spec"] == base_stored[service]["spec"]
        for k, stored in chart_stored.items():
            if k[0] in RBAC_KINDS:
                for field in ("rules", "roleRef", "subjects"):
                    assert stored.get(field) == base_stored[k].get(field), (k, field)
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


EVERY_OPTION = (
    "podDisruptionBudget.enabled=true",
    "networkPolicy.enabled=true",
    "networkPolicy.apiServer.cidrs={10.0.0.1/32,fd00::1/128}",
    "networkPolicy.metrics.from[0].namespaceSelector.matchLabels.name=monitoring",
    "networkPolicy.extraEgress[0].ports[0].port=9000",
    "metrics.grafanaDashboard.enabled=true",
    "imagePullSecrets[0].name=registry",
    "priorityClassName=system-cluster-critical",
    "rbac.watchSecrets=true",
)

# Pod Security `restricted` judges the pod template of every variant the values offer (the API
# server's PodSecurity admission warns for workloads, it rejects only pods).
SECURITY_VARIANTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "defaults": ((), True),
    "openshift-force": (("openshift.adaptSecurityContext=force",), True),
    "ids-unset": (("podSecurityContext.runAsUser=null", "podSecurityContext.fsGroup=null"), True),
    "other-uid": (("podSecurityContext.runAsUser=1000710000", "securityContext.runAsUser=1000710000"), True),
    "privileged": (("securityContext.privileged=true", "securityContext.allowPrivilegeEscalation=null"), False),
    "root-allowed": (("podSecurityContext.runAsNonRoot=null", "podSecurityContext.runAsUser=0"), False),
    "escalation": (("securityContext.allowPrivilegeEscalation=true",), False),
}


def test_chart_with_every_option_applies_with_server_dry_run(
    control_plane: ControlPlane, unique_name: str, tmp_path: Path
) -> None:
    """Every object the chart can render without the monitoring API is accepted by the API server."""
    namespace = unique_name
    control_plane.kubectl("create", "namespace", namespace)
    try:
        values = tmp_path / "parity.yaml"
        values.write_text(yaml.safe_dump(PARITY_VALUES))
        rendered = docs(helm_template(namespace, *EVERY_OPTION, extra=["-f", str(values)]))
        kinds = {d["kind"] for d in rendered}
        assert {"PodDisruptionBudget", "NetworkPolicy", "ConfigMap", "CustomResourceDefinition"} <= kinds
        stored = by_key(dry_run(control_plane, rendered))
        assert set(stored) == set(by_key(rendered))
        pdb = stored[("PodDisruptionBudget", namespace, "tenant-platform-operator")]
        assert pdb["spec"]["maxUnavailable"] == 1
        assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        policy = stored[("NetworkPolicy", namespace, "tenant-platform-operator")]["spec"]
        assert policy["policyTypes"] == ["Ingress", "Egress"]
        (metrics, *_) = policy["ingress"]
        assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
        api, dns, extra = policy["egress"]
        assert [b["ipBlock"]["cidr"] for b in api["to"]] == ["10.0.0.1/32", "fd00::1/128"]
        assert {p["port"] for p in api["ports"]} == {443, 6443}
        assert {(p["port"], p["protocol"]) for p in dns["ports"]} == {(53, "UDP"), (53, "TCP")}
        assert extra == {"ports": [{"port": 9000, "protocol": "TCP"}]}
        # The policy selects the operator's pod and allows its metrics port by name.
        deployment = stored[("Deployment", namespace, "tenant-platform-operator")]
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
        assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.parametrize(
    ("values", "api_versions", "ids"),
    [
        ((), (), True),
        ((), ("security.openshift.io/v1",), False),  # auto, on OpenShift
        (("openshift.adaptSecurityContext=disabled",), ("security.openshift.io/v1",), True),
        (("openshift.adaptSecurityContext=force",), (), False),
    ],
)
def test_openshift_leaves_ids_to_the_scc(values: tuple[str, ...], api_versions: tuple[str, ...], ids: bool) -> None:
    extra = ("securityContext.runAsUser=65532", "securityContext.runAsGroup=65532")
    (deployment,) = [
        d for d in docs(helm_template("ops", *values, *extra, api_versions=api_versions)) if d["kind"] == "Deployment"
    ]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]["securityContext"]
    for context in (pod["securityContext"], container):
        present = {"runAsUser", "runAsGroup", "fsGroup"} & set(context)
        assert bool(present) is ids, context
    # What Pod Security `restricted` needs stays either way.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["allowPrivilegeEscalation"] is False


def test_security_context_variants_against_pod_security(control_plane: ControlPlane, unique_name: str) -> None:
    """Pod Security `restricted` (the level deploy/base/namespace.yaml enforces) accepts every
    variant the chart documents, and flags each value that weakens the pod."""
    namespace = unique_name
    control_plane.kubectl("create", "namespace", namespace)
    control_plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted")
    try:
        for variant, (values, compliant) in SECURITY_VARIANTS.items():
            objs = [d for d in docs(helm_template(namespace, *values)) if d["kind"] == "Deployment"]
            result = control_plane.kubectl(
                "apply", "--server-side", "--dry-run=server", "-o", "name", "-f", "-", input=yaml.safe_dump_all(objs)
            )
            warned = "would violate PodSecurity" in result.stderr
            assert warned is not compliant, (variant, result.stderr)
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")


MONITORING_CRDS = [
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                        }
                    },
                }
            ],
        },
    }
    for kind, plural in (("ServiceMonitor", "servicemonitors"), ("PrometheusRule", "prometheusrules"))
]


def test_monitoring_gate_follows_the_live_api(unique_name: str) -> None:
    """With the flags on, `helm template --validate` renders ServiceMonitor and PrometheusRule
    only once the cluster serves monitoring.coreos.com/v1 (stand-in CRDs: the gate, not the
    Prometheus Operator, is under test).

    NB: on a control plane of its own. `--validate` runs Helm's install checks, which refuse
    cluster-scoped objects (our CRD, the operator's ClusterRole) that other tests of the session
    created without Helm's ownership labels.
    """
    with ControlPlane(controller_manager=False) as control_plane:
        _monitoring_gate(control_plane, unique_name)


def _monitoring_gate(control_plane: ControlPlane, namespace: str) -> None:
    on = ["metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"]
    live = ["--validate", f"--kubeconfig={control_plane.kubeconfig_path}"]
    control_plane.kubectl("create", "namespace", namespace)
    try:
        before = docs(helm_template(namespace, *on, extra=live))
        assert not [d for d in before if d["kind"] in MONITORING_KINDS]
        control_plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(MONITORING_CRDS))
        for crd in MONITORING_CRDS:
            control_plane.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}"
            )
        after = docs(helm_template(namespace, *on, extra=live))
        monitoring = [d for d in after if d["kind"] in MONITORING_KINDS]
        assert sorted(d["kind"] for d in monitoring) == ["PrometheusRule", "ServiceMonitor"]
        stored = dry_run(control_plane, monitoring)
        assert sorted(d["kind"] for d in stored) == ["PrometheusRule", "ServiceMonitor"]
    finally:
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
        for crd in MONITORING_CRDS:
            control_plane.kubectl("delete", "crd", crd["metadata"]["name"], "--ignore-not-found")


def test_install_doc_overlay_works(tmp_path: Path) -> None:
    """The overlay example in docs/install.md builds and changes what it says it changes."""
    doc = (ROOT / "docs" / "install.md").read_text()
    match = re.search(r"```yaml\n# my-overlay/kustomization.yaml\n(.*?)```", doc, re.S)
    assert match, "docs/install.md lacks the overlay example"
    overlay = tmp_path / "my-overlay"
    overlay.mkdir()
    # kustomize takes bases by relative path only.
    relative = os.path.relpath(BASE, overlay)
    (overlay / "kustomization.yaml").write_text(match.group(1).replace("../deploy/base", relative))
    kubectl = find_bin_dir() / "kubectl"
    proc = subprocess.run([str(kubectl), "kustomize", str(overlay)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    (deployment,) = [d for d in docs(proc.stdout) if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"registry.example.com/tenant-platform-operator:{__version__}"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TENANT_PLATFORM_DRIFT_INTERVAL"] == "600"
