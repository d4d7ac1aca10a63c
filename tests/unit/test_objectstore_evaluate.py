"""ObjectStoreReady, decided purely from the spec and the credentials Secret: one row per reason."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api import reasons
from tenant_platform.concerns.objectstore.verdict import ObjectStoreFacts, evaluate, needs_secret

R = reasons.ObjectStore
S3 = {
    "mode": "S3",
    "s3": {
        "endpoint": "https://s3.example.com",
        "bucket": "kamiwaza",
        "region": "eu-west-1",
        "credentialsSecret": {"name": "s3-creds"},
    },
}
RECORDED_S3 = {
    "mode": "S3",
    "endpoint": "https://s3.example.com",
    "bucket": "kamiwaza",
    "region": "eu-west-1",
    "credentialsSecret": "s3-creds",
}


def creds(**data: str) -> dict[str, Any]:
    return {"data": {k: base64.b64encode(v.encode()).decode() if v else "" for k, v in data.items()}}


def with_endpoint(endpoint: str) -> dict[str, Any]:
    return {**S3, "s3": {**S3["s3"], "endpoint": endpoint}}  # type: ignore[dict-item]


@dataclass
class Row:
    spec: dict[str, Any] | None
    secret: dict[str, Any] | None
    status: str
    reason: str
    fragment: str
    recorded: dict[str, Any]
    needs_secret: bool = False


ROWS = [
    pytest.param(Row(None, None, "True", R.BUILTIN, "mode is Builtin", {"mode": "Builtin"}), id="builtin"),
    pytest.param(
        Row({"mode": "S3"}, None, "False", R.S3_SETTINGS_MISSING, "spec.objectStore.s3 is missing", {"mode": "S3"}),
        id="s3 settings missing",
    ),
    pytest.param(
        Row(
            with_endpoint("s3.example.com"),
            None,
            "False",
            R.INVALID_ENDPOINT,
            "spec.objectStore.s3.endpoint 's3.example.com' is not an http(s) URL with a host",
            {**RECORDED_S3, "endpoint": "s3.example.com"},
        ),
        id="invalid endpoint",
    ),
    pytest.param(
        Row(
            S3,
            None,
            "False",
            R.CREDENTIALS_SECRET_NOT_FOUND,
            "Secret s3-creds named in spec.objectStore.s3.credentialsSecret does not exist in namespace ns. "
            "Create it with keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.",
            RECORDED_S3,
            needs_secret=True,
        ),
        id="secret not found",
    ),
    pytest.param(
        Row(
            S3,
            creds(AWS_ACCESS_KEY_ID="AKIAEXAMPLE", AWS_SECRET_ACCESS_KEY=""),
            "False",
            R.CREDENTIALS_KEYS_MISSING,
            "lacks non-empty key(s) AWS_SECRET_ACCESS_KEY (set in",
            RECORDED_S3,
            needs_secret=True,
        ),
        id="keys missing",
    ),
    pytest.param(
        Row(
            S3,
            creds(AWS_ACCESS_KEY_ID="AKIAEXAMPLE", AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI"),
            "True",
            R.S3_CREDENTIALS_FOUND,
            "S3 object store https://s3.example.com bucket kamiwaza, region eu-west-1: credentials Secret s3-creds "
            "in namespace ns has AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.",
            RECORDED_S3,
            needs_secret=True,
        ),
        id="credentials found",
    ),
]


@pytest.mark.parametrize("row", ROWS)
def test_evaluate(row: Row) -> None:
    tp = platform("tp", "ns", **({} if row.spec is None else {"objectStore": row.spec}))
    assert needs_secret(tp.spec.object_store) == row.needs_secret
    verdict = evaluate(tp, ObjectStoreFacts(secret=row.secret))
    cond = verdict.condition
    assert (cond.status, cond.reason) == (row.status, row.reason)
    assert row.fragment in cond.message, cond.message
    assert "AKIAEXAMPLE" not in cond.message and "wJalrXUtnFEMI" not in cond.message
    assert verdict.recorded.dump() == {"objectStore": row.recorded}


def test_empty_region_is_recorded_and_left_out_of_the_message() -> None:
    spec = {**S3, "s3": {**S3["s3"], "region": ""}}  # type: ignore[dict-item]
    secret = creds(AWS_ACCESS_KEY_ID="a", AWS_SECRET_ACCESS_KEY="b")
    verdict = evaluate(platform("tp", "ns", objectStore=spec), ObjectStoreFacts(secret=secret))
    assert verdict.recorded.dump()["objectStore"]["region"] == ""
    assert "region" not in verdict.condition.message
