"""ObjectStoreReady against the real API server: Builtin, and S3 credentials Secret checks."""

from __future__ import annotations

from typing import Any

import pytest
from facts_support import b64, create_namespace, run_step
from tests.support import platform_body

from tenant_platform.api import constants
from tenant_platform.concerns.objectstore import step
from tenant_platform.kube.client import Kube


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


def s3_spec(**secret: Any) -> dict[str, Any]:
    return {
        "mode": "S3",
        "s3": {
            "endpoint": "https://s3.example.com",
            "bucket": "kamiwaza",
            "region": "eu-west-1",
            "credentialsSecret": {"name": "s3-creds", **secret},
        },
    }


def creds(namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s3-creds", "namespace": namespace},
        "data": {k: b64(v) for k, v in data.items()},
    }


def test_builtin_needs_nothing(kube: Kube, unique_name: str) -> None:
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name))
    cond = result.conditions[0]
    assert (cond.type, cond.status, cond.reason) == (constants.OBJECT_STORE_READY, "True", "Builtin")
    assert result.recorded == {"objectStore": {"mode": "Builtin"}}


def test_s3_credentials_secret_missing(kube: Kube, unique_name: str) -> None:
    create_namespace(kube, unique_name)
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, objectStore=s3_spec()))
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("False", "CredentialsSecretNotFound")
    assert (
        f"Secret s3-creds named in spec.objectStore.s3.credentialsSecret does not exist in namespace {unique_name}"
        in cond.message
    )
    assert "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in cond.message
    assert result.recorded == {
        "objectStore": {
            "mode": "S3",
            "endpoint": "https://s3.example.com",
            "bucket": "kamiwaza",
            "region": "eu-west-1",
            "credentialsSecret": "s3-creds",
        }
    }


def test_s3_keys_missing_are_named(kube: Kube, unique_name: str) -> None:
    create_namespace(kube, unique_name)
    kube.create(creds(unique_name, {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": ""}))
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, objectStore=s3_spec()))
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("False", "CredentialsKeysMissing")
    assert "AWS_SECRET_ACCESS_KEY" in cond.message and "AWS_ACCESS_KEY_ID" not in cond.message.split("(")[0]
    assert "AKIAEXAMPLE" not in cond.message


def test_s3_custom_keys_pass(kube: Kube, unique_name: str) -> None:
    create_namespace(kube, unique_name)
    kube.create(creds(unique_name, {"access": "AKIAEXAMPLE", "secret": "wJalrXUtnFEMI"}))
    spec = s3_spec(accessKeyIdKey="access", secretAccessKeyKey="secret")
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, objectStore=spec))
    cond = result.conditions[0]
    assert (cond.status, cond.reason) == ("True", "S3CredentialsFound")
    assert "s3-creds" in cond.message and "wJalrXUtnFEMI" not in cond.message and "AKIAEXAMPLE" not in cond.message

    # With the default key names the same Secret lacks both keys.
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, objectStore=s3_spec()))
    assert result.conditions[0].reason == "CredentialsKeysMissing"
    assert "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY" in result.conditions[0].message


def test_s3_endpoint_must_be_a_url(kube: Kube, unique_name: str) -> None:
    spec = s3_spec()
    spec["s3"]["endpoint"] = "s3.example.com"
    result = run_step(step.STEP, kube, platform_body(unique_name, unique_name, objectStore=spec))
    assert (result.conditions[0].status, result.conditions[0].reason) == ("False", "InvalidEndpoint")
