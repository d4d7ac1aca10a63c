"""PURE decisions for GatewayReady: verify an Istio Gateway, and the step's whole verdict.

``verify_gateway(live, ...)`` returns the problems (reason, sentence) with a Gateway that should
serve the platform: it must select the gateway workload (``spec.selector`` equal to ours), and
have an HTTPS server on port 443 whose ``hosts`` admit the domain for VirtualServices in the
tenant namespace, no host (on any port) that admits the domain for VirtualServices from every
namespace (a bare host or ``*/``: any namespace could bind routes for the platform's domain),
and TLS from a ``credentialName`` (the edge certificate Secret). A missing port-80 server is
only a note. Empty problems means the Gateway is fine. A Gateway the operator only verifies
(External) may have hosts open to every namespace, as the checklist writes them (plain hosts):
that is a hardening warning (a Warning event GatewayHostsOpen when it first appears, and a
"Hardening recommended" sentence in the True condition), not a failure.

``evaluate(platform, facts, dry_run=...)`` turns what the gateway step read (``GatewayFacts``)
into its ``GatewayVerdict``: the Gateway to apply (Managed), the GatewayReady condition, the
event and the recorded coordinates. Checks, in the order a reason is chosen:

    GatewayKindNotServed, DomainHeldByAnotherPlatform, Conflict (Managed), WouldApply (dry run),
    GatewayNotFound,
    SelectorMismatch, NoHTTPSServer, HostsMissDomain, DomainOpenToAllNamespaces (Managed), NoCredential,
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

import functools
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.api.reasons import Gateway as Reason
from tenant_platform.api.status.gateway import RecordedGateway
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.gateway import manifests
from tenant_platform.core import conditions, domainclaims, ownership
from tenant_platform.core.checks import Chain, Check
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Event, Manifest, Verdict


@dataclass
class GatewayReport:
    problems: list[tuple[Reason, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    hardening: list[str] = field(default_factory=list)
    """What a Gateway the operator only verifies could tighten (hosts open to every namespace): a
    warning, not a problem (``verify_gateway(..., open_hosts_warn=True)``)."""

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


# -- verifying a Gateway: a chain of named checks ----------------------------------------------------

Problem = tuple[Reason, str]


@dataclass(frozen=True)
class GatewayUnderCheck:
    """The subject of ``VERIFY_CHECKS``: a Gateway (None: absent) and what it must serve.

    A check that needs what an earlier one found missing passes (returns None): after
    GatewayNotFound, NoHTTPSServer or HostsMissDomain nothing later is reported."""

    live: Manifest | None
    name: str
    namespace: str
    domain: str
    selector: dict[str, str]
    tenant_namespace: str
    credential_name: str

    @property
    def where(self) -> str:
        return f"Gateway {self.namespace}/{self.name}"

    @functools.cached_property
    def servers(self) -> list[dict[str, Any]]:
        spec = (self.live or {}).get("spec") or {}
        return [s for s in spec.get("servers") or [] if isinstance(s, dict)]

    @functools.cached_property
    def https(self) -> list[dict[str, Any]]:
        return [s for s in self.servers if _port(s) == (443, "HTTPS")]

    def admits(self, host: object) -> tuple[bool, str]:
        return host_matches(
            str(host), domain=self.domain, tenant_namespace=self.tenant_namespace, gateway_namespace=self.namespace
        )

    @functools.cached_property
    def serving(self) -> list[dict[str, Any]]:
        """The HTTPS 443 servers one of whose hosts admits the domain from the tenant namespace."""
        return [s for s in self.https if any(self.admits(h)[0] for h in s.get("hosts") or [])]

    @functools.cached_property
    def namespace_notes(self) -> list[str]:
        """Why hosts that match the domain do not admit the tenant namespace (up to the first host
        of each HTTPS server that admits it)."""
        notes: list[str] = []
        for server in self.https:
            for host in server.get("hosts") or []:
                ok, why = self.admits(host)
                if ok:
                    break
                if why:
                    notes.append(why)
        return notes

    @property
    def credentials(self) -> list[str]:
        return [str((s.get("tls") or {}).get("credentialName") or "") for s in self.serving]


def gateway_missing(g: GatewayUnderCheck) -> Problem | None:
    if g.live is not None:
        return None
    return (
        Reason.GATEWAY_NOT_FOUND,
        f"{g.where} does not exist; create it, or set spec.gateway.management to Managed so the operator does",
    )


def selector_mismatch(g: GatewayUnderCheck) -> Problem | None:
    if g.live is None:
        return None
    spec = g.live.get("spec") or {}
    live_selector = {str(k): str(v) for k, v in (spec.get("selector") or {}).items()}
    if live_selector == dict(g.selector):
        return None
    return (
        Reason.SELECTOR_MISMATCH,
        f"{g.where} selects {_labels(live_selector)} but spec.gateway.selector is {_labels(g.selector)}; "
        "the Gateway must select the gateway workload",
    )


def no_https_server(g: GatewayUnderCheck) -> Problem | None:
    if g.live is None or g.https:
        return None
    return (Reason.NO_HTTPS_SERVER, f"{g.where} has no server with port number 443 and protocol HTTPS")


def hosts_miss_domain(g: GatewayUnderCheck) -> Problem | None:
    if g.live is None or not g.https or g.serving:
        return None
    hosts = sorted({str(h) for s in g.https for h in s.get("hosts") or []})
    detail = f" ({'; '.join(g.namespace_notes)})" if g.namespace_notes else ""
    return (
        Reason.HOSTS_MISS_DOMAIN,
        f"{g.where}'s HTTPS 443 hosts {hosts or '[]'} do not include {g.domain}{detail}; routes for the domain "
        "would silently never be programmed",
    )


def domain_open_to_all(g: GatewayUnderCheck) -> Problem | None:
    if not g.serving:
        return None
    open_hosts = sorted(
        {str(h) for s in g.servers for h in s.get("hosts") or [] if open_to_all(str(h), domain=g.domain)}
    )
    if not open_hosts:
        return None
    return (
        Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES,
        f"{g.where}'s hosts {open_hosts} admit {g.domain} for VirtualServices from every namespace, so any "
        f"namespace could route the platform's domain; list it as {g.tenant_namespace}/{g.domain} instead",
    )


def no_credential(g: GatewayUnderCheck) -> Problem | None:
    if not g.serving or any(g.credentials):
        return None
    modes = sorted({str((s.get("tls") or {}).get("mode") or "none") for s in g.serving})
    return (
        Reason.NO_CREDENTIAL,
        f"{g.where}'s HTTPS 443 server for {g.domain} has no tls.credentialName (tls mode {', '.join(modes)}); "
        f"set it to the edge certificate Secret {g.credential_name}",
    )


def credential_mismatch(g: GatewayUnderCheck) -> Problem | None:
    credentials = g.credentials
    if not g.serving or not any(credentials) or g.credential_name in credentials:
        return None
    return (
        Reason.CREDENTIAL_MISMATCH,
        f"{g.where} serves {g.domain} with credentialName {', '.join(c for c in credentials if c)} but "
        f"spec.edgeCertificate.secretName is {g.credential_name}; make them name the same Secret",
    )


VERIFY_CHECKS = Chain[GatewayUnderCheck, Problem](
    Check("Gateway exists", gateway_missing),
    Check("selects the gateway workload", selector_mismatch),
    Check("has an HTTPS 443 server", no_https_server),
    Check("HTTPS hosts admit the domain", hosts_miss_domain),
    Check("domain closed to other namespaces", domain_open_to_all),
    Check("TLS from a credential", no_credential),
    Check("credential is the edge certificate", credential_mismatch),
)
"""Every finding is a problem, in this order (``GatewayReport.problems``); the first names the reason."""


def http_redirect_note(g: GatewayUnderCheck) -> str:
    """A note (not a problem) when no port-80 server admits the domain; "" when one does."""
    http = [s for s in g.servers if _port(s)[0] == 80 and any(g.admits(h)[0] for h in s.get("hosts") or [])]
    if http:
        return ""
    return f"{g.where} serves no port 80 for {g.domain}; plain-HTTP visitors get no redirect"


def verify_gateway(
    live: dict[str, Any] | None,
    *,
    name: str,
    namespace: str,
    domain: str,
    selector: dict[str, str],
    tenant_namespace: str,
    credential_name: str,
    open_hosts_warn: bool = False,
) -> GatewayReport:
    """The problems and notes of ``live``. ``open_hosts_warn`` (a Gateway the operator only
    verifies, as the checklist writes it with plain hosts): DomainOpenToAllNamespaces is a
    hardening warning (``GatewayReport.hardening``), not a problem."""
    subject = GatewayUnderCheck(live, name, namespace, domain, dict(selector), tenant_namespace, credential_name)
    report = GatewayReport(problems=[found.value for found in VERIFY_CHECKS.every(subject)])
    if open_hosts_warn:
        report.hardening = [text for reason, text in report.problems if reason == Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES]
        report.problems = [p for p in report.problems if p[0] != Reason.DOMAIN_OPEN_TO_ALL_NAMESPACES]
    if subject.serving:  # the Gateway got as far as serving the domain: is HTTP redirected too?
        note = http_redirect_note(subject)
        if note:
            report.notes.append(note)
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
    claims: tuple[domainclaims.Claim, ...] = ()
    """Every TenantPlatform's spec.domain (core/domainclaims.py ``claims_of``)."""
    serving: tuple[tuple[str, str], ...] = ()
    """(platform, "namespace/name") of each Gateway of ours, any platform's, whose hosts name the domain."""


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
    return ownership.adoptable(live, live_owner, platform.name)


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
    held = domainclaims.holders(platform.name, domain, claims=facts.claims, in_place=gateways)
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


# -- the step's verdict: a chain of named checks -----------------------------------------------------


@dataclass(frozen=True)
class GatewayDecision:
    """The subject of ``EVALUATE_CHECKS``: the spec, what was read, and whether this is a dry run."""

    platform: TenantPlatform
    facts: GatewayFacts
    dry_run: bool = False

    @property
    def managed(self) -> bool:
        return self.platform.spec.gateway.management == "Managed"

    @property
    def where(self) -> str:
        gw = self.platform.spec.gateway
        return f"{gw.namespace}/{gw.name}"

    @functools.cached_property
    def rendered(self) -> list[Manifest]:
        """The Gateway to apply: Managed, outside a dry run, before the apply; else nothing."""
        if self.managed and not self.dry_run and not self.facts.applied:
            return manifests.render(self.platform)
        return []

    @functools.cached_property
    def report(self) -> GatewayReport:
        """``verify_gateway`` of the Gateway as it will stand: the rendered one when it is about to
        be applied, else the live one."""
        gw = self.platform.spec.gateway
        return verify_gateway(
            self.rendered[0] if self.rendered else self.facts.live,
            name=gw.name,
            namespace=gw.namespace,
            domain=self.platform.spec.domain,
            selector=gw.selector,
            tenant_namespace=self.platform.spec.namespace,
            credential_name=self.platform.spec.edge_certificate.secret_name,
            open_hosts_warn=not self.managed,
        )


def kind_not_served(d: GatewayDecision) -> Condition | None:
    if d.facts.kind_served:
        return None
    return conditions.false(
        TYPE,
        Reason.GATEWAY_KIND_NOT_SERVED,
        f"The API server does not serve {manifests.KIND} ({manifests.API_VERSION}); install Istio's CRDs.",
    )


def held_elsewhere(d: GatewayDecision) -> Condition | None:
    return domain_held(d.platform, d.facts)


def not_ours(d: GatewayDecision) -> Condition | None:
    """Managed: a Gateway of that name that is neither ours nor opted in for us is never overwritten."""
    platform, live, owner = d.platform, d.facts.live, d.facts.live_owner
    if not d.managed or live is None or owner == platform.name or adoptable(live, owner, platform):
        return None
    owned = ownership.belongs_to(f"Gateway {d.where} already exists and", owner)
    hint = (
        ""
        if owner
        else f" To hand a Gateway prepared by hand over to this platform, annotate it "
        f"{constants.ANNOTATION_ADOPTABLE}={platform.name} (docs/migration.md)."
    )
    return conditions.false(
        TYPE,
        Common.CONFLICT,
        f"{owned}; it was left untouched. Delete or rename it, choose another spec.gateway.name, or "
        f"set spec.gateway.management to External to use it as is.{hint}",
    )


def would_apply(d: GatewayDecision) -> Condition | None:
    if not (d.managed and d.dry_run and d.facts.live is None):
        return None
    return conditions.false(TYPE, Reason.WOULD_APPLY, f"The operator would create Gateway {d.where}.")


def gateway_problems(d: GatewayDecision) -> Condition | None:
    report = d.report
    if not report.problems:
        return None
    return conditions.false(TYPE, report.problems[0][0], report.message + ".")


def service_missing(d: GatewayDecision) -> Condition | None:
    gw = d.platform.spec.gateway
    problem = service_problem(gw.service_host, d.facts.service_ref, d.facts.service)
    if not problem:
        return None
    return conditions.false(TYPE, Reason.GATEWAY_SERVICE_NOT_FOUND, problem)


EVALUATE_CHECKS = Chain[GatewayDecision, Condition](
    Check("Gateway kind served", kind_not_served),
    Check("domain not held by another platform", held_elsewhere),
    Check("Gateway ours or opted in (Managed)", not_ours),
    Check("Gateway exists (Managed, dry run)", would_apply),
    Check("Gateway serves the domain", gateway_problems),
    Check("gateway Service exposes 443", service_missing),
)
"""The first finding is GatewayReady; none: Programmed (Managed) or Verified (External)."""

WRITES_NOTHING = frozenset(EVALUATE_CHECKS.names[:4])
"""A finding of these checks leaves the Gateway as it is (nothing is applied)."""


def ready(d: GatewayDecision) -> Condition:
    """GatewayReady True: every check passed."""
    spec = d.platform.spec
    notes = d.report.notes
    if d.managed:
        message = (
            f"Gateway {d.where} serves {spec.domain} on HTTPS 443 with credential "
            f"{spec.edge_certificate.secret_name} and redirects HTTP 80"
        )
        if d.dry_run:
            message += " (dry run: any drift would be repaired on a real reconcile)"
        reason = Reason.PROGRAMMED
    else:
        message = (
            f"External Gateway {d.where} selects the gateway workload and serves {spec.domain} on "
            "HTTPS 443 with a credential"
        )
        reason = Reason.VERIFIED
    message += "; note: " + "; ".join(notes) + "." if notes else "."
    if d.report.hardening:
        message += " " + hardening_note(d)
    return conditions.true(TYPE, reason, message)


HARDENING = "Hardening recommended"


def hardening_note(d: GatewayDecision) -> str:
    """The sentence naming the hardening of a verified Gateway with hosts open to every namespace."""
    return f"{HARDENING}: " + "; ".join(d.report.hardening) + "."


def hardening_event(d: GatewayDecision, previous: str) -> list[Event]:
    """A Warning event when the hardening note is new (the previous GatewayReady message lacks it),
    so that a Gateway left as it is does not post one on every pass."""
    if not d.report.hardening or d.report.problems:
        return []
    note = hardening_note(d)
    if note in previous:
        return []
    return [("Warning", reasons.Event.GATEWAY_HOSTS_OPEN, f"Gateway {d.where}: {note}")]


def previous_message(platform: TenantPlatform) -> str:
    """The GatewayReady message last written to status ("" when none)."""
    for cond in platform.status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == TYPE:
            return str(cond.get("message") or "")
    return ""


def evaluate(platform: TenantPlatform, facts: GatewayFacts, *, dry_run: bool = False) -> Verdict:
    """GatewayReady, the Gateway to apply and the recorded coordinates, from what was read.

    Managed, outside a dry run and before the apply (``facts.applied`` False), ``desired`` holds
    the rendered Gateway and the condition judges it as rendered. The step applies it and calls
    ``evaluate`` again with what the API server returned (fields another field manager set
    survive a server-side apply), which then wants nothing more written.
    """
    decision = GatewayDecision(platform, facts, dry_run)
    found = EVALUATE_CHECKS.first(decision)
    desired = [] if found is not None and found.check in WRITES_NOTHING else decision.rendered
    events: list[Event] = (
        [("Normal", reasons.Event.GATEWAY_APPLIED, f"Applied Gateway {decision.where}.")] if facts.wrote else []
    )
    if found is None:
        events += hardening_event(decision, previous_message(platform))
    return Verdict(
        conditions=[found.value if found is not None else ready(decision)],
        desired=desired,
        recorded=Recorded(gateway=recorded_gateway(platform)),
        events=events,
    )


def prunes(platform: TenantPlatform, verdict: Verdict) -> list[str | None]:
    """Where the step looks for Gateways of ours the spec no longer names: only when it applies one."""
    return prune_namespaces(platform) if verdict.desired else []
