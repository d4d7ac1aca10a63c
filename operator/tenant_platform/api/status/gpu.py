"""Typed ``status.gpu`` (the GPUReady concern's section) and the GPU facts in ``status.recorded``.

``GpuStatus`` has three shapes, as the step writes them: ``{"summary": "disabled"}`` when both
labels and HAMi reporting are off; node names and labels only when HAMi reporting is off; and
per-node HAMi capacity, totals and resource names otherwise. Optional fields that are None are
left out of the JSON (``dump``), which is how each shape drops what it does not report.
"""

from __future__ import annotations

from pydantic import Field

from tenant_platform.api.status import StatusModel


class SlotCount(StatusModel):
    total: int
    used: int


class Amount(StatusModel):
    """Memory (MiB) or cores (percent of a card): total, used and free."""

    total: int
    used: int
    free: int


class NodeLockStatus(StatusModel):
    """HAMi's node lock (``hami.io/mutex.lock``); ``{"held": false}`` when there is none."""

    held: bool
    since: str | None = None
    pod: str | None = None
    """``<namespace>/<pod>``, or "" for a legacy lock that names no pod."""
    state: str | None = None
    stale: bool | None = None
    reason: str | None = None


class GpuFit(StatusModel):
    """What the largest request could get: on one node (``nodes[].fit``) or any node (``total.fit``).

    Over schedulable cards with a free sharing slot: the most free memory (MiB) and the most free
    cores (percent) on any one card (not necessarily the same card), and how many cards are
    completely unused (an exclusive, whole-card request fits them).
    """

    largest_free_memory_mib: int = Field(alias="largestFreeMemoryMiB")
    largest_free_cores_percent: int
    free_cards: int


class GpuNodeStatus(StatusModel):
    """One GPU node in ``status.gpu.nodes`` (name and labelled only without HAMi reporting)."""

    name: str
    labelled: bool
    registered: bool | None = None
    cards: int | None = None
    models: dict[str, int] | None = None
    slots: SlotCount | None = None
    memory_mib: Amount | None = Field(default=None, alias="memoryMiB")
    cores_percent: Amount | None = None
    unhealthy_cards: int | None = None
    pods: int | None = None
    lock: NodeLockStatus | None = None
    cordoned_cards: int | None = None
    unparseable: str | None = None
    """Why the register annotation cannot be parsed (at most 200 characters)."""
    ignored_pods: list[str] | None = None
    """At most 5 pods placed here whose allocation annotation cannot be parsed, with why."""
    ignored_pod_count: int | None = None
    """How many pods placed here were ignored for a malformed allocation annotation."""
    fit: GpuFit | None = None
    detected_by: list[str] | None = None
    """What made it a GPU node: capacity, label, register, runtimeHandler, runtimeClass, nodeSelector."""
    taints: list[str] | None = None
    """NoSchedule/NoExecute taints (``key=value:Effect``, at most 8)."""
    device_plugin_conflict: str | None = None
    """Why two device plugins seem to run here."""


class GpuTotal(StatusModel):
    """The cluster roll-up (``nodes`` only without HAMi reporting)."""

    nodes: int
    cards: int | None = None
    models: dict[str, int] | None = None
    slots: SlotCount | None = None
    memory_mib: Amount | None = Field(default=None, alias="memoryMiB")
    cores_percent: Amount | None = None
    unhealthy_cards: int | None = None
    fit: GpuFit | None = None


class GpuLabelsStatus(StatusModel):
    wanted: dict[str, str]
    labelled_nodes: int


class ResourceNamesStatus(StatusModel):
    """HAMi's extended-resource names (also recorded as ``gpuResourceNames``)."""

    count: str
    memory: str
    memory_percentage: str
    cores: str
    priority: str


class ResourceNamesSource(ResourceNamesStatus):
    """The names and where they came from (the ConfigMap, or "defaults" and why)."""

    source: str


class WorkloadStatus(StatusModel):
    """A HAMi Deployment or DaemonSet: ``<namespace>/<name>``, desired and ready pods."""

    name: str
    kind: str
    desired: int
    ready: int


class WebhookProbeStatus(StatusModel):
    """The dry-run create of a GPU pod in the tenant namespace (HAMi's mutating webhook)."""

    namespace: str
    outcome: str
    """mutated, unmutated, unreachable (a webhook call failed), denied, failed or skipped."""
    scheduler_name: str | None = None
    webhook: str | None = None
    service: str | None = None
    detail: str | None = None
    checked_at: str | None = None
    """When the dry run ran (RFC 3339); the verdict is kept between checks while HAMi's workloads
    and the tenant namespace are unchanged, for at most the operator's webhook probe interval."""


class GpuHealthStatus(StatusModel):
    """``status.gpu.health``: how GPU nodes were found and HAMi's health (every list bounded)."""

    detected_by: dict[str, int] | None = None
    """Detection source -> GPU nodes it found (a node may count under several)."""
    runtime_classes: list[str] | None = None
    scheduler: WorkloadStatus | None = None
    device_plugin: WorkloadStatus | None = None
    webhook: WebhookProbeStatus | None = None
    device_plugin_conflicts: list[str] | None = None
    tainted_nodes: int | None = None
    notes: list[str] | None = None


class GpuStatus(StatusModel):
    """``status.gpu``."""

    nodes: list[GpuNodeStatus] | None = None
    total: GpuTotal | None = None
    summary: str
    labels: GpuLabelsStatus | None = None
    nodes_omitted: int | None = None
    resource_names: ResourceNamesSource | None = None
    ignored_pods: int | None = None
    """HAMi pods ignored for a malformed allocation annotation, on all nodes."""
    health: GpuHealthStatus | None = None


class GpuNodeRecord(StatusModel):
    """One GPU node in ``status.recorded.gpuNodes``: its main model and number of cards."""

    name: str
    model: str
    cards: int


class GpuRecorded(StatusModel):
    """What the gpu step records (``gpuResourceNames`` only with HAMi reporting)."""

    gpu_nodes: list[GpuNodeRecord]
    gpu_resource_names: ResourceNamesStatus | None = None
