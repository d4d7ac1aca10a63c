"""DNSReady: pods (and people) resolve the platform's domain to the ingress gateway.

The step contract (framework/contract.py): ``gather`` reads, concerns/dns/verdict.py ``evaluate``
decides (pure), ``apply`` makes the writes of the plan behind that verdict and reports (the
events of its writes, CorefileUpdated and CorednsCustomUpdated, in the verdict).

``management: CoreDNS``. The rewrite ``rewrite name exact <domain> <spec.gateway.serviceHost>``
goes where the cluster's distribution expects it (concerns/dns/coredns.py ``detect_distribution``):

- ``corefile`` (kubeadm and most clusters): our marked block in the ``Corefile`` key of
  ConfigMap kube-system/coredns, inside the server block holding the ``kubernetes`` plugin, above
  that plugin (formats/corefile.py). Read-modify-write with the object's resourceVersion as the
  precondition (PUT): a concurrent edit makes the API server answer 409, and we re-read and retry
  (``status.dns.MAX_ATTEMPTS``, then Conflict and a retry shortly), so nobody's edit is lost. No
  write at all when our block is already right. The platforms of this process do not race each
  other for that object: their edits go through one combiner (concerns/dns/combiner.py), which
  makes the edits waiting at the same time in one PUT.
- ``import`` (k3s, AKS, and any cluster whose Corefile imports ``*.override`` files from the
  ``coredns-custom`` ConfigMap): our own key ``tenant-platform-<platform>.override`` in
  ``coredns-custom`` (created if absent), written with a merge patch of that key only. These
  distributions revert edits to the main Corefile.
- ``managed`` (k0s, RKE2's Helm-managed CoreDNS, the addon manager in Reconcile mode, k3s without
  the import, a Kamaji tenant's CoreDNS add-on): nothing is edited; DNSReady is True
  (RewriteFound) once the live Corefile rewrites the domain to the gateway, else False with reason
  ManagedByDistribution and the exact configuration change to make (Kamaji: no durable way).

Several TenantPlatforms coexist (one block or key each); cleanup removes only ours.

``gather`` reads the CoreDNS ConfigMaps, Deployment, one Node, and the CoreDNS pods (whose start
times tell whether CoreDNS loaded the change; concerns/dns/coredns.py ``pickup``). After writing the
object the pods must load, ``apply`` decides again (pure, ``dns.plan``) on what the API server
returned, without reading again, so that the server's time of our change counts.

Guard rails, in every mode (core/domainclaims.py): ``gather`` also lists the TenantPlatforms, and
a cluster-internal or cloud-metadata domain, or one another platform holds, is refused before
anything is written. ``_edit_corefile`` hands the combiner the guard with the edit: it judges the
text the edit is about to change (other platforms' edits of the same batch made), again on every
retry with a fresh list of TenantPlatforms, so a platform that took the domain meanwhile wins
and our edit is dropped (the others' go through).

Reload: ``gather`` notes the Corefile's blocks in the combiner's ``BlockLedger`` and gives the
verdict the time our own block last changed, so another platform's block written does not make
this one wait for the CoreDNS pods' reload (ReloadPending).

``management: External``: verify only, by resolving the domain from the operator's pod (in-cluster
only, ``resolver``) and comparing with the gateway Service's addresses (cluster IPs, ``externalIPs``,
load-balancer IPs, and what its load-balancer host names resolve to). ``Disabled``: True with
reason Disabled. Both also remove a rewrite we wrote earlier. An API error becomes
Forbidden/APIError "... configure CoreDNS" (``action``).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.concerns.dns import verdict
from tenant_platform.concerns.dns.combiner import CorefileCombiner, CorefileConflict, Edit, key_of, shared
from tenant_platform.concerns.dns.coredns import CoreDNSTarget, pod_selector
from tenant_platform.core import domainclaims
from tenant_platform.core.gatewayservice import service_hostnames, service_of
from tenant_platform.core.verdict import Event, Verdict
from tenant_platform.formats import corefile
from tenant_platform.framework.base import CleanupResult, StepContext
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj

COMPONENT = "dns"
# Passes of evaluate-and-write per reconcile: one to write, one to judge what was written.
MAX_PASSES = 3


def default_resolver(host: str) -> list[str]:
    """The addresses ``host`` resolves to from this process (raises OSError when it does not)."""
    infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


class Refused(Exception):
    """The guard refused the domain on a retry of the Corefile edit (``verdict`` says why)."""

    def __init__(self, decided: Verdict) -> None:
        super().__init__(decided.condition.message)
        self.verdict = decided


@dataclass
class DnsStep:
    target: CoreDNSTarget = field(default_factory=CoreDNSTarget)
    resolver: Callable[[str], list[str]] = default_resolver
    name: str = COMPONENT
    condition_types: tuple[str, ...] = (constants.DNS_READY,)
    combiner: CorefileCombiner = field(default_factory=shared)
    """Every DnsStep of the process shares one (concerns/dns/combiner.py)."""

    # -- Step -------------------------------------------------------------------------------------

    def render(self, platform: TenantPlatform) -> list[Obj]:
        if platform.spec.dns.management != "CoreDNS":
            return []
        return [
            corefile.render_preview(
                platform.name,
                platform.spec.domain,
                platform.spec.gateway.service_host,
                namespace=self.target.namespace,
                name=self.target.config_map,
            )
        ]

    def action(self, platform: TenantPlatform) -> Action:
        return Action("configure CoreDNS")

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        try:
            cm, custom = self._read_configs(ctx)
            writes = verdict.removal_writes(ctx.name, cm, custom)
            self._write(ctx, verdict.DnsFacts(corefile_cm=cm, custom_cm=custom), writes, [])
        except errors.KubeError as exc:
            return CleanupResult(False, f"could not remove the CoreDNS rewrite: {exc.message or exc}")
        except (CorefileConflict, corefile.CorefileError) as exc:
            return CleanupResult(False, f"could not remove the CoreDNS rewrite: {exc}")
        return CleanupResult(True, "removed the CoreDNS rewrite" if writes else "")

    # -- gather, evaluate, apply --------------------------------------------------------------------

    def gather(self, ctx: StepContext) -> verdict.DnsFacts:
        """Reads only: what ``evaluate`` needs for the platform's spec.dns.management."""
        management = ctx.platform.spec.dns.management
        if management == "CoreDNS":
            return self._gather_coredns(ctx)
        facts = verdict.DnsFacts(in_cluster=ctx.settings.in_cluster, claims=self._claims(ctx))
        if not ctx.dry_run:  # to remove a rewrite we wrote earlier
            cm, custom = self._read_configs(ctx)
            facts = replace(facts, corefile_cm=cm, custom_cm=custom)
        if management == "External" and ctx.settings.in_cluster:
            facts = self._gather_resolution(ctx, facts)
        return facts

    def evaluate(self, given: Given, facts: verdict.DnsFacts) -> Verdict:
        return verdict.evaluate(given.platform, facts, now=given.now, target=self.target, dry_run=given.dry_run)

    def apply(self, ctx: StepContext, facts: verdict.DnsFacts, decided: Verdict) -> Verdict:
        """Make the writes of the plan behind ``verdict`` (the same pure decision); when it asks,
        decide again on what the API server returned (nothing read again), and write again if
        that decision wants more (at most MAX_PASSES). The events of the writes made go to the
        verdict returned, whichever it is."""
        plan = self._plan(ctx, facts)
        events: list[Event] = []
        try:
            for _ in range(MAX_PASSES):
                if not plan.writes:
                    break
                facts = self._write(ctx, facts, plan.writes, events)
                if not plan.recheck:
                    break
                plan = self._plan(ctx, facts)
        except CorefileConflict:
            return verdict.kept_changing(self.target).but(events=events)
        except Refused as refused:
            return refused.verdict.but(events=events)
        return plan.verdict.but(events=[*events, *plan.verdict.events])

    def _plan(self, ctx: StepContext, facts: verdict.DnsFacts) -> verdict.DnsPlan:
        return verdict.plan(ctx.platform, facts, now=ctx.now, target=self.target, dry_run=ctx.dry_run)

    # -- reads ------------------------------------------------------------------------------------

    def _read_configs(self, ctx: StepContext) -> tuple[Obj | None, Obj | None]:
        t = self.target
        cm = ctx.kube.get("v1", "ConfigMap", t.config_map, t.namespace)
        custom = ctx.kube.get("v1", "ConfigMap", t.custom_config_map, t.namespace)
        return cm, custom

    @staticmethod
    def _claims(ctx: StepContext) -> tuple[domainclaims.Claim, ...]:
        """The domain of every TenantPlatform preparing this cluster (one list of the cluster-scoped kind)."""
        return domainclaims.claims_of(ctx.platforms())

    def _gather_coredns(self, ctx: StepContext) -> verdict.DnsFacts:
        t = self.target
        kube = ctx.kube
        cm, custom = self._read_configs(ctx)
        deployment = kube.get("apps/v1", "Deployment", t.deployment, t.namespace)
        rke2 = kube.get("v1", "ConfigMap", t.rke2_config_map, t.namespace) if cm is None else None
        nodes = kube.request("GET", "/api/v1/nodes", query={"limit": "1"}).get("items") or []
        pods = kube.list("v1", "Pod", t.namespace, label_selector=pod_selector(deployment)) if cm is not None else []
        noted, at = self._own_block(ctx, cm, read=True)
        return verdict.DnsFacts(
            own_block_noted=noted,
            own_block_changed_at=at,
            corefile_cm=cm,
            custom_cm=custom,
            deployment=deployment,
            node=nodes[0] if nodes else None,
            rke2_cm=rke2,
            pods=pods,
            in_cluster=ctx.settings.in_cluster,
            claims=self._claims(ctx),
        )

    def _gather_resolution(self, ctx: StepContext, facts: verdict.DnsFacts) -> verdict.DnsFacts:
        """External, in cluster: the gateway Service and what the domain resolves to from here."""
        spec = ctx.platform.spec
        service = None
        parsed = service_of(spec.gateway.service_host)
        if parsed is not None:
            service = ctx.kube.get("v1", "Service", parsed[0], parsed[1])
        # A load balancer that publishes a host name (no fixed IP) counts by what that name resolves to.
        behind: set[str] = set()
        for hostname in service_hostnames(service):
            with contextlib.suppress(OSError):
                behind |= set(self.resolver(hostname))
        facts = replace(facts, gateway_service=service, hostname_addresses=tuple(sorted(behind)))
        try:
            return replace(facts, resolved=self.resolver(spec.domain))
        except OSError as exc:
            return replace(facts, resolve_error=str(exc))

    def _own_block(self, ctx: StepContext, cm: Obj | None, *, read: bool) -> tuple[bool, datetime | None]:
        """Whether our block is in ``cm``'s Corefile, and when it last changed (the combiner's
        ``BlockLedger``; ``read``: note ``cm`` first, as read)."""
        key = key_of(ctx.kube, self.target)
        if read:
            self.combiner.ledger.note_read(key, cm, now=ctx.now)
        return self.combiner.ledger.changed_at(key, ctx.name)

    # -- writes -----------------------------------------------------------------------------------

    def _write(
        self, ctx: StepContext, facts: verdict.DnsFacts, writes: list[verdict.Write], events: list[Event]
    ) -> verdict.DnsFacts:
        """Make ``writes`` in order; ``facts`` with the objects as the API server returned them.
        The event of each write made is added to ``events``."""
        for write in writes:
            if isinstance(write, verdict.CorefileWrite):
                written = self._edit_corefile(ctx, facts, write)
                noted, at = self._own_block(ctx, written, read=False)
                facts = replace(facts, corefile_cm=written, own_block_noted=noted, own_block_changed_at=at)
            else:
                facts = replace(facts, custom_cm=self._patch_custom(ctx, write.key, write.value))
            if write.event is not None:
                events.append(write.event)
        return facts

    def _edit_corefile(self, ctx: StepContext, facts: verdict.DnsFacts, write: verdict.CorefileWrite) -> Obj:
        """Our edit of the Corefile, made by the combiner (read-modify-write with a resourceVersion
        precondition, retried on 409, together with the edits of other platforms waiting then).

        ``facts.corefile_cm`` is the object already read (saves a GET when it is the freshest the
        combiner knows). When the edit adds our rewrite, the guard judges the Corefile it is about
        to change on every attempt (with the TenantPlatforms listed again on a retry); a refusal
        raises Refused and our edit is not made. Returns the object as written, or as read when
        the edit is a no-op.
        """
        claims = facts.claims

        def judge(cm: Obj, fresh: bool) -> Exception | None:
            nonlocal claims
            if fresh:
                claims = self._claims(ctx)
            refused = verdict.guard(ctx.platform, replace(facts, corefile_cm=cm, claims=claims), dry_run=True)
            return None if refused is None else Refused(refused.verdict)

        edit = Edit(
            ctx.name,
            write.edit,
            ctx.kube,
            judge=judge if write.rewrite is not None else None,
            seen=facts.corefile_cm,
            logger=ctx.logger,
        )
        return self.combiner.edit(key_of(ctx.kube, self.target), edit)

    def _patch_custom(self, ctx: StepContext, key: str, value: str | None) -> Obj | None:
        """Set (or, with None, remove) one key of the import ConfigMap, touching no other key."""
        t = self.target
        try:
            return ctx.kube.merge_patch(
                "v1", "ConfigMap", t.custom_config_map, {"data": {key: value}}, namespace=t.namespace
            )
        except errors.NotFound:
            if value is None:
                return None
        try:
            return ctx.kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": t.custom_config_map, "namespace": t.namespace},
                    "data": {key: value},
                }
            )
        except errors.Conflict:  # created concurrently: patch our key into it
            return ctx.kube.merge_patch(
                "v1", "ConfigMap", t.custom_config_map, {"data": {key: value}}, namespace=t.namespace
            )


STEP = DnsStep()
_CONTRACT: Step[verdict.DnsFacts] = STEP
