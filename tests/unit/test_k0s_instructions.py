"""The k0s CoreDNS guidance says exactly what the checklist says (one row per fact), and its patch parses."""

from __future__ import annotations

import pytest
import yaml

from tenant_platform.api.status.dns import Mode
from tenant_platform.concerns.dns import coredns
from tenant_platform.formats import corefile
from tenant_platform.testing.seed import STOCK_COREFILE

HOST = "istio-ingressgateway.istio-system.svc.cluster.local"
DIST = coredns.Distribution("k0s", Mode.MANAGED, "the CoreDNS objects carry k0sproject.io labels or annotations")
PATCHED = corefile.upsert_block(STOCK_COREFILE, "kamiwaza", "kamiwaza.example.com", HOST)
MESSAGE = coredns.k0s_instructions(DIST, patched_corefile=PATCHED, target=coredns.CoreDNSTarget())


@pytest.mark.parametrize(
    "fact",
    [
        pytest.param("On every controller node", id="every controller node"),
        pytest.param("`systemctl cat k0scontroller` shows --config=<file>", id="which file: the unit's flag"),
        pytest.param("k0s reads /etc/k0s/k0s.yaml if present, else built-in defaults", id="which file: default"),
        pytest.param("A file that exists gets only the spec.network.coreDNS addition", id="existing file untouched"),
        pytest.param("/run/k0s/k0s.yaml shows the running spec.storage.type (etcd or kine)", id="datastore read"),
        pytest.param("a --single node runs on kine; `k0s config create` writes etcd", id="datastore defaults"),
        pytest.param("a new, empty datastore", id="datastore risk"),
        pytest.param("copy kine.dataSource too", id="kine data source"),
        pytest.param("apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\n", id="ClusterConfig kind"),
        pytest.param("target: {kind: ConfigMap, name: coredns, namespace: kube-system}", id="patch target"),
        pytest.param("type: StrategicMergePatch\n", id="strategic merge patch"),
        pytest.param("`k0s config validate --config <file>`", id="validate"),
        pytest.param("`k0s backup --save-path <dir>`", id="backup"),
        pytest.param("keep it off the node", id="backup holds keys"),
        pytest.param("`systemctl restart k0scontroller`", id="restart k0scontroller"),
    ],
)
def test_k0s_message_states_each_checklist_fact(fact: str) -> None:
    assert fact in MESSAGE


def test_k0s_patch_is_a_clusterconfig_whose_content_is_the_whole_patched_corefile() -> None:
    block = MESSAGE[MESSAGE.index("apiVersion: k0s") : MESSAGE.index("\n4. ")]
    config = yaml.safe_load(block + "\n")
    assert config["kind"] == "ClusterConfig"
    (entry,) = config["spec"]["network"]["coreDNS"]["patches"]
    assert entry["target"] == {"kind": "ConfigMap", "name": "coredns", "namespace": "kube-system"}
    assert entry["patch"]["type"] == "StrategicMergePatch"
    content = yaml.safe_load(entry["patch"]["content"])
    assert content == {"data": {"Corefile": PATCHED}}
    assert "rewrite name exact kamiwaza.example.com " + HOST in content["data"]["Corefile"]


def test_no_json_patch_and_no_coredns_rollout_for_k0s() -> None:
    assert "op: replace" not in MESSAGE
    assert "rollout restart" not in MESSAGE
