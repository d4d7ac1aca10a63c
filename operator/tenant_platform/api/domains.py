"""Domains a TenantPlatform may never claim, whatever its DNS mode (pure; mirrors the CRD's CEL).

``reserved(domain)`` returns ``(kind, why)`` for a domain that names something inside the cluster
or a cloud's instance metadata service, else None. Rewriting such a name to the ingress gateway
would hand every pod's requests for it (the API server, in-cluster Services, instance credentials)
to whoever routes the platform's domain. The CRD rejects the same domains at apply time (the
``x-kubernetes-validations`` of spec.domain in crds/, one rule per kind below);
tests/integration/test_crd_validation.py applies every row of the unit table to the real API
server and checks that it agrees with this function.

``under_zone(domain, zones)`` covers what only the cluster knows: the zones its CoreDNS serves
with the ``kubernetes`` plugin (the cluster domain, when it is not ``cluster.local``).
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["cluster-internal", "cloud-metadata", "ip-address"]

CLUSTER_INTERNAL_SUFFIXES = ("cluster.local", "svc", "arpa", "localhost")
"""The domain may not be one of these nor end in ``.<suffix>``."""
CLUSTER_INTERNAL_PREFIXES = ("kubernetes.default",)
"""The domain may not be one of these nor start with ``<prefix>.``."""
METADATA_NAMES = (
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.com",
    "metadata.azure.internal",
    "instance-data",
    "ec2.internal",
    "compute.internal",
)
"""Cloud instance-metadata names (and AWS's instance host zones): the domain may not be one of
these nor end in ``.<name>``."""
METADATA_PREFIXES = ("instance-data", "metadata.google")
LINK_LOCAL = re.compile(r"^169[.-]254[.-]")
"""169.254.169.254 in any form a wildcard DNS service reads (169.254.169.254.nip.io, 169-254-...)."""
NUMERIC = re.compile(r"^[0-9.]+$")


def _is_or_under(domain: str, names: tuple[str, ...]) -> str:
    for name in names:
        if domain == name or domain.endswith("." + name):
            return name
    return ""


def reserved(domain: str) -> tuple[Kind, str] | None:
    """``(kind, why)`` when ``domain`` may never be a platform's domain, else None."""
    domain = domain.lower().rstrip(".")
    if "." not in domain:
        return "cluster-internal", (
            f"{domain} is a single label, which pods resolve through their search domains (in-cluster names)"
        )
    if name := _is_or_under(domain, CLUSTER_INTERNAL_SUFFIXES):
        return "cluster-internal", f"{domain} is a cluster-internal name (under {name})"
    for prefix in CLUSTER_INTERNAL_PREFIXES:
        if domain == prefix or domain.startswith(prefix + "."):
            return "cluster-internal", f"{domain} names the Kubernetes API Service ({prefix})"
    if name := _is_or_under(domain, METADATA_NAMES):
        return "cloud-metadata", f"{domain} is a cloud instance-metadata name ({name})"
    for prefix in METADATA_PREFIXES:
        if domain.startswith(prefix + "."):
            return "cloud-metadata", f"{domain} is a cloud instance-metadata name ({prefix}.*)"
    if LINK_LOCAL.match(domain):
        return "cloud-metadata", f"{domain} names the link-local metadata address 169.254.169.254"
    if NUMERIC.match(domain):
        return "ip-address", f"{domain} is an IP address, not a domain"
    return None


def under_zone(domain: str, zones: list[str]) -> str:
    """The first of ``zones`` that is ``domain`` or a parent of it ("" when none); ``.`` is ignored."""
    domain = domain.lower().rstrip(".")
    for zone in zones:
        clean = zone.lower().rstrip(".")
        if clean and (domain == clean or domain.endswith("." + clean)):
            return clean
    return ""
