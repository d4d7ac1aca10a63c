"""ObjectStoreReady: the platform's object storage choice is usable (checklist item 8).

Builtin (SeaweedFS on a PVC, installed by the platform) needs nothing from us: True, reason
Builtin. S3: the endpoint is an http(s) URL, and the credentials Secret exists in the tenant
namespace with non-empty values under the configured access-key-id and secret-access-key keys.
The values are never read beyond "present and non-empty". Record: ``objectStore`` {mode, and for
S3 endpoint, bucket, region, credentialsSecret (the name only)}.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile.base import CleanupResult, StepContext, StepResult
from tenant_platform.status import conditions

COMPONENT = "objectstore"

REASON_BUILTIN = "Builtin"
REASON_S3_READY = "S3CredentialsFound"
REASON_S3_MISSING = "S3SettingsMissing"
REASON_INVALID_ENDPOINT = "InvalidEndpoint"
REASON_SECRET_NOT_FOUND = "CredentialsSecretNotFound"
REASON_KEYS_MISSING = "CredentialsKeysMissing"


class ObjectStoreStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.OBJECT_STORE_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def reconcile(self, ctx: StepContext) -> StepResult:
        spec = ctx.platform.spec.object_store
        namespace = ctx.platform.spec.namespace
        type_ = constants.OBJECT_STORE_READY
        if spec.mode == "Builtin":
            cond = conditions.true(
                type_,
                REASON_BUILTIN,
                "spec.objectStore.mode is Builtin: the platform installs its own object store on a PVC.",
            )
            return StepResult(conditions=[cond], recorded={"objectStore": {"mode": "Builtin"}})
        s3 = spec.s3
        if s3 is None:
            cond = conditions.false(
                type_,
                REASON_S3_MISSING,
                "spec.objectStore.mode is S3 but spec.objectStore.s3 is missing: set endpoint, bucket and "
                "credentialsSecret.",
            )
            return StepResult(conditions=[cond], recorded={"objectStore": {"mode": "S3"}})
        secret_ref = s3.credentials_secret
        recorded: dict[str, Any] = {
            "objectStore": {
                "mode": "S3",
                "endpoint": s3.endpoint,
                "bucket": s3.bucket,
                "region": s3.region,
                "credentialsSecret": secret_ref.name,
            }
        }
        parsed = urllib.parse.urlsplit(s3.endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            cond = conditions.false(
                type_,
                REASON_INVALID_ENDPOINT,
                f"spec.objectStore.s3.endpoint {s3.endpoint!r} is not an http(s) URL with a host, "
                "e.g. https://s3.example.com.",
            )
            return StepResult(conditions=[cond], recorded=recorded)
        secret = ctx.kube.get("v1", "Secret", secret_ref.name, namespace)
        if secret is None:
            cond = conditions.false(
                type_,
                REASON_SECRET_NOT_FOUND,
                f"Secret {secret_ref.name} named in spec.objectStore.s3.credentialsSecret does not exist in "
                f"namespace {namespace}. Create it with keys {secret_ref.access_key_id_key} and "
                f"{secret_ref.secret_access_key_key}.",
            )
            return StepResult(conditions=[cond], recorded=recorded)
        data = {**(secret.get("data") or {})}
        wanted = [secret_ref.access_key_id_key, secret_ref.secret_access_key_key]
        missing = [key for key in dict.fromkeys(wanted) if not data.get(key)]
        if missing:
            cond = conditions.false(
                type_,
                REASON_KEYS_MISSING,
                f"Secret {secret_ref.name} in namespace {namespace} lacks non-empty key(s) "
                f"{', '.join(missing)} (set in spec.objectStore.s3.credentialsSecret). Add them, or point "
                "accessKeyIdKey/secretAccessKeyKey at the keys it has.",
            )
            return StepResult(conditions=[cond], recorded=recorded)
        region = f", region {s3.region}" if s3.region else ""
        cond = conditions.true(
            type_,
            REASON_S3_READY,
            f"S3 object store {s3.endpoint} bucket {s3.bucket}{region}: credentials Secret {secret_ref.name} "
            f"in namespace {namespace} has {' and '.join(wanted)}.",
        )
        return StepResult(conditions=[cond], recorded=recorded)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP = ObjectStoreStep()
