"""ObjectStoreReady: the platform's object storage choice is usable (checklist item 8).

Shape: ``gather`` reads the S3 credentials Secret, and only when the verdict depends on it;
concerns/objectstore/verdict.py ``evaluate`` decides (Builtin needs nothing; S3 needs an http(s) endpoint and
the Secret with non-empty values under the configured keys); ``apply`` writes nothing. Record:
``objectStore`` {mode, and for S3 endpoint, bucket, region, credentialsSecret (the name only)}.
"""

from __future__ import annotations

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.objectstore.verdict import ObjectStoreFacts, evaluate, needs_secret
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube.client import Obj

COMPONENT = "objectstore"


def gather(ctx: StepContext) -> ObjectStoreFacts:
    """The credentials Secret in the tenant namespace, when the verdict needs it (one GET)."""
    spec = ctx.platform.spec.object_store
    if spec.s3 is None or not needs_secret(spec):
        return ObjectStoreFacts()
    return ObjectStoreFacts(
        secret=ctx.kube.get("v1", "Secret", spec.s3.credentials_secret.name, ctx.platform.spec.namespace)
    )


class ObjectStoreStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.OBJECT_STORE_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> ObjectStoreFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: ObjectStoreFacts) -> Verdict:
        return evaluate(given.platform, facts)

    def apply(self, ctx: StepContext, facts: ObjectStoreFacts, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP: Step[ObjectStoreFacts] = ObjectStoreStep()
