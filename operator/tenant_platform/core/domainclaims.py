"""PURE guard rails of DNSReady: domains a platform may not have rewritten, in any DNS mode.

``refusal(platform, corefile_text=..., custom_data=..., claims=...)`` returns why the operator
refuses the platform's domain, or None:

- ``ReservedDomain``: a cluster-internal or cloud-metadata name (api/domains.reserved, the same
  rules the CRD applies at apply time, re-checked for objects stored before them), or a name
  inside a zone the cluster's CoreDNS serves with the ``kubernetes`` plugin (the cluster domain,
  whatever it is called). A rewrite the operator wrote for it earlier is removed.
- ``DomainHeldByAnotherPlatform``: another TenantPlatform's marked block in the Corefile, or its
  key in ``coredns-custom``, already rewrites the domain; or, while no platform rewrites it yet,
  another TenantPlatform created earlier names it in spec.domain (first come, first served; a
  platform whose own rewrite is already in place keeps it). Nothing is written.

``holders(name, domain, claims=..., in_place=...)`` is the ownership rule itself, shared with
GatewayReady (concerns/gateway/verdict.py): what is already in place keeps the domain, else first come,
first served by creationTimestamp, then name.

A hand-made rewrite of the domain (the checklist's ``rewrite name exact <domain> <host>`` line,
outside every marker) belongs to no platform: it never counts as another platform's hold. The
DNS step replaces it when the admin opted the CoreDNS ConfigMap in (concerns/dns/verdict.py ``takes_over``).

The DNS step runs it before every decision and again on every retry of its Corefile edit, on the
freshly read Corefile and TenantPlatforms, so a platform that took the domain in between wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tenant_platform.api import domains
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import DNS
from tenant_platform.formats import corefile


@dataclass(frozen=True)
class Claim:
    """One TenantPlatform's domain, as listed from the API."""

    platform: str
    domain: str
    created: str = ""
    """metadata.creationTimestamp (RFC 3339 in UTC, so it sorts as text)."""
    deleting: bool = False


def claims_of(items: Iterable[Mapping[str, Any]]) -> tuple[Claim, ...]:
    """The claims of listed TenantPlatform objects."""
    found = []
    for item in items:
        meta = item.get("metadata") or {}
        found.append(
            Claim(
                platform=str(meta.get("name") or ""),
                domain=str((item.get("spec") or {}).get("domain") or ""),
                created=str(meta.get("creationTimestamp") or ""),
                deleting=bool(meta.get("deletionTimestamp")),
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class Refusal:
    reason: DNS
    message: str
    remove_ours: bool
    """Remove a rewrite the operator wrote for this platform earlier (reserved names only)."""


def cluster_zones(text: str) -> list[str]:
    """The zones the DNS server block's ``kubernetes`` plugin serves ([] when it cannot be read)."""
    try:
        server = corefile.dns_server_block(text)
    except corefile.CorefileError:
        return []
    plugin = server.directive(corefile.KUBERNETES_PLUGIN)
    zones = plugin.args if plugin is not None and plugin.args else [corefile.zone_of(k) for k in server.keys]
    return [z for z in zones if z.strip(".")]


def rewriters(domain: str, text: str, custom_data: Mapping[str, str]) -> set[str]:
    """The platforms whose marked block or ``coredns-custom`` key rewrites ``domain``."""
    line = corefile.rewrite_line(domain, "")
    found: set[str] = set()
    try:
        blocks = corefile.marked_blocks(text)
    except corefile.CorefileError:
        blocks = []  # the step refuses such a Corefile anyway (CorefileUnsupported)
    found |= {b.platform for b in blocks if any(x.startswith(line) for x in b.body)}
    prefix, suffix = f"{corefile.MARKER}-", corefile.OVERRIDE_SUFFIX
    for key, value in custom_data.items():
        ours = key.startswith(prefix) and key.endswith(suffix)
        if ours and any(x.strip().startswith(line) for x in str(value or "").splitlines()):
            found.add(key[len(prefix) : -len(suffix)])
    return found


def refusal(
    platform: TenantPlatform, *, corefile_text: str, custom_data: Mapping[str, str], claims: Iterable[Claim]
) -> Refusal | None:
    """Why ``platform``'s domain must not be rewritten (see the module docstring), or None."""
    domain = platform.spec.domain
    never = (
        " The operator never points it at the gateway, in any spec.dns.management; choose the platform's own domain."
    )
    found = domains.reserved(domain)
    if found is not None:
        return Refusal(DNS.RESERVED_DOMAIN, f"spec.domain {found[1]}.{never}", True)
    zone = domains.under_zone(domain, cluster_zones(corefile_text))
    if zone:
        return Refusal(
            DNS.RESERVED_DOMAIN,
            f"spec.domain {domain} is inside {zone}, a zone the cluster's CoreDNS answers with the kubernetes plugin "
            f"(in-cluster names).{never}",
            True,
        )
    held = holders(platform.name, domain, claims=claims, in_place=rewriters(domain, corefile_text, custom_data))
    if held.in_place:
        return Refusal(
            DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
            f"TenantPlatform {', '.join(held.in_place)} already rewrites {domain} in the cluster DNS; two platforms "
            "cannot share a domain, so nothing was written. Give this platform its own spec.domain.",
            False,
        )
    if held.earlier:
        return Refusal(
            DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
            f"TenantPlatform {', '.join(held.earlier)} was created earlier with spec.domain {domain}; two platforms "
            "cannot share a domain, so nothing was written. Give this platform its own spec.domain.",
            False,
        )
    return None


@dataclass(frozen=True)
class Held:
    """Who holds a domain against a platform; both empty when the platform may use it."""

    in_place: tuple[str, ...] = ()
    """Other platforms whose rewrite (DNS) or Gateway (GatewayReady) for the domain is in place."""
    earlier: tuple[str, ...] = ()
    """Other platforms created earlier (then by name) that name the domain in spec.domain."""

    def __bool__(self) -> bool:
        return bool(self.in_place or self.earlier)


def holders(name: str, domain: str, *, claims: Iterable[Claim], in_place: Iterable[str] = ()) -> Held:
    """The one ownership rule for a domain, in DNS and on the Gateway.

    - Another platform's piece already in place (``in_place``) holds the domain while ``name``'s is
      not: a platform that took the domain keeps it, whatever is created later.
    - Both in place (written before this rule existed): the earliest claim among them keeps it;
      when a claim cannot be ranked (not listed), neither writes.
    - Nothing in place, or only ``name``'s: first come, first served among the listed claims on
      the same ``spec.domain`` (creationTimestamp, then name; platforms being deleted let go).
    """
    listed = [c for c in claims if c.domain == domain and not c.deleting]
    order = {c.platform: (c.created, c.platform) for c in listed}
    mine = order.get(name)
    placed = set(in_place)
    others_placed = sorted(placed - {name})
    if name not in placed:
        if others_placed:
            return Held(in_place=tuple(others_placed))
        pool = [c.platform for c in listed]
        earlier = sorted(p for p in pool if p != name and (mine is None or order[p] < mine))
        return Held(earlier=tuple(earlier))
    # Ours is in place too: another platform's piece outranks it when claimed earlier, or when
    # either claim cannot be ranked (not listed): then nothing is written on either side.
    return Held(in_place=tuple(p for p in others_placed if mine is None or p not in order or order[p] < mine))
