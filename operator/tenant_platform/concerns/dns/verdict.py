"""DNSReady, decided (pure): from the facts the DNS step gathered and the spec, what to write and
what to report.

``plan(platform, facts, now=..., target=..., dry_run=...)`` returns a ``DnsPlan``: the ``Verdict``
(what ``evaluate`` returns: the DNSReady condition, reason from ``reasons.DNS``, and
``status.recorded.dns``, a ``DnsRecord``) and the writes to make, in order:

- ``CorefileWrite``: put our marked block in the main Corefile right, or remove it. It is an
  edit, not a text: the step's read-modify-write applies it again to whatever a retry reads.
- ``OverrideWrite``: set or remove our key in the ``coredns-custom`` import ConfigMap.

``management: CoreDNS``: the chain ``COREDNS_CHECKS`` (core/checks.py) on a ``CoreDNSSubject``
(the spec and facts, and what several checks need computed once: the distribution, the wanted
Corefile, the live rewrite of the domain, a hand-made one, the placement); the first finding is
the plan (the order of reasons is the chain's order, in code); none finds: ``configured``.

The distribution (concerns/dns/coredns.py) decides the mode. ``corefile`` upserts our block
(formats/corefile.py) and drops an import key we wrote before; when the admin opted the CoreDNS
ConfigMap in (``tenancy.dev/adoptable-by`` lists the platform: ``takes_over``), the same single
write also removes a hand-made rewrite of the domain (``corefile.take_over``), else the message
names that line and the annotation; ``import`` writes our key and drops a block we wrote before;
``managed`` writes nothing and says what to change.

Wherever CoreDNS reads it, a rewrite of the domain the operator did not write counts: in
``managed`` (k0s, RKE2's chart ConfigMap, the addon manager) a live Corefile that rewrites the
domain to the gateway, however it got there, is RewriteFound (True; ``_live_in``); in
``corefile`` and ``import`` a hand-made line or an admin's ``*.override`` key is never doubled
(``_hand_made``): to the gateway RewriteFound, and a rewrite of ours beside it is removed; otherwise
ConflictingRewrite, nothing written. Kamaji's CoreDNS add-on writes its Corefile back
(clastix/kamaji#742): ManagedByDistribution always, no write (no fight with Kamaji).
Refused without writing: no CoreDNS ConfigMap (CoreDNSNotFound), a Corefile we cannot edit
safely (CorefileUnsupported). A dry run
writes nothing and reports WouldConfigure when a write is due. Otherwise the condition is the
pods' pickup of the change (``pickup``): in ``corefile`` mode, of the last change of our own
block (``DnsFacts.own_block_changed_at``, when the step noted it), not of another platform's.
When the verdict writes the object whose change the pods must load, it assumes the write lands
at ``now`` and sets ``recheck``: the step's ``apply`` decides
again, with this same function, on the objects the API server returned (nothing read again), so
that the server's time of the change counts.

In every mode, first (``guard``, core/domainclaims.py): a reserved domain (ReservedDomain: its
earlier rewrite of ours is removed) or one another platform holds (DomainHeldByAnotherPlatform:
nothing written) is refused. The step runs ``guard`` again on every retry of its Corefile edit.

``External``: verify only, from the resolver's answer gathered in the operator's pod and the
gateway Service's addresses (NotVerifiable outside the cluster). ``Disabled``: True. Both remove
a rewrite we wrote earlier; when our marker in the Corefile is damaged they refuse to guess
(CorefileUnsupported) and say what to remove by hand.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import DNS, Common
from tenant_platform.api.status.dns import DnsRecord, Mode
from tenant_platform.api.status.recorded import Recorded
from tenant_platform.concerns.dns.coredns import (
    CoreDNSTarget,
    Distribution,
    changed_at,
    corefile_text,
    detect_distribution,
    managed_message,
    pickup,
)
from tenant_platform.core import conditions, domainclaims, ownership
from tenant_platform.core.checks import Chain, Check
from tenant_platform.core.conditions import Condition
from tenant_platform.core.gatewayservice import service_addresses
from tenant_platform.core.verdict import Event, Verdict
from tenant_platform.formats import corefile

Obj = dict[str, Any]
TYPE = constants.DNS_READY
MAX_ATTEMPTS = 5
"""Read-modify-write attempts of the Corefile per pass before giving up (kept_changing)."""
RETRY_AFTER = 5.0


@dataclass(frozen=True)
class DnsFacts:
    """What the DNS step read. Objects it did not read are None (or empty)."""

    corefile_cm: Obj | None = None
    custom_cm: Obj | None = None
    deployment: Obj | None = None
    node: Obj | None = None
    """One Node, for the distribution's marks."""
    rke2_cm: Obj | None = None
    """Read only when the CoreDNS ConfigMap is absent."""
    pods: list[Obj] = field(default_factory=list)
    """The CoreDNS pods (CoreDNS management, with a CoreDNS ConfigMap)."""
    in_cluster: bool = False
    gateway_service: Obj | None = None
    """External, in cluster: the Service spec.gateway.serviceHost names."""
    resolved: list[str] = field(default_factory=list)
    """External, in cluster: what the domain resolves to from the operator's pod."""
    resolve_error: str | None = None
    """External, in cluster: why the domain did not resolve."""
    hostname_addresses: tuple[str, ...] = ()
    """External, in cluster: what the gateway Service's load-balancer host names resolve to."""
    claims: tuple[domainclaims.Claim, ...] = ()
    """Every TenantPlatform's spec.domain (ours included), for the guard."""
    own_block_noted: bool = False
    """The step knows when our block in the main Corefile last changed (``own_block_changed_at``;
    concerns/dns/combiner.py ``BlockLedger``). False: the time of the operator's last write of the
    ConfigMap (managedFields) counts, whichever block it changed."""
    own_block_changed_at: datetime | None = None
    """When our block last changed (server time; None: unknown)."""


@dataclass(frozen=True)
class CorefileWrite:
    """Our block in the main Corefile: put right (``rewrite`` = (domain, service host)) or removed."""

    platform: str
    rewrite: tuple[str, str] | None
    event: Event | None = None
    """Posted once the write succeeded."""
    take_over: bool = False
    """Also remove a hand-made rewrite of the domain, in the same write (``corefile.take_over``)."""

    def edit(self, text: str) -> str:
        """``text`` with the edit made (itself when nothing changes)."""
        if self.rewrite is None:
            return corefile.remove_block(text, self.platform)
        if self.take_over:
            return corefile.take_over(text, self.platform, *self.rewrite)
        return corefile.upsert_block(text, self.platform, *self.rewrite)


@dataclass(frozen=True)
class OverrideWrite:
    """Our key in the ``coredns-custom`` ConfigMap: set to ``value``, or removed (None)."""

    key: str
    value: str | None
    event: Event | None = None


Write = CorefileWrite | OverrideWrite


@dataclass(frozen=True)
class DnsPlan:
    """The decision (``verdict``) and the writes it implies, which the step carries out."""

    verdict: Verdict
    writes: list[Write] = field(default_factory=list)
    """In order; none in a dry run."""
    recheck: bool = False
    """The condition assumed a write at ``now``: decide again on what the writes returned."""


def _plan(
    conds: list[Condition],
    *,
    recorded: DnsRecord | None = None,
    progressing: bool = False,
    requeue_after: float | None = None,
    writes: list[Write] | None = None,
    recheck: bool = False,
) -> DnsPlan:
    verdict = Verdict(
        conditions=conds,
        recorded=Recorded() if recorded is None else Recorded(dns=recorded),
        progressing=progressing,
        requeue_after=requeue_after,
    )
    return DnsPlan(verdict, writes=writes or [], recheck=recheck)


def evaluate(
    platform: TenantPlatform,
    facts: DnsFacts,
    *,
    now: datetime,
    target: CoreDNSTarget | None = None,
    dry_run: bool = False,
) -> Verdict:
    """The DNSReady verdict for ``platform`` from ``facts`` (``plan``'s verdict)."""
    return plan(platform, facts, now=now, target=target, dry_run=dry_run).verdict


def plan(
    platform: TenantPlatform,
    facts: DnsFacts,
    *,
    now: datetime,
    target: CoreDNSTarget | None = None,
    dry_run: bool = False,
) -> DnsPlan:
    """The DNSReady verdict for ``platform`` from ``facts``, and the writes it implies."""
    target = target or CoreDNSTarget()
    refused = guard(platform, facts, dry_run=dry_run)
    if refused is not None:
        return refused
    if platform.spec.dns.management == "CoreDNS":
        return _coredns(platform, facts, now=now, target=target, dry_run=dry_run)
    return _unmanaged(platform, facts, target=target, dry_run=dry_run)


def guard(platform: TenantPlatform, facts: DnsFacts, *, dry_run: bool = False) -> DnsPlan | None:
    """The refusal of a reserved or held domain (core/domainclaims.py), in every mode; None when allowed."""
    found = domainclaims.refusal(
        platform,
        corefile_text=corefile_text(facts.corefile_cm),
        custom_data=dict((facts.custom_cm or {}).get("data") or {}),
        claims=facts.claims,
    )
    if found is None:
        return None
    writes: list[Write] = []
    if found.remove_ours and not dry_run:
        try:
            writes = removal_writes(platform.name, facts.corefile_cm, facts.custom_cm)
        except corefile.CorefileError:
            writes = []
    note = " Removed the rewrite the operator had written for it." if writes else ""
    return _plan(
        [conditions.false(TYPE, found.reason, found.message + note)],
        recorded=DnsRecord(management=platform.spec.dns.management),
        writes=writes,
    )


def removal_writes(platform: str, corefile_cm: Obj | None, custom_cm: Obj | None) -> list[Write]:
    """The writes that remove our Corefile block and our import key, where present."""
    writes: list[Write] = []
    if corefile_cm is not None and corefile.block_for(corefile_text(corefile_cm), platform) is not None:
        writes.append(CorefileWrite(platform, None))
    key = corefile.override_key(platform)
    if custom_cm is not None and key in (custom_cm.get("data") or {}):
        writes.append(OverrideWrite(key, None))
    return writes


def kept_changing(target: CoreDNSTarget) -> Verdict:
    """The Corefile changed under every one of our MAX_ATTEMPTS read-modify-writes: retry soon."""
    message = (
        f"The Corefile in ConfigMap {target.namespace}/{target.config_map} changed under the operator {MAX_ATTEMPTS} "
        "times in a row; it will retry shortly."
    )
    return Verdict([conditions.false(TYPE, Common.CONFLICT, message)], progressing=True, requeue_after=RETRY_AFTER)


# -- External and Disabled --------------------------------------------------------------------------


def _unmanaged(platform: TenantPlatform, facts: DnsFacts, *, target: CoreDNSTarget, dry_run: bool) -> DnsPlan:
    management = platform.spec.dns.management
    try:
        writes = [] if dry_run else removal_writes(platform.name, facts.corefile_cm, facts.custom_cm)
    except corefile.CorefileError as exc:
        # Our marker is damaged: never guess where our block ends; a person removes it.
        t = target
        return _refused(
            DnsRecord(management=management),
            DNS.COREFILE_UNSUPPORTED,
            f"spec.dns.management is {management}, so the operator would remove the rewrite it wrote earlier, but "
            f"the Corefile in ConfigMap {t.namespace}/{t.config_map} cannot be edited safely: {exc}. Remove the "
            f"block between the tenant-platform markers for {platform.name} by hand.",
        )
    note = " Removed the CoreDNS rewrite the operator had written." if writes else ""
    if management == "Disabled":
        cond = conditions.true(
            TYPE,
            Common.DISABLED,
            "spec.dns.management is Disabled: the operator neither configures nor checks DNS." + note,
        )
    else:
        verified = _verify_external(platform, facts)
        cond = replace(verified, message=verified.message + note)
    return _plan([cond], recorded=DnsRecord(management=management), writes=writes)


def _verify_external(platform: TenantPlatform, facts: DnsFacts) -> Condition:
    spec = platform.spec
    if not facts.in_cluster:
        return conditions.unknown(
            TYPE,
            DNS.NOT_VERIFIABLE,
            f"spec.dns.management is External and the operator runs outside the cluster, so it cannot check "
            f"what pods resolve {spec.domain} to; run it in-cluster, or check from a pod that "
            f"`getent hosts {spec.domain}` returns the gateway Service's address.",
        )
    if facts.resolve_error is not None:
        return conditions.false(
            TYPE,
            DNS.DOES_NOT_RESOLVE,
            f"{spec.domain} does not resolve from the operator's pod ({facts.resolve_error}); add a DNS record for "
            "it pointing at the gateway, or set spec.dns.management to CoreDNS.",
        )
    expected = service_addresses(facts.gateway_service) | set(facts.hostname_addresses)
    addresses = facts.resolved
    if expected & set(addresses):
        return conditions.true(
            TYPE,
            DNS.RESOLVES,
            f"{spec.domain} resolves from the operator's pod to {', '.join(addresses)}, an address of the gateway "
            f"Service {spec.gateway.service_host}.",
        )
    return conditions.false(
        TYPE,
        DNS.RESOLVES_ELSEWHERE,
        f"{spec.domain} resolves from the operator's pod to {', '.join(addresses) or 'nothing'}, not to the "
        f"gateway Service {spec.gateway.service_host} ({', '.join(sorted(expected)) or 'no address found'}); "
        "fix the DNS record, or set spec.dns.management to CoreDNS.",
    )


# -- CoreDNS: a chain of named checks ---------------------------------------------------------------


@dataclass(frozen=True)
class CoreDNSSubject:
    """The subject of ``COREDNS_CHECKS``: the spec, what was read, and what several checks need,
    computed once (the distribution, the wanted Corefile, the live rewrite of the domain, a
    hand-made one, where our rewrite goes)."""

    platform: TenantPlatform
    facts: DnsFacts
    now: datetime
    target: CoreDNSTarget = field(default_factory=CoreDNSTarget)
    dry_run: bool = False

    @functools.cached_property
    def dist(self) -> Distribution:
        facts = self.facts
        return detect_distribution(
            corefile_cm=facts.corefile_cm,
            custom_cm=facts.custom_cm,
            deployment=facts.deployment,
            node=facts.node,
            rke2_cm=facts.rke2_cm,
            target=self.target,
        )

    @property
    def present(self) -> bool:
        """The CoreDNS ConfigMap exists."""
        return self.facts.corefile_cm is not None

    @property
    def managed(self) -> bool:
        """The distribution manages CoreDNS's configuration: the operator writes nothing."""
        return self.dist.mode == Mode.MANAGED

    @property
    def where(self) -> str:
        """The CoreDNS ConfigMap, for a message."""
        return f"ConfigMap {self.target.namespace}/{self.target.config_map}"

    @functools.cached_property
    def wanted(self) -> str | corefile.CorefileError:
        """The Corefile with our block put right (a hand-made rewrite replaced in the same write when
        opted in: ``takes_over``), or why it cannot be edited safely."""
        spec = self.platform.spec
        edit = CorefileWrite(
            self.platform.name,
            (spec.domain, spec.gateway.service_host),
            take_over=takes_over(self.platform, self.facts.corefile_cm),
        )
        try:
            return edit.edit(corefile_text(self.facts.corefile_cm))
        except corefile.CorefileError as exc:
            return exc

    @property
    def editable(self) -> bool:
        """The CoreDNS ConfigMap exists and its Corefile can be edited safely."""
        return self.present and isinstance(self.wanted, str)

    @property
    def live_config_map(self) -> str:
        """Where CoreDNS's live Corefile is read: the CoreDNS ConfigMap, else RKE2's chart's."""
        t = self.target
        return f"{t.namespace}/{t.config_map if self.present else t.rke2_config_map}"

    @functools.cached_property
    def live(self) -> Condition | None:
        """What the live Corefile does with the domain (``_live_in``): None, RewriteFound or
        ConflictingRewrite."""
        cm = self.facts.corefile_cm if self.present else self.facts.rke2_cm
        return _live_in(self.platform, corefile_text(cm), f"ConfigMap {self.live_config_map}")

    @property
    def live_to_gateway(self) -> bool:
        """The live Corefile rewrites the domain, and only to the gateway (RewriteFound)."""
        return self.live is not None and self.live.status == "True"

    def managed_message(self, patched_corefile: str) -> str:
        """What to change in the distribution's own configuration (coredns.py ``managed_message``)."""
        return managed_message(self.dist, patched_corefile=patched_corefile, platform=self.platform, target=self.target)

    @functools.cached_property
    def by_hand(self) -> HandMade | None:
        """A rewrite of the domain someone else put where CoreDNS reads it (modes corefile and
        import; ``_hand_made``)."""
        if self.managed or not self.editable:
            return None
        return _hand_made(self.platform, self.facts, self.dist, self.target)

    @functools.cached_property
    def place(self) -> _Placement:
        """Where our rewrite lives in this mode (corefile or import), and the writes that put it right."""
        placed = _in_imports if self.dist.mode == Mode.IMPORT else _in_corefile
        return placed(self.platform, self.facts, self.dist, self.target)


def rke2_chart_rewrites(s: CoreDNSSubject) -> DnsPlan | None:
    """No CoreDNS ConfigMap, RKE2: its chart's ConfigMap already rewrites the domain to the gateway."""
    if s.present or s.dist.name != "rke2" or s.live is None or not s.live_to_gateway:
        return None
    record = _record(s.dist, evidence=s.dist.evidence, config_map=s.live_config_map)
    return _plan([s.live], recorded=record)


def rke2_chart_manages(s: CoreDNSSubject) -> DnsPlan | None:
    """No CoreDNS ConfigMap, RKE2 without the rewrite: say how to add it through the chart."""
    if s.present or s.dist.name != "rke2" or s.live_to_gateway:
        return None
    message = s.managed_message(patched_corefile="")
    return _refused(_record(s.dist), DNS.MANAGED_BY_DISTRIBUTION, _and_today(s.live, message))


def configmap_missing(s: CoreDNSSubject) -> DnsPlan | None:
    """No CoreDNS ConfigMap (and not RKE2's chart): the cluster DNS is not CoreDNS as we know it."""
    if s.present:
        return None
    t = s.target
    return _refused(
        _record(s.dist),
        DNS.COREDNS_NOT_FOUND,
        f"ConfigMap {t.namespace}/{t.config_map} does not exist, so the cluster DNS is not CoreDNS as "
        "the operator knows it; set spec.dns.management to External and configure DNS yourself.",
    )


def corefile_unsupported(s: CoreDNSSubject) -> DnsPlan | None:
    """A Corefile the operator cannot edit safely (checked in every mode, managed ones too)."""
    if not s.present or not isinstance(s.wanted, corefile.CorefileError):
        return None
    return _refused(
        _record(s.dist),
        DNS.COREFILE_UNSUPPORTED,
        f"The Corefile in {s.where} cannot be edited safely: {s.wanted}. "
        "Fix it, or set spec.dns.management to External and configure DNS yourself.",
    )


def kamaji_writes_back(s: CoreDNSSubject) -> DnsPlan | None:
    """Kamaji's CoreDNS add-on writes its Corefile back (clastix/kamaji#742): a rewrite live now is
    not durable, so ManagedByDistribution always."""
    if not s.present or not isinstance(s.wanted, str) or s.dist.name != "kamaji":
        return None
    message = s.managed_message(patched_corefile=s.wanted)
    if s.live is not None and s.live_to_gateway:
        message = f"{s.live.message} {message} Kamaji will remove it on its next reconcile."
    else:
        message = _and_today(s.live, message)
    return _refused(_record(s.dist, evidence=s.dist.evidence), DNS.MANAGED_BY_DISTRIBUTION, message)


def managed_rewrite_live(s: CoreDNSSubject) -> DnsPlan | None:
    """Managed (k0s, the addon manager, k3s without the import...): the live Corefile already
    rewrites the domain to the gateway, however it got there."""
    if not s.editable or not s.managed or s.dist.name == "kamaji" or s.live is None or not s.live_to_gateway:
        return None
    return _plan([s.live], recorded=_record(s.dist, evidence=s.dist.evidence, config_map=s.live_config_map))


def distribution_manages(s: CoreDNSSubject) -> DnsPlan | None:
    """Managed, no rewrite to the gateway live: say what to change in the distribution's own
    configuration (and what the live Corefile does with the domain today, when it rewrites it)."""
    if not s.present or not isinstance(s.wanted, str) or not s.managed or s.live_to_gateway:
        return None
    message = _and_today(s.live, s.managed_message(patched_corefile=s.wanted))
    return _refused(_record(s.dist, evidence=s.dist.evidence), DNS.MANAGED_BY_DISTRIBUTION, message)


def conflicting_by_hand(s: CoreDNSSubject) -> DnsPlan | None:
    """A rewrite of the domain by hand that is not one line to the gateway in the DNS server block:
    ConflictingRewrite, nothing written (never a second rewrite beside it)."""
    hand = s.by_hand
    if hand is None or hand.right:
        return None
    spec = s.platform.spec
    line = corefile.rewrite_line(spec.domain, spec.gateway.service_host)
    advice = f"make it one `{line}` line in the server block with the kubernetes plugin, or remove it"
    return _refused(
        hand.record,
        DNS.CONFLICTING_REWRITE,
        f"A rewrite of {spec.domain} the operator did not write is in {hand.where}: {hand.shown}; the operator adds "
        f"no second rewrite of the domain beside it. To fix it, {advice}.{hand.annotate}",
    )


def by_hand_to_gateway(s: CoreDNSSubject) -> DnsPlan | None:
    """One rewrite of the domain by hand, to the gateway: RewriteFound, and a rewrite of ours beside
    it is removed."""
    hand = s.by_hand
    if hand is None or not hand.right:
        return None
    spec = s.platform.spec
    removal = [] if s.dry_run else removal_writes(s.platform.name, s.facts.corefile_cm, s.facts.custom_cm)
    removal = [
        replace(
            w,
            event=(
                "Normal",
                _removed_event(w),
                f"Removed the operator's rewrite of {spec.domain}: {hand.shown} in {hand.where} already rewrites it.",
            ),
        )
        for w in removal
    ]
    removed = " Removed the operator's own rewrite of the domain, so only that one remains." if removal else ""
    cond = conditions.true(
        TYPE,
        DNS.REWRITE_FOUND,
        f"{hand.where} already rewrites {spec.domain} to {spec.gateway.service_host} ({hand.shown}); the operator "
        f"did not write it and adds no rewrite of its own.{removed}{hand.annotate} {_UNKNOWN_TIME}",
    )
    return _plan([cond], recorded=hand.record, writes=list(removal))


def would_configure(s: CoreDNSSubject) -> DnsPlan | None:
    """A dry run with a write due: WouldConfigure, nothing written."""
    if not s.editable or s.managed or not s.dry_run or not s.place.rewritten:
        return None
    return _refused(s.place.record, DNS.WOULD_CONFIGURE, s.place.would)


COREDNS_CHECKS: Final = Chain[CoreDNSSubject, DnsPlan](
    Check("RKE2's chart ConfigMap rewrites the domain", rke2_chart_rewrites),
    Check("RKE2's chart manages CoreDNS", rke2_chart_manages),
    Check("CoreDNS ConfigMap exists", configmap_missing),
    Check("Corefile editable safely", corefile_unsupported),
    Check("Kamaji writes its Corefile back", kamaji_writes_back),
    Check("live Corefile rewrites the domain (managed)", managed_rewrite_live),
    Check("distribution manages CoreDNS", distribution_manages),
    Check("no conflicting rewrite by hand", conflicting_by_hand),
    Check("rewrite by hand to the gateway", by_hand_to_gateway),
    Check("nothing to write (dry run)", would_configure),
)
"""Management CoreDNS: the first finding is the plan; none: ``configured``."""


def configured(s: CoreDNSSubject) -> DnsPlan:
    """Every check passed: write our rewrite where the mode puts it (not in a dry run), and the
    condition is the pods' pickup of the change (``pickup``)."""
    place = s.place
    # The pods must load the change to our rewrite: written now, or as last changed.
    seen = pickup(
        pods=s.facts.pods,
        changed=s.now if place.rewritten else place.changed,
        now=s.now,
        reload=place.reload,
        mode=s.dist.mode,
        target=s.target,
    )
    return _plan(
        [Condition(TYPE, seen.status, seen.reason, place.head + seen.sentence)],
        recorded=place.record,
        progressing=seen.reason == DNS.RELOAD_PENDING,
        requeue_after=seen.requeue_after,
        writes=[] if s.dry_run else place.writes,
        recheck=place.rewritten,
    )


def _coredns(
    platform: TenantPlatform, facts: DnsFacts, *, now: datetime, target: CoreDNSTarget, dry_run: bool
) -> DnsPlan:
    subject = CoreDNSSubject(platform, facts, now, target, dry_run)
    found = COREDNS_CHECKS.first(subject)
    return found.value if found is not None else configured(subject)


@dataclass(frozen=True)
class _Placement:
    """Where our rewrite lives in one mode, and the writes that put it right."""

    record: DnsRecord
    watched: Obj | None
    """The object whose change the CoreDNS pods must load."""
    writes: list[Write]
    """Our rewrite first when due, then the removal of what the other mode wrote before."""
    rewritten: bool
    """The writes change ``watched``."""
    would: str
    """What a dry run reports when ``rewritten``."""
    head: str
    """The condition message's first sentence."""
    reload: bool
    """Whether the pods reload the change by themselves (the reload plugin, Corefile only)."""
    changed: datetime | None
    """When our rewrite there last changed, as far as known (server time; None: unknown)."""


def _in_imports(platform: TenantPlatform, facts: DnsFacts, dist: Distribution, t: CoreDNSTarget) -> _Placement:
    """Our key in coredns-custom; a block we wrote into the main Corefile before is removed (the
    distribution reverts it anyway)."""
    spec = platform.spec
    key = corefile.override_key(platform.name)
    where = f"ConfigMap {t.namespace}/{t.custom_config_map}"
    wanted = corefile.render_override(platform.name, spec.domain, spec.gateway.service_host)
    writes: list[Write] = []
    rewritten = ((facts.custom_cm or {}).get("data") or {}).get(key) != wanted
    if rewritten:
        event = ("Normal", reasons.Event.COREDNS_CUSTOM_UPDATED, f"Wrote key {key} of {where}.")
        writes.append(OverrideWrite(key, wanted, event))
    if corefile.block_for(corefile_text(facts.corefile_cm), platform.name) is not None:
        writes.append(CorefileWrite(platform.name, None))
    who = dist.name if dist.name != "generic" else "This cluster"
    return _Placement(
        record=_record(dist, config_map=f"{t.namespace}/{t.custom_config_map}", key=key),
        watched=facts.custom_cm,
        writes=writes,
        rewritten=rewritten,
        would=f"The operator would write key {key} with the rewrite for {spec.domain} into {where} ({dist.evidence}).",
        head=(
            f"{who} imports CoreDNS overrides ({dist.evidence}): key "
            f"{key} of {where} rewrites {spec.domain} to {spec.gateway.service_host}. "
        ),
        reload=True,
        changed=changed_at(facts.custom_cm),
    )


# -- a rewrite of the domain that the operator did not write -----------------------------------------


def _live_in(platform: TenantPlatform, text: str, where: str) -> Condition | None:
    """What a Corefile the operator does not edit (k0s, RKE2, the addon manager, Kamaji) does with the
    domain: None without a rewrite of it in the DNS server block; RewriteFound (True) when every
    rewrite of it there goes to the gateway (our marked block copied from the instructions, the
    checklist's bare line, whatever put it there); else ConflictingRewrite (False)."""
    spec = platform.spec
    try:
        found = corefile.live_rewrites(text, spec.domain)
    except corefile.CorefileError:
        return None
    if not found:
        return None
    shown = "; ".join(f"`{r.text}`" for r in found[:3])
    wrong = [r for r in found if not corefile.same_host(r.target, spec.gateway.service_host)]
    if wrong:
        return conditions.false(
            TYPE,
            DNS.CONFLICTING_REWRITE,
            f"The live Corefile in {where} rewrites {spec.domain} with {shown}, not to the gateway Service "
            f"{spec.gateway.service_host}.",
        )
    twice = " It holds more than one rewrite of the domain; keep one." if len(found) > 1 else ""
    return conditions.true(
        TYPE,
        DNS.REWRITE_FOUND,
        f"The live Corefile in {where} rewrites {spec.domain} to {spec.gateway.service_host} ({shown}); the "
        f"operator did not write it and writes nothing.{twice} {_UNKNOWN_TIME}",
    )


_UNKNOWN_TIME = (
    "The time of that change is unknown to the operator, so it was not compared with the CoreDNS pods' start "
    "times; if the domain does not resolve from a pod, restart CoreDNS."
)


def _and_today(found: Condition | None, message: str) -> str:
    """``message`` prefixed with what the live Corefile does today, when it rewrites the domain wrongly."""
    return f"{found.message} {message}" if found is not None else message


@dataclass(frozen=True)
class HandMade:
    """Rewrites of the domain someone else put where CoreDNS reads it (modes corefile and import),
    not handed over to the operator."""

    rewrites: tuple[tuple[str, corefile.LiveRewrite, bool], ...]
    """(the coredns-custom key or "", the rewrite, whether it is in a server block of its own)."""
    right: bool
    """One rewrite, to the gateway, in the DNS server block (a server block of its own takes the
    domain's queries, so the operator cannot judge what answers them: never right)."""
    shown: str
    where: str
    record: DnsRecord
    annotate: str
    """How to hand it over to the operator (Corefile only)."""


def _hand_made(platform: TenantPlatform, facts: DnsFacts, dist: Distribution, t: CoreDNSTarget) -> HandMade | None:
    """A rewrite of the domain someone else put where CoreDNS reads it (modes corefile and import):
    an admin's ``*.override`` key, or a hand-made line in the Corefile. None when there is none (or
    it is being taken over: ``takes_over``)."""
    spec = platform.spec
    if dist.mode == Mode.IMPORT:
        where = f"ConfigMap {t.namespace}/{t.custom_config_map}"
        ours = corefile.override_key(platform.name)
        data = (facts.custom_cm or {}).get("data") or {}
        found = [
            (k, r, False)
            for k, v in sorted(data.items())
            if k != ours and k.endswith(corefile.OVERRIDE_SUFFIX) and isinstance(v, str)
            for r in corefile.override_rewrites(v, spec.domain)
        ]
        shown = "; ".join(f"`{r.text}` (key {k})" for k, r, _ in found[:3])
        record = _record(dist, config_map=f"{t.namespace}/{t.custom_config_map}")
        annotate = ""
    else:
        where = f"ConfigMap {t.namespace}/{t.config_map}"
        if takes_over(platform, facts.corefile_cm):
            return None
        try:
            hand = [
                h
                for h in corefile.hand_made_rewrites(corefile_text(facts.corefile_cm), spec.domain)
                if h.placement != "elsewhere"
            ]
        except corefile.CorefileError:
            return None
        found = [("", corefile.LiveRewrite(h.text, h.target, False), h.placement == "own-block") for h in hand]
        shown = "; ".join(
            f"`{h.text}` (line {h.line + 1}{', in a server block of its own' if h.placement == 'own-block' else ''})"
            for h in hand[:3]
        )
        record = _record(dist, config_map=f"{t.namespace}/{t.config_map}")
        annotate = (
            f" To have the operator replace it by its marked block in one write, annotate {where} "
            f"{constants.ANNOTATION_ADOPTABLE}={platform.name} (docs/migration.md)."
        )
    if not found:
        return None
    right = len(found) == 1 and all(
        corefile.same_host(r.target, spec.gateway.service_host) and not own for _, r, own in found
    )
    return HandMade(tuple(found), right, shown, where, record, annotate)


def _removed_event(write: Write) -> reasons.Event:
    return reasons.Event.COREFILE_UPDATED if isinstance(write, CorefileWrite) else reasons.Event.COREDNS_CUSTOM_UPDATED


def takes_over(platform: TenantPlatform, corefile_cm: Obj | None) -> bool:
    """The admin opted the CoreDNS ConfigMap in for this platform (``tenancy.dev/adoptable-by``
    lists it): a hand-made rewrite of the domain is replaced by our block (docs/migration.md)."""
    return platform.name in ownership.adoptable_by(corefile_cm)


def hand_made_note(platform: TenantPlatform, text: str, *, taken_over: bool, where: str) -> str:
    """What the message says about hand-made rewrites of the domain still in the Corefile."""
    try:
        hand = corefile.hand_made_rewrites(text, platform.spec.domain)
    except corefile.CorefileError:
        return ""
    if not hand:
        return ""
    shown = "; ".join(f"`{h.text}` (line {h.line + 1})" for h in hand[:3])
    elsewhere = all(h.placement == "elsewhere" for h in hand)
    if taken_over or elsewhere:
        return (
            f" A hand-made rewrite of {platform.spec.domain} is in a server block the operator does not edit: "
            f"{shown}; remove it by hand."
        )
    return (
        f" The hand-made {shown} rewrites the same name; annotate {where} "
        f"{constants.ANNOTATION_ADOPTABLE}={platform.name} to have it replaced by this block in one write "
        "(docs/migration.md)."
    )


def _in_corefile(platform: TenantPlatform, facts: DnsFacts, dist: Distribution, t: CoreDNSTarget) -> _Placement:
    """Our block in the main Corefile (replacing a hand-made rewrite when opted in); our import key
    (if any) removed."""
    spec = platform.spec
    rewrite = (spec.domain, spec.gateway.service_host)
    where = f"ConfigMap {t.namespace}/{t.config_map}"
    text = corefile_text(facts.corefile_cm)
    writes: list[Write] = []
    taking_over = takes_over(platform, facts.corefile_cm)
    edit = CorefileWrite(platform.name, rewrite, take_over=taking_over)
    new_text = edit.edit(text)
    rewritten = new_text != text
    replaced = [h.text for h in corefile.hand_made_rewrites(text, spec.domain) if h.placement != "elsewhere"]
    replaced = replaced if taking_over else []
    if rewritten:
        said = f"Added the rewrite for {spec.domain} to {where}"
        said += f", replacing the hand-made {'; '.join(replaced)}." if replaced else "."
        writes.append(replace(edit, event=("Normal", reasons.Event.COREFILE_UPDATED, said)))
    key = corefile.override_key(platform.name)
    if key in ((facts.custom_cm or {}).get("data") or {}):
        writes.append(OverrideWrite(key, None))
    return _Placement(
        record=_record(dist, config_map=f"{t.namespace}/{t.config_map}"),
        watched=facts.corefile_cm,
        writes=writes,
        rewritten=rewritten,
        would=f"The operator would add `{corefile.rewrite_line(*rewrite)}` to the Corefile in {where}"
        + (f", replacing the hand-made {'; '.join(replaced)}." if replaced else "."),
        head=(
            f"The Corefile in {where} rewrites {spec.domain} to {spec.gateway.service_host} (block "
            f"'{corefile.begin_marker(platform.name)}')."
            + hand_made_note(platform, new_text, taken_over=taking_over, where=where)
            + " "
        ),
        reload=corefile.has_reload(text),
        # Our own block's last change, not the ConfigMap's: another platform's block written
        # makes no platform but that one wait for the reload.
        changed=facts.own_block_changed_at if facts.own_block_noted else changed_at(facts.corefile_cm),
    )


def _record(dist: Distribution, **where: str) -> DnsRecord:
    """``status.recorded.dns`` under management CoreDNS."""
    return DnsRecord(management="CoreDNS", distribution=dist.name, mode=dist.mode, **where)


def _refused(record: DnsRecord, reason: DNS | Common, message: str) -> DnsPlan:
    """False, nothing written."""
    return _plan([conditions.false(TYPE, reason, message)], recorded=record)
