"""The gpu step's per-pass reads for GPU discovery and HAMi's health (concerns/gpu/health.py judges them).

- NVIDIA RuntimeClasses (one LIST of ``node.k8s.io/v1`` RuntimeClasses): their nodeSelectors
  mark GPU nodes, with ``spec.gpu.nodeSelector``.
- With ``spec.gpu.hami.enabled``: the Deployments in HAMi's namespace (its scheduler) and the
  DaemonSets of the whole cluster (HAMi's device plugin, and every GPU device plugin: NVIDIA's
  runs in the GPU operator's namespace). Only when two or more GPU device-plugin DaemonSets exist
  are their pods listed (by each DaemonSet's selector) to find nodes running both.
- With GPU nodes: a server-side dry-run create of a GPU pod in the tenant namespace (HAMi's
  mutating webhook; nothing is stored). Not on every pass: the verdict is kept in memory (per
  API server, tenant namespace, HAMi namespace and count resource) while its inputs are unchanged
  (the resourceVersions of HAMi's Deployments and DaemonSets and of the tenant namespace, all
  read from the watch-fed cache) and younger than ``Settings.webhook_probe_interval``. A change
  to a MutatingWebhookConfiguration is seen within that interval: the operator may not watch
  them (docs/security.md). The verdict says when it was taken (``checkedAt``).

In the operator every read here is answered by the watch-fed cache (``main.cache_scopes``), so a
no-op pass makes no request for GPU health.

A read that fails is a note in status (``read_errors``), never a failed step: GPUReady still
reports what the snapshot shows.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from tenant_platform.concerns.gpu import health
from tenant_platform.concerns.gpu.health import HealthFacts, Selector, Workload
from tenant_platform.formats.hami.bounds import shorten
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj


def _failed(what: str, exc: errors.KubeError) -> str:
    return shorten(f"Could not {what}: {exc.status} {exc.reason or ''} {exc.message or ''}".strip(), 200)


def read_selectors(kube: Kube, spec_selector: Selector | None) -> tuple[tuple[Selector, ...], tuple[str, ...], str]:
    """(selectors, NVIDIA RuntimeClass names, read error or "")."""
    selectors = [spec_selector] if spec_selector is not None else []
    try:
        classes = kube.list("node.k8s.io/v1", "RuntimeClass")
    except errors.KubeError as exc:
        return tuple(selectors), (), _failed("list RuntimeClasses", exc)
    found, names = health.runtime_class_selectors(classes)
    return tuple(selectors + found), tuple(names), ""


def _plugin_nodes(kube: Kube, plugins: list[Workload], problems: list[str]) -> dict[str, tuple[str, ...]]:
    """Node -> GPU device-plugin DaemonSets with a pod there (only asked with two or more)."""
    if len(plugins) < 2:
        return {}
    out: dict[str, set[str]] = {}
    for plugin in plugins[: health.MAX_PLUGIN_DAEMONSETS]:
        if not plugin.selector:
            continue
        selector = ",".join(f"{k}={v}" for k, v in sorted(plugin.selector.items()))
        try:
            pods = kube.list("v1", "Pod", plugin.namespace, label_selector=selector)
        except errors.KubeError as exc:
            problems.append(_failed(f"list the pods of DaemonSet {plugin.ref}", exc))
            continue
        for pod in pods:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node:
                out.setdefault(node, set()).add(plugin.ref)
    return {node: tuple(sorted(refs)) for node, refs in out.items()}


def read_health(
    kube: Kube,
    *,
    hami_namespace: str,
    tenant_namespace: str,
    count_resource: str,
    runtime_classes: tuple[str, ...],
    gpu_nodes: Collection[str],
    problems: list[str],
    now: datetime,
    probe_interval: float,
) -> HealthFacts:
    """HAMi's workloads, GPU device plugins per node, and the webhook dry run (reads only)."""
    workloads: list[Workload] = []
    read = True
    inputs: list[str] = []
    try:
        deployments = kube.list("apps/v1", "Deployment", hami_namespace)
        all_daemonsets = kube.list("apps/v1", "DaemonSet")
    except errors.KubeError as exc:
        problems.append(_failed("list HAMi's Deployments and the cluster's DaemonSets", exc))
        deployments, all_daemonsets, read = [], [], False
    workloads += [health.workload(d) for d in deployments]
    daemonsets = [health.workload(d) for d in all_daemonsets]
    ours = [o for o in all_daemonsets if (o.get("metadata") or {}).get("namespace") == hami_namespace]
    inputs += [_version(o) for o in deployments + ours]
    workloads = [w for w in workloads if w.role]
    workloads += [d for d in daemonsets if (d.role and d.namespace == hami_namespace) or d.gpu_plugin]
    plugins = sorted((d for d in daemonsets if d.gpu_plugin), key=lambda d: d.ref)
    plugin_nodes = _plugin_nodes(kube, plugins, problems)
    probe = None
    if gpu_nodes:
        probe = _webhook_verdict(
            kube, tenant_namespace, count_resource, hami_namespace, inputs, now=now, interval=probe_interval
        )
    return HealthFacts(
        namespace=hami_namespace,
        workloads=tuple(workloads[:32]),
        plugin_nodes=plugin_nodes,
        webhook=probe,
        runtime_classes=runtime_classes,
        read_errors=tuple(problems[:4]),
        read=read,
    )


def _version(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')}/{meta.get('namespace')}/{meta.get('name')}@{meta.get('resourceVersion')}"


@dataclass(frozen=True)
class _Verdict:
    inputs: tuple[str, ...]
    at: datetime
    probe: health.WebhookProbe


_VERDICTS: dict[tuple[str, str, str, str], _Verdict] = {}
_VERDICTS_LOCK = threading.Lock()
MAX_VERDICTS = 4096
"""Kept verdicts (one per API server, tenant namespace, HAMi namespace and count resource)."""


def forget_webhook_verdicts() -> None:
    """Drop every kept dry-run verdict (the next pass of each platform checks again)."""
    with _VERDICTS_LOCK:
        _VERDICTS.clear()


def _webhook_verdict(
    kube: Kube,
    namespace: str,
    count_resource: str,
    hami_namespace: str,
    inputs: list[str],
    *,
    now: datetime,
    interval: float,
) -> health.WebhookProbe:
    """The kept verdict when its inputs are unchanged and it is younger than ``interval``, else a
    fresh dry run. Inputs: HAMi's workloads (listed by the caller) and the tenant namespace."""
    try:
        tenant = kube.get("v1", "Namespace", namespace)
    except errors.KubeError:
        tenant = None  # the dry run reports what is wrong with it
    key = (kube.server, namespace, hami_namespace, count_resource)
    current = (*sorted(inputs), _version(tenant) if tenant is not None else "absent")
    with _VERDICTS_LOCK:
        kept = _VERDICTS.get(key)
    if kept is not None and kept.inputs == current and timedelta(0) <= now - kept.at < timedelta(seconds=interval):
        return kept.probe
    at = now.replace(microsecond=0)
    probe = _dry_run(kube, namespace, count_resource, checked_at=at)
    with _VERDICTS_LOCK:
        if len(_VERDICTS) >= MAX_VERDICTS:
            _VERDICTS.clear()
        _VERDICTS[key] = _Verdict(current, at, probe)
    return probe


def _dry_run(kube: Kube, namespace: str, count_resource: str, *, checked_at: datetime) -> health.WebhookProbe:
    try:
        returned = kube.create(health.probe_pod(namespace, count_resource), dry_run=True)
    except errors.KubeError as exc:
        probe = health.probe_result(namespace, pod=None, error=exc.message or str(exc), status=exc.status)
    else:
        probe = health.probe_result(namespace, pod=returned)
    return dataclasses.replace(probe, checked_at=checked_at.isoformat().replace("+00:00", "Z"))
