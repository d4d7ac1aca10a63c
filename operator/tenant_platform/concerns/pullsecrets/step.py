"""PullSecretsReady: every Secret in ``spec.imagePullSecrets`` is a usable registry credential.

Verify: each named Secret exists in the tenant namespace, has type kubernetes.io/dockerconfigjson,
and its ``.dockerconfigjson`` decodes to JSON with an ``auths`` object naming at least one
registry. Report which registry hosts each covers (never the credentials). Record:
``imagePullSecrets`` (the names, in spec order). With none named: True, reason NoneRequired.

Where the operator runs in the cluster, the registry hosts are also probed (framework/probes.py):
the outcome is a best-effort ``status.checks.registryProbes`` entry, never part of the condition.

Shape: ``gather`` reads only the Secrets named in the spec, one GET each (the operator never
lists Secrets), and probes the registry hosts the usable ones cover (network I/O, so a fact);
concerns/pullsecrets/verdict.py ``evaluate`` decides, purely, and the step's ``evaluate`` puts the
probe into ``status.checks``; ``apply`` writes nothing.
"""

from __future__ import annotations

from dataclasses import replace

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.pullsecrets.verdict import PullSecretsFacts, evaluate, registry_hosts
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework import probes
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube.client import Obj

COMPONENT = "pullsecrets"


def gather(ctx: StepContext) -> PullSecretsFacts:
    """Each Secret named in the spec, one GET each (first mention only; the operator never lists
    Secrets); where the operator runs in the cluster, the probe of the registry hosts they cover."""
    namespace = ctx.platform.spec.namespace
    names = list(dict.fromkeys(ctx.platform.spec.image_pull_secrets))
    facts = PullSecretsFacts(secrets=[(name, ctx.kube.get("v1", "Secret", name, namespace)) for name in names])
    hosts = registry_hosts(ctx.platform, facts)
    if ctx.settings.in_cluster and hosts:
        return replace(facts, registry_probe=probes.probe_registries(hosts))
    return facts


class PullSecretsStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = (constants.PULL_SECRETS_READY,)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> PullSecretsFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: PullSecretsFacts) -> Verdict:
        """The pure verdict, and the probe (a fact) as the best-effort ``status.checks`` entry."""
        verdict = evaluate(given.platform, facts)
        if facts.registry_probe is None:
            return verdict
        return verdict.but(sections={"checks": {probes.CHECK_NAME: dict(facts.registry_probe)}})

    def apply(self, ctx: StepContext, facts: PullSecretsFacts, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP: Step[PullSecretsFacts] = PullSecretsStep()
