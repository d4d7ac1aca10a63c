"""InstallerReady decided without a cluster (concerns/installer/verdict.py): one row per reason, the recorded
facts, and when the kubeconfig token is kept or re-minted."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from tests.support import platform

from tenant_platform.api.reasons import Common, Installer
from tenant_platform.concerns.installer import manifests
from tenant_platform.concerns.installer.verdict import (
    Answer,
    InstallerFacts,
    ServerChoice,
    choose_server,
    evaluate,
    recorded,
    renewal_requeue,
    server_sentence,
    token_minted,
    token_plan,
)

NAME = "demo"
USER = "system:serviceaccount:kamiwaza:platform-installer"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


demo = partial(platform, NAME, namespace="kamiwaza", uid="u-1", domain="kamiwaza.example.com")


def answers(**overrides: bool) -> tuple[Answer, ...]:
    """The checklist's answers, each as expected unless overridden by resource name."""
    return tuple(
        Answer(verb, group, resource, namespaced, expected, overrides.get(resource, expected))
        for verb, group, resource, namespaced, expected in manifests.CAN_I_CHECKS
    )


@dataclass(frozen=True)
class Row:
    facts: InstallerFacts
    status: str
    reason: str
    message: str
    progressing: bool = False
    dry_run: bool = False
    recorded: dict[str, Any] | None = field(
        default_factory=lambda: {"installer": {"serviceAccountName": "platform-installer", "namespace": "kamiwaza"}}
    )


ROWS = {
    "reconciled": Row(
        InstallerFacts(answers=answers()),
        "True",
        Installer.RECONCILED,
        f"Installer {USER} can create deployments and virtualservices in kamiwaza and cannot create clusterroles "
        "or customresourcedefinitions, list nodes or secrets cluster-wide, or impersonate.",
    ),
    "permissions missing": Row(
        InstallerFacts(answers=answers(deployments=False)),
        "False",
        Installer.PERMISSIONS_MISSING,
        f"Installer {USER} failed the checklist's access checks: can create deployments.apps in kamiwaza: got no, "
        "want yes.",
        progressing=True,
    ),
    "excess permissions": Row(
        InstallerFacts(answers=answers(nodes=True, deployments=False)),
        "False",
        Installer.EXCESS_PERMISSIONS,
        "can create deployments.apps in kamiwaza: got no, want yes; can list nodes (cluster-wide): got yes, want no.",
    ),
    "excess permissions: a cluster-wide secrets reader gets no kubeconfig": Row(
        InstallerFacts(answers=answers(secrets=True), withheld=True),
        "False",
        Installer.EXCESS_PERMISSIONS,
        "can list secrets (cluster-wide): got yes, want no. No kubeconfig token was minted, and ours was deleted.",
    ),
    "conflict: an existing ServiceAccount without our claim is never taken": Row(
        InstallerFacts(foreign=("ServiceAccount kamiwaza/platform-installer (not created by the operator)",)),
        "False",
        Common.CONFLICT,
        "left untouched (no token minted): ServiceAccount kamiwaza/platform-installer (not created by the operator).",
        recorded=None,
    ),
    "excess permissions (dry run)": Row(
        InstallerFacts(answers=answers(clusterroles=True)),
        "False",
        Installer.EXCESS_PERMISSIONS,
        "can create clusterroles.rbac.authorization.k8s.io (cluster-wide): got yes, want no.",
        dry_run=True,
    ),
    "would create (dry run)": Row(
        InstallerFacts(answers=answers(deployments=False, virtualservices=False)),
        "False",
        Installer.WOULD_CREATE,
        f"The operator would create the installer identity {USER}; today: can create deployments.apps in "
        "kamiwaza: got no, want yes; can create virtualservices.networking.istio.io in kamiwaza: got no, want yes.",
        progressing=True,
        dry_run=True,
    ),
    "forbidden: a write was refused with 403": Row(
        InstallerFacts(apply_errors=("Role kamiwaza/x: nope", "RoleBinding kamiwaza/y: boom"), forbidden=True),
        "False",
        Common.FORBIDDEN,
        "Could not apply the installer identity: Role kamiwaza/x: nope; RoleBinding kamiwaza/y: boom.",
        progressing=True,
        recorded=None,
    ),
    "api error: a write failed otherwise": Row(
        # The reason follows the error's type, never the words: "forbidden" in a 422 is no 403.
        InstallerFacts(apply_errors=("Role kamiwaza/x: rules: Forbidden: not allowed",)),
        "False",
        Common.API_ERROR,
        "Could not apply the installer identity: Role kamiwaza/x: rules: Forbidden: not allowed.",
        progressing=True,
        recorded=None,
    ),
}


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_condition(row: Row) -> None:
    verdict = evaluate(demo(), row.facts, dry_run=row.dry_run)
    cond = verdict.condition
    assert (cond.type, cond.status, cond.reason) == ("InstallerReady", row.status, row.reason)
    assert row.message in cond.message
    assert verdict.progressing == row.progressing
    assert verdict.recorded.dump() == (row.recorded or {})


def test_every_installer_condition_reason_has_a_row() -> None:
    reasons = set(Installer)  # the token-minted event has its reason in reasons.Event
    assert {r.reason for r in ROWS.values()} >= reasons | {Common.FORBIDDEN, Common.API_ERROR, Common.CONFLICT}


def test_recorded_names_the_kubeconfig_secret_and_the_token_renewal_is_asked_for() -> None:
    facts = InstallerFacts(answers=answers(), kubeconfig_secret="platform-installer-kubeconfig", token_requeue=600.0)
    verdict = evaluate(demo(), facts)
    assert verdict.recorded.dump() == {
        "installer": {
            "serviceAccountName": "platform-installer",
            "namespace": "kamiwaza",
            "kubeconfigSecret": "platform-installer-kubeconfig",
        }
    }
    assert list(verdict.recorded.dump()["installer"]) == ["serviceAccountName", "namespace", "kubeconfigSecret"]
    assert verdict.requeue_after == 600.0
    missing = evaluate(demo(), InstallerFacts(answers=answers(nodes=True), token_requeue=5.0))
    assert missing.requeue_after == 5.0


SERVER = "https://api.example.com:6443"


def secret(
    expires: datetime, *, claim: str | None = NAME, server: str = SERVER, issued: datetime | None = None
) -> dict[str, Any]:
    labels = {"tenancy.dev/tenant-platform": claim} if claim else {}
    annotations = {
        manifests.ANNOTATION_TOKEN_EXPIRES: expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        manifests.ANNOTATION_SERVER: server,
    }
    if issued is not None:
        annotations[manifests.ANNOTATION_TOKEN_ISSUED] = issued.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {
            "name": "platform-installer-kubeconfig",
            "namespace": "kamiwaza",
            "labels": labels,
            "annotations": annotations,
        },
        "data": {"kubeconfig": "a2NmZw=="},
    }


TTL_2H = {"kubeconfigSecret": {"enabled": True, "tokenTTL": "2h"}}
TOKENS = {
    # (live Secret, claim) -> kept?, requeue seconds
    "fresh and ours: kept until its renewal point": (secret(NOW + timedelta(hours=2)), NAME, True, 84 * 60.0),
    "past the renewal point: re-minted": (secret(NOW + timedelta(minutes=30)), NAME, False, 84 * 60.0),
    "renewal point within a minute: kept, back in a minute": (
        secret(NOW + timedelta(minutes=36, seconds=30)),
        NAME,
        True,
        60.0,
    ),
    "not ours by its claim: re-minted": (secret(NOW + timedelta(hours=2), claim="other"), "other", False, 84 * 60.0),
    "missing: minted": (None, None, False, 84 * 60.0),
    "another server chosen since: re-minted": (
        secret(NOW + timedelta(hours=2), server="https://10.96.0.1:443"),
        NAME,
        False,
        84 * 60.0,
    ),
    "no expiry annotation: re-minted": ({"metadata": {"name": "x"}}, NAME, False, 84 * 60.0),
    # The server capped the 2h asked for at 1h: renewal at 70 % of the hour granted, not "2h minus
    # 36 min" (which lies before the token was even minted: re-minted on every pass).
    "capped by the server at 1h, just minted: kept for 42 min": (
        secret(NOW + timedelta(hours=1), issued=NOW),
        NAME,
        True,
        42 * 60.0,
    ),
    "capped at 1h, 50 min old: re-minted": (
        secret(NOW + timedelta(minutes=10), issued=NOW - timedelta(minutes=50)),
        NAME,
        False,
        84 * 60.0,
    ),
    "issued after its expiry (garbage): the requested lifetime counts": (
        secret(NOW + timedelta(hours=2), issued=NOW + timedelta(hours=3)),
        NAME,
        True,
        84 * 60.0,
    ),
}


@pytest.mark.parametrize(
    ("granted", "requeue"),
    [(timedelta(hours=2), 84 * 60.0), (timedelta(hours=1), 42 * 60.0), (timedelta(minutes=10), 7 * 60.0)],
)
def test_renewal_requeue_follows_the_lifetime_granted(granted: timedelta, requeue: float) -> None:
    assert renewal_requeue(NOW, NOW + granted, timedelta(hours=2), NOW) == requeue


@pytest.mark.parametrize(("live", "claim", "kept", "requeue"), TOKENS.values(), ids=TOKENS.keys())
def test_token_plan(live: dict[str, Any] | None, claim: str | None, kept: bool, requeue: float) -> None:
    p = demo(installer=TTL_2H)
    plan = token_plan(p, live, claim=claim, now=NOW, server=SERVER)
    assert (plan.keep is not None) == kept
    assert plan.requeue_after == requeue
    assert plan.expiration_seconds == 7200
    if plan.keep is not None and live is not None:
        assert plan.keep == {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "platform-installer-kubeconfig",
                "namespace": "kamiwaza",
                "annotations": live["metadata"]["annotations"],
            },
            "type": "Opaque",
            "data": {"kubeconfig": "a2NmZw=="},
        }


def test_token_minted_event_names_the_secret_not_the_token() -> None:
    assert token_minted(demo(installer=TTL_2H)) == (
        "Normal",
        "TokenMinted",
        "Minted a new installer token for Secret kamiwaza/platform-installer-kubeconfig.",
    )


def cluster_info(kubeconfig: str | None) -> dict[str, Any]:
    return {"metadata": {"name": "cluster-info", "namespace": "kube-public"}, "data": {"kubeconfig": kubeconfig}}


CA_B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nPUBLISHED\n-----END CERTIFICATE-----\n").decode()
KUBEADM_INFO = f"""apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {CA_B64}
    server: https://cp.example.com:6443
  name: ""
contexts: null
current-context: ""
users: null
"""
OPERATOR = "https://10.96.0.1:443"
SERVERS = {
    # (spec server, cluster-info ConfigMap) -> (server, CA, source, note contains)
    "spec wins over cluster-info": (
        SERVER,
        cluster_info(KUBEADM_INFO),
        SERVER,
        "operator CA",
        "Spec",
        "",
    ),
    "cluster-info's server and CA": (
        "",
        cluster_info(KUBEADM_INFO),
        "https://cp.example.com:6443",
        "-----BEGIN CERTIFICATE-----\nPUBLISHED\n-----END CERTIFICATE-----\n",
        "ClusterInfo",
        "",
    ),
    "no cluster-info: the operator's address": ("", None, OPERATOR, "operator CA", "OperatorAPI", ""),
    "cluster-info without a kubeconfig": (
        "",
        cluster_info(None),
        OPERATOR,
        "operator CA",
        "OperatorAPI",
        "no kubeconfig",
    ),
    "cluster-info not YAML": ("", cluster_info("{: ["), OPERATOR, "operator CA", "OperatorAPI", "not YAML"),
    "cluster-info server over http: refused": (
        "",
        cluster_info(KUBEADM_INFO.replace("https://cp", "http://cp")),
        OPERATOR,
        "operator CA",
        "OperatorAPI",
        "no usable https server",
    ),
    "cluster-info server with user info: refused": (
        "",
        cluster_info(KUBEADM_INFO.replace("https://cp", "https://user:pw@cp")),
        OPERATOR,
        "operator CA",
        "OperatorAPI",
        "no usable https server",
    ),
    "cluster-info CA not base64": (
        "",
        cluster_info(KUBEADM_INFO.replace(CA_B64, "not*base64")),
        OPERATOR,
        "operator CA",
        "OperatorAPI",
        "not base64",
    ),
    "cluster-info without a CA: the operator's": (
        "",
        cluster_info(KUBEADM_INFO.replace(f"certificate-authority-data: {CA_B64}", "insecure-skip-tls-verify: false")),
        "https://cp.example.com:6443",
        "operator CA",
        "ClusterInfo",
        "",
    ),
}


@pytest.mark.parametrize("row", SERVERS.values(), ids=SERVERS.keys())
def test_choose_server(row: tuple[str, dict[str, Any] | None, str, str, str, str]) -> None:
    spec_server, info, server, ca, source, note = row
    p = demo(installer={"kubeconfigSecret": {"enabled": True, "server": spec_server}})
    choice = choose_server(p, cluster_info=info, operator_server=OPERATOR, operator_ca="operator CA")
    assert (choice.server, choice.ca_pem, choice.source) == (server, ca, source)
    assert note in choice.note
    if not note:
        assert choice.note == ""
    sentence = server_sentence("kamiwaza", "k", choice)
    assert f"names server {server} (from " in sentence


def test_server_recorded_only_with_the_secret() -> None:
    p = demo(installer={"kubeconfigSecret": {"enabled": True}})
    choice = ServerChoice(SERVER, None, "ClusterInfo")
    with_secret = recorded(p, "k", choice).dump()["installer"]
    assert with_secret["kubeconfigServer"] == SERVER  # type: ignore[index]
    assert with_secret["kubeconfigServerSource"] == "ClusterInfo"  # type: ignore[index]
    without = recorded(p, None, choice).dump()["installer"]
    assert "kubeconfigServer" not in without  # type: ignore[operator]
