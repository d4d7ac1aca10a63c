"""PullSecretsReady, decided purely from the named Secrets: one row per reason."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import reasons
from tenant_platform.concerns.pullsecrets.verdict import PullSecretsFacts, evaluate, registry_hosts

R = reasons.PullSecrets


def docker(auths: Any, *, type_: str = "kubernetes.io/dockerconfigjson") -> dict[str, Any]:
    raw = base64.b64encode(json.dumps({"auths": auths}).encode()).decode()
    return {"type": type_, "data": {".dockerconfigjson": raw}}


GOOD = docker({"https://index.docker.io/v1/": {"auth": "dXNlcjpodW50ZXIy"}, "reg.example:5000": {"auth": "eDp5"}})
MIRROR = docker({"mirror.example": {"auth": "eDp5"}})


@pytest.mark.parametrize(
    ("secrets", "status", "reason", "fragment", "hosts"),
    [
        pytest.param([], "True", R.NONE_REQUIRED, "spec.imagePullSecrets is empty", [], id="none named"),
        pytest.param(
            [("pull", GOOD), ("mirror", MIRROR)],
            "True",
            R.PULL_SECRETS_FOUND,
            "Pull secrets in namespace ns are usable: pull covers index.docker.io, reg.example:5000; "
            "mirror covers mirror.example.",
            ["index.docker.io", "mirror.example", "reg.example:5000"],
            id="all usable",
        ),
        pytest.param(
            [("pull", None), ("mirror", MIRROR)],
            "False",
            R.PULL_SECRET_NOT_FOUND,
            "Secret pull in namespace ns does not exist. Create each missing Secret in namespace ns with kubectl "
            "create secret docker-registry (type kubernetes.io/dockerconfigjson). "
            "Usable: mirror covers mirror.example.",
            ["mirror.example"],
            id="one missing",
        ),
        pytest.param(
            [("pull", {"type": "Opaque"})],
            "False",
            R.WRONG_SECRET_TYPE,
            "Pull secret problems: Secret pull in namespace ns has type Opaque, not kubernetes.io/dockerconfigjson.",
            [],
            id="wrong type",
        ),
        pytest.param(
            [("pull", {"type": "kubernetes.io/dockerconfigjson", "data": {}})],
            "False",
            R.UNPARSEABLE,
            "Secret pull in namespace ns has no .dockerconfigjson key",
            [],
            id="unparseable",
        ),
        pytest.param(
            [("pull", docker({}))],
            "False",
            R.NO_REGISTRIES,
            "Secret pull in namespace ns: .dockerconfigjson lists no registry",
            [],
            id="no registries",
        ),
        pytest.param(
            [("pull", docker({})), ("gone", None)],
            "False",
            R.NO_REGISTRIES,
            "Create each missing Secret",
            [],
            id="first problem names the reason",
        ),
    ],
)
def test_evaluate(secrets: list, status: str, reason: str, fragment: str, hosts: list[str]) -> None:
    tp = platform("tp", "ns", imagePullSecrets=[n for n, _ in secrets])
    facts = PullSecretsFacts(secrets=secrets)
    verdict = evaluate(tp, facts)
    cond = verdict.condition
    assert (cond.status, cond.reason) == (status, reason)
    assert fragment in cond.message, cond.message
    assert registry_hosts(tp, facts) == hosts
    assert verdict.recorded.dump() == {"imagePullSecrets": [n for n, _ in secrets]}
    assert "hunter2" not in cond.message and "dXNlcjpodW50ZXIy" not in cond.message
