"""The ingress gateway Service named by ``spec.gateway.serviceHost`` (pure).

Shared by the gateway step (the Service must exist and expose port 443) and the DNS step (with
``management: External``, the domain must resolve to one of the Service's addresses), so that
neither step imports the other. Reading the Service is the caller's business.
"""

from __future__ import annotations

from typing import Any


def service_of(host: str) -> tuple[str, str] | None:
    """(name, namespace) of a ``<service>.<namespace>.svc[.<cluster domain>]`` host, else None."""
    parts = host.rstrip(".").split(".")
    if len(parts) >= 3 and parts[2] == "svc":
        return parts[0], parts[1]
    return None


def service_addresses(service: dict[str, Any] | None) -> set[str]:
    """The addresses a Service answers on: its cluster IPs, its ``externalIPs`` (the checklist's
    exposure on a node address) and its load balancers' IPs."""
    if service is None:
        return set()
    spec = service.get("spec") or {}
    addresses = {ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None"}
    addresses |= {str(ip) for ip in spec.get("externalIPs") or [] if ip}
    for ingress in (service.get("status") or {}).get("loadBalancer", {}).get("ingress") or []:
        if ingress.get("ip"):
            addresses.add(str(ingress["ip"]))
    return addresses


def service_hostnames(service: dict[str, Any] | None) -> list[str]:
    """The host names its load balancers publish (``status.loadBalancer.ingress[].hostname``, as
    cloud load balancers without a fixed IP do): the caller resolves them to compare addresses."""
    if service is None:
        return []
    ingress = (service.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
    return sorted({str(i["hostname"]) for i in ingress if i.get("hostname")})
