"""``spec.target``: the client a pass prepares another cluster with (docs/fleet.md).

Not a step: the pipeline calls ``connect`` before any step runs, and every step then works
through the client it returns (``StepContext.kube``); status stays in the management cluster.
``connect`` reads the kubeconfig Secret by name (never lists, never copies it), builds or reuses
the client for that version of the Secret (``kube.remote.TargetClients``, so a rotation is used
on the next pass), and probes the target: GET /version (reachable, version) and GET namespace
kube-system (authorised; its uid identifies the cluster). ``status.target.evaluate`` decides.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import SecretRef, TenantPlatform
from tenant_platform.concerns.target.verdict import TargetFacts, TargetVerdict, evaluate
from tenant_platform.core import conditions
from tenant_platform.core.identities import all_names
from tenant_platform.framework import statuswriter
from tenant_platform.kube import errors, remote
from tenant_platform.kube.client import Kube

# A pass that could not reach its spec.target comes back this soon.
RETRY_SECONDS = 30.0


@dataclass(frozen=True)
class TargetConnection:
    """The verdict, and the target's client when it was reached."""

    verdict: TargetVerdict
    kube: Kube | None
    secret: SecretRef
    resource_version: str = ""

    @property
    def reachable(self) -> bool:
        return self.kube is not None and self.verdict.reachable

    @property
    def key(self) -> tuple[str, str, str]:
        """(namespace, name, key) of the kubeconfig Secret: what identifies the target."""
        return (self.secret.namespace, self.secret.name, self.secret.key)


@dataclass(frozen=True)
class TargetObservation:
    """What the operator watches in a reached target (targetwatch.TargetSnapshots): the GPU
    snapshot (``StepContext.observed``) and the target's read cache, a client for the same
    target whose watched facts (GPUReady's health reads) are served from its own watches. None
    where not watched: the pass reads from the target's API."""

    observed: Any
    kube: Kube | None


def gather(
    platform: TenantPlatform, management: Kube, clients: remote.TargetClients
) -> tuple[TargetFacts, Kube | None, str]:
    """Read the Secret, build (or reuse) the client, probe the target. Reads only."""
    assert platform.spec.target is not None
    ref = platform.spec.target.secret_ref()
    facts = TargetFacts(secret=ref)
    try:
        secret = management.get("v1", "Secret", ref.name, ref.namespace)
    except errors.Forbidden:
        return replace(facts, secret_forbidden=True), None, ""
    if secret is None:
        return replace(facts, secret_found=False), None, ""
    data = secret.get("data") or {}
    raw = _decoded(data.get(ref.key))
    if not raw:
        return replace(facts, keys=tuple(data), key_present=False), None, ""
    version = str(secret.get("metadata", {}).get("resourceVersion") or "")
    try:
        kube = clients.get((ref.namespace, ref.name, ref.key), version, raw)
    except remote.KubeconfigError as exc:
        return replace(facts, kubeconfig_error=str(exc)), None, version
    facts = replace(facts, server=kube.server)
    try:
        found = kube.server_version()
        namespace = kube.get("v1", "Namespace", "kube-system") or {}
    except errors.KubeError as exc:
        return replace(facts, probe_status=exc.status, probe_message=str(exc.message or exc)), None, version
    uid = str(namespace.get("metadata", {}).get("uid") or "")
    return replace(facts, version=found, cluster_uid=uid), kube, version


def _decoded(value: object) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def connect(
    platform: TenantPlatform,
    management: Kube,
    *,
    clients: remote.TargetClients | None = None,
    minimum: tuple[int, int] = constants.MIN_TARGET_VERSION,
) -> TargetConnection:
    """The target's client and TargetReachable for one pass (``platform.spec.target`` is set)."""
    assert platform.spec.target is not None
    facts, kube, version = gather(platform, management, clients if clients is not None else remote.CLIENTS)
    verdict = evaluate(facts, minimum=minimum)
    return TargetConnection(verdict, kube if verdict.reachable else None, facts.secret, version)


def unreachable_status(
    platform: TenantPlatform, old_status: dict[str, Any], connection: TargetConnection, *, now: datetime
) -> tuple[dict[str, Any], float]:
    """The status of a pass that did not reach its target (no step ran): TargetReachable says why,
    Ready is False (Stalled past the progress deadline); every other key, the concerns' conditions
    and status.recorded among them, keeps what the last pass that reached the target wrote.
    Returns (new status, seconds until the next pass); the pipeline writes it."""
    cond = connection.verdict.condition
    before = conditions.get(list(old_status.get("conditions") or []), constants.TARGET_REACHABLE)
    since: dict[str, datetime] = {}
    started = conditions.parse_time(before.get("lastTransitionTime")) if before else None
    if before is not None and before.get("status") != "True" and started is not None:
        since[constants.TARGET_REACHABLE] = started
    deadline = conditions.Deadline(float(platform.spec.progress_deadline_seconds), now, since)
    summary = conditions.summarize({cond.type: cond}, [cond.type], deadline=deadline)
    new_status = statuswriter.with_conditions(
        old_status, (cond, summary.ready, summary.reconciling, summary.stalled), now=now, generation=platform.generation
    )
    requeue = RETRY_SECONDS
    if summary.stalls_in is not None:
        requeue = min(requeue, max(1.0, summary.stalls_in + 1.0))
    return new_status, requeue


def left_behind(platform: TenantPlatform) -> str:
    """What a platform whose target was not reached at deletion may have left there: every kind
    and place a step writes, from the spec (and the target recorded last), for the event that
    releases the finalizer (docs/fleet.md). Nothing is read: the target did not answer."""
    spec = platform.spec
    recorded = (platform.status.get("recorded") or {}).get("target") or {}
    where = str(recorded.get("server") or "the target cluster")
    parts = [
        f"namespaces {', '.join(spec.all_namespaces)} (deletionPolicy {spec.deletion_policy}) with the "
        "installer identity, install values and trust ConfigMap",
        f"ValidatingAdmissionPolicies and bindings {', '.join(all_names(platform.name))}",
    ]
    if spec.gateway.management == "Managed":
        parts.append(f"Gateway {spec.gateway.namespace}/{spec.gateway.name}")
    if spec.edge_certificate.issuer == "SelfSigned":
        parts.append(f"Secret {spec.gateway.namespace}/{spec.edge_certificate.secret_name}")
    if spec.dns.management == "CoreDNS":
        parts.append(f"the CoreDNS rewrite of {spec.domain}")
    parts.append("GPU node labels and storage write-test objects, if any")
    return f"Possibly left in {where} (labelled {constants.LABEL_PLATFORM}={platform.name}): " + "; ".join(parts) + "."
