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
from tenant_platform.concerns.apiaddresses import verdict as apiaddresses
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube.client import Obj

COMPONENT = "apiaddresses"
CHECK_NAME = apiaddresses.CHECK_NAME


def gather(ctx: StepContext) -> apiaddresses.APIAddressesFacts:
    """The ``kubernetes`` Service and the EndpointSlices labelled for it, in ``default``."""
    return apiaddresses.APIAddressesFacts(
        service=ctx.kube.get("v1", "Service", apiaddresses.SERVICE_NAME, apiaddresses.SERVICE_NAMESPACE),
        slices=ctx.kube.list(
            "discovery.k8s.io/v1",
            "EndpointSlice",
            apiaddresses.SERVICE_NAMESPACE,
            label_selector=f"{apiaddresses.SERVICE_NAME_LABEL}={apiaddresses.SERVICE_NAME}",
        ),
    )


class APIAddressesStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = ()

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return []

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> apiaddresses.APIAddressesFacts:
        return gather(ctx)

    def evaluate(self, given: Given, facts: apiaddresses.APIAddressesFacts) -> Verdict:
        return apiaddresses.evaluate(facts)

    def apply(self, ctx: StepContext, facts: apiaddresses.APIAddressesFacts, verdict: Verdict) -> Verdict:
        return verdict

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        return CleanupResult(True)


STEP: Step[apiaddresses.APIAddressesFacts] = APIAddressesStep()
