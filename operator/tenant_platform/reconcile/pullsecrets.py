"""PullSecretsReady: every Secret in ``spec.imagePullSecrets`` is a usable registry credential.

Verify: each named Secret exists in the tenant namespace, has type kubernetes.io/dockerconfigjson,
and its ``.dockerconfigjson`` decodes to JSON with an ``auths`` object naming at least one
registry. Report which registry hosts each covers (never the credentials). Record:
``imagePullSecrets`` (the names, in spec order). With none named: True, reason NoneRequired.

Where the operator runs in the cluster, the registry hosts are also probed (reconcile/probes.py):
the outcome is a best-effort ``status.checks.registryProbes`` entry, never part of the condition.

Only Secrets named in the spec are read, one GET each: the operator never lists Secrets.
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile import probes
from tenant_platform.reconcile.base import CleanupResult, StepContext, StepResult
from tenant_platform.status import conditions
from tenant_platform.status import pullsecrets as pull_status

COMPONENT = "pullsecrets"


class PullSecretsStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.PULL_SECRETS_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def reconcile(self, ctx: StepContext) -> StepResult:
        platform = ctx.platform
        names = list(dict.fromkeys(platform.spec.image_pull_secrets))
        namespace = platform.spec.namespace
        type_ = constants.PULL_SECRETS_READY
        if not names:
            cond = conditions.true(
                type_,
                pull_status.REASON_NONE_REQUIRED,
                "spec.imagePullSecrets is empty: images are pulled without credentials.",
            )
            return StepResult(conditions=[cond], recorded={"imagePullSecrets": []})

        verdicts = [
            pull_status.check_secret(name, namespace, ctx.kube.get("v1", "Secret", name, namespace)) for name in names
        ]
        bad = [v for v in verdicts if not v.ok]
        good = [v for v in verdicts if v.ok]
        covers = "; ".join(f"{v.name} covers {', '.join(v.hosts)}" for v in good)
        if bad:
            message = "Pull secret problems: " + "; ".join(v.problem for v in bad) + "."
            if any(v.reason == pull_status.REASON_NOT_FOUND for v in bad):
                message += (
                    f" Create each missing Secret in namespace {namespace} with kubectl create secret "
                    "docker-registry (type kubernetes.io/dockerconfigjson)."
                )
            if covers:
                message += f" Usable: {covers}."
            cond = conditions.false(type_, bad[0].reason, message)
        else:
            cond = conditions.true(
                type_,
                pull_status.REASON_FOUND,
                f"Pull secrets in namespace {namespace} are usable: {covers}.",
            )

        status: dict[str, Any] = {}
        hosts = sorted({h for v in good for h in v.hosts})
        if ctx.settings.in_cluster and hosts:
            status["checks"] = {probes.CHECK_NAME: probes.probe_registries(hosts)}
        return StepResult(conditions=[cond], recorded={"imagePullSecrets": names}, status=status)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP = PullSecretsStep()
