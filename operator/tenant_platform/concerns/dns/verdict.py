"""DNSReady, decided (pure): from the facts the DNS step gathered and the spec, what to write and
what to report.

``plan(platform, facts, now=..., target=..., dry_run=...)`` returns a ``DnsPlan``: the ``Verdict``
(what ``evaluate`` returns: the DNSReady condition, reason from ``reasons.DNS``, and
``status.recorded.dns``, a ``DnsRecord``) and the writes to make, in order:

- ``CorefileWrite``: put our marked block in the main Corefile right, or remove it. It is an
  edit, not a text: the step's read-modify-write applies it again to whatever a retry reads.
- ``OverrideWrite``: set or remove our key in the ``coredns-custom`` import ConfigMap.

``management: CoreDNS`` (the chain of named checks ``COREDNS_CHECKS``, in the order of its
reasons): the distribution (concerns/dns/coredns.py) decides the mode. ``corefile``
upserts our block (formats/corefile.py) and drops an import key we wrote before; when the admin
opted the CoreDNS ConfigMap in (``tenancy.dev/adoptable-by`` lists the platform: ``takes_over``),
the same single write also removes a hand-made rewrite of the domain (``corefile.take_over``),
else the message names that line and the annotation; ``import`` writes
our key and drops a block we wrote before; ``managed`` writes nothing and says what to change.
Refused without writing: no CoreDNS ConfigMap (CoreDNSNotFound), a Corefile we cannot edit
safely (CorefileUnsupported). A dry run
writes nothing and reports WouldConfigure when a write is due. Otherwise the condition is the
pods' pickup of the change (``pickup``). When the verdict writes the object whose change the pods
must load, it assumes the write lands at ``now`` and sets ``recheck``: the step's ``apply`` decides
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

from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
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
from tenant_platform.core import conditions, ownership
from tenant_platform.core import domainclaims as dnsguard
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
    claims: tuple[dnsguard.Claim, ...] = ()
    """Every TenantPlatform's spec.domain (ours included), for the guard."""


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
    found = dnsguard.refusal(
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
    expected = service_addresses(facts.gateway_service)
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


# -- CoreDNS ----------------------------------------------------------------------------------------


def _coredns(
    platform: TenantPlatform, facts: DnsFacts, *, now: datetime, target: CoreDNSTarget, dry_run: bool
) -> DnsPlan:
    """Management CoreDNS: the first finding of ``COREDNS_CHECKS`` (the last always finds)."""
    found = COREDNS_CHECKS.first(CoreDNSUnderCheck(platform, facts, now, target, dry_run))
    assert found is not None  # pods_pick_up always finds
    return found.value


@dataclass(frozen=True)
class CoreDNSUnderCheck:
    """What the CoreDNS checks look at: the platform, the facts, the clock, where CoreDNS lives,
    and (worked out once, when a check first asks) the distribution, the Corefile we want and
    where our rewrite goes."""

    platform: TenantPlatform
    facts: DnsFacts
    now: datetime
    target: CoreDNSTarget
    dry_run: bool = False

    @cached_property
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

    @cached_property
    def desired(self) -> str | corefile.CorefileError:
        """The Corefile with our block put right, or why it cannot be edited safely."""
        platform, cm = self.platform, self.facts.corefile_cm
        rewrite = (platform.spec.domain, platform.spec.gateway.service_host)
        edit = CorefileWrite(platform.name, rewrite, take_over=takes_over(platform, cm))
        try:
            return edit.edit(corefile_text(cm))
        except corefile.CorefileError as exc:
            return exc

    @cached_property
    def place(self) -> _Placement:
        """Where our rewrite lives in the distribution's mode, and the writes that put it right."""
        place = _in_imports if self.dist.mode == Mode.IMPORT else _in_corefile
        return place(self.platform, self.facts, self.dist, self.target)


def rke2_manages(subject: CoreDNSUnderCheck) -> DnsPlan | None:
    """No CoreDNS ConfigMap, and RKE2's Helm chart configures CoreDNS: say what to add there."""
    if subject.facts.corefile_cm is not None or subject.dist.name != "rke2":
        return None
    return _refused(
        _record(subject.dist),
        DNS.MANAGED_BY_DISTRIBUTION,
        managed_message(subject.dist, patched_corefile="", platform=subject.platform, target=subject.target),
    )


def coredns_not_found(subject: CoreDNSUnderCheck) -> DnsPlan | None:
    """No CoreDNS ConfigMap: the cluster DNS is not CoreDNS as the operator knows it."""
    if subject.facts.corefile_cm is not None:
        return None
    t = subject.target
    return _refused(
        _record(subject.dist),
        DNS.COREDNS_NOT_FOUND,
        f"ConfigMap {t.namespace}/{t.config_map} does not exist, so the cluster DNS is not CoreDNS as "
        "the operator knows it; set spec.dns.management to External and configure DNS yourself.",
    )


def corefile_unsupported(subject: CoreDNSUnderCheck) -> DnsPlan | None:
    """Our block cannot be put into the Corefile safely: nothing is edited."""
    if not isinstance(subject.desired, corefile.CorefileError):
        return None
    t = subject.target
    return _refused(
        _record(subject.dist),
        DNS.COREFILE_UNSUPPORTED,
        f"The Corefile in ConfigMap {t.namespace}/{t.config_map} cannot be edited safely: {subject.desired}. "
        "Fix it, or set spec.dns.management to External and configure DNS yourself.",
    )


def distribution_manages(subject: CoreDNSUnderCheck) -> DnsPlan | None:
    """The distribution reverts edits of CoreDNS: say what to change, with the Corefile we want
    (a Corefile that cannot be edited is the finding of the check before)."""
    dist, desired = subject.dist, subject.desired
    if dist.mode != Mode.MANAGED or isinstance(desired, corefile.CorefileError):
        return None
    return _refused(
        _record(dist, evidence=dist.evidence),
        DNS.MANAGED_BY_DISTRIBUTION,
        managed_message(dist, patched_corefile=desired, platform=subject.platform, target=subject.target),
    )


def would_configure(subject: CoreDNSUnderCheck) -> DnsPlan | None:
    """A dry run with a write due: say what would be written, write nothing."""
    if not subject.dry_run or not subject.place.rewritten:
        return None
    return _refused(subject.place.record, DNS.WOULD_CONFIGURE, subject.place.would)


def pods_pick_up(subject: CoreDNSUnderCheck) -> DnsPlan | None:
    """Write what is due; the condition is the pods' pickup of the change (``pickup``)."""
    place, now = subject.place, subject.now
    # The pods must load the change to ``watched``: written now, or as read.
    seen = pickup(
        pods=subject.facts.pods,
        changed=now if place.rewritten else changed_at(place.watched),
        now=now,
        reload=place.reload,
        mode=subject.dist.mode,
        target=subject.target,
    )
    return _plan(
        [Condition(TYPE, seen.status, seen.reason, place.head + seen.sentence)],
        recorded=place.record,
        progressing=seen.reason == DNS.RELOAD_PENDING,
        requeue_after=seen.requeue_after,
        writes=[] if subject.dry_run else place.writes,
        recheck=place.rewritten,
    )


COREDNS_CHECKS: Final = Chain[CoreDNSUnderCheck, DnsPlan](
    Check("RKE2 configures CoreDNS", rke2_manages),
    Check("CoreDNS ConfigMap exists", coredns_not_found),
    Check("Corefile editable", corefile_unsupported),
    Check("distribution reverts edits", distribution_manages),
    Check("dry run: would configure", would_configure),
    Check("pods pick up the rewrite", pods_pick_up),
)
"""DNSReady under management CoreDNS, in order: the first check that finds gives the plan."""


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
    )


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
    )


def _record(dist: Distribution, **where: str) -> DnsRecord:
    """``status.recorded.dns`` under management CoreDNS."""
    return DnsRecord(management="CoreDNS", distribution=dist.name, mode=dist.mode, **where)


def _refused(record: DnsRecord, reason: DNS | Common, message: str) -> DnsPlan:
    """False, nothing written."""
    return _plan([conditions.false(TYPE, reason, message)], recorded=record)
