"""Image pull Secrets: is each one usable, and which registries does it cover? Pure.

Only the registry host names ever leave this module: never a username, password, auth string or
identity token, not even in an error (a parse error names the Secret and the key, not the text).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DOCKER_CONFIG_JSON_TYPE = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"

REASON_NONE_REQUIRED = "NoneRequired"
REASON_FOUND = "PullSecretsFound"
REASON_NOT_FOUND = "PullSecretNotFound"
REASON_WRONG_TYPE = "WrongSecretType"
REASON_UNPARSEABLE = "Unparseable"
REASON_NO_REGISTRIES = "NoRegistries"


@dataclass(frozen=True)
class Verdict:
    name: str
    ok: bool
    reason: str
    problem: str = ""
    hosts: list[str] = field(default_factory=list)


def registry_host(key: str) -> str:
    """``https://index.docker.io/v1/`` -> ``index.docker.io``; ``reg.example:5000`` stays as is."""
    host = key.strip()
    for scheme in ("https://", "http://"):
        if host.lower().startswith(scheme):
            host = host[len(scheme) :]
    return host.split("/", 1)[0].lower()


def check_secret(name: str, namespace: str, secret: Mapping[str, Any] | None) -> Verdict:
    """The verdict for one named Secret (None: it does not exist)."""
    where = f"Secret {name} in namespace {namespace}"
    if secret is None:
        return Verdict(name, False, REASON_NOT_FOUND, f"{where} does not exist")
    type_ = str(secret.get("type") or "Opaque")
    if type_ != DOCKER_CONFIG_JSON_TYPE:
        return Verdict(name, False, REASON_WRONG_TYPE, f"{where} has type {type_}, not {DOCKER_CONFIG_JSON_TYPE}")
    raw = (secret.get("data") or {}).get(DOCKER_CONFIG_JSON_KEY)
    if not raw:
        return Verdict(name, False, REASON_UNPARSEABLE, f"{where} has no {DOCKER_CONFIG_JSON_KEY} key")
    try:
        doc = json.loads(base64.b64decode(str(raw), validate=True))
    except (binascii.Error, ValueError):
        return Verdict(name, False, REASON_UNPARSEABLE, f"{where}: {DOCKER_CONFIG_JSON_KEY} is not base64-encoded JSON")
    auths = doc.get("auths") if isinstance(doc, dict) else None
    if not isinstance(auths, dict):
        return Verdict(name, False, REASON_UNPARSEABLE, f"{where}: {DOCKER_CONFIG_JSON_KEY} has no auths object")
    hosts = sorted({registry_host(str(k)) for k in auths if str(k).strip()})
    if not hosts:
        return Verdict(name, False, REASON_NO_REGISTRIES, f"{where}: {DOCKER_CONFIG_JSON_KEY} lists no registry")
    return Verdict(name, True, REASON_FOUND, hosts=hosts)
