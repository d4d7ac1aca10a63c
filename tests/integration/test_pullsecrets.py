"""PullSecretsReady against the real API server, and the best-effort registry probe.

Credentials must never surface: every assertion on a usable Secret also checks that no password,
auth string or token appears in the status, the condition message or the install values.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from facts_support import b64, create_namespace, dockerconfigjson, get_platform, reconcile_once, run_step
from tests.support import condition, platform_body

from tenant_platform.api import constants
from tenant_platform.concerns.pullsecrets import step
from tenant_platform.config import Settings
from tenant_platform.framework import probes
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube

PASSWORD = "s3cr3t-Pa55word"
AUTH = b64(f"robot:{PASSWORD}")
TOKEN = "identity-token-abc123"


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


def secret(name: str, namespace: str, *, type_: str, data: dict[str, str]) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": type_,
        "data": data,
    }


def good_secret(name: str, namespace: str, auths: dict[str, Any] | None = None) -> dict:
    if auths is None:
        auths = {
            "registry.example.com": {"username": "robot", "password": PASSWORD, "auth": AUTH},
            "https://index.docker.io/v1/": {"auth": AUTH, "identitytoken": TOKEN},
        }
    return secret(
        name,
        namespace,
        type_="kubernetes.io/dockerconfigjson",
        data={".dockerconfigjson": dockerconfigjson(auths)},
    )


def assert_no_credentials(*texts: str) -> None:
    for text in texts:
        for leaked in (PASSWORD, AUTH, TOKEN, "robot"):
            assert leaked not in text


def test_none_named_is_true(kube: Kube, unique_name: str) -> None:
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name))
    cond = result.conditions[0]
    assert (cond.type, cond.status, cond.reason) == (constants.PULL_SECRETS_READY, "True", "NoneRequired")
    assert result.recorded == {"imagePullSecrets": []}


@pytest.mark.parametrize(
    ("make", "reason", "words"),
    [
        pytest.param(
            None, "PullSecretNotFound", ["does not exist", "kubectl create secret docker-registry"], id="absent"
        ),
        pytest.param(
            lambda n, ns: secret(n, ns, type_="Opaque", data={".dockerconfigjson": dockerconfigjson({})}),
            "WrongSecretType",
            ["has type Opaque, not kubernetes.io/dockerconfigjson"],
            id="wrong type",
        ),
        pytest.param(
            lambda n, ns: secret(n, ns, type_="kubernetes.io/dockercfg", data={".dockercfg": b64("{}")}),
            "WrongSecretType",
            ["kubernetes.io/dockercfg"],
            id="legacy dockercfg",
        ),
        pytest.param(
            lambda n, ns: good_secret(n, ns, auths={}),
            "NoRegistries",
            ["lists no registry"],
            id="empty auths",
        ),
    ],
)
def test_unusable_secrets_fail_with_a_reason(kube: Kube, unique_name: str, make: Any, reason: str, words: list) -> None:
    create_namespace(kube, unique_name)
    if make:
        kube.create(make("pull", unique_name))
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, imagePullSecrets=["pull"]))
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("False", reason)
    assert f"Secret pull in namespace {unique_name}" in cond.message
    for word in words:
        assert word in cond.message
    assert result.recorded == {"imagePullSecrets": ["pull"]}


def test_a_payload_without_auths_is_unparseable_and_not_echoed(kube: Kube, unique_name: str) -> None:
    # The API server only checks that .dockerconfigjson is JSON. A classic mistake it lets through:
    # the old ~/.dockercfg layout (registries at the top level, no "auths") in a dockerconfigjson Secret.
    create_namespace(kube, unique_name)
    legacy = {"registry.example.com": {"username": "robot", "password": PASSWORD, "auth": AUTH}}
    kube.create(
        secret(
            "pull",
            unique_name,
            type_="kubernetes.io/dockerconfigjson",
            data={".dockerconfigjson": b64(json.dumps(legacy))},
        )
    )
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, imagePullSecrets=["pull"]))
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("False", "Unparseable")
    assert "has no auths object" in cond.message
    assert_no_credentials(cond.message)
    # Truly broken JSON never gets in: the API server rejects it.
    with pytest.raises(errors.Invalid, match="dockerconfigjson"):
        broken = {".dockerconfigjson": b64("{")}
        kube.create(secret("bad", unique_name, type_="kubernetes.io/dockerconfigjson", data=broken))


def test_usable_secrets_report_hosts_and_never_credentials(kube: Kube, make_platform: Any, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    kube.create(good_secret("pull-a", ns))
    kube.create(good_secret("pull-b", ns, auths={"mirror.internal:5000": {"auth": AUTH}}))
    make_platform(unique_name, ns, imagePullSecrets=["pull-a", "pull-b"])
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.PULL_SECRETS_READY)
    assert (cond["status"], cond["reason"]) == ("True", "PullSecretsFound")
    assert "pull-a covers index.docker.io, registry.example.com" in cond["message"]
    assert "pull-b covers mirror.internal:5000" in cond["message"]

    status = get_platform(kube, unique_name)["status"]
    assert status["recorded"]["imagePullSecrets"] == ["pull-a", "pull-b"]
    cm = kube.get("v1", "ConfigMap", f"{unique_name}-install-values", ns)
    assert cm is not None
    values = cm["data"]["values.yaml"]
    assert "- name: pull-a" in values
    assert_no_credentials(json.dumps(status), cond["message"], values)

    # One of them breaks: the condition names it and still lists what is usable.
    kube.delete("v1", "Secret", "pull-b", ns)
    kube.create(secret("pull-b", ns, type_="Opaque", data={"password": b64(PASSWORD)}))
    outcome = reconcile_once(kube, unique_name)
    cond = condition(outcome.status, constants.PULL_SECRETS_READY)
    assert (cond["status"], cond["reason"]) == ("False", "WrongSecretType")
    assert "pull-b" in cond["message"] and "Usable: pull-a covers" in cond["message"]
    assert_no_credentials(json.dumps(get_platform(kube, unique_name)["status"]), cond["message"])


def test_in_cluster_probe_is_best_effort_and_never_fails_the_condition(kube: Kube, unique_name: str) -> None:
    ns = unique_name
    create_namespace(kube, ns)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    open_host = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        kube.create(
            good_secret("pull", ns, auths={open_host: {"auth": AUTH}, f"127.0.0.1:{closed_port}": {"auth": AUTH}})
        )
        body = platform_body(unique_name, ns, imagePullSecrets=["pull"])
        probes.clear_cache()
        outside = run_step(step.STEP, kube, body, settings=Settings(in_cluster=False))
        inside = run_step(step.STEP, kube, body, settings=Settings(in_cluster=True))
    finally:
        listener.close()
    assert "checks" not in outside.status  # only from a pod in the cluster
    assert inside.conditions[0].status == "True"  # a failed probe is a warning, not a condition
    entry = inside.status["checks"][probes.CHECK_NAME]
    assert entry["bestEffort"] is True and entry["result"] == "Warn"
    reachable = {f"{h['host']}:{h['port']}": h["reachable"] for h in entry["hosts"]}
    assert reachable == {open_host: True, f"127.0.0.1:{closed_port}": False}
    assert_no_credentials(json.dumps(entry))
