"""The Kubernetes API addresses a NetworkPolicy must allow, from the ``kubernetes`` Service and its
EndpointSlices. Pure.

Many CNIs evaluate egress policy after Service translation, so a policy allowing only the Service's
cluster IP silently blocks pods from the API server: both sets are needed, each address as a /32
(IPv4) or /128 (IPv6), sorted (numerically, IPv4 first) and without duplicates. Ports travel with
them: the Service port (usually 443) and the endpoint port the API server really listens on
(often 6443), which is what a post-translation policy sees.

Every endpoint address is recorded whatever its readiness: an API server that is briefly not
ready is still one pods must reach once it is. Not-ready addresses are named in a note.

``compute`` finds the addresses; ``evaluate`` (the step's pure part) turns them into the recorded
``kubernetesAPI`` and, when something looks wrong or is worth a note, the
``status.checks.kubernetesAPI`` entry: the step owns no condition (the addresses are facts, not
a prerequisite an admin can fix from our spec).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api.status.apiaddresses import APIAddressesRecorded, Check, KubernetesAPI
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.core.verdict import Verdict

SERVICE_NAME = "kubernetes"
SERVICE_NAMESPACE = "default"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
CHECK_NAME = "kubernetesAPI"


@dataclass(frozen=True)
class APIAddresses:
    service_cidrs: list[str]
    endpoint_cidrs: list[str]
    service_ports: list[int]
    endpoint_ports: list[int]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def recorded(self) -> APIAddressesRecorded:
        return APIAddressesRecorded(
            kubernetes_api=KubernetesAPI(
                service_cidrs=self.service_cidrs,
                endpoint_cidrs=self.endpoint_cidrs,
                service_ports=self.service_ports,
                endpoint_ports=self.endpoint_ports,
            )
        )

    def check(self) -> Check | None:
        """Warn when something looks wrong, Pass with the notes alone, None when there is nothing to say."""
        if not (self.warnings or self.notes):
            return None
        return Check(result="Warn" if self.warnings else "Pass", message=" ".join([*self.warnings, *self.notes]))


@dataclass(frozen=True)
class APIAddressesFacts:
    """The ``kubernetes`` Service in ``default`` (None: absent) and its EndpointSlices."""

    service: Mapping[str, Any] | None
    slices: Sequence[Mapping[str, Any]]


def evaluate(facts: APIAddressesFacts) -> Verdict:
    """No condition; recorded ``kubernetesAPI``; ``status.checks.kubernetesAPI`` when there is something to say."""
    found = compute(facts.service, facts.slices)
    check = found.check()
    sections = {"checks": {CHECK_NAME: check.dump()}} if check is not None else {}
    return Verdict(conditions=[], recorded=Recorded(kubernetes_api=found.recorded().kubernetes_api), sections=sections)


def host_cidr(address: str) -> str | None:
    """``10.0.0.1`` -> ``10.0.0.1/32``; ``fd00::1`` -> ``fd00::1/128``; None when not an IP."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    return f"{ip.compressed}/{ip.max_prefixlen}"


def sort_cidrs(cidrs: Iterable[str]) -> list[str]:
    """Deduplicated, IPv4 before IPv6, numeric order."""
    networks = {ipaddress.ip_network(c, strict=False) for c in cidrs}
    return [str(n) for n in sorted(networks, key=lambda n: (n.version, int(n.network_address), n.prefixlen))]


def compute(service: Mapping[str, Any] | None, slices: Sequence[Mapping[str, Any]]) -> APIAddresses:
    """Addresses of the ``kubernetes`` Service (None when absent) and its EndpointSlices."""
    warnings: list[str] = []
    notes: list[str] = []
    service_cidrs: list[str] = []
    service_ports: list[int] = []
    target_ports: list[int] = []
    where = f"Service {SERVICE_NAMESPACE}/{SERVICE_NAME}"
    if service is None:
        warnings.append(f"{where} does not exist, so no service addresses were recorded.")
    else:
        spec = service.get("spec") or {}
        ips = list(spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else []))
        service_cidrs = [c for c in (host_cidr(ip) for ip in ips if ip != "None") if c]
        for port in spec.get("ports") or []:
            if isinstance(port.get("port"), int):
                service_ports.append(port["port"])
            if isinstance(port.get("targetPort"), int):
                target_ports.append(port["targetPort"])
        if not service_cidrs:
            warnings.append(f"{where} has no cluster IP.")

    endpoint_cidrs: list[str] = []
    endpoint_ports: list[int] = []
    not_ready: list[str] = []
    skipped: list[str] = []
    for eps in slices:
        for port in eps.get("ports") or []:
            if isinstance(port.get("port"), int):
                endpoint_ports.append(port["port"])
        for endpoint in eps.get("endpoints") or []:
            ready = (endpoint.get("conditions") or {}).get("ready")
            for address in endpoint.get("addresses") or []:
                cidr = host_cidr(str(address))
                if cidr is None:
                    skipped.append(str(address))
                    continue
                endpoint_cidrs.append(cidr)
                if ready is False:
                    not_ready.append(cidr)
    if not endpoint_cidrs:
        warnings.append(
            f"No EndpointSlice labelled {SERVICE_NAME_LABEL}={SERVICE_NAME} in namespace {SERVICE_NAMESPACE} lists an "
            "API server address, so endpointCIDRs is empty. NetworkPolicies built from these facts would block "
            "pods from the API server wherever the CNI applies policy after Service translation. The API server "
            "normally maintains that EndpointSlice (unless it runs with --endpoint-reconciler-type=none); "
            "find the API server addresses and create it, or fix the API server's endpoint reconciler."
        )
    if not_ready:
        notes.append("Recorded although not ready: " + ", ".join(sort_cidrs(not_ready)) + ".")
    if skipped:
        notes.append("Ignored endpoint addresses that are not IPs: " + ", ".join(sorted(set(skipped))) + ".")
    if not endpoint_ports:
        endpoint_ports = target_ports
    return APIAddresses(
        service_cidrs=sort_cidrs(service_cidrs),
        endpoint_cidrs=sort_cidrs(endpoint_cidrs),
        service_ports=sorted(set(service_ports)),
        endpoint_ports=sorted(set(endpoint_ports)),
        warnings=warnings,
        notes=notes,
    )
