"""InstallerReady, decided (pure): keep or re-mint the kubeconfig token, and the condition.

The installer step (concerns/installer/step.py) applies the identity concerns/installer/manifests.py renders,
asks SubjectAccessReviews the checklist's ``can-i`` questions, and only when none that must be no
answered yes asks ``token_plan`` whether the kubeconfig Secret's token may be kept (re-minted
once less than ``RENEW_FRACTION`` of its lifetime is left, or when the Secret is missing), then
prunes. The lifetime is the one the API server granted (the Secret's issued-at and expires-at
annotations, from the TokenRequest's ``status.expirationTimestamp``), not the one asked for: a
server that caps tokens below ``tokenTTL`` (``--service-account-max-token-expiration``) would
otherwise look due for renewal on every pass. ``evaluate`` turns what happened into the verdict:

- an object of the identity exists without this platform's claim: Conflict, nothing written (the
  message names the ``tenancy.dev/adoptable-by`` opt-in for an object nobody's labels claim: the
  step takes such an object over once annotated);
- an apply or prune error: Forbidden (one of them was a 403) or APIError, progressing, nothing
  recorded (the access checks were not asked);
- a "no" check that answered yes: ExcessPermissions (not progressing: a human must act);
- a "yes" check that answered no: PermissionsMissing (progressing), or WouldCreate in a dry run;
- every check as expected: Reconciled.

It records ``installer`` (api/status/installer.py) and asks to come back at the token's renewal.

``choose_server`` picks the address the minted kubeconfig names: ``spec.installer.kubeconfigSecret
.server``, else the kubeconfig kubeadm publishes in ``kube-public/cluster-info`` (its server and
CA), else the API address the operator itself uses (often the in-cluster Service address, which a
workstation cannot reach). The choice and its source are recorded.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import KUBECONFIG_SERVER, TenantPlatform, parse_duration
from tenant_platform.api.reasons import Common, Installer
from tenant_platform.api.status.installer import RecordedInstaller, ServerSource
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.installer import manifests
from tenant_platform.core import conditions
from tenant_platform.core.identities import service_account_user
from tenant_platform.core.verdict import Event, Manifest, Verdict

NOT_OURS = "not created by the operator"
"""How ``InstallerFacts.foreign`` describes an object that carries nobody's labels (adoptable)."""
# Re-mint the token once less than this share of its lifetime is left.
RENEW_FRACTION = 0.3
# Never come back for the token sooner than this.
MIN_TOKEN_REQUEUE = 60.0


@dataclass(frozen=True)
class TokenPlan:
    """What to do with the kubeconfig Secret's token."""

    keep: Manifest | None
    """The Secret intent re-sending the live token (so the apply stays a no-op); None: mint one."""
    requeue_after: float
    """Seconds until the (kept or new) token reaches its renewal point."""
    expiration_seconds: int
    """The lifetime to ask a new token for (``kubeconfigSecret.tokenTTL``)."""


def token_expiry(secret: Manifest | None) -> datetime | None:
    """When the token in the kubeconfig Secret expires, by our annotation."""
    if not secret:
        return None
    annotations = secret.get("metadata", {}).get("annotations") or {}
    return conditions.parse_time(annotations.get(manifests.ANNOTATION_TOKEN_EXPIRES))


@dataclass(frozen=True)
class ServerChoice:
    """The API server address the minted kubeconfig names, its CA, and where both came from."""

    server: str
    ca_pem: str | None
    source: ServerSource
    note: str = ""
    """Why a source that was present was not used (a malformed cluster-info), for the message."""


CLUSTER_INFO_NAMESPACE = "kube-public"
CLUSTER_INFO_NAME = "cluster-info"


def cluster_info_server(config_map: Manifest | None) -> tuple[str, str | None, str]:
    """(server, CA PEM or None, problem) from kubeadm's ``cluster-info`` ConfigMap.

    Its ``kubeconfig`` key holds a kubeconfig with one cluster; a server that is not an https URL
    of the shape the CRD accepts is refused (problem set, server empty), never used as is.
    """
    if config_map is None:
        return "", None, ""
    text = (config_map.get("data") or {}).get("kubeconfig")
    where = f"ConfigMap {CLUSTER_INFO_NAMESPACE}/{CLUSTER_INFO_NAME}"
    if not isinstance(text, str) or not text.strip():
        return "", None, f"{where} has no kubeconfig key"
    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        return "", None, f"{where} holds a kubeconfig that is not YAML"
    clusters = doc.get("clusters") if isinstance(doc, dict) else None
    cluster = (
        clusters[0].get("cluster")
        if isinstance(clusters, list) and clusters and isinstance(clusters[0], dict)
        else None
    )
    server = cluster.get("server") if isinstance(cluster, dict) else None
    if not isinstance(server, str) or not server or not re.fullmatch(KUBECONFIG_SERVER, server):
        return "", None, f"{where} names no usable https server ({str(server)[:100]!r})"
    ca: str | None = None
    data = cluster.get("certificate-authority-data") if isinstance(cluster, dict) else None
    if isinstance(data, str) and data:
        try:
            ca = base64.b64decode(data, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return "", None, f"{where} has certificate-authority-data that is not base64 PEM"
    return server, ca, ""


def choose_server(
    platform: TenantPlatform, *, cluster_info: Manifest | None, operator_server: str, operator_ca: str | None
) -> ServerChoice:
    """The spec's server (with the operator's CA), else cluster-info's (with its CA), else the operator's."""
    spec_server = platform.spec.installer.kubeconfig_secret.server
    if spec_server:
        return ServerChoice(spec_server, operator_ca, "Spec")
    server, ca, problem = cluster_info_server(cluster_info)
    if server:
        return ServerChoice(server, ca or operator_ca, "ClusterInfo")
    return ServerChoice(operator_server, operator_ca, "OperatorAPI", note=problem)


SOURCE_PHRASES: dict[ServerSource, str] = {
    "Spec": "spec.installer.kubeconfigSecret.server",
    "ClusterInfo": f"ConfigMap {CLUSTER_INFO_NAMESPACE}/{CLUSTER_INFO_NAME}",
    "OperatorAPI": "the API address the operator uses; set spec.installer.kubeconfigSecret.server if a "
    "workstation cannot reach it",
}


def server_sentence(namespace: str, secret: str | None, server: ServerChoice | None) -> str:
    """ " The kubeconfig in Secret ns/name names <server> (from <source>)." ("" without a Secret)."""
    if not secret or server is None:
        return ""
    note = f"; {server.note}" if server.note else ""
    return (
        f" The kubeconfig in Secret {namespace}/{secret} names server {server.server} "
        f"(from {SOURCE_PHRASES[server.source]}{note})."
    )


def token_issued(secret: Manifest | None) -> datetime | None:
    """When the token in the kubeconfig Secret was minted, by our annotation (older Secrets: None)."""
    if not secret:
        return None
    annotations = secret.get("metadata", {}).get("annotations") or {}
    return conditions.parse_time(annotations.get(manifests.ANNOTATION_TOKEN_ISSUED))


def granted_lifetime(issued_at: datetime | None, expires_at: datetime, requested: timedelta) -> timedelta:
    """The lifetime the API server granted: expiry minus issue time when both are known and sane,
    else the one requested."""
    if issued_at is None or expires_at <= issued_at:
        return requested
    return expires_at - issued_at


def renewal_requeue(issued_at: datetime, expires_at: datetime, requested: timedelta, now: datetime) -> float:
    """Seconds from ``now`` until a token minted at ``issued_at`` reaches its renewal point."""
    lifetime = granted_lifetime(issued_at, expires_at, requested)
    renew_at = expires_at - lifetime * RENEW_FRACTION
    return max((renew_at - now).total_seconds(), MIN_TOKEN_REQUEUE)


def token_plan(
    platform: TenantPlatform, secret: Manifest | None, *, claim: str | None, now: datetime, server: str
) -> TokenPlan:
    """Keep the live token while it is ours (``claim``: the Secret's platform label), before its
    renewal point (``RENEW_FRACTION`` of the lifetime the server granted) and naming ``server``;
    otherwise mint a new one (a new server re-mints)."""
    ttl = parse_duration(platform.spec.installer.kubeconfig_secret.token_ttl)
    expires_at = token_expiry(secret)
    issued_at = token_issued(secret)
    renew_at = expires_at - granted_lifetime(issued_at, expires_at, ttl) * RENEW_FRACTION if expires_at else None
    annotations = (secret or {}).get("metadata", {}).get("annotations") or {}
    same_server = annotations.get(manifests.ANNOTATION_SERVER) == server
    if secret is not None and renew_at is not None and now < renew_at and claim == platform.name and same_server:
        keep = manifests.kubeconfig_secret(
            platform,
            expires_at=annotations[manifests.ANNOTATION_TOKEN_EXPIRES],
            kubeconfig_b64=secret.get("data", {}).get("kubeconfig", ""),
            server=server,
            issued_at=str(annotations.get(manifests.ANNOTATION_TOKEN_ISSUED) or ""),
        )
        return TokenPlan(keep, max((renew_at - now).total_seconds(), MIN_TOKEN_REQUEUE), int(ttl.total_seconds()))
    return TokenPlan(
        None, max((ttl * (1 - RENEW_FRACTION)).total_seconds(), MIN_TOKEN_REQUEUE), int(ttl.total_seconds())
    )


def token_minted(platform: TenantPlatform) -> Event:
    """The event posted when a new token was minted (never the token itself)."""
    where = f"{platform.spec.namespace}/{platform.kubeconfig_secret_name}"
    return ("Normal", reasons.Event.TOKEN_MINTED, f"Minted a new installer token for Secret {where}.")


@dataclass(frozen=True)
class Answer:
    """One checklist ``can-i`` question (render/installer.CAN_I_CHECKS) and the API's answer."""

    verb: str
    group: str
    resource: str
    namespaced: bool
    expected: bool
    allowed: bool

    def failure(self, namespace: str) -> str:
        where = f" in {namespace}" if self.namespaced else " (cluster-wide)"
        what = f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{where}"
        return f"can {what}: got {_yes(self.allowed)}, want {_yes(self.expected)}"


def _yes(value: bool) -> str:
    return "yes" if value else "no"


@dataclass(frozen=True)
class InstallerFacts:
    apply_errors: tuple[str, ...] = ()
    """What applying or pruning the identity could not do (the access checks were then not asked)."""
    forbidden: bool = False
    """One of ``apply_errors`` was the API saying 403."""
    kubeconfig_secret: str | None = None
    """The kubeconfig Secret applied in this pass."""
    server: ServerChoice | None = None
    """The server that Secret's kubeconfig names (set with ``kubeconfig_secret``)."""
    token_requeue: float | None = None
    answers: tuple[Answer, ...] = ()
    foreign: tuple[str, ...] = ()
    """Objects of the identity that exist without this platform's claim: nothing was written."""
    withheld: bool = False
    """A kubeconfig was asked for but not minted (ExcessPermissions); ours was deleted."""

    @property
    def excess(self) -> bool:
        """A check that must answer no answered yes."""
        return any(a.allowed and not a.expected for a in self.answers)


def recorded(
    platform: TenantPlatform, kubeconfig_secret: str | None = None, server: ServerChoice | None = None
) -> Recorded:
    """``status.recorded.installer`` (the server only with the Secret that names it)."""
    with_server = server if kubeconfig_secret else None
    facts = RecordedInstaller(
        service_account_name=platform.spec.installer.service_account_name,
        namespace=platform.spec.namespace,
        kubeconfig_secret=kubeconfig_secret,
        kubeconfig_server=with_server.server if with_server else None,
        kubeconfig_server_source=with_server.source if with_server else None,
    )
    return Recorded(installer=facts)


def evaluate(platform: TenantPlatform, facts: InstallerFacts, *, dry_run: bool = False) -> Verdict:
    type_ = constants.INSTALLER_READY
    if facts.foreign:
        hand_made = [f for f in facts.foreign if f.endswith(f"({NOT_OURS})")]
        hint = (
            f" To hand the identity prepared by hand with the checklist over to this platform, annotate each of "
            f"those objects {constants.ANNOTATION_ADOPTABLE}={platform.name}: it is then taken over in place "
            "(docs/migration.md)."
            if hand_made
            else ""
        )
        cond = conditions.false(
            type_,
            Common.CONFLICT,
            "The installer identity's objects exist and are not this TenantPlatform's, left untouched "
            f"(no token minted): {', '.join(facts.foreign)}. Choose another spec.installer.serviceAccountName "
            f"or remove them.{hint}",
        )
        return Verdict(conditions=[cond])
    if facts.apply_errors:
        message = "; ".join(facts.apply_errors)
        reason = Common.FORBIDDEN if facts.forbidden else Common.API_ERROR
        cond = conditions.false(type_, reason, f"Could not apply the installer identity: {message}.")
        return Verdict(conditions=[cond], progressing=True)

    ns = platform.spec.namespace
    user, _ = service_account_user(platform)
    facts_recorded = recorded(platform, facts.kubeconfig_secret, facts.server)
    wrong = [a for a in facts.answers if a.allowed != a.expected]
    if not wrong:
        cond = conditions.true(
            type_,
            Installer.RECONCILED,
            f"Installer {user} can create deployments and virtualservices in {ns} and cannot "
            "create clusterroles or customresourcedefinitions, list nodes or secrets cluster-wide, or impersonate."
            + server_sentence(ns, facts.kubeconfig_secret, facts.server),
        )
        return Verdict(conditions=[cond], recorded=facts_recorded, requeue_after=facts.token_requeue)
    failures = "; ".join(a.failure(ns) for a in wrong)
    too_much = any(a.allowed and not a.expected for a in wrong)
    if dry_run and not too_much:
        cond = conditions.false(
            type_,
            Installer.WOULD_CREATE,
            f"The operator would create the installer identity {user}; today: {failures}.",
        )
    else:
        withheld = " No kubeconfig token was minted, and ours was deleted." if facts.withheld else ""
        cond = conditions.false(
            type_,
            Installer.EXCESS_PERMISSIONS if too_much else Installer.PERMISSIONS_MISSING,
            f"Installer {user} failed the checklist's access checks: {failures}.{withheld}",
        )
    return Verdict(
        conditions=[cond], recorded=facts_recorded, progressing=not too_much, requeue_after=facts.token_requeue
    )
