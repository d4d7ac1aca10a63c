"""PURE decisions for GatewayReady: verify an Istio Gateway, and the step's whole verdict.

``verify_gateway(live, ...)`` returns the problems (reason, sentence) with a Gateway that should
serve the platform: it must select the gateway workload (``spec.selector`` equal to ours), and
have an HTTPS server on port 443 whose ``hosts`` admit the domain for VirtualServices in the
tenant namespace, no host (on any port) that admits the domain for VirtualServices from every
namespace (a bare host or ``*/``: any namespace could bind routes for the platform's domain),
and TLS from a ``credentialName`` (the edge certificate Secret). A missing port-80 server is
only a note. Empty problems means the Gateway is fine.

``evaluate(platform, facts, dry_run=...)`` turns what the gateway step read (``GatewayFacts``)
into its ``GatewayVerdict``: the Gateway to apply (Managed), the GatewayReady condition, the
event and the recorded coordinates. Checks, in the order a reason is chosen:

    GatewayKindNotServed, DomainHeldByAnotherPlatform, Conflict (Managed), WouldApply (dry run),
    GatewayNotFound,
    SelectorMismatch, NoHTTPSServer, HostsMissDomain, DomainOpenToAllNamespaces, NoCredential,
    CredentialMismatch,
    GatewayServiceNotFound, then Programmed (Managed) or Verified (External)

DomainHeldByAnotherPlatform: one domain belongs to one platform, by the rule DNSReady applies
(core/domainclaims.py ``holders``): another platform's Gateway of ours that already serves the
domain keeps it; else the platform created first (then by name) with that spec.domain has it.
The later platform writes nothing (in either mode); a Gateway it wrote earlier is left as it is.

Host matching follows Istio: a host is ``[namespace/]dnsName``; the namespace part is ``*`` (any),
``.`` (the Gateway's own namespace) or a namespace name; ``dnsName`` ``*`` matches every name and
``*.example.com`` every name ending in ``.example.com`` (any depth, as Istio's suffix match).
``binds`` applies the same rule to a VirtualService: which of a Gateway's servers a route for a
host, from a namespace, would bind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.api.status.gateway import RecordedGateway
from tenant_platform.concerns.gateway import manifests as render_gateway
from tenant_platform.core import conditions, ownership
from tenant_platform.core import domainclaims as dnsguard
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import LegacyVerdict as Verdict
from tenant_platform.core.verdict import Manifest


@dataclass
class GatewayReport:
    problems: list[tuple[Reason, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def reason(self) -> Reason | None:
        return self.problems[0][0] if self.problems else None

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


def open_to_all(host: str, *, domain: str) -> bool:
    """Whether ``host`` admits ``domain`` for VirtualServices from every namespace (``*/`` or bare)."""
    namespace, _, _ = host.rpartition("/")
    return namespace in ("", "*") and host_matches(host, domain=domain, tenant_namespace="", gateway_namespace="")[0]


def binds(live: dict[str, Any], *, namespace: str, host: str) -> list[int]:
    """The ports of ``live``'s servers a VirtualService in ``namespace`` for ``host`` binds to.

    Istio's rule: a server admits the route when one of its hosts admits both the route's
    namespace (the host's namespace part) and its host name.
    """
    gateway_namespace = str((live.get("metadata") or {}).get("namespace") or "")
    return [
        _port(server)[0]
        for server in (live.get("spec") or {}).get("servers") or []
        if isinstance(server, dict)
        and any(
            host_matches(str(h), domain=host, tenant_namespace=namespace, gateway_namespace=gateway_namespace)[0]
            for h in server.get("hosts") or []
        )
    ]


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
                Reason.GATEWAY_NOT_FOUND,
                f"{where} does not exist; create it, or set spec.gateway.management to Managed so the operator does",
            )
        )
        return report
    spec = live.get("spec") or {}
    live_selector = {str(k): str(v) for k, v in (spec.get("selector") or {}).items()}
    if live_selector != dict(selector):
        report.problems.append(
            (
                Reason.SELECTOR_MISMATCH,
                f"{where} selects {_labels(live_selector)} but spec.gateway.selector is {_labels(selector)}; "
                "the Gateway must select the gateway workload",
            )
        )
    servers = [s for s in spec.get("servers") or [] if isinstance(s, dict)]
    https = [s for s in servers if _port(s) == (443, "HTTPS")]
    if not https:
        report.problems.append(
            (Reason.NO_HTTPS_SERVER, f"{where} has no server with port number 443 and protocol HTTPS")
        )
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
                Reason.HOSTS_MISS_DOMAIN,
                f"{where}'s HTTPS 443 hosts {hosts or '[]'} do not include {domain}{detail}; routes for the domain "
                "would silently never be programmed",
            )
        )
        return report
    open_hosts = sorted({str(h) for s in servers for h in s.get("hosts") or [] if open_to_all(str(h), domain=domain)})
    if open_hosts:
        report.problems.append(
            (
                Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES,
                f"{where}'s hosts {open_hosts} admit {domain} for VirtualServices from every namespace, so any "
                f"namespace could route the platform's domain; list it as {tenant_namespace}/{domain} instead",
            )
        )
    credentials = [str((s.get("tls") or {}).get("credentialName") or "") for s in serving]
    if not any(credentials):
        modes = sorted({str((s.get("tls") or {}).get("mode") or "none") for s in serving})
        report.problems.append(
            (
                Reason.NO_CREDENTIAL,
                f"{where}'s HTTPS 443 server for {domain} has no tls.credentialName (tls mode {', '.join(modes)}); "
                f"set it to the edge certificate Secret {credential_name}",
            )
        )
    elif credential_name not in credentials:
        report.problems.append(
            (
                Reason.CREDENTIAL_MISMATCH,
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


# -- the step's verdict ------------------------------------------------------------------------------

TYPE = constants.GATEWAY_READY


@dataclass(frozen=True)
class GatewayFacts:
    """What the gateway step read (concerns/gateway/step.py ``gather``), or learnt from its own apply."""

    kind_served: bool
    """The API server serves networking.istio.io/v1 Gateway (nothing else is read when not)."""
    live: Manifest | None = None
    """The Gateway spec.gateway names, as it stands (as our apply returned it, once ``applied``)."""
    live_owner: str = ""
    """The TenantPlatform owning ``live`` by our labels; "" when it lacks them."""
    service_ref: tuple[str, str] | None = None
    """(name, namespace) of the gateway Service, when spec.gateway.serviceHost names a Service."""
    service: Manifest | None = None
    """That Service; None when it does not exist."""
    applied: bool = False
    """``live`` is what our server-side apply of the desired Gateway returned in this pass."""
    wrote: bool = False
    """That apply changed the Gateway (it was missing or had drifted)."""
    claims: tuple[dnsguard.Claim, ...] = ()
    """Every TenantPlatform's spec.domain (core/domainclaims.py ``claims_of``)."""
    serving: tuple[tuple[str, str], ...] = ()
    """(platform, "namespace/name") of each Gateway of ours, any platform's, whose hosts name the domain."""


@dataclass
class GatewayVerdict(Verdict):
    prune_namespaces: list[str | None] = field(default_factory=list)
    """With ``desired``: where to look for Gateways of ours the spec no longer names."""


def recorded_gateway(platform: TenantPlatform) -> RecordedGateway:
    gw = platform.spec.gateway
    return RecordedGateway(
        name=gw.name,
        namespace=gw.namespace,
        selector=dict(gw.selector),
        service_account_name=gw.service_account_name,
        service_host=gw.service_host,
        mesh_namespace=platform.spec.mesh.namespace,
        management=gw.management,
    )


def prune_namespaces(platform: TenantPlatform) -> list[str | None]:
    """The Gateway's namespace, and the one recorded last time when the spec moved it."""
    namespaces: list[str | None] = [platform.spec.gateway.namespace]
    previous = ((platform.status.get("recorded") or {}).get("gateway") or {}).get("namespace")
    if previous and previous not in namespaces:
        namespaces.append(str(previous))
    return namespaces


def service_problem(host: str, service_ref: tuple[str, str] | None, service: Manifest | None) -> str:
    """A sentence when the gateway Service is missing or lacks port 443, else ""."""
    if service_ref is None:
        return ""
    name, namespace = service_ref
    if service is None:
        return (
            f"The gateway Service {namespace}/{name} (spec.gateway.serviceHost {host}) does not exist; install "
            "the ingress gateway or fix spec.gateway.serviceHost."
        )
    ports = [p.get("port") for p in (service.get("spec") or {}).get("ports") or []]
    if 443 not in ports:
        return f"The gateway Service {namespace}/{name} exposes no port 443 (ports: {ports}); HTTPS cannot reach it."
    return ""


def not_applied(errors: list[str]) -> Condition:
    """GatewayReady when the server-side apply of the desired Gateway failed."""
    return conditions.false(TYPE, Common.API_ERROR, "Could not apply: " + "; ".join(errors) + ".")


def adoptable(live: Manifest, live_owner: str, platform: TenantPlatform) -> bool:
    """A Gateway without anyone's labels that an admin opted in for ``platform`` (docs/migration.md).

    Another platform's Gateway is never adopted, whatever its annotations say.
    """
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    return not live_owner and annotations.get(constants.ANNOTATION_ADOPTABLE) == platform.name


def serves_domain(live: Manifest, domain: str) -> bool:
    """Whether one of ``live``'s hosts names ``domain`` (its DNS name, whatever the namespace part)."""
    wanted = domain.lower().rstrip(".")
    return any(
        str(host).rpartition("/")[2].strip().lower().rstrip(".") == wanted
        for server in (live.get("spec") or {}).get("servers") or []
        if isinstance(server, dict)
        for host in server.get("hosts") or []
    )


def domain_held(platform: TenantPlatform, facts: GatewayFacts) -> Condition | None:
    """GatewayReady False when another platform holds spec.domain (core/domainclaims.py), else None."""
    domain = platform.spec.domain
    gateways: dict[str, list[str]] = {}
    for owner, where in facts.serving:
        gateways.setdefault(owner, []).append(where)
    held = dnsguard.holders(platform.name, domain, claims=facts.claims, in_place=gateways)
    advice = (
        "two platforms cannot share a domain, so nothing was written (no Gateway, no host for it). Give this "
        "platform its own spec.domain."
    )
    if held.in_place:
        serving = "; ".join(f"TenantPlatform {p} with Gateway {', '.join(sorted(gateways[p]))}" for p in held.in_place)
        return conditions.false(
            TYPE, Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM, f"{domain} is already served by {serving}; {advice}"
        )
    if held.earlier:
        return conditions.false(
            TYPE,
            Reason.DOMAIN_HELD_BY_ANOTHER_PLATFORM,
            f"TenantPlatform {', '.join(held.earlier)} was created earlier with spec.domain {domain}; {advice}",
        )
    return None


def evaluate(platform: TenantPlatform, facts: GatewayFacts, *, dry_run: bool = False) -> GatewayVerdict:
    """GatewayReady, the Gateway to apply and the recorded coordinates, from what was read.

    Managed, outside a dry run and before the apply (``facts.applied`` False), ``desired`` holds
    the rendered Gateway and the condition judges it as rendered. The step applies it and calls
    ``evaluate`` again with what the API server returned (fields another field manager set
    survive a server-side apply), which then wants nothing more written.
    """
    gw = platform.spec.gateway
    where = f"{gw.namespace}/{gw.name}"
    recorded = {"gateway": recorded_gateway(platform).dump()}
    events = [("Normal", reasons.Event.GATEWAY_APPLIED, f"Applied Gateway {where}.")] if facts.wrote else []

    def verdict(cond: Condition, desired: list[Manifest] | None = None) -> GatewayVerdict:
        desired = desired or []
        return GatewayVerdict(
            conditions=[cond],
            desired=desired,
            recorded=recorded,
            events=events,
            prune_namespaces=prune_namespaces(platform) if desired else [],
        )

    if not facts.kind_served:
        return verdict(
            conditions.false(
                TYPE,
                Reason.GATEWAY_KIND_NOT_SERVED,
                f"The API server does not serve {render_gateway.KIND} ({render_gateway.API_VERSION}); install "
                "Istio's CRDs.",
            )
        )
    held = domain_held(platform, facts)
    if held is not None:
        return verdict(held)
    managed = gw.management == "Managed"
    live = facts.live
    desired: list[Manifest] = []
    if managed:
        if live is not None and facts.live_owner != platform.name and not adoptable(live, facts.live_owner, platform):
            owned = ownership.belongs_to(f"Gateway {where} already exists and", facts.live_owner)
            hint = (
                ""
                if facts.live_owner
                else f" To hand a Gateway prepared by hand over to this platform, annotate it "
                f"{constants.ANNOTATION_ADOPTABLE}={platform.name} (docs/migration.md)."
            )
            return verdict(
                conditions.false(
                    TYPE,
                    Common.CONFLICT,
                    f"{owned}; it was left untouched. Delete or rename it, choose another spec.gateway.name, or "
                    f"set spec.gateway.management to External to use it as is.{hint}",
                )
            )
        if dry_run and live is None:
            return verdict(conditions.false(TYPE, Reason.WOULD_APPLY, f"The operator would create Gateway {where}."))
        if not dry_run and not facts.applied:
            desired = render_gateway.render(platform)
            live = desired[0]
    report = verify_gateway(
        live,
        name=gw.name,
        namespace=gw.namespace,
        domain=platform.spec.domain,
        selector=gw.selector,
        tenant_namespace=platform.spec.namespace,
        credential_name=platform.spec.edge_certificate.secret_name,
    )
    if report.problems:
        return verdict(conditions.false(TYPE, report.problems[0][0], report.message + "."), desired)
    problem = service_problem(gw.service_host, facts.service_ref, facts.service)
    if problem:
        return verdict(conditions.false(TYPE, Reason.GATEWAY_SERVICE_NOT_FOUND, problem), desired)
    if managed:
        message = (
            f"Gateway {where} serves {platform.spec.domain} on HTTPS 443 with credential "
            f"{platform.spec.edge_certificate.secret_name} and redirects HTTP 80"
        )
        if dry_run:
            message += " (dry run: any drift would be repaired on a real reconcile)"
        reason = Reason.PROGRAMMED
    else:
        message = (
            f"External Gateway {where} selects the gateway workload and serves {platform.spec.domain} on "
            "HTTPS 443 with a credential"
        )
        reason = Reason.VERIFIED
    message += "; note: " + "; ".join(report.notes) + "." if report.notes else "."
    return verdict(conditions.true(TYPE, reason, message), desired)
