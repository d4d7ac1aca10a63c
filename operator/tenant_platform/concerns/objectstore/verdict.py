"""ObjectStoreReady, decided from the spec and the S3 credentials Secret. Pure.

Builtin (SeaweedFS on a PVC, installed by the platform) needs nothing: True, reason Builtin. S3:
the endpoint is an http(s) URL, and the credentials Secret exists in the tenant namespace with
non-empty values under the configured access-key-id and secret-access-key keys. The values are
never looked at beyond "present and non-empty", and never leave this module.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import ObjectStore, TenantPlatform
from tenant_platform.api.status.objectstore import ObjectStoreRecorded, RecordedObjectStore
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict

R = reasons.ObjectStore


@dataclass(frozen=True)
class ObjectStoreFacts:
    """The credentials Secret named in ``spec.objectStore.s3`` (None: absent, or not read because
    ``needs_secret`` said the spec is decided without it)."""

    secret: Mapping[str, Any] | None = None


def _verdict(condition: Condition, recorded: ObjectStoreRecorded) -> Verdict:
    return Verdict(conditions=[condition], recorded=Recorded(object_store=recorded.object_store))


def endpoint_ok(endpoint: str) -> bool:
    """An http(s) URL with a host."""
    parsed = urllib.parse.urlsplit(endpoint)
    return parsed.scheme in ("http", "https") and bool(parsed.hostname)


def needs_secret(spec: ObjectStore) -> bool:
    """Whether the verdict depends on the credentials Secret (S3, complete, with a usable endpoint)."""
    return spec.mode == "S3" and spec.s3 is not None and endpoint_ok(spec.s3.endpoint)


def evaluate(platform: TenantPlatform, facts: ObjectStoreFacts) -> Verdict:
    """ObjectStoreReady and ``recorded.objectStore`` {mode, and for S3 the endpoint, bucket, region and
    the credentials Secret's name}."""
    spec = platform.spec.object_store
    namespace = platform.spec.namespace
    type_ = constants.OBJECT_STORE_READY
    if spec.mode == "Builtin":
        cond = conditions.true(
            type_, R.BUILTIN, "spec.objectStore.mode is Builtin: the platform installs its own object store on a PVC."
        )
        return _verdict(cond, ObjectStoreRecorded(object_store=RecordedObjectStore(mode="Builtin")))
    s3 = spec.s3
    if s3 is None:
        cond = conditions.false(
            type_,
            R.S3_SETTINGS_MISSING,
            "spec.objectStore.mode is S3 but spec.objectStore.s3 is missing: set endpoint, bucket and "
            "credentialsSecret.",
        )
        return _verdict(cond, ObjectStoreRecorded(object_store=RecordedObjectStore(mode="S3")))
    ref = s3.credentials_secret
    recorded = ObjectStoreRecorded(
        object_store=RecordedObjectStore(
            mode="S3", endpoint=s3.endpoint, bucket=s3.bucket, region=s3.region, credentials_secret=ref.name
        )
    )
    if not endpoint_ok(s3.endpoint):
        cond = conditions.false(
            type_,
            R.INVALID_ENDPOINT,
            f"spec.objectStore.s3.endpoint {s3.endpoint!r} is not an http(s) URL with a host, "
            "e.g. https://s3.example.com.",
        )
        return _verdict(cond, recorded)
    if facts.secret is None:
        cond = conditions.false(
            type_,
            R.CREDENTIALS_SECRET_NOT_FOUND,
            f"Secret {ref.name} named in spec.objectStore.s3.credentialsSecret does not exist in "
            f"namespace {namespace}. Create it with keys {ref.access_key_id_key} and {ref.secret_access_key_key}.",
        )
        return _verdict(cond, recorded)
    data = {**(facts.secret.get("data") or {})}
    wanted = [ref.access_key_id_key, ref.secret_access_key_key]
    missing = [key for key in dict.fromkeys(wanted) if not data.get(key)]
    if missing:
        cond = conditions.false(
            type_,
            R.CREDENTIALS_KEYS_MISSING,
            f"Secret {ref.name} in namespace {namespace} lacks non-empty key(s) "
            f"{', '.join(missing)} (set in spec.objectStore.s3.credentialsSecret). Add them, or point "
            "accessKeyIdKey/secretAccessKeyKey at the keys it has.",
        )
        return _verdict(cond, recorded)
    region = f", region {s3.region}" if s3.region else ""
    cond = conditions.true(
        type_,
        R.S3_CREDENTIALS_FOUND,
        f"S3 object store {s3.endpoint} bucket {s3.bucket}{region}: credentials Secret {ref.name} "
        f"in namespace {namespace} has {' and '.join(wanted)}.",
    )
    return _verdict(cond, recorded)
