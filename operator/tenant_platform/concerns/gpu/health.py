"""GPU node discovery beyond what a node advertises, and HAMi's health (pure).

Discovery (``detected_by``): besides GPU capacity, NVIDIA feature-discovery labels and HAMi's
register annotation (concerns/gpu/capacity.py ``is_gpu_node``), a node is a GPU node when

- its ``status.runtimeHandlers`` name an NVIDIA handler (``nvidia``, ``nvidia-cdi``, ...: the
  container toolkit configured the runtime there),
- an NVIDIA RuntimeClass (handler or name ``nvidia``) selects it with ``scheduling.nodeSelector``,
- or ``spec.gpu.nodeSelector`` selects it.

Without these a pure-HAMi cluster deadlocks: HAMi's device plugin runs only on nodes already
labelled ``gpu=on``, so an unlabelled GPU node advertises nothing and is never labelled.

Health, from what the gpu step read (concerns/gpu/healthreads.py):

- NoSchedule/NoExecute taints on GPU nodes: a note, never a failure (the operator cannot know
  which tolerations the platform's pods carry); ``GPUNodesTainted`` (still True) when every GPU
  node carries one besides ``<count resource>:NoSchedule``, which the ExtendedResourceToleration
  admission plugin tolerates for pods that request the resource. The node controller's condition
  taints (``node.kubernetes.io/not-ready``, ``unreachable``, ``unschedulable``, ...) describe the
  node's state, not a choice, and are left out;
- two device plugins on one node: pods of two GPU device-plugin DaemonSets on the node, or a node
  HAMi registers whose ``nvidia.com/gpu`` capacity is one per card where HAMi advertises its split
  count while another GPU device plugin than HAMi's exists (NVIDIA's own plugin registered the
  resource last): ``DevicePluginConflict``. HAMi's mock device plugin advertises no count resource
  and is never one of the two; a count set by hand (the mock's health gate) is no plugin's;
- HAMi's scheduler Deployment and device-plugin DaemonSet in HAMi's namespace not ready:
  ``HAMiSchedulerNotReady``, ``HAMiDevicePluginNotReady``; absent: a note;
- HAMi's mutating webhook: a server-side dry-run create of a GPU pod in the tenant namespace.
  An error naming a webhook call (``failed calling webhook "<name>"``: its service unreachable,
  the failure mode of a control plane without a working konnectivity path) is
  ``WebhookUnreachable``; a pod no webhook gave another scheduler is ``WebhookNotInPath`` when HAMi's
  scheduler is deployed (concerns/gpu/verdict.py: HAMi's chart default ``failurePolicy: Ignore``
  admits GPU pods unmutated when the webhook is unreachable), a note otherwise.

Everything that reaches status is bounded: at most MAX_NOTES notes of MAX_NOTE_CHARS, at most
MAX_LISTED_CONFLICTS device-plugin conflicts, names shortened.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from tenant_platform.api import constants, reasons
from tenant_platform.api.models import NodeSelector
from tenant_platform.api.status.gpu import GpuHealthStatus, WebhookProbeStatus, WorkloadStatus
from tenant_platform.formats.hami.bounds import MAX_NOTE_CHARS, shorten
from tenant_platform.formats.hami.register import Card

NVIDIA_HANDLER: Final = "nvidia"
DEVICE_PLUGIN_DIR: Final = "/var/lib/kubelet/device-plugins"
DEFAULT_SCHEDULER: Final = "default-scheduler"
SCHEDULER_COMPONENT: Final = "hami-scheduler"
DEVICE_PLUGIN_COMPONENT: Final = "hami-device-plugin"
MOCK_PLUGIN_COMPONENT: Final = "hami-mock-device-plugin"
"""HAMi's mock device plugin (its chart's ``mockDevicePlugin.enabled``, Project-HAMi/mock-device-plugin):
it advertises memory and cores (``nvidia.com/gpumem``, ``gpucores``, ``gpumem-percentage``), never
the count resource, so it is no second plugin for that resource."""
COMPONENT_LABEL: Final = "app.kubernetes.io/component"
CONDITION_TAINT_PREFIX: Final = "node.kubernetes.io/"
MAX_NOTES: Final = 8
MAX_LISTED_CONFLICTS: Final = 10
# GPU device-plugin DaemonSets whose pods are listed to find nodes running two of them.
MAX_PLUGIN_DAEMONSETS: Final = 8

# Detection sources, in the order status lists them.
CAPACITY, LABEL, REGISTER, RUNTIME_HANDLER, RUNTIME_CLASS, NODE_SELECTOR = (
    "capacity",
    "label",
    "register",
    "runtimeHandler",
    "runtimeClass",
    "nodeSelector",
)
SOURCES: Final = (CAPACITY, LABEL, REGISTER, RUNTIME_HANDLER, RUNTIME_CLASS, NODE_SELECTOR)

_WEBHOOK_CALL = re.compile(r'failed calling webhook "([^"]{1,253})"')
_WEBHOOK_DENIED = re.compile(r'admission webhook "([^"]{1,253})" denied')
_URL = re.compile(r'(?:Post|post) "?(https?://[^/"\s?]{1,300})')


# -- discovery ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        return False  # an operator we do not know selects nothing


@dataclass(frozen=True)
class Selector:
    """A label selector (Kubernetes semantics); an empty one selects nothing here, never every node."""

    source: str
    """RUNTIME_CLASS or NODE_SELECTOR."""
    match_labels: Mapping[str, str] = field(default_factory=dict)
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.match_labels and not self.expressions:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.expressions
        )


def spec_selector(selector: NodeSelector | None) -> Selector | None:
    """``spec.gpu.nodeSelector`` as a Selector (None when not set)."""
    if selector is None:
        return None
    return Selector(
        NODE_SELECTOR,
        dict(selector.match_labels),
        tuple(Requirement(r.key, r.operator, tuple(r.values)) for r in selector.match_expressions),
    )


def nvidia_handler(name: str) -> bool:
    return name == NVIDIA_HANDLER or name.startswith(NVIDIA_HANDLER + "-")


def runtime_class_selectors(runtime_classes: Iterable[Mapping[str, Any]]) -> tuple[list[Selector], list[str]]:
    """(selectors, names): the nodeSelector of every NVIDIA RuntimeClass, and every such class's name.

    A class without ``scheduling.nodeSelector`` runs anywhere, so it marks no node in particular.
    """
    selectors: list[Selector] = []
    found: list[str] = []
    for item in runtime_classes:
        meta = item.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not (nvidia_handler(str(item.get("handler") or "")) or name == NVIDIA_HANDLER):
            continue
        found.append(shorten(name, 63))
        node_selector = (item.get("scheduling") or {}).get("nodeSelector") or {}
        if isinstance(node_selector, Mapping) and node_selector:
            selectors.append(Selector(RUNTIME_CLASS, {str(k): str(v) for k, v in node_selector.items()}))
    return selectors, sorted(found)


def detected_by(
    *,
    advertised: Sequence[str],
    labels: Mapping[str, str],
    runtime_handlers: Iterable[str],
    selectors: Sequence[Selector],
) -> tuple[str, ...]:
    """Every source that makes a node a GPU node (``advertised``: what is_gpu_node found)."""
    sources = set(advertised)
    if any(nvidia_handler(h) for h in runtime_handlers):
        sources.add(RUNTIME_HANDLER)
    for selector in selectors:
        if selector.source not in sources and selector.matches(labels):
            sources.add(selector.source)
    return tuple(s for s in SOURCES if s in sources)


# -- workloads ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A Deployment or DaemonSet: its role for us, readiness and (plugins) pod selector."""

    kind: str
    namespace: str
    name: str
    desired: int
    ready: int
    role: Literal["scheduler", "device-plugin", "mock-device-plugin", ""] = ""
    gpu_plugin: bool = False
    """A DaemonSet whose pods mount the kubelet's device-plugin directory and mention nvidia, hami or
    gpu (not HAMi's mock device plugin: it advertises no count resource)."""
    selector: Mapping[str, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_ready(self) -> bool:
        return self.ready >= self.desired

    def status(self) -> WorkloadStatus:
        return WorkloadStatus(name=self.ref, kind=self.kind, desired=self.desired, ready=self.ready)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def workload(obj: Mapping[str, Any]) -> Workload:
    """A Deployment or DaemonSet body as a Workload (never raises for odd content)."""
    kind = str(obj.get("kind") or "")
    meta = _map(obj.get("metadata"))
    name = shorten(str(meta.get("name") or ""), 63)
    namespace = shorten(str(meta.get("namespace") or ""), 63)
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    template = _map(_map(spec.get("template")).get("spec"))
    component = str(_map(meta.get("labels")).get(COMPONENT_LABEL) or "")
    if kind == "DaemonSet":
        desired, ready = _int(status.get("desiredNumberScheduled")), _int(status.get("numberReady"))
    else:
        desired, ready = _int(spec.get("replicas", 1)), _int(status.get("readyReplicas"))
    role: Literal["scheduler", "device-plugin", "mock-device-plugin", ""] = ""
    images = [str(_map(c).get("image") or "") for c in _list(template.get("containers"))]
    if kind == "DaemonSet" and (
        component == MOCK_PLUGIN_COMPONENT
        or name.endswith("mock-device-plugin")
        or any("mock-device-plugin" in i for i in images)
    ):
        role = "mock-device-plugin"
    elif kind == "Deployment" and (component == SCHEDULER_COMPONENT or name.endswith(SCHEDULER_COMPONENT)):
        role = "scheduler"
    elif kind == "DaemonSet" and (component == DEVICE_PLUGIN_COMPONENT or name.endswith(DEVICE_PLUGIN_COMPONENT)):
        role = "device-plugin"
    mounts_plugins = any(
        str(_map(_map(v).get("hostPath")).get("path") or "").startswith(DEVICE_PLUGIN_DIR)
        for v in _list(template.get("volumes"))
    )
    words = " ".join([name, *images]).lower()
    gpu_plugin = (
        kind == "DaemonSet"
        and role != "mock-device-plugin"
        and mounts_plugins
        and any(w in words for w in ("nvidia", "hami", "gpu"))
    )
    match = _map(_map(spec.get("selector")).get("matchLabels"))
    selector = {str(k): str(v) for k, v in match.items()}
    return Workload(kind, namespace, name, desired, ready, role, gpu_plugin, selector)


# -- the webhook dry run --------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookProbe:
    """What the dry-run create of a GPU pod in the tenant namespace showed."""

    namespace: str
    outcome: Literal["mutated", "unmutated", "unreachable", "denied", "failed", "skipped"]
    scheduler_name: str = ""
    webhook: str = ""
    service: str = ""
    detail: str = ""
    checked_at: str = ""
    """When the dry run ran (RFC 3339): a verdict is kept between checks (concerns/gpu/healthreads.py).
    Named in the WebhookUnreachable message; notes leave it out (200 characters are for the detail)."""

    @property
    def when(self) -> str:
        return f" (dry run at {self.checked_at})" if self.checked_at else ""

    def status(self) -> WebhookProbeStatus:
        return WebhookProbeStatus(
            namespace=self.namespace,
            outcome=self.outcome,
            scheduler_name=self.scheduler_name or None,
            webhook=self.webhook or None,
            service=self.service or None,
            detail=self.detail or None,
            checked_at=self.checked_at or None,
        )


def probe_result(namespace: str, *, pod: Mapping[str, Any] | None, error: str = "", status: int = 0) -> WebhookProbe:
    """Classify the dry run: the returned pod (its schedulerName), or the API server's error."""
    if pod is not None:
        scheduler = str((pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER)
        outcome: Literal["mutated", "unmutated"] = "unmutated" if scheduler == DEFAULT_SCHEDULER else "mutated"
        return WebhookProbe(namespace, outcome, scheduler_name=shorten(scheduler, 63))
    url = _URL.search(error)
    service = shorten(url.group(1), 120) if url else ""
    if called := _WEBHOOK_CALL.search(error):
        return WebhookProbe(
            namespace, "unreachable", webhook=shorten(called.group(1), 120), service=service, detail=_detail(error)
        )
    if denied := _WEBHOOK_DENIED.search(error):
        return WebhookProbe(namespace, "denied", webhook=shorten(denied.group(1), 120), detail=_detail(error))
    if status == 404:
        return WebhookProbe(namespace, "skipped", detail=_detail(f"namespace {namespace} does not exist yet"))
    return WebhookProbe(namespace, "failed", detail=_detail(error))


def _detail(text: str) -> str:
    return shorten(" ".join(text.split()), MAX_NOTE_CHARS)


# -- findings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HealthFacts:
    """What concerns/gpu/healthreads.py read for one pass (empty when HAMi reporting is off)."""

    namespace: str = ""
    """HAMi's namespace (spec.gpu.hami.configMapNamespace)."""
    workloads: tuple[Workload, ...] = ()
    """HAMi's Deployments and DaemonSets in its namespace, and GPU device-plugin DaemonSets anywhere."""
    plugin_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Node -> GPU device-plugin DaemonSets with a pod there (only when two or more DaemonSets exist)."""
    webhook: WebhookProbe | None = None
    runtime_classes: tuple[str, ...] = ()
    read_errors: tuple[str, ...] = ()
    """Reads that failed (each a short sentence); what they would have shown is not judged."""
    read: bool = False
    """HAMi's workloads were read this pass (False: nothing is said about them)."""

    def role(self, role: str) -> list[Workload]:
        return [w for w in self.workloads if w.role == role and w.namespace == self.namespace]


def split_count_conflict(cards: Sequence[Card], capacity: int) -> str | None:
    """Why ``capacity`` of the count resource says NVIDIA's plugin registered last, or None.

    HAMi's device plugin advertises each card's split count (the register's ``count``); NVIDIA's
    advertises one per card. Only decidable when HAMi splits cards (a count above 1).
    """
    hami_total = sum(c.count for c in cards)
    if cards and hami_total > len(cards) and capacity == len(cards):
        return f"advertises {capacity} (one per card) where HAMi's device plugin advertises {hami_total}"
    return None


def other_count_plugins(facts: HealthFacts) -> list[Workload]:
    """GPU device-plugin DaemonSets besides HAMi's own device plugin (NVIDIA's, the GPU operator's):
    what else could advertise the count resource (HAMi's mock never does)."""
    return [w for w in facts.workloads if w.gpu_plugin and w.role != "device-plugin"]


def conflicts(facts: HealthFacts, split: Mapping[str, str], gpu_nodes: Iterable[str]) -> dict[str, str]:
    """GPU node -> why two device plugins advertise there: pods of two GPU device-plugin DaemonSets
    on the node, or a one-per-card capacity (``split``) while another GPU device plugin than HAMi's
    exists to have advertised it. Without one the capacity is no second plugin's: the mock-device
    lab sets ``nvidia.com/gpu`` by hand as the mock's health gate (any positive value works)."""
    others = other_count_plugins(facts)
    out: dict[str, str] = {}
    for node in sorted(gpu_nodes):
        plugins = facts.plugin_nodes.get(node, ())
        if len(plugins) > 1:
            out[node] = "device-plugin pods of " + " and ".join(plugins[:3])
        elif node in split and others:
            out[node] = f"{split[node]}; GPU device plugin besides HAMi's: {_names([w.ref for w in others], 2)}"
    return out


def taint_phrase(taint: tuple[str, str, str]) -> str:
    key, value, effect = taint
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def chosen_taints(taints: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Taints someone put on the node, not the node controller's condition taints (``node.kubernetes.io/``:
    not-ready, unreachable, unschedulable, pressure), which describe the node's state, not a choice."""
    return [t for t in taints if not t[0].startswith(CONDITION_TAINT_PREFIX)]


def blocking_taints(taints: Iterable[tuple[str, str, str]], count_resource: str) -> list[str]:
    """Chosen taints that keep a GPU pod away unless it tolerates them (the resource's NoSchedule is
    tolerated: the ExtendedResourceToleration admission plugin adds that toleration)."""
    return [taint_phrase(t) for t in chosen_taints(taints) if not (t[0] == count_resource and t[2] == "NoSchedule")]


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


Problem = tuple[reasons.GPU, str]


def problems(facts: HealthFacts, conflicting: Mapping[str, str], *, gpu_nodes: int) -> list[Problem]:
    """The health problems that make GPUReady False, most urgent first."""
    out: list[Problem] = []
    probe = facts.webhook
    if probe is not None and probe.outcome == "unreachable":
        via = f" (service {probe.service})" if probe.service else ""
        out.append(
            (
                reasons.GPU.WEBHOOK_UNREACHABLE,
                f"A dry-run GPU pod in namespace {probe.namespace}{probe.when} fails: the API server cannot call "
                f'webhook "{probe.webhook}"{via}, so every GPU pod there is rejected. '
                "Check the webhook's Service and "
                f"pods, and the control plane's path to the cluster network (konnectivity): {probe.detail}",
            )
        )
    if gpu_nodes:
        for role, reason, what in (
            ("scheduler", reasons.GPU.HAMI_SCHEDULER_NOT_READY, "HAMi's scheduler"),
            ("device-plugin", reasons.GPU.HAMI_DEVICE_PLUGIN_NOT_READY, "HAMi's device plugin"),
        ):
            lagging = [f"{w.kind} {w.ref} ({w.ready}/{w.desired} ready)" for w in facts.role(role) if not w.is_ready]
            if lagging:
                out.append((reason, f"{what} is not ready: {_names(lagging)}."))
    if conflicting:
        listed = [f"{node} ({why})" for node, why in conflicting.items()]
        out.append(
            (
                reasons.GPU.DEVICE_PLUGIN_CONFLICT,
                f"Two GPU device plugins on node(s) {_names(listed, 3)}: the kubelet keeps the last one to register "
                "the resource, so HAMi's accounting and the node disagree. Run only HAMi's device plugin on "
                "HAMi's nodes (e.g. the NVIDIA GPU operator with devicePlugin.enabled=false).",
            )
        )
    return out


def notes(facts: HealthFacts, *, tainted: Mapping[str, list[str]], gpu_nodes: int, hami_enabled: bool) -> list[str]:
    """Sentences that do not fail GPUReady (at most MAX_NOTES, each at most MAX_NOTE_CHARS)."""
    out: list[str] = []
    if tainted:
        listed = [f"{node} ({', '.join(t[:2])})" for node, t in sorted(tainted.items())]
        scope = "every GPU node" if len(tainted) == gpu_nodes else f"{len(tainted)} of {gpu_nodes} GPU node(s)"
        out.append(f"Taints on {scope}: {_names(listed, 3)}; the platform's GPU pods need matching tolerations.")
    for error in facts.read_errors:
        out.append(error)
    if hami_enabled and gpu_nodes and facts.read:
        for role, what in (("scheduler", "scheduler Deployment"), ("device-plugin", "device-plugin DaemonSet")):
            found = facts.role(role)
            if not found:
                out.append(f"No HAMi {what} found in namespace {facts.namespace} (spec.gpu.hami.configMapNamespace).")
            elif role == "device-plugin" and all(w.desired == 0 for w in found):
                out.append(
                    f"HAMi's device plugin ({found[0].ref}) runs on no node yet: its DaemonSet selects nodes "
                    "by the labels this platform applies."
                )
        probe = facts.webhook
        if probe is not None and probe.outcome == "unmutated" and not facts.role("scheduler"):
            # With HAMi's scheduler deployed this is WebhookNotInPath (concerns/gpu/verdict.py).
            out.append(
                f"No webhook gave the dry-run GPU pod in namespace {probe.namespace} another scheduler than "
                f"{DEFAULT_SCHEDULER}: HAMi's webhook does not handle GPU pods there, so HAMi does not schedule them."
            )
        elif probe is not None and probe.outcome in ("denied", "failed", "skipped"):
            out.append(f"The dry-run GPU pod in namespace {probe.namespace} was not judged by HAMi: {probe.detail}")
    return [shorten(n, MAX_NOTE_CHARS) for n in out[:MAX_NOTES]]


def health_status(
    facts: HealthFacts,
    *,
    detected: Mapping[str, int],
    conflicting: Mapping[str, str],
    tainted: int,
    notes: Sequence[str],
) -> GpuHealthStatus:
    """``status.gpu.health`` (bounded)."""
    scheduler = facts.role("scheduler")
    plugin = facts.role("device-plugin")
    return GpuHealthStatus(
        detected_by={k: v for k, v in detected.items() if v} or None,
        runtime_classes=list(facts.runtime_classes[:8]) or None,
        scheduler=scheduler[0].status() if scheduler else None,
        device_plugin=plugin[0].status() if plugin else None,
        webhook=facts.webhook.status() if facts.webhook is not None else None,
        device_plugin_conflicts=[f"{n}: {why}" for n, why in list(conflicting.items())[:MAX_LISTED_CONFLICTS]] or None,
        tainted_nodes=tainted or None,
        notes=list(notes) or None,
    )


# -- the dry-run GPU pod --------------------------------------------------------------------------

PROBE_NAME_PREFIX: Final = "tenant-platform-gpu-probe-"
PROBE_IMAGE: Final = "registry.k8s.io/pause:3.10.1"


def probe_pod(namespace: str, count_resource: str) -> dict[str, Any]:
    """A restricted-compliant pod asking for one GPU, created only as a server-side dry run.

    Istio's injector is kept out (``sidecar.istio.io/inject: "false"``) so that a failing
    webhook call is HAMi's (or another GPU webhook's), not the mesh's.
    """
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": PROBE_NAME_PREFIX,
            "namespace": namespace,
            "labels": {constants.LABEL_MANAGED_BY: constants.MANAGED_BY_VALUE, constants.LABEL_COMPONENT: "gpu"},
            "annotations": {"sidecar.istio.io/inject": "false"},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": PROBE_IMAGE,
                    "resources": {"limits": {count_resource: "1"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "readOnlyRootFilesystem": True,
                    },
                }
            ],
        },
    }
