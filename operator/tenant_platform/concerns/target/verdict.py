"""PURE: whether the target cluster of a ``spec.target`` platform was reached (TargetReachable).

``concerns/target/step.py`` gathers the facts (the kubeconfig Secret in the management cluster, a
client built from it, the target's /version and kube-system namespace); ``evaluate`` decides the
condition and the identity to record. Messages name the Secret and the server, never a value
from the kubeconfig besides its server URL.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenant_platform.api import constants
from tenant_platform.api.models import SecretRef
from tenant_platform.api.reasons import Target
from tenant_platform.api.status.target import RecordedTarget
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition

MAX_KEYS_NAMED = 10


@dataclass(frozen=True)
class TargetFacts:
    """What was read. A later field is meaningful only when every earlier check passed."""

    secret: SecretRef
    secret_found: bool = True
    secret_forbidden: bool = False
    keys: tuple[str, ...] = ()
    """The Secret's data keys (named when ``key`` is missing)."""
    key_present: bool = True
    kubeconfig_error: str = ""
    server: str = ""
    probe_status: int | None = None
    """HTTP status of the probe that failed (0: no answer); None: the probes answered."""
    probe_message: str = ""
    version: tuple[int, int, str] = (0, 0, "")
    cluster_uid: str = ""


@dataclass(frozen=True)
class TargetVerdict:
    condition: Condition
    recorded: RecordedTarget | None = None

    @property
    def reachable(self) -> bool:
        return self.condition.is_true


def _false(reason: Target, message: str) -> TargetVerdict:
    return TargetVerdict(conditions.false(constants.TARGET_REACHABLE, reason, message))


def evaluate(facts: TargetFacts, *, minimum: tuple[int, int] = constants.MIN_TARGET_VERSION) -> TargetVerdict:
    ref = facts.secret
    where = f"Secret {ref.namespace}/{ref.name}"
    if facts.secret_forbidden:
        return _false(Target.SECRET_NOT_FOUND, f"The operator may not read {where} in the management cluster.")
    if not facts.secret_found:
        return _false(
            Target.SECRET_NOT_FOUND,
            f"{where} does not exist in the management cluster (Cluster API and Kamaji create it once the "
            "control plane is up).",
        )
    if not facts.key_present:
        keys = ", ".join(sorted(facts.keys)[:MAX_KEYS_NAMED]) or "none"
        return _false(Target.KEY_MISSING, f"{where} has no non-empty key {ref.key!r} (its keys: {keys}).")
    if facts.kubeconfig_error:
        problem = facts.kubeconfig_error
        text = f"The kubeconfig in {where} key {ref.key!r} cannot be used: {problem}."
        return _false(Target.INVALID_KUBECONFIG, text)
    server = facts.server
    if facts.probe_status is not None:
        if facts.probe_status in (401, 403):
            what = "does not accept the credentials of"
            if facts.probe_status == 403:
                what = "forbids reading namespace kube-system to"
            return _false(
                Target.UNAUTHORIZED,
                f"The target {server} {what} the identity in {where} ({facts.probe_status}): "
                f"{facts.probe_message[:200]}",
            )
        return _false(Target.UNREACHABLE, f"The target {server} did not answer: {facts.probe_message[:300]}")
    major, minor, git = facts.version
    if (major, minor) < minimum:
        return _false(
            Target.VERSION_TOO_OLD,
            f"The target {server} runs Kubernetes {git or f'{major}.{minor}'}; the operator needs "
            f"{minimum[0]}.{minimum[1]} or newer.",
        )
    recorded = RecordedTarget(
        secret=f"{ref.namespace}/{ref.name}", server=server, version=git, cluster_uid=facts.cluster_uid
    )
    message = f"Reached {server} (Kubernetes {git}) with the kubeconfig in {where} key {ref.key!r}."
    return TargetVerdict(conditions.true(constants.TARGET_REACHABLE, Target.REACHABLE, message), recorded)
