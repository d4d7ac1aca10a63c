"""PURE verification of an Istio Gateway against what the platform needs.

``verify_gateway(live, ...)`` returns the problems (reason, sentence) with a Gateway that should
serve the platform: it must select the gateway workload (``spec.selector`` equal to ours), and
have an HTTPS server on port 443 whose ``hosts`` admit the domain for VirtualServices in the
tenant namespace, with TLS from a ``credentialName`` (the edge certificate Secret). A missing
port-80 server is only a note. Empty problems means the Gateway is fine.

Host matching follows Istio: a host is ``[namespace/]dnsName``; the namespace part is ``*`` (any),
``.`` (the Gateway's own namespace) or a namespace name; ``dnsName`` ``*`` matches every name and
``*.example.com`` every name ending in ``.example.com`` (any depth, as Istio's suffix match).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GATEWAY_NOT_FOUND = "GatewayNotFound"
SELECTOR_MISMATCH = "SelectorMismatch"
NO_HTTPS_SERVER = "NoHTTPSServer"
HOSTS_MISS_DOMAIN = "HostsMissDomain"
NO_CREDENTIAL = "NoCredential"
CREDENTIAL_MISMATCH = "CredentialMismatch"


@dataclass
class GatewayReport:
    problems: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def reason(self) -> str:
        return self.problems[0][0] if self.problems else ""

    @property
    def message(self) -> str:
        return "; ".join(text for _, text in self.problems)


def host_matches(host: str, *, domain: str, tenant_namespace: str, gateway_namespace: str) -> tuple[bool, str]:
    """(admits, why-not) for one Gateway host entry."""
    namespace, _, name = host.rpartition("/")
    name = name.strip().lower().rstrip(".")
    domain = domain.lower().rstrip(".")
    if name == "*":
        name_ok = True
    elif name.startswith("*."):
        name_ok = domain.endswith(name[1:])
    else:
        name_ok = name == domain
    if not name_ok:
        return False, ""
    if namespace in ("", "*"):
        return True, ""
    effective = gateway_namespace if namespace == "." else namespace
    if effective == tenant_namespace:
        return True, ""
    return False, (
        f"host {host!r} matches the domain but only admits VirtualServices from namespace {effective}, "
        f"not {tenant_namespace}"
    )


def _port(server: dict[str, Any]) -> tuple[int, str]:
    port = server.get("port") or {}
    try:
        number = int(port.get("number", 0) or 0)
    except (TypeError, ValueError):
        number = 0
    return number, str(port.get("protocol", "")).upper()


def verify_gateway(
    live: dict[str, Any] | None,
    *,
    name: str,
    namespace: str,
    domain: str,
    selector: dict[str, str],
    tenant_namespace: str,
    credential_name: str,
) -> GatewayReport:
    report = GatewayReport()
    where = f"Gateway {namespace}/{name}"
    if live is None:
        report.problems.append(
            (
                GATEWAY_NOT_FOUND,
                f"{where} does not exist; create it, or set spec.gateway.management to Managed so the operator does",
            )
        )
        return report
    spec = live.get("spec") or {}
    live_selector = {str(k): str(v) for k, v in (spec.get("selector") or {}).items()}
    if live_selector != dict(selector):
        report.problems.append(
            (
                SELECTOR_MISMATCH,
                f"{where} selects {_labels(live_selector)} but spec.gateway.selector is {_labels(selector)}; "
                "the Gateway must select the gateway workload",
            )
        )
    servers = [s for s in spec.get("servers") or [] if isinstance(s, dict)]
    https = [s for s in servers if _port(s) == (443, "HTTPS")]
    if not https:
        report.problems.append((NO_HTTPS_SERVER, f"{where} has no server with port number 443 and protocol HTTPS"))
        return report
    serving: list[dict[str, Any]] = []
    namespace_notes: list[str] = []
    for server in https:
        for host in server.get("hosts") or []:
            ok, why = host_matches(
                str(host), domain=domain, tenant_namespace=tenant_namespace, gateway_namespace=namespace
            )
            if ok:
                serving.append(server)
                break
            if why:
                namespace_notes.append(why)
    if not serving:
        hosts = sorted({str(h) for s in https for h in s.get("hosts") or []})
        detail = f" ({'; '.join(namespace_notes)})" if namespace_notes else ""
        report.problems.append(
            (
                HOSTS_MISS_DOMAIN,
                f"{where}'s HTTPS 443 hosts {hosts or '[]'} do not include {domain}{detail}; routes for the domain "
                "would silently never be programmed",
            )
        )
        return report
    credentials = [str((s.get("tls") or {}).get("credentialName") or "") for s in serving]
    if not any(credentials):
        modes = sorted({str((s.get("tls") or {}).get("mode") or "none") for s in serving})
        report.problems.append(
            (
                NO_CREDENTIAL,
                f"{where}'s HTTPS 443 server for {domain} has no tls.credentialName (tls mode {', '.join(modes)}); "
                f"set it to the edge certificate Secret {credential_name}",
            )
        )
    elif credential_name not in credentials:
        report.problems.append(
            (
                CREDENTIAL_MISMATCH,
                f"{where} serves {domain} with credentialName {', '.join(c for c in credentials if c)} but "
                f"spec.edgeCertificate.secretName is {credential_name}; make them name the same Secret",
            )
        )
    http = [
        s
        for s in servers
        if _port(s)[0] == 80
        and any(
            host_matches(str(h), domain=domain, tenant_namespace=tenant_namespace, gateway_namespace=namespace)[0]
            for h in s.get("hosts") or []
        )
    ]
    if not http:
        report.notes.append(f"{where} serves no port 80 for {domain}; plain-HTTP visitors get no redirect")
    return report


def _labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}" if labels else "{}"
