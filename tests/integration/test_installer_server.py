"""The installer kubeconfig's server, on the real API server: the spec's, else the kubeconfig
kubeadm publishes in ``kube-public/cluster-info`` (server and CA), else the operator's own API
address; the choice is recorded in ``status.recorded.installer`` and the install values, and a
changed choice re-mints. Values an attacker could try (plain http, user info, a query) are
rejected at apply time by the CRD.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from tests.support import condition

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.concerns.installvalues import manifests
from tenant_platform.config import Settings
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=30)
SECRET = "platform-installer-kubeconfig"
PUBLISHED = "https://cp.example.test:6443"


def run(kube: Kube, name: str) -> reconcile.Outcome:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return reconcile.run(body, kube=kube, settings=SETTINGS, now=NOW)


def minted(kube: Kube, namespace: str) -> dict[str, Any]:
    secret = kube.get("v1", "Secret", SECRET, namespace)
    assert secret is not None
    doc: dict[str, Any] = json.loads(base64.b64decode(secret["data"]["kubeconfig"]))
    return doc["clusters"][0]["cluster"]


@pytest.fixture
def cluster_info(crd: Kube) -> Iterator[str]:
    """kube-public/cluster-info as kubeadm publishes it (server and CA; no user), removed after."""
    ca = crd.ca_data() or ""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {"server": PUBLISHED, "certificate-authority-data": base64.b64encode(ca.encode()).decode()},
            }
        ],
        "contexts": None,
        "current-context": "",
        "users": None,
    }
    crd.delete("v1", "ConfigMap", "cluster-info", "kube-public")
    crd.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": yaml.safe_dump(kubeconfig)},
        }
    )
    try:
        yield ca
    finally:
        crd.delete("v1", "ConfigMap", "cluster-info", "kube-public")


def test_server_from_cluster_info_then_spec_then_operator(
    crd: Kube, make_platform: Any, unique_name: str, cluster_info: str
) -> None:
    ns = unique_name
    make_platform(unique_name, ns, installer={"kubeconfigSecret": {"enabled": True}})
    outcome = run(crd, unique_name)
    assert minted(crd, ns) == {
        "server": PUBLISHED,
        "certificate-authority-data": base64.b64encode(cluster_info.encode()).decode(),
    }
    installer = outcome.status["recorded"]["installer"]
    assert (installer["kubeconfigServer"], installer["kubeconfigServerSource"]) == (PUBLISHED, "ClusterInfo")
    ready = condition(outcome.status, "InstallerReady")
    assert f"names server {PUBLISHED} (from ConfigMap kube-public/cluster-info)" in ready["message"]
    values = crd.get("v1", "ConfigMap", f"{unique_name}-install-values", ns)
    assert values is not None
    doc = yaml.safe_load(values["data"][manifests.VALUES_KEY])
    assert doc["installer"]["kubeconfigServer"] == PUBLISHED
    assert doc["installer"]["kubeconfigServerSource"] == "ClusterInfo"

    # The spec wins, and a different server re-mints at once (the token is never decoded back).
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"spec": {"installer": {"kubeconfigSecret": {"server": "https://api.example.test"}}}},
    )
    outcome = run(crd, unique_name)
    assert minted(crd, ns)["server"] == "https://api.example.test"
    assert outcome.status["recorded"]["installer"]["kubeconfigServerSource"] == "Spec"
    assert any(e[1] == "TokenMinted" for e in outcome.events)

    # Neither: the operator's own address.
    crd.merge_patch(
        constants.API_VERSION,
        constants.KIND,
        unique_name,
        {"spec": {"installer": {"kubeconfigSecret": {"server": ""}}}},
    )
    crd.delete("v1", "ConfigMap", "cluster-info", "kube-public")
    outcome = run(crd, unique_name)
    assert minted(crd, ns)["server"] == crd.server
    assert outcome.status["recorded"]["installer"]["kubeconfigServerSource"] == "OperatorAPI"


@pytest.mark.parametrize(
    "server",
    [
        pytest.param("http://api.example.test", id="plain http"),
        pytest.param("https://user:pw@api.example.test", id="user info"),
        pytest.param("https://api.example.test/?x=1", id="query"),
        pytest.param("https://api.example.test#f", id="fragment"),
        pytest.param("https://api.example.test\nserver: https://evil", id="newline"),
        pytest.param("file:///etc/passwd", id="another scheme"),
    ],
)
def test_unsafe_server_rejected_at_apply_time(crd: Kube, make_platform: Any, unique_name: str, server: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        make_platform(unique_name, unique_name, installer={"kubeconfigSecret": {"enabled": True, "server": server}})
    assert "spec.installer.kubeconfigSecret.server" in str(caught.value.message)
