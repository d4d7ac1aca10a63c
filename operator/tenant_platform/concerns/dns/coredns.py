"""What the cluster's CoreDNS is, who manages it, and whether it loaded our change (pure).

- ``CoreDNSTarget``: where CoreDNS's configuration lives (kube-system by default; tests point it
  at a scratch namespace).
- ``detect_distribution``: which path the rewrite takes (``Mode``), from the CoreDNS ConfigMaps and
  Deployment and one Node: ``corefile`` (a plain CoreDNS ConfigMap), ``import`` (the Corefile
  imports ``*.override`` files from ``coredns-custom``: k3s, AKS) or ``managed`` (k0s, RKE2, the
  addon manager in Reconcile mode, k3s without the import). ``managed_message`` says exactly what
  to change in the distribution's own configuration.
- ``pickup``: whether the running CoreDNS pods loaded our last change, judged from their start
  times against the time of our last write (``changed_at``: our managedFields entry, server time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import DNS
from tenant_platform.api.status.dns import Mode
from tenant_platform.core import conditions
from tenant_platform.formats import corefile

Obj = dict[str, Any]
COREFILE_KEY = "Corefile"
# kubelet refreshes ConfigMap volumes within about a minute (sync period plus cache TTL) and the
# reload plugin checks every 30s (plus up to 15s jitter).
RELOAD_GRACE = timedelta(seconds=150)
# The CoreDNS pods' labels when the Deployment names no selector (kubeadm's).
DEFAULT_POD_LABELS = {"k8s-app": "kube-dns"}
# The label Kamaji's add-ons put on what they manage in a tenant cluster (clastix/kamaji
# internal/constants/labels.go); its CoreDNS add-on writes the whole ConfigMap's data back on
# every reconcile (internal/resources/addons/coredns.go, clastix/kamaji#742).
KAMAJI_LABEL = "kamaji.clastix.io/project"
KAMAJI_LABEL_VALUE = "kamaji"


@dataclass(frozen=True)
class CoreDNSTarget:
    """Where CoreDNS's configuration lives (tests point this at a scratch namespace)."""

    namespace: str = "kube-system"
    config_map: str = "coredns"
    custom_config_map: str = "coredns-custom"
    deployment: str = "coredns"
    rke2_config_map: str = "rke2-coredns-rke2-coredns"

    @property
    def restart(self) -> str:
        """The command that restarts CoreDNS, quoted for a message."""
        return f"`kubectl -n {self.namespace} rollout restart deployment/{self.deployment}`"


@dataclass(frozen=True)
class Distribution:
    name: str
    """k0s, k3s, rke2, aks, addon-manager or generic."""
    mode: Mode
    evidence: str


def corefile_text(config_map: Obj | None) -> str:
    """The ``Corefile`` key of a CoreDNS ConfigMap ("" when absent)."""
    return str(((config_map or {}).get("data") or {}).get(COREFILE_KEY) or "")


def pod_selector(deployment: Obj | None) -> str:
    """The label selector of the CoreDNS pods: the Deployment's, else kubeadm's labels."""
    match = ((((deployment or {}).get("spec") or {}).get("selector") or {}).get("matchLabels")) or DEFAULT_POD_LABELS
    return ",".join(f"{k}={v}" for k, v in sorted(match.items()))


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
    """Which path the rewrite takes, from what the cluster shows."""
    node_name, node_evidence = _node_distribution(node)
    cm_labels = ((corefile_cm or {}).get("metadata") or {}).get("labels") or {}
    if cm_labels.get(KAMAJI_LABEL) == KAMAJI_LABEL_VALUE:
        return Distribution(
            "kamaji",
            Mode.MANAGED,
            f"ConfigMap {target.namespace}/{target.config_map} is labelled {KAMAJI_LABEL}={KAMAJI_LABEL_VALUE} "
            "(Kamaji's CoreDNS add-on)",
        )
    if any("k0sproject.io" in k for k in _meta_keys(corefile_cm) + _meta_keys(deployment)):
        return Distribution("k0s", Mode.MANAGED, "the CoreDNS objects carry k0sproject.io labels or annotations")
    if node_name == "k0s":
        return Distribution("k0s", Mode.MANAGED, node_evidence)
    if corefile_cm is None:
        if rke2_cm is not None:
            return Distribution(
                "rke2", Mode.MANAGED, f"CoreDNS is configured by ConfigMap {target.namespace}/{target.rke2_config_map}"
            )
        return Distribution(node_name or "generic", Mode.MANAGED, "no CoreDNS ConfigMap")
    try:
        imports = corefile.override_imports(corefile_text(corefile_cm))
    except corefile.CorefileError:
        imports = []
    if imports and (custom_cm is not None or _mounts_custom(deployment, target.custom_config_map)):
        return Distribution(
            node_name or "generic",
            Mode.IMPORT,
            f"the Corefile imports {imports[0]} from ConfigMap {target.namespace}/{target.custom_config_map}",
        )
    labels = (corefile_cm.get("metadata") or {}).get("labels") or {}
    if labels.get("addonmanager.kubernetes.io/mode") == "Reconcile":
        return Distribution(
            node_name or "addon-manager",
            Mode.MANAGED,
            f"ConfigMap {target.namespace}/{target.config_map} is labelled addonmanager.kubernetes.io/mode=Reconcile",
        )
    cm_keys = _meta_keys(corefile_cm)
    if node_name == "k3s" or any(k.startswith("objectset.rio.cattle.io/") for k in cm_keys):
        return Distribution(
            "k3s", Mode.MANAGED, node_evidence or "the CoreDNS ConfigMap is applied by k3s's deploy controller"
        )
    return Distribution(node_name or "generic", Mode.COREFILE, "a plain CoreDNS ConfigMap")


def managed_message(
    dist: Distribution, *, patched_corefile: str, platform: TenantPlatform, target: CoreDNSTarget
) -> str:
    """What to change in the distribution's own configuration, exactly."""
    spec = platform.spec
    rewrite = corefile.rewrite_line(spec.domain, spec.gateway.service_host)
    if dist.name == "k0s":
        return k0s_instructions(dist, patched_corefile=patched_corefile, target=target)
    if dist.name == "kamaji":
        return kamaji_message(dist, platform=platform, target=target)
    if dist.name == "rke2":
        return (
            f"RKE2 deploys CoreDNS with its rke2-coredns Helm chart ({dist.evidence}) and reverts edits, so the "
            "operator did not edit it. Add the rewrite through a HelmChartConfig named rke2-coredns in "
            f"{target.namespace}: in valuesContent, add to servers[0].plugins (before the kubernetes plugin) "
            f"the entry {{name: rewrite, parameters: name exact {spec.domain} {spec.gateway.service_host}}}. "
            "Warning: Helm replaces a list value whole, so servers (and its plugins) in valuesContent must be "
            "the chart's complete list with the entry added (copy it from `helm get values -a rke2-coredns -n "
            f"{target.namespace}`), or CoreDNS loses every other plugin. DNSReady turns True once the "
            f"chart's ConfigMap {target.namespace}/{target.rke2_config_map} holds the rewrite."
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


def kamaji_message(dist: Distribution, *, platform: TenantPlatform, target: CoreDNSTarget) -> str:
    """Kamaji's CoreDNS add-on has no durable place for the rewrite: say so, and what does work."""
    spec = platform.spec
    rewrite = corefile.rewrite_line(spec.domain, spec.gateway.service_host)
    return (
        f"Kamaji's CoreDNS add-on manages this tenant's CoreDNS ({dist.evidence}): it writes the whole "
        f"ConfigMap {target.namespace}/{target.config_map} back to its own Corefile on every reconcile and "
        "offers no setting for extra Corefile lines (clastix/kamaji#742), so there is no durable way to carry "
        "the rewrite there and the operator does not edit it (an edit would be undone, and editing it back "
        "would fight Kamaji). Either remove spec.addons.coreDNS from the TenantControlPlane and deploy "
        f"CoreDNS yourself (then the operator adds `{rewrite}` to that Corefile), or set spec.dns.management "
        "to External and publish a DNS record for the domain."
    )


def k0s_instructions(dist: Distribution, *, patched_corefile: str, target: CoreDNSTarget) -> str:
    """The checklist's k0s procedure: a StrategicMergePatch of the whole Corefile in the ClusterConfig.

    k0s puts its ``coredns`` ConfigMap back, so the change goes into the k0s configuration on every
    controller node; which file, the datastore it must keep, and the validate/backup/restart steps
    are spelled out because a configuration naming another datastore brings the cluster up empty.
    """
    content = "\n".join("                  " + line for line in patched_corefile.rstrip("\n").splitlines())
    return (
        f"k0s manages CoreDNS ({dist.evidence}) and puts ConfigMap {target.namespace}/{target.config_map} back, "
        "so the operator did not edit it. On every controller node:\n"
        "1. Find the k0s configuration file: `systemctl cat k0scontroller` shows --config=<file>; without it "
        "k0s reads /etc/k0s/k0s.yaml if present, else built-in defaults. A file that exists gets only the "
        "spec.network.coreDNS addition below.\n"
        "2. Keep the datastore: /run/k0s/k0s.yaml shows the running spec.storage.type (etcd or kine). A new file "
        "must set the same type (a --single node runs on kine; `k0s config create` writes etcd, and restarting "
        "with the wrong type brings the cluster up on a new, empty datastore). With kine and a custom "
        "--data-dir, copy kine.dataSource too.\n"
        "3. Add this patch (the content is the whole live Corefile with the rewrite added):\n"
        "apiVersion: k0s.k0sproject.io/v1beta1\n"
        "kind: ClusterConfig\n"
        "spec:\n"
        "  network:\n"
        "    coreDNS:\n"
        "      patches:\n"
        f"        - target: {{kind: ConfigMap, name: {target.config_map}, namespace: {target.namespace}}}\n"
        "          patch:\n"
        "            type: StrategicMergePatch\n"
        "            content: |\n"
        "              data:\n"
        f"                {COREFILE_KEY}: |\n"
        f"{content}\n"
        "4. `k0s config validate --config <file>`, then `k0s backup --save-path <dir>` (the archive holds the "
        "datastore and private keys: keep it off the node), then `systemctl restart k0scontroller`."
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
    reason: DNS
    sentence: str
    requeue_after: float | None = None


def pickup(
    *,
    pods: list[Obj],
    changed: datetime | None,
    now: datetime,
    reload: bool,
    mode: Mode,
    target: CoreDNSTarget,
) -> Pickup:
    """Whether running CoreDNS pods have loaded our last change."""
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running" and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    reload_note = (
        "" if reload or mode != Mode.COREFILE else " The server block has no reload plugin: later edits need a restart."
    )
    if not running:
        return Pickup(
            "True",
            DNS.CONFIGURED,
            "No CoreDNS pod is running, so whether CoreDNS loaded the change could not be checked; pods load the "
            "current configuration when they start." + reload_note,
        )
    if changed is None:
        return Pickup(
            "True",
            DNS.CONFIGURED,
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
            DNS.CONFIGURED,
            f"All {len(running)} running CoreDNS pods started after the change, so they loaded it.",
        )
    names = ", ".join(sorted(stale))
    at = conditions.format_time(changed)
    if mode == Mode.IMPORT:
        return Pickup(
            "False",
            DNS.RESTART_REQUIRED,
            f"CoreDNS pods {names} started before the change at {at}; the reload plugin only notices "
            f"changes to the main Corefile, not to imported files, so restart CoreDNS: {target.restart}.",
        )
    if not reload:
        return Pickup(
            "False",
            DNS.RELOAD_PLUGIN_MISSING,
            f"CoreDNS pods {names} started before the change at {at} and the server block has no reload "
            f"plugin, so they still serve the old Corefile; restart CoreDNS: {target.restart} (and add `reload` to "
            "the server block so later edits load by themselves).",
        )
    remaining = (changed + RELOAD_GRACE - now).total_seconds()
    if remaining > 0:
        return Pickup(
            "False",
            DNS.RELOAD_PENDING,
            f"Changed at {at}; CoreDNS pods {names} pick it up through the reload plugin within about "
            f"{int(RELOAD_GRACE.total_seconds())}s of the change.",
            requeue_after=max(remaining, 1.0),
        )
    return Pickup(
        "True",
        DNS.CONFIGURED,
        f"Changed at {at}; the reload plugin has had time to load it into pods {names} (not confirmed "
        f"by CoreDNS itself; if the domain does not resolve, restart CoreDNS: {target.restart}).",
    )


def platforms_concerned(old: Obj | None, new: Obj | None) -> tuple[str, ...] | None:
    """Which platforms a change of the CoreDNS ConfigMap concerns (the read cache wakes only them).

    When the change only adds or rewrites marked blocks (``# BEGIN tenant-platform <name>``):
    the names of those blocks, so one platform writing its block does not wake every other one
    (with N platforms converging, N writes each woke N passes). None, meaning every platform,
    for anything else: a block removed (a platform refused for a domain another one held may
    take it now), a change outside the blocks, another key, labels or annotations (the
    adoptable-by opt-in), an unreadable Corefile, or the object created or deleted.
    """
    if old is None or new is None:
        return None
    for part in ("labels", "annotations"):
        if ((old.get("metadata") or {}).get(part) or {}) != ((new.get("metadata") or {}).get(part) or {}):
            return None
    old_data, new_data = dict(old.get("data") or {}), dict(new.get("data") or {})
    old_text, new_text = old_data.pop(COREFILE_KEY, None), new_data.pop(COREFILE_KEY, None)
    if old_data != new_data or old.get("binaryData") != new.get("binaryData"):
        return None
    if not isinstance(old_text, str) or not isinstance(new_text, str):
        return None
    try:
        before, old_rest = _blocks_and_rest(old_text)
        after, new_rest = _blocks_and_rest(new_text)
    except corefile.CorefileError:
        return None
    if old_rest != new_rest or set(before) - set(after):
        return None
    return tuple(sorted(name for name, lines in after.items() if before.get(name) != lines))


def _blocks_and_rest(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """Each marked block's lines (markers included) by platform, and the lines outside them."""
    lines = text.splitlines()
    blocks: dict[str, list[str]] = {}
    inside: set[int] = set()
    for block in corefile.marked_blocks(text):
        if block.platform in blocks:  # the same name twice: not a change of one block
            raise corefile.CorefileError(f"two blocks for {block.platform}")
        blocks[block.platform] = lines[block.start : block.end + 1]
        inside.update(range(block.start, block.end + 1))
    return blocks, [line for i, line in enumerate(lines) if i not in inside]
