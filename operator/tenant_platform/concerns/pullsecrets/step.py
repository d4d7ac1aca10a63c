"""PullSecretsReady: every Secret in ``spec.imagePullSecrets`` is a usable registry credential.

Verify: each named Secret exists in the tenant namespace, has type kubernetes.io/dockerconfigjson,
and its ``.dockerconfigjson`` decodes to JSON with an ``auths`` object naming at least one
registry. Report which registry hosts each covers (never the credentials). Record:
``imagePullSecrets`` (the names, in spec order). With none named: True, reason NoneRequired.

Where the operator runs in the cluster, the registry hosts are also probed (framework/probes.py):
the outcome is a best-effort ``status.checks.registryProbes`` entry, never part of the condition.

Shape: ``gather`` reads only the Secrets named in the spec, one GET each (the operator never
lists Secrets); concerns/pullsecrets/verdict.py ``evaluate`` decides, purely; the step probes and reports.
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.pullsecrets import verdict as pull_status
from tenant_platform.framework import probes
from tenant_platform.framework.base import CleanupResult, StepContext, StepResult
from tenant_platform.kube.client import Obj

COMPONENT = "pullsecrets"


def gather(ctx: StepContext) -> pull_status.PullSecretsFacts:
    """Each Secret named in the spec, one GET each (first mention only; the operator never lists Secrets)."""
    namespace = ctx.platform.spec.namespace
    names = list(dict.fromkeys(ctx.platform.spec.image_pull_secrets))
    return pull_status.PullSecretsFacts(
        secrets=[(name, ctx.kube.get("v1", "Secret", name, namespace)) for name in names]
    )


class PullSecretsStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.PULL_SECRETS_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def reconcile(self, ctx: StepContext) -> StepResult:
        verdict = pull_status.evaluate(ctx.platform, gather(ctx))
        status: dict[str, Any] = {}
        if ctx.settings.in_cluster and verdict.registry_hosts:
            status["checks"] = {probes.CHECK_NAME: probes.probe_registries(verdict.registry_hosts)}
        return StepResult(conditions=[verdict.condition], recorded=verdict.recorded.dump(), status=status)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP = PullSecretsStep()
