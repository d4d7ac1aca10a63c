"""The Kubernetes API addresses, recorded for NetworkPolicies (checklist item 9).

Record: ``kubernetesAPI`` {serviceCIDRs, endpointCIDRs, servicePorts, endpointPorts} from the
``kubernetes`` Service in ``default`` and every EndpointSlice labelled
``kubernetes.io/service-name=kubernetes`` there (see concerns/apiaddresses/verdict.py for the rules).

This step owns no condition: the addresses are facts, not a prerequisite an admin can fix from
our spec. What looks wrong (no EndpointSlice, no cluster IP) goes to ``status.checks.kubernetesAPI``
as a warning, and ``tenant-platform check`` lists it as WARN. The facts are read on every pass,
so the drift timer keeps them current when control-plane nodes change.

Shape: ``gather`` reads the Service and the slices; concerns/apiaddresses/verdict.py ``evaluate`` decides the
recorded facts and the check, purely; ``apply`` writes nothing.
"""

from __future__ import annotations

from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.apiaddresses import verdict
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube.client import Obj

COMPONENT = "apiaddresses"
CHECK_NAME = verdict.CHECK_NAME


def gather(ctx: StepContext) -> verdict.APIAddressesFacts:
    """The ``kubernetes`` Service and the EndpointSlices labelled for it, in ``default``."""
    return verdict.APIAddressesFacts(
        service=ctx.kube.get("v1", "Service", verdict.SERVICE_NAME, verdict.SERVICE_NAMESPACE),
        slices=ctx.kube.list(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            verdict.SERVICE_NAMESPACE,
            label_selector=f"{verdict.SERVICE_NAME_LABEL}={verdict.SERVICE_NAME}",
        ),
    )


class APIAddressesStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = ()

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> verdict.APIAddressesFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: verdict.APIAddressesFacts) -> Verdict:
        return verdict.evaluate(facts)

    def apply(self, ctx: StepContext, facts: verdict.APIAddressesFacts, decided: Verdict) -> Verdict:
        return decided

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP: Step[verdict.APIAddressesFacts] = APIAddressesStep()
