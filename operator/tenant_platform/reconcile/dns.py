"""DNSReady: pods (and people) resolve the platform's domain to the ingress gateway.

``management: CoreDNS``. The rewrite ``rewrite name exact <domain> <spec.gateway.serviceHost>``
goes where the cluster's distribution expects it (``detect_distribution``):

- ``corefile`` (kubeadm and most clusters): our marked block in the ``Corefile`` key of
  ConfigMap kube-system/coredns, inside the server block holding the ``kubernetes`` plugin, above
  that plugin (render/corefile.py). Read-modify-write with the object's resourceVersion as the
  precondition (PUT): a concurrent edit makes the API server answer 409, and we re-read and retry,
  so nobody's edit is lost. No write at all when our block is already right.
- ``import`` (k3s, AKS, and any cluster whose Corefile imports ``*.override`` files from the
  ``coredns-custom`` ConfigMap): our own key ``tenant-platform-<platform>.override`` in
  ``coredns-custom``, written with a merge patch of that key only. These distributions revert edits
  to the main Corefile.
- ``managed`` (k0s, RKE2's Helm-managed CoreDNS, the addon manager in Reconcile mode, k3s without
  the import): nothing is edited; DNSReady is False with reason ManagedByDistribution and the exact
  configuration change to make.

Several TenantPlatforms coexist (one block or key each); cleanup removes only ours.

Whether CoreDNS loaded the change is judged from its running pods (``pickup``): a pod that
started after our last write loaded it; older pods pick up Corefile edits through the ``reload``
plugin (within about two minutes) but never a change to an imported file. With no running pod
(as on a bare control plane) there is nothing to ask, and the message says so.

``management: External``: verify only, by resolving the domain from the operator's pod (in-cluster
only) and comparing with the gateway Service's addresses. ``Disabled``: True with reason Disabled.
Both also remove a rewrite we wrote earlier.
"""

from __future__ import annotations

import copy
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj
from tenant_platform.reconcile.base import CleanupResult, StepContext, StepResult, api_error_condition
from tenant_platform.reconcile.gateway import service_of
from tenant_platform.render import corefile
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition

COMPONENT = "dns"
COREFILE_KEY = "Corefile"
MAX_ATTEMPTS = 5
# kubelet refreshes ConfigMap volumes within about a minute (sync period plus cache TTL) and the
# reload plugin checks every 30s (plus up to 15s jitter).
RELOAD_GRACE = timedelta(seconds=150)

REASON_CONFIGURED = "Configured"
REASON_RELOAD_PENDING = "ReloadPending"
REASON_RELOAD_PLUGIN_MISSING = "ReloadPluginMissing"
REASON_RESTART_REQUIRED = "RestartRequired"
REASON_MANAGED_BY_DISTRIBUTION = "ManagedByDistribution"
REASON_COREDNS_NOT_FOUND = "CoreDNSNotFound"
REASON_COREFILE_UNSUPPORTED = "CorefileUnsupported"
REASON_WOULD_CONFIGURE = "WouldConfigure"
REASON_RESOLVES = "Resolves"
REASON_RESOLVES_ELSEWHERE = "ResolvesElsewhere"
REASON_DOES_NOT_RESOLVE = "DoesNotResolve"
REASON_NOT_VERIFIABLE = "NotVerifiable"

MODE_COREFILE = "corefile"
MODE_IMPORT = "import"
MODE_MANAGED = "managed"


@dataclass(frozen=True)
class CoreDNSTarget:
    """Where CoreDNS's configuration lives (tests point this at a scratch namespace)."""

    namespace: str = "kube-system"
    config_map: str = "coredns"
    custom_config_map: str = "coredns-custom"
    deployment: str = "coredns"
    rke2_config_map: str = "rke2-coredns-rke2-coredns"


@dataclass(frozen=True)
class Distribution:
    name: str
    """k0s, k3s, rke2, aks, addon-manager or generic."""
    mode: str
    """corefile, import or managed."""
    evidence: str


def _meta_keys(obj: Obj | None) -> list[str]:
    if not obj:
        return []
    meta = obj.get("metadata") or {}
    return [*(meta.get("labels") or {}), *(meta.get("annotations") or {})]


def _node_distribution(node: Obj | None) -> tuple[str, str]:
    if not node:
        return "", ""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    keys = _meta_keys(node)
    name = meta.get("name", "")
    if any("k0sproject.io" in k for k in keys):
        return "k0s", f"node {name} carries k0sproject.io labels"
    if labels.get("node.kubernetes.io/instance-type") == "rke2" or any(k.startswith("rke2.io/") for k in keys):
        return "rke2", f"node {name} carries rke2.io annotations"
    if labels.get("node.kubernetes.io/instance-type") == "k3s" or any(k.startswith("k3s.io/") for k in keys):
        return "k3s", f"node {name} carries k3s.io annotations"
    if any(k.startswith("kubernetes.azure.com/") for k in labels):
        return "aks", f"node {name} carries kubernetes.azure.com labels"
    return "", ""


def _mounts_custom(deployment: Obj | None, custom_name: str) -> bool:
    volumes = ((((deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
    return any((v.get("configMap") or {}).get("name") == custom_name for v in volumes)


def detect_distribution(
    *,
    corefile_cm: Obj | None,
    custom_cm: Obj | None,
    deployment: Obj | None,
    node: Obj | None,
    rke2_cm: Obj | None,
    target: CoreDNSTarget,
) -> Distribution:
    """Which path the rewrite takes, from what the cluster shows (pure)."""
    node_name, node_evidence = _node_distribution(node)
    if any("k0sproject.io" in k for k in _meta_keys(corefile_cm) + _meta_keys(deployment)):
        return Distribution("k0s", MODE_MANAGED, "the CoreDNS objects carry k0sproject.io labels or annotations")
    if node_name == "k0s":
        return Distribution("k0s", MODE_MANAGED, node_evidence)
    if corefile_cm is None:
        if rke2_cm is not None:
            return Distribution(
                "rke2", MODE_MANAGED, f"CoreDNS is configured by ConfigMap {target.namespace}/{target.rke2_config_map}"
            )
        return Distribution(node_name or "generic", MODE_MANAGED, "no CoreDNS ConfigMap")
    text = str((corefile_cm.get("data") or {}).get(COREFILE_KEY) or "")
    try:
        imports = corefile.override_imports(text)
    except corefile.CorefileError:
        imports = []
    if imports and (custom_cm is not None or _mounts_custom(deployment, target.custom_config_map)):
        return Distribution(
            node_name or "generic",
            MODE_IMPORT,
            f"the Corefile imports {imports[0]} from ConfigMap {target.namespace}/{target.custom_config_map}",
        )
    labels = (corefile_cm.get("metadata") or {}).get("labels") or {}
    if labels.get("addonmanager.kubernetes.io/mode") == "Reconcile":
        return Distribution(
            node_name or "addon-manager",
            MODE_MANAGED,
            f"ConfigMap {target.namespace}/{target.config_map} is labelled addonmanager.kubernetes.io/mode=Reconcile",
        )
    cm_keys = _meta_keys(corefile_cm)
    if node_name == "k3s" or any(k.startswith("objectset.rio.cattle.io/") for k in cm_keys):
        return Distribution(
            "k3s", MODE_MANAGED, node_evidence or "the CoreDNS ConfigMap is applied by k3s's deploy controller"
        )
    return Distribution(node_name or "generic", MODE_COREFILE, "a plain CoreDNS ConfigMap")


def managed_message(
    dist: Distribution, *, patched_corefile: str, platform: TenantPlatform, target: CoreDNSTarget
) -> str:
    """What to change in the distribution's own configuration, exactly."""
    spec = platform.spec
    rewrite = corefile.rewrite_line(spec.domain, spec.gateway.service_host)
    if dist.name == "k0s":
        indented = "\n".join("                " + line for line in patched_corefile.rstrip("\n").splitlines())
        return (
            f"k0s manages CoreDNS ({dist.evidence}) and reverts edits to ConfigMap "
            f"{target.namespace}/{target.config_map}, so the operator did not edit it. Add this patch to the k0s "
            "configuration (k0s.yaml, or the ClusterConfig for dynamic config), apply it, then restart CoreDNS with "
            f"`kubectl -n {target.namespace} rollout restart deployment/{target.deployment}`. Keep the rest of "
            "your k0s configuration, in particular spec.storage: a configuration naming a different datastore "
            "brings the cluster up empty.\n"
            "spec:\n"
            "  network:\n"
            "    coreDNS:\n"
            "      patches:\n"
            f"        - target: {{kind: ConfigMap, name: {target.config_map}, namespace: {target.namespace}}}\n"
            "          patch:\n"
            "            - op: replace\n"
            f"              path: /data/{COREFILE_KEY}\n"
            "              value: |\n"
            f"{indented}"
        )
    if dist.name == "rke2":
        return (
            f"RKE2 deploys CoreDNS with its rke2-coredns Helm chart ({dist.evidence}) and reverts edits, so the "
            "operator did not edit it. Add the rewrite through a HelmChartConfig named rke2-coredns in "
            f"{target.namespace}: in valuesContent, add to servers[0].plugins (before the kubernetes plugin) "
            f"the entry {{name: rewrite, parameters: name exact {spec.domain} {spec.gateway.service_host}}}."
        )
    if dist.name == "k3s":
        return (
            f"k3s rewrites ConfigMap {target.namespace}/{target.config_map} when it restarts ({dist.evidence}) "
            f"and this Corefile has no `import /etc/coredns/custom/*.override`, so the operator did not edit it. "
            f"Upgrade k3s (its CoreDNS imports *.override files from ConfigMap {target.custom_config_map}), or "
            f"put `{rewrite}` in a key ending in .override of ConfigMap {target.namespace}/"
            f"{target.custom_config_map} once the import is present."
        )
    return (
        f"CoreDNS's configuration is reconciled by the cluster ({dist.evidence}), so an edit would be reverted and "
        f"the operator did not make one. Add `{rewrite}` to the cluster DNS configuration through the "
        "distribution's own mechanism (on AKS: a key ending in .override in ConfigMap "
        f"{target.namespace}/{target.custom_config_map}), then restart CoreDNS."
    )


def changed_at(obj: Obj | None) -> datetime | None:
    """When the operator last wrote ``obj`` (from managedFields; server time), else None."""
    times = [
        entry.get("time")
        for entry in ((obj or {}).get("metadata") or {}).get("managedFields") or []
        if entry.get("manager") == constants.FIELD_MANAGER and entry.get("time")
    ]
    parsed = [conditions.parse_time(t) for t in times]
    valid = [t for t in parsed if t is not None]
    return max(valid) if valid else None


@dataclass(frozen=True)
class Pickup:
    status: conditions.Status
    reason: str
    sentence: str
    requeue_after: float | None = None


def pickup(
    *,
    pods: list[Obj],
    changed: datetime | None,
    now: datetime,
    reload: bool,
    mode: str,
    target: CoreDNSTarget,
) -> Pickup:
    """Whether running CoreDNS pods have loaded our last change (pure)."""
    restart = f"`kubectl -n {target.namespace} rollout restart deployment/{target.deployment}`"
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    reload_note = (
        "" if reload or mode != MODE_COREFILE else " The server block has no reload plugin: later edits need a restart."
    )
    if not running:
        return Pickup(
            "True",
            REASON_CONFIGURED,
            "No CoreDNS pod is running, so whether CoreDNS loaded the change could not be checked; pods load the "
            "current configuration when they start." + reload_note,
        )
    if changed is None:
        return Pickup(
            "True",
            REASON_CONFIGURED,
            "The time of the last change is unknown (no managedFields entry), so it was not compared with the "
            "CoreDNS pods' start times." + reload_note,
        )
    stale = []
    for pod in running:
        started = conditions.parse_time((pod.get("status") or {}).get("startTime"))
        if started is None or started < changed:
            stale.append(pod["metadata"]["name"])
    if not stale:
        return Pickup(
            "True",
            REASON_CONFIGURED,
            f"All {len(running)} running CoreDNS pods started after the change, so they loaded it.",
        )
    names = ", ".join(sorted(stale))
    if mode == MODE_IMPORT:
        return Pickup(
            "False",
            REASON_RESTART_REQUIRED,
            f"CoreDNS pods {names} started before the change at {_fmt(changed)}; the reload plugin only notices "
            f"changes to the main Corefile, not to imported files, so restart CoreDNS: {restart}.",
        )
    if not reload:
        return Pickup(
            "False",
            REASON_RELOAD_PLUGIN_MISSING,
            f"CoreDNS pods {names} started before the change at {_fmt(changed)} and the server block has no reload "
            f"plugin, so they still serve the old Corefile; restart CoreDNS: {restart} (and add `reload` to the "
            "server block so later edits load by themselves).",
        )
    remaining = (changed + RELOAD_GRACE - now).total_seconds()
    if remaining > 0:
        return Pickup(
            "False",
            REASON_RELOAD_PENDING,
            f"Changed at {_fmt(changed)}; CoreDNS pods {names} pick it up through the reload plugin within about "
            f"{int(RELOAD_GRACE.total_seconds())}s of the change.",
            requeue_after=max(remaining, 1.0),
        )
    return Pickup(
        "True",
        REASON_CONFIGURED,
        f"Changed at {_fmt(changed)}; the reload plugin has had time to load it into pods {names} (not confirmed "
        f"by CoreDNS itself; if the domain does not resolve, restart CoreDNS: {restart}).",
    )


def _fmt(moment: datetime) -> str:
    return conditions.format_time(moment)


def default_resolver(host: str) -> list[str]:
    """The addresses ``host`` resolves to from this process (raises OSError when it does not)."""
    infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


class CorefileConflict(Exception):
    """The Corefile kept changing under us for MAX_ATTEMPTS attempts."""


@dataclass
class DnsStep:
    target: CoreDNSTarget = field(default_factory=CoreDNSTarget)
    resolver: Callable[[str], list[str]] = default_resolver
    name: str = COMPONENT
    condition_types: tuple[str, ...] = (constants.DNS_READY,)

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

    def reconcile(self, ctx: StepContext) -> StepResult:
        type_ = constants.DNS_READY
        try:
            return self._reconcile(ctx)
        except errors.KubeError as exc:
            return StepResult(conditions=[api_error_condition(type_, exc, "configure CoreDNS")], failed=True)
        except CorefileConflict as exc:
            return StepResult(
                conditions=[conditions.false(type_, constants.REASON_CONFLICT, str(exc))],
                progressing=True,
                requeue_after=5.0,
            )

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        try:
            removed = self._remove(ctx)
        except errors.KubeError as exc:
            return CleanupResult(False, f"could not remove the CoreDNS rewrite: {exc.message or exc}")
        except (CorefileConflict, corefile.CorefileError) as exc:
            return CleanupResult(False, f"could not remove the CoreDNS rewrite: {exc}")
        return CleanupResult(True, "removed the CoreDNS rewrite" if removed else "")

    # -- reconcile --------------------------------------------------------------------------------

    def _reconcile(self, ctx: StepContext) -> StepResult:
        type_ = constants.DNS_READY
        management = ctx.platform.spec.dns.management
        if management != "CoreDNS":
            removed = False if ctx.dry_run else self._remove(ctx)
            note = " Removed the CoreDNS rewrite the operator had written." if removed else ""
            if management == "Disabled":
                return StepResult(
                    conditions=[
                        conditions.true(
                            type_,
                            constants.REASON_DISABLED,
                            "spec.dns.management is Disabled: the operator neither configures nor checks DNS." + note,
                        )
                    ],
                    recorded={"dns": {"management": management}},
                )
            cond = self._verify_external(ctx)
            return StepResult(
                conditions=[conditions.Condition(cond.type, cond.status, cond.reason, cond.message + note)],
                recorded={"dns": {"management": management}},
            )
        return self._coredns(ctx)

    def _read(self, ctx: StepContext) -> tuple[Obj | None, Obj | None, Obj | None, Obj | None, Obj | None]:
        t = self.target
        kube = ctx.kube
        cm = kube.get("v1", "ConfigMap", t.config_map, t.namespace)
        custom = kube.get("v1", "ConfigMap", t.custom_config_map, t.namespace)
        deployment = kube.get("apps/v1", "Deployment", t.deployment, t.namespace)
        rke2 = kube.get("v1", "ConfigMap", t.rke2_config_map, t.namespace) if cm is None else None
        nodes = kube.request("GET", "/api/v1/nodes", query={"limit": "1"}).get("items") or []
        return cm, custom, deployment, rke2, (nodes[0] if nodes else None)

    def _coredns(self, ctx: StepContext) -> StepResult:
        type_ = constants.DNS_READY
        platform = ctx.platform
        spec = platform.spec
        t = self.target
        cm, custom, deployment, rke2, node = self._read(ctx)
        dist = detect_distribution(
            corefile_cm=cm, custom_cm=custom, deployment=deployment, node=node, rke2_cm=rke2, target=t
        )
        recorded: dict[str, Any] = {
            "dns": {"management": "CoreDNS", "distribution": dist.name, "mode": dist.mode},
        }

        def result(cond: Condition, **kwargs: Any) -> StepResult:
            return StepResult(conditions=[cond], recorded=recorded, **kwargs)

        if cm is None:
            if dist.name == "rke2":
                message = managed_message(dist, patched_corefile="", platform=platform, target=t)
                return result(conditions.false(type_, REASON_MANAGED_BY_DISTRIBUTION, message))
            return result(
                conditions.false(
                    type_,
                    REASON_COREDNS_NOT_FOUND,
                    f"ConfigMap {t.namespace}/{t.config_map} does not exist, so the cluster DNS is not CoreDNS as "
                    "the operator knows it; set spec.dns.management to External and configure DNS yourself.",
                )
            )
        text = str((cm.get("data") or {}).get(COREFILE_KEY) or "")
        try:
            desired_text = corefile.upsert_block(text, platform.name, spec.domain, spec.gateway.service_host)
            reload = corefile.has_reload(text)
            others = self._others_with_domain(text, platform.name, spec.domain)
        except corefile.CorefileError as exc:
            return result(
                conditions.false(
                    type_,
                    REASON_COREFILE_UNSUPPORTED,
                    f"The Corefile in ConfigMap {t.namespace}/{t.config_map} cannot be edited safely: {exc}. "
                    "Fix it, or set spec.dns.management to External and configure DNS yourself.",
                )
            )
        if others:
            return result(
                conditions.false(
                    type_,
                    constants.REASON_CONFLICT,
                    f"TenantPlatform {', '.join(others)} already rewrites {spec.domain} in the Corefile; two platforms "
                    "cannot share a domain.",
                )
            )
        if dist.mode == MODE_MANAGED:
            recorded["dns"]["evidence"] = dist.evidence
            return result(
                conditions.false(
                    type_,
                    REASON_MANAGED_BY_DISTRIBUTION,
                    managed_message(dist, patched_corefile=desired_text, platform=platform, target=t),
                )
            )
        if dist.mode == MODE_IMPORT:
            return self._import_mode(ctx, cm, custom=custom, deployment=deployment, dist=dist, recorded=recorded)

        # corefile mode: our block in the main Corefile; our .override key (if any) removed.
        where = f"ConfigMap {t.namespace}/{t.config_map}"
        recorded["dns"]["configMap"] = f"{t.namespace}/{t.config_map}"
        if desired_text != text and ctx.dry_run:
            return result(
                conditions.false(
                    type_,
                    REASON_WOULD_CONFIGURE,
                    f"The operator would add `{corefile.rewrite_line(spec.domain, spec.gateway.service_host)}` to the "
                    f"Corefile in {where}.",
                )
            )
        live = cm
        if desired_text != text:
            live = self._edit_corefile(
                ctx,
                cm,
                lambda current: corefile.upsert_block(current, platform.name, spec.domain, spec.gateway.service_host),
            )
            ctx.events.append(("Normal", "CorefileUpdated", f"Added the rewrite for {spec.domain} to {where}."))
        if (
            not ctx.dry_run
            and custom is not None
            and corefile.override_key(platform.name) in (custom.get("data") or {})
        ):
            self._patch_custom(ctx, corefile.override_key(platform.name), None)
        pods = self._pods(ctx, deployment)
        verdict = pickup(pods=pods, changed=changed_at(live), now=ctx.now, reload=reload, mode=MODE_COREFILE, target=t)
        head = (
            f"The Corefile in {where} rewrites {spec.domain} to {spec.gateway.service_host} (block "
            f"'{corefile.begin_marker(platform.name)}'). "
        )
        return result(
            conditions.Condition(type_, verdict.status, verdict.reason, head + verdict.sentence),
            progressing=verdict.reason == REASON_RELOAD_PENDING,
            requeue_after=verdict.requeue_after,
        )

    def _import_mode(
        self,
        ctx: StepContext,
        cm: Obj,
        *,
        custom: Obj | None,
        deployment: Obj | None,
        dist: Distribution,
        recorded: dict[str, Any],
    ) -> StepResult:
        type_ = constants.DNS_READY
        platform = ctx.platform
        spec = platform.spec
        t = self.target
        key = corefile.override_key(platform.name)
        wanted = corefile.render_override(platform.name, spec.domain, spec.gateway.service_host)
        where = f"ConfigMap {t.namespace}/{t.custom_config_map}"
        recorded["dns"].update({"configMap": f"{t.namespace}/{t.custom_config_map}", "key": key})
        current = (custom or {}).get("data", {}) or {}
        live = custom
        if current.get(key) != wanted:
            if ctx.dry_run:
                return StepResult(
                    conditions=[
                        conditions.false(
                            type_,
                            REASON_WOULD_CONFIGURE,
                            f"The operator would write key {key} with the rewrite for {spec.domain} into {where} "
                            f"({dist.evidence}).",
                        )
                    ],
                    recorded=recorded,
                )
            live = self._patch_custom(ctx, key, wanted)
            ctx.events.append(("Normal", "CorednsCustomUpdated", f"Wrote key {key} of {where}."))
        # A block we wrote into the main Corefile before (now reverted by the distribution anyway).
        text = str((cm.get("data") or {}).get(COREFILE_KEY) or "")
        if not ctx.dry_run and corefile.block_for(text, platform.name) is not None:
            self._edit_corefile(ctx, cm, lambda current: corefile.remove_block(current, platform.name))
        verdict = pickup(
            pods=self._pods(ctx, deployment),
            changed=changed_at(live),
            now=ctx.now,
            reload=True,
            mode=MODE_IMPORT,
            target=t,
        )
        who = dist.name if dist.name != "generic" else "This cluster"
        head = (
            f"{who} imports CoreDNS overrides ({dist.evidence}): key "
            f"{key} of {where} rewrites {spec.domain} to {spec.gateway.service_host}. "
        )
        return StepResult(
            conditions=[conditions.Condition(type_, verdict.status, verdict.reason, head + verdict.sentence)],
            recorded=recorded,
        )

    @staticmethod
    def _others_with_domain(text: str, platform: str, domain: str) -> list[str]:
        line = f"rewrite name exact {domain} "
        return sorted(
            {
                b.platform
                for b in corefile.marked_blocks(text)
                if b.platform != platform and any(x.startswith(line) for x in b.body)
            }
        )

    # -- writes -----------------------------------------------------------------------------------

    def _edit_corefile(self, ctx: StepContext, first: Obj | None, edit: Callable[[str], str]) -> Obj:
        """Read-modify-write of the Corefile with a resourceVersion precondition; retries on 409.

        ``first`` is the object already read (saves one GET). Returns the object as written, or
        as read when the edit is a no-op.
        """
        t = self.target
        live = first
        for _attempt in range(MAX_ATTEMPTS):
            if live is None:
                live = ctx.kube.get("v1", "ConfigMap", t.config_map, t.namespace)
                if live is None:
                    raise errors.NotFound(404, "NotFound", f"ConfigMap {t.namespace}/{t.config_map} disappeared")
            text = str((live.get("data") or {}).get(COREFILE_KEY) or "")
            new = edit(text)
            if new == text:
                return live
            body = copy.deepcopy(live)
            body.setdefault("apiVersion", "v1")
            body.setdefault("kind", "ConfigMap")
            body["metadata"].pop("managedFields", None)  # keep the server's record of field owners
            body.setdefault("data", {})[COREFILE_KEY] = new
            try:
                return ctx.kube.replace(body)
            except errors.Conflict:
                ctx.logger.info("Corefile in %s/%s changed while we edited it; retrying", t.namespace, t.config_map)
                live = None
        raise CorefileConflict(
            f"The Corefile in ConfigMap {t.namespace}/{t.config_map} changed under the operator {MAX_ATTEMPTS} times "
            "in a row; it will retry shortly."
        )

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

    def _remove(self, ctx: StepContext) -> bool:
        """Remove our Corefile block and our import key; True when something was removed."""
        t = self.target
        platform = ctx.platform.name
        removed = False
        cm = ctx.kube.get("v1", "ConfigMap", t.config_map, t.namespace)
        if cm is not None:
            text = str((cm.get("data") or {}).get(COREFILE_KEY) or "")
            if corefile.block_for(text, platform) is not None:
                self._edit_corefile(ctx, cm, lambda current: corefile.remove_block(current, platform))
                removed = True
        custom = ctx.kube.get("v1", "ConfigMap", t.custom_config_map, t.namespace)
        if custom is not None and corefile.override_key(platform) in (custom.get("data") or {}):
            self._patch_custom(ctx, corefile.override_key(platform), None)
            removed = True
        return removed

    # -- reads ------------------------------------------------------------------------------------

    def _pods(self, ctx: StepContext, deployment: Obj | None) -> list[Obj]:
        match = ((((deployment or {}).get("spec") or {}).get("selector") or {}).get("matchLabels")) or {
            "k8s-app": "kube-dns"
        }
        selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
        return ctx.kube.list("v1", "Pod", self.target.namespace, label_selector=selector)

    def _verify_external(self, ctx: StepContext) -> Condition:
        type_ = constants.DNS_READY
        spec = ctx.platform.spec
        if not ctx.settings.in_cluster:
            return conditions.unknown(
                type_,
                REASON_NOT_VERIFIABLE,
                f"spec.dns.management is External and the operator runs outside the cluster, so it cannot check "
                f"what pods resolve {spec.domain} to; run it in-cluster, or check from a pod that "
                f"`getent hosts {spec.domain}` returns the gateway Service's address.",
            )
        expected: set[str] = set()
        parsed = service_of(spec.gateway.service_host)
        if parsed is not None:
            service = ctx.kube.get("v1", "Service", parsed[0], parsed[1])
            if service is not None:
                svc_spec = service.get("spec") or {}
                expected |= {
                    ip for ip in svc_spec.get("clusterIPs") or [svc_spec.get("clusterIP")] if ip and ip != "None"
                }
                for ingress in (service.get("status") or {}).get("loadBalancer", {}).get("ingress") or []:
                    if ingress.get("ip"):
                        expected.add(str(ingress["ip"]))
        try:
            addresses = self.resolver(spec.domain)
        except OSError as exc:
            return conditions.false(
                type_,
                REASON_DOES_NOT_RESOLVE,
                f"{spec.domain} does not resolve from the operator's pod ({exc}); add a DNS record for it pointing "
                f"at the gateway, or set spec.dns.management to CoreDNS.",
            )
        if expected & set(addresses):
            return conditions.true(
                type_,
                REASON_RESOLVES,
                f"{spec.domain} resolves from the operator's pod to {', '.join(addresses)}, an address of the gateway "
                f"Service {spec.gateway.service_host}.",
            )
        return conditions.false(
            type_,
            REASON_RESOLVES_ELSEWHERE,
            f"{spec.domain} resolves from the operator's pod to {', '.join(addresses) or 'nothing'}, not to the "
            f"gateway Service {spec.gateway.service_host} ({', '.join(sorted(expected)) or 'no address found'}); "
            "fix the DNS record, or set spec.dns.management to CoreDNS.",
        )


STEP = DnsStep()
