"""PullSecretsReady, decided from the Secrets named in the spec. Pure.

``check_secret`` says whether one Secret is a usable registry credential and which registry
hosts it covers; ``registry_hosts`` the hosts the usable ones cover (the step's gather probes
them where it runs in the cluster); ``evaluate`` turns the checks of every named Secret into the
condition and the recorded names. Only the registry host names ever leave this module:
never a username, password, auth string or identity token, not even in an error (a parse error
names the Secret and the key, not the text).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.status.pullsecrets import PullSecretsRecorded
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.core import conditions
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict

DOCKER_CONFIG_JSON_TYPE = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"

R = reasons.PullSecrets


@dataclass(frozen=True)
class SecretCheck:
    """One named Secret: usable (``ok``, with the ``hosts`` it covers) or the ``problem``."""

    name: str
    ok: bool
    reason: reasons.PullSecrets
    problem: str = ""
    hosts: list[str] = field(default_factory=list)


def registry_host(key: str) -> str:
    """``https://index.docker.io/v1/`` -> ``index.docker.io``; ``reg.example:5000`` stays as is."""
    host = key.strip()
    for scheme in ("https://", "http://"):
        if host.lower().startswith(scheme):
            host = host[len(scheme) :]
    return host.split("/", 1)[0].lower()


def check_secret(name: str, namespace: str, secret: Mapping[str, Any] | None) -> SecretCheck:
    """The verdict for one named Secret (None: it does not exist)."""
    where = f"Secret {name} in namespace {namespace}"
    if secret is None:
        return SecretCheck(name, False, R.PULL_SECRET_NOT_FOUND, f"{where} does not exist")
    type_ = str(secret.get("type") or "Opaque")
    if type_ != DOCKER_CONFIG_JSON_TYPE:
        return SecretCheck(name, False, R.WRONG_SECRET_TYPE, f"{where} has type {type_}, not {DOCKER_CONFIG_JSON_TYPE}")
    raw = (secret.get("data") or {}).get(DOCKER_CONFIG_JSON_KEY)
    if not raw:
        return SecretCheck(name, False, R.UNPARSEABLE, f"{where} has no {DOCKER_CONFIG_JSON_KEY} key")
    try:
        doc = json.loads(base64.b64decode(str(raw), validate=True))
    except (binascii.Error, ValueError):
        return SecretCheck(name, False, R.UNPARSEABLE, f"{where}: {DOCKER_CONFIG_JSON_KEY} is not base64-encoded JSON")
    auths = doc.get("auths") if isinstance(doc, dict) else None
    if not isinstance(auths, dict):
        return SecretCheck(name, False, R.UNPARSEABLE, f"{where}: {DOCKER_CONFIG_JSON_KEY} has no auths object")
    hosts = sorted({registry_host(str(k)) for k in auths if str(k).strip()})
    if not hosts:
        return SecretCheck(name, False, R.NO_REGISTRIES, f"{where}: {DOCKER_CONFIG_JSON_KEY} lists no registry")
    return SecretCheck(name, True, R.PULL_SECRETS_FOUND, hosts=hosts)


@dataclass(frozen=True)
class PullSecretsFacts:
    """The Secrets named in ``spec.imagePullSecrets`` (first mention only; None where absent), read in the
    tenant namespace."""

    secrets: Sequence[tuple[str, Mapping[str, Any] | None]]
    registry_probe: Mapping[str, Any] | None = None
    """The best-effort probe of ``registry_hosts`` from the operator's pod (None: not probed:
    outside the cluster, or no host to probe)."""


def registry_hosts(platform: TenantPlatform, facts: PullSecretsFacts) -> list[str]:
    """Hosts the usable Secrets cover, sorted: the step probes them where it runs in the cluster."""
    checks = [check_secret(name, platform.spec.namespace, secret) for name, secret in facts.secrets]
    return sorted({h for c in checks if c.ok for h in c.hosts})


def _verdict(condition: Condition, recorded: PullSecretsRecorded) -> Verdict:
    return Verdict(conditions=[condition], recorded=Recorded(image_pull_secrets=recorded.image_pull_secrets))


def evaluate(platform: TenantPlatform, facts: PullSecretsFacts) -> Verdict:
    """PullSecretsReady: True when every named Secret is usable (or none is named)."""
    type_ = constants.PULL_SECRETS_READY
    namespace = platform.spec.namespace
    recorded = PullSecretsRecorded(image_pull_secrets=[name for name, _ in facts.secrets])
    if not facts.secrets:
        cond = conditions.true(
            type_, R.NONE_REQUIRED, "spec.imagePullSecrets is empty: images are pulled without credentials."
        )
        return _verdict(cond, recorded)
    checks = [check_secret(name, namespace, secret) for name, secret in facts.secrets]
    bad = [c for c in checks if not c.ok]
    good = [c for c in checks if c.ok]
    covers = "; ".join(f"{c.name} covers {', '.join(c.hosts)}" for c in good)
    if bad:
        message = "Pull secret problems: " + "; ".join(c.problem for c in bad) + "."
        if any(c.reason == R.PULL_SECRET_NOT_FOUND for c in bad):
            message += (
                f" Create each missing Secret in namespace {namespace} with kubectl create secret "
                "docker-registry (type kubernetes.io/dockerconfigjson)."
            )
        if covers:
            message += f" Usable: {covers}."
        cond = conditions.false(type_, bad[0].reason, message)
    else:
        cond = conditions.true(
            type_, R.PULL_SECRETS_FOUND, f"Pull secrets in namespace {namespace} are usable: {covers}."
        )
    return _verdict(cond, recorded)
