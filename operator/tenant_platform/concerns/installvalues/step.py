"""The install hand-off: a ConfigMap in the tenant namespace with every recorded fact.

The pipeline runs it as a phase of its own after every concern step (reconcile/registry.py
``HANDOFF``), so ``ctx.recorded`` holds, typed (``api.status.recorded.Recorded``, with the domain),
what every step recorded in this pass (a fact that does not parse failed the step that recorded
it); the values document (concerns/installvalues/manifests.py, pure) is therefore exactly
``status.recorded`` of the same pass, and ``tenant-platform facts`` renders the same text from a
live object's ``status.recorded`` through the same model. The ConfigMap is named
``spec.installValues.configMapName`` (default ``<platform>-install-values``), key ``values.yaml``,
labelled as ours, applied only when its content changes (no-op passes write nothing), and a
ConfigMap we made under an earlier name is pruned. Status: ``installValues`` {configMap}.
Like every child in the platform's namespaces it has no owner reference: with deletionPolicy
Retain it stays (the installed platform keeps its facts), with Delete it goes with the namespace.

This step owns no condition. ``evaluate`` (pure) renders the ConfigMap from ``given.recorded``
and the section; ``apply`` writes it and prunes. If the ConfigMap cannot be written (typically:
the tenant namespace does not exist yet, which NamespacesReady reports),
``status.installValues.error`` says why (and the event InstallValuesNotWritten), and the pass is
retried.
"""

from __future__ import annotations

from typing import Any

from tenant_platform.api import reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.installvalues import manifests
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext, apply_children
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube.client import Obj

COMPONENT = "installvalues"


def recorded_facts(platform: TenantPlatform, recorded: dict[str, Any]) -> Recorded:
    """``status.recorded`` as a pass would leave it with these facts (the domain added), typed."""
    return Recorded.parse({"domain": platform.spec.domain, **recorded})


SECTION = "installValues"
RETRY_AFTER = 10.0


class InstallValuesStep:
    name = COMPONENT
    condition_types: tuple[str, ...] = ()

    def desired(self, platform: TenantPlatform, recorded: Recorded) -> Obj:
        return manifests.render_config_map(
            platform_name=platform.name,
            namespace=platform.spec.namespace,
            config_map_name=platform.install_values_name,
            recorded=recorded,
        )

    def render(self, platform: TenantPlatform) -> list[Obj]:
        """The ConfigMap with the facts knowable without a cluster (the domain and the spec's names)."""
        facts: dict[str, Any] = {"imagePullSecrets": list(platform.spec.image_pull_secrets)}
        if platform.spec.storage.storage_class_name:
            facts["storageClassName"] = platform.spec.storage.storage_class_name
        return [self.desired(platform, recorded_facts(platform, facts))]

    def action(self, platform: TenantPlatform) -> Action:
        return Action(f"reconcile {COMPONENT}", retry_soon=True)

    def gather(self, ctx: StepContext) -> None:
        """Nothing to read: the facts are those every step recorded in this pass (``given.recorded``)."""
        return None

    def evaluate(self, given: Given, facts: None) -> Verdict:
        """The values ConfigMap of what this pass recorded, and the section naming it."""
        platform = given.platform
        return Verdict(
            conditions=[],
            desired=[self.desired(platform, given.recorded)],
            sections={SECTION: {"configMap": platform.install_values_name}},
        )

    def apply(self, ctx: StepContext, facts: None, verdict: Verdict) -> Verdict:
        """Write the ConfigMap (when it changed), prune one under an earlier name."""
        platform = ctx.platform
        outcome = apply_children(
            ctx,
            COMPONENT,
            verdict.desired,
            prune_kinds=[("v1", "ConfigMap")],
            prune_namespaces=[platform.spec.namespace],
        )
        if outcome.ok:
            return verdict
        return not_written(platform, verdict, outcome.errors)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        """Nothing to undo: the ConfigMap follows the namespace's deletionPolicy (see above)."""
        return CleanupResult(True)


def not_written(platform: TenantPlatform, verdict: Verdict, errors: list[str]) -> Verdict:
    """``verdict`` once writing the ConfigMap failed: the section says why, an event, a retry."""
    name = platform.install_values_name
    error = (
        f"Could not write ConfigMap {name} in namespace {platform.spec.namespace}: "
        + "; ".join(errors)
        + ". It is retried on the next pass."
    )
    section: dict[str, Any] = {**verdict.sections[SECTION], "error": error}
    return verdict.but(
        sections={**verdict.sections, SECTION: section},
        events=[*verdict.events, ("Warning", reasons.Event.INSTALL_VALUES_NOT_WRITTEN, error)],
        failed=True,
        requeue_after=RETRY_AFTER,
    )


STEP: Step[None] = InstallValuesStep()
