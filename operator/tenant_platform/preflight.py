"""`tenant-platform facts` and `tenant-platform check`: the facts of a live TenantPlatform, and a
read-only preflight usable before the operator is installed.

``check`` runs the one reconcile (``reconcile.run``) with ``dry_run=True`` and
``write_status=False`` against the current kubeconfig: every step verifies and reports, none
writes (server-side dry-run requests and access reviews store nothing). Each concern condition
becomes a row:

- PASS: the condition is True;
- WARN: the operator would make it so itself: a reason starting with ``Would`` (``WouldCreate``:
  the thing is absent and the operator creates it), or a step still converging (``progressing``)
  without an API failure; plus every non-condition check (``status.checks``, e.g. best-effort
  probes and the API-address warning);
- FAIL: anything else: a prerequisite a person must provide or fix.

The exit code is 1 when any row FAILs, else 0. Each row carries a fix: REMEDIATIONS keyed by
(condition type, catalogue reason), then by (None, reason) for the ``Common`` and ``Summary``
reasons, then a generic sentence; a non-condition check's fix is CHECK_FIXES[check name].
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pydantic
import yaml

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.api.reasons import (
    DNS,
    Common,
    EdgeCertificate,
    Gateway,
    Installer,
    Mesh,
    Namespaces,
    ObjectStore,
    PodGuard,
    PullSecrets,
    Reason,
    Storage,
    Summary,
)
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.installvalues import manifests
from tenant_platform.config import Settings, load_settings
from tenant_platform.kube.client import Kube, Obj

PASS = "PASS"
WARN = "WARN"
FAIL = "FAIL"

Row = dict[str, str]


class PreflightError(Exception):
    """A user-facing error: the TenantPlatform cannot be found or read."""


# (condition type or None for any type, reason) -> what to do.
REMEDIATIONS: dict[tuple[str | None, Reason], str] = {
    # Shared reasons.
    (None, Common.FORBIDDEN): (
        "Run check with an identity allowed to read what the detail names, or grant the operator that "
        "permission (deploy/ holds its RBAC)."
    ),
    (None, Common.API_ERROR): "Check that the API server is reachable and healthy, then run check again.",
    (None, Summary.INVALID_SPEC): "Fix the spec field the detail names; nothing else is checked until then.",
    (None, Common.INTERNAL_ERROR): "A bug in the operator: report it with the detail.",
    # Dry runs.
    (constants.NAMESPACES_READY, Namespaces.WOULD_CREATE): "Nothing to do: the operator creates it when it runs.",
    (constants.INSTALLER_READY, Installer.WOULD_CREATE): "Nothing to do: the operator creates it when it runs.",
    (constants.POD_GUARD_READY, PodGuard.WOULD_APPLY): "Nothing to do: the operator applies it when it runs.",
    (constants.GATEWAY_READY, Gateway.WOULD_APPLY): "Nothing to do: the operator applies it when it runs.",
    (constants.EDGE_CERTIFICATE_READY, EdgeCertificate.WOULD_ISSUE): (
        "Nothing to do: the operator issues a self-signed certificate when it runs."
    ),
    # Pod guard.
    (constants.POD_GUARD_READY, PodGuard.VIOLATING_PODS_FOUND): (
        "Fix or delete the pods the detail names (their manifests break Pod Security baseline); the guard "
        "switches to Deny once none would be denied. See docs/pod-guard.md."
    ),
    (constants.POD_GUARD_READY, PodGuard.PODS_NOT_CHECKED): (
        "The detail names pods whose dry-run check failed (for example a full ResourceQuota); fix that, and "
        "the staged check runs again."
    ),
    (constants.POD_GUARD_READY, PodGuard.UNSUPPORTED_KUBERNETES_VERSION): (
        "Upgrade to Kubernetes 1.30 or newer, or enforce the same rules with Kyverno or Gatekeeper "
        "(docs/pod-guard.md) and set spec.podGuard.enforcement to Warn."
    ),
    (constants.POD_GUARD_READY, PodGuard.INVALID_PROXY_IMAGE_REPOSITORY): (
        "List repositories only in spec.podGuard.proxyImageRepositories (registry/path, no tag or digest)."
    ),
    # Concerns of other steps, where the fix is standard (their messages carry the specifics).
    (constants.MESH_READY, Mesh.ISTIOD_NOT_FOUND): (
        "Install Istio in sidecar mode (e.g. istioctl install --set profile=default), or set spec.mesh.namespace "
        "to where istiod runs."
    ),
    (constants.MESH_READY, Mesh.ISTIO_KINDS_NOT_SERVED): "Install or upgrade Istio so that its CRDs are served.",
    (constants.GATEWAY_READY, Gateway.GATEWAY_KIND_NOT_SERVED): (
        "Install Istio (its CRDs serve networking.istio.io Gateway)."
    ),
    (constants.DNS_READY, DNS.COREDNS_NOT_FOUND): (
        "Set spec.dns.management to External and make the domain resolve to the gateway for pods yourself."
    ),
    (constants.EDGE_CERTIFICATE_READY, EdgeCertificate.SECRET_NOT_FOUND): (
        "Create the kubernetes.io/tls Secret named in spec.edgeCertificate.secretName in the gateway namespace, "
        "or set spec.edgeCertificate.issuer to SelfSigned."
    ),
    # Storage.
    (constants.STORAGE_READY, Storage.STORAGE_CLASS_NOT_FOUND): (
        "Create the StorageClass named in spec.storage.storageClassName, or set that field to an existing class "
        "(kubectl get storageclass)."
    ),
    (constants.STORAGE_READY, Storage.NO_DEFAULT_STORAGE_CLASS): (
        "Set spec.storage.storageClassName, or mark one class default: kubectl annotate storageclass NAME "
        "storageclass.kubernetes.io/is-default-class=true."
    ),
    (constants.STORAGE_READY, Storage.AMBIGUOUS_DEFAULT_STORAGE_CLASS): (
        "Set spec.storage.storageClassName to the class the platform should use, or remove the default "
        "annotation from all classes but one."
    ),
    (constants.STORAGE_READY, Storage.VERIFICATION_PENDING): (
        "Wait for the write test; if it stays pending, check the provisioner and that pods in the tenant "
        "namespace get scheduled."
    ),
    (constants.STORAGE_READY, Storage.VERIFICATION_FAILED): (
        "Check the provisioner and the volume's permissions; kubectl describe the test pod while it runs."
    ),
    (constants.STORAGE_READY, Storage.VERIFICATION_TIMED_OUT): (
        "Check that the provisioner creates volumes (kubectl get pvc -n NAMESPACE) and that pods can be "
        "scheduled and can pull the test image."
    ),
    # Pull secrets.
    (constants.PULL_SECRETS_READY, PullSecrets.PULL_SECRET_NOT_FOUND): (
        "Create it in the tenant namespace: kubectl create secret docker-registry NAME -n NAMESPACE "
        "--docker-server=REGISTRY --docker-username=USER --docker-password=... (create the namespace first, "
        "or let the operator create it)."
    ),
    (constants.PULL_SECRETS_READY, PullSecrets.WRONG_SECRET_TYPE): (
        "Recreate the Secret with type kubernetes.io/dockerconfigjson (kubectl create secret docker-registry)."
    ),
    (constants.PULL_SECRETS_READY, PullSecrets.UNPARSEABLE): (
        "Recreate the Secret with kubectl create secret docker-registry, or from a valid "
        "~/.docker/config.json with --from-file=.dockerconfigjson=PATH."
    ),
    (constants.PULL_SECRETS_READY, PullSecrets.NO_REGISTRIES): (
        "Recreate the Secret with at least one registry under auths (kubectl create secret docker-registry)."
    ),
    # Object store.
    (constants.OBJECT_STORE_READY, ObjectStore.CREDENTIALS_SECRET_NOT_FOUND): (
        "Create the credentials Secret in the tenant namespace: kubectl create secret generic NAME -n NAMESPACE "
        "--from-literal=AWS_ACCESS_KEY_ID=... --from-literal=AWS_SECRET_ACCESS_KEY=..."
    ),
    (constants.OBJECT_STORE_READY, ObjectStore.CREDENTIALS_KEYS_MISSING): (
        "Add the missing keys to the Secret, or set spec.objectStore.s3.credentialsSecret.accessKeyIdKey and "
        "secretAccessKeyKey to the keys it has."
    ),
    (constants.OBJECT_STORE_READY, ObjectStore.S3_SETTINGS_MISSING): (
        "Fill in spec.objectStore.s3 (endpoint, bucket, credentialsSecret), or set spec.objectStore.mode to Builtin."
    ),
    (constants.OBJECT_STORE_READY, ObjectStore.INVALID_ENDPOINT): (
        "Set spec.objectStore.s3.endpoint to a URL such as https://s3.example.com."
    ),
}
# Non-condition check (its name in status.checks) -> what to do when it warns.
CHECK_FIXES: dict[str, str] = {
    "kubernetesAPI": (
        "Make sure the API server maintains the default/kubernetes EndpointSlice (its endpoint reconciler), or "
        "create one listing every API server address; the install's NetworkPolicies need them."
    ),
    "registryProbes": (
        "From a pod in the cluster: nslookup REGISTRY and curl -sSI https://REGISTRY/v2/ ; fix DNS, egress "
        "firewall or proxy settings for the nodes."
    ),
}
GENERIC_FIX = "Act on the detail, then run tenant-platform check again (docs/status.md explains each reason)."
OPERATOR_DOES_IT = "Nothing to do: the operator does this when it runs."
NOTHING_TO_DO = ""


_BY_VALUE: dict[tuple[str | None, str], str] = dict(REMEDIATIONS.items())


def remediation(type_: str, reason: str) -> str:
    """The fix sentence for a (condition type, reason); ``reason`` may be the plain value."""
    found = _BY_VALUE.get((type_, reason)) or _BY_VALUE.get((None, reason))
    if found:
        return found
    return OPERATOR_DOES_IT if reason.startswith("Would") else GENERIC_FIX


def classify(condition: Mapping[str, Any], *, progressing: bool, failed: bool) -> str:
    """PASS, WARN or FAIL for one concern condition (see the module docstring)."""
    if condition.get("status") == "True":
        return PASS
    if failed:
        return FAIL
    if str(condition.get("reason", "")).startswith("Would") or progressing:
        return WARN
    return FAIL


def load_body(kube: Kube, source: Obj | str) -> Obj:
    """A TenantPlatform body from a dict, a YAML file path, or the name of one on the cluster."""
    if isinstance(source, dict):
        body = source
    elif os.path.isfile(source):
        with open(source, encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if isinstance(d, dict)]
        found = [d for d in docs if d.get("kind") == constants.KIND]
        if not found:
            raise PreflightError(f"{source} holds no {constants.KIND}")
        body = found[0]
    else:
        got = kube.get(constants.API_VERSION, constants.KIND, source)
        if got is None:
            raise PreflightError(f"{constants.KIND} {source} not found on the cluster; pass a file to check one")
        body = got
    if not (body.get("metadata") or {}).get("name"):
        raise PreflightError(f"the {constants.KIND} has no metadata.name")
    return body


def run_check(
    kube: Kube,
    platform_body_or_file: Obj | str,
    *,
    settings: Settings | None = None,
    now: datetime | None = None,
) -> tuple[list[Row], int]:
    """Run every verification read-only; return (rows, exit code: 1 when any row FAILs)."""
    body = load_body(kube, platform_body_or_file)
    outcome = reconcile.run(
        body,
        kube=kube,
        settings=settings or load_settings(),
        now=now or datetime.now(UTC),
        dry_run=True,
        write_status=False,
    )
    rows: list[Row] = []
    if not outcome.results:
        # Invalid spec (Stalled) or paused: the steps did not run.
        for cond in outcome.status.get("conditions") or []:
            if cond.get("type") in (constants.STALLED, constants.RECONCILING) and cond.get("reason") in (
                Summary.INVALID_SPEC,
                Summary.PAUSED,
            ):
                verdict = FAIL if cond["reason"] == Summary.INVALID_SPEC else WARN
                rows.append(_row("Spec", verdict, cond.get("message", ""), remediation("Spec", cond["reason"])))
                break
        return rows, _exit_code(rows)

    by_type: dict[str, Row] = {}
    check_rows: list[Row] = []
    for step_result in outcome.results.values():
        for cond in step_result.conditions:
            as_dict = {"type": cond.type, "status": cond.status, "reason": cond.reason, "message": cond.message}
            verdict = classify(as_dict, progressing=step_result.progressing, failed=step_result.failed)
            fix = NOTHING_TO_DO if verdict == PASS else remediation(cond.type, cond.reason)
            by_type[cond.type] = _row(cond.type, verdict, f"{cond.reason}: {cond.message}", fix)
        for name, entry in sorted((step_result.status.get("checks") or {}).items()):
            if not isinstance(entry, dict):
                continue
            passed = entry.get("result") == "Pass"
            detail = str(entry.get("message", ""))
            if entry.get("bestEffort"):
                detail = f"(best effort) {detail}"
            fix = NOTHING_TO_DO if passed else CHECK_FIXES.get(name, GENERIC_FIX)
            check_rows.append(_row(name, PASS if passed else WARN, detail, fix))
    order = {t: i for i, t in enumerate(constants.CONCERN_TYPES)}
    rows = [by_type[t] for t in sorted(by_type, key=lambda t: (order.get(t, len(order)), t))]
    rows += check_rows
    return rows, _exit_code(rows)


def _row(check: str, result: str, detail: str, fix: str) -> Row:
    return {"check": check, "result": result, "detail": detail, "fix": fix}


def _exit_code(rows: Sequence[Row]) -> int:
    return 1 if any(r["result"] == FAIL for r in rows) else 0


def format_table(rows: Sequence[Row], *, detail_width: int = 64, fix_width: int = 48) -> str:
    """A plain-text table (CHECK, RESULT, DETAIL, FIX) with wrapped cells and a summary line."""
    headers = {"check": "CHECK", "result": "RESULT", "detail": "DETAIL", "fix": "FIX"}
    check_width = max([len(headers["check"]), *(len(r["check"]) for r in rows)])
    result_width = len(headers["result"])
    lines = [
        f"{headers['check']:<{check_width}}  {headers['result']:<{result_width}}  "
        f"{headers['detail']:<{detail_width}}  {headers['fix']}".rstrip()
    ]
    for row in rows:
        detail = textwrap.wrap(row["detail"], detail_width) or [""]
        fix = textwrap.wrap(row["fix"], fix_width) or [""]
        for i in range(max(len(detail), len(fix))):
            check = row["check"] if i == 0 else ""
            result = row["result"] if i == 0 else ""
            d = detail[i] if i < len(detail) else ""
            f = fix[i] if i < len(fix) else ""
            lines.append(f"{check:<{check_width}}  {result:<{result_width}}  {d:<{detail_width}}  {f}".rstrip())
    counts = {k: sum(1 for r in rows if r["result"] == k) for k in (PASS, WARN, FAIL)}
    lines.append("")
    lines.append(f"{counts[PASS]} passed, {counts[WARN]} warnings, {counts[FAIL]} failed.")
    return "\n".join(lines)


def facts_document(kube: Kube, name: str) -> str:
    """The install values document of a live TenantPlatform, from its ``status.recorded``.

    The same text as ``values.yaml`` in its install-values ConfigMap after the same pass.
    Raises PreflightError when the TenantPlatform does not exist or has recorded nothing yet.
    """
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    if body is None:
        raise PreflightError(f"{constants.KIND} {name} not found")
    recorded = (body.get("status") or {}).get("recorded")
    if not recorded:
        raise PreflightError(
            f"{constants.KIND} {name} has no recorded facts yet: is the operator running? "
            "(tenant-platform check shows what it would find)"
        )
    try:
        facts = Recorded.parse(recorded)
    except pydantic.ValidationError as exc:
        raise PreflightError(f"{constants.KIND} {name} has recorded facts this version cannot read: {exc}") from exc
    namespace = str((body.get("spec") or {}).get("namespace", ""))
    return manifests.render_values(platform_name=name, namespace=namespace, recorded=facts)
