"""`tenant-platform fit`: which GPU nodes could take a pod asking for this much GPU now, and for
each that cannot, the first reason (docs/gpu.md, "Will it fit?").

The answer is the gpu step's own: the same snapshot filling (observe/), the same capacity and the
same per-card fit (concerns/gpu/nodefit.py over concerns/gpu/fit.py). Against a cluster it reads,
read-only, what the snapshot reads (all Nodes, live Pods, HAMi's ConfigMap for the resource
names) and the TenantPlatforms; offline it reads a snapshot file written by ``--save-snapshot``
(``SNAPSHOT_KIND``: the trimmed Nodes and HAMi pods, the resource names, the platforms' GPU spec
and share status, and when it was taken; no Secret, no pod spec beyond container names, no
environment).

``--platform`` applies that tenant's GPU share (``spec.gpu.share``): quota admission adds the
pod's requests to what the namespace's quota has ``used`` (``status.gpuShare``, as the quota
controller computed it) and refuses the pod when that exceeds ``hard``; a refused pod fits no node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pydantic
import yaml

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform, parse_duration
from tenant_platform.api.status.gpu import ResourceNamesSource, ResourceNamesStatus
from tenant_platform.api.timestamps import format_time, parse_time
from tenant_platform.concerns.gpu import health, nodefit
from tenant_platform.concerns.gpu.facts import GpuFacts
from tenant_platform.concerns.gpu.fit import GpuRequest
from tenant_platform.concerns.gpu.step import read_resource_names
from tenant_platform.concerns.gpushare import manifests as share_manifests
from tenant_platform.formats.hami import names
from tenant_platform.formats.hami.names import ResourceNames
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.observe.cluster import LIVE_PODS, ClusterSnapshot
from tenant_platform.observe.objects import pod_info

SNAPSHOT_API_VERSION: Final = "tenancy.dev/v1alpha1"
SNAPSHOT_KIND: Final = "GpuFitSnapshot"
DEFAULT_HAMI_NAMESPACE: Final = "kube-system"
DEFAULT_LOCK_TIMEOUT: Final = timedelta(minutes=5)
"""HAMi's own node-lock timeout, used without --platform (a platform's spec.gpu.hami.nodeLockTimeout)."""


class FitError(Exception):
    """Bad input: an unreadable snapshot file, an unknown platform or namespace."""


# -- what the fit reads ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FitInputs:
    """Everything a fit is computed from, from a cluster or a snapshot file."""

    taken_at: datetime
    nodes: tuple[Obj, ...]
    pods: tuple[Obj, ...]
    names: ResourceNames = names.DEFAULT_NAMES
    names_source: str = "defaults"
    platforms: tuple[Obj, ...] = ()
    source: str = ""


def _extended(resources: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in sorted((resources or {}).items()) if "/" in str(k)}


def trim_node(body: Mapping[str, Any]) -> Obj:
    """What the snapshot keeps of a Node (observe/objects.py ``node_info`` reads no more)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    annotations = {k: str(v) for k, v in sorted((meta.get("annotations") or {}).items()) if k in names.NODE_ANNOTATIONS}
    node: Obj = {
        "metadata": {
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
            "labels": dict(meta.get("labels") or {}),
            "annotations": annotations,
        },
        "spec": {"taints": list(spec.get("taints") or [])},
        "status": {
            "capacity": _extended(status.get("capacity")),
            "allocatable": _extended(status.get("allocatable")),
            "runtimeHandlers": [
                {"name": h.get("name")} for h in status.get("runtimeHandlers") or [] if isinstance(h, dict)
            ],
        },
    }
    return node


def trim_pod(body: Mapping[str, Any]) -> Obj | None:
    """What the snapshot keeps of a HAMi pod (None for a pod HAMi did not place, or that ended):
    its HAMi annotations, phase, container names and init containers' exit codes."""
    if pod_info(body) is None:
        return None
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    annotations = {k: str(v) for k, v in sorted((meta.get("annotations") or {}).items()) if k in names.POD_ANNOTATIONS}
    init_statuses = []
    for entry in status.get("initContainerStatuses") or []:
        terminated = (entry.get("state") or {}).get("terminated")
        state = {"terminated": {"exitCode": terminated.get("exitCode")}} if terminated else {}
        init_statuses.append({"name": entry.get("name"), "state": state})
    return {
        "metadata": {"namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "annotations": annotations},
        "spec": {
            "initContainers": [{"name": c.get("name")} for c in spec.get("initContainers") or []],
            "containers": [{"name": c.get("name")} for c in spec.get("containers") or []],
        },
        "status": {"phase": status.get("phase", "Pending"), "initContainerStatuses": init_statuses},
    }


def trim_platform(body: Mapping[str, Any]) -> Obj:
    """A TenantPlatform's name, spec and what of its status a fit reads (the GPU share's use and
    the resource names the gpu step recorded)."""
    status = body.get("status") or {}
    kept: Obj = {}
    if status.get("gpuShare") is not None:
        kept["gpuShare"] = status["gpuShare"]
    recorded = (status.get("recorded") or {}).get("gpuResourceNames")
    if recorded is not None:
        kept["recorded"] = {"gpuResourceNames": recorded}
    return {
        "metadata": {"name": (body.get("metadata") or {}).get("name", "")},
        "spec": body.get("spec") or {},
        "status": kept,
    }


def read_cluster(kube: Kube, *, hami_namespace: str | None = None, platform: str | None = None) -> FitInputs:
    """Read, read-only, what a fit needs: all Nodes, live Pods (two paged LISTs, as the
    snapshot's ``load_from_api``), HAMi's resource names (from ``hami_namespace``; default the
    platform's ``spec.gpu.hami.configMapNamespace``, else kube-system) and the TenantPlatforms
    (only the one named, when ``platform`` is given; otherwise all of them, or none when they
    cannot be read)."""
    taken = datetime.now(UTC).replace(microsecond=0)
    platforms: tuple[Obj, ...]
    if platform is not None:
        body = kube.get(constants.API_VERSION, constants.KIND, platform)
        if body is None:
            raise FitError(f"{constants.KIND} {platform} not found on the cluster (kubectl get tp lists them)")
        platforms = (trim_platform(body),)
        hami = ((body.get("spec") or {}).get("gpu") or {}).get("hami") or {}
        hami_namespace = hami_namespace or str(hami.get("configMapNamespace") or DEFAULT_HAMI_NAMESPACE)
    else:
        try:
            platforms = tuple(trim_platform(b) for b in kube.list(constants.API_VERSION, constants.KIND))
        except errors.KubeError:
            platforms = ()
    nodes = tuple(trim_node(n) for n in kube.list("v1", "Node"))
    pods = tuple(p for p in (trim_pod(p) for p in kube.list("v1", "Pod", field_selector=LIVE_PODS)) if p is not None)
    resource_names, source = read_resource_names(kube, hami_namespace or DEFAULT_HAMI_NAMESPACE)
    return FitInputs(taken, nodes, pods, resource_names, source, platforms, f"cluster {kube.server}")


# -- the snapshot file ----------------------------------------------------------------------------


def snapshot_document(inputs: FitInputs) -> Obj:
    n = inputs.names
    return {
        "apiVersion": SNAPSHOT_API_VERSION,
        "kind": SNAPSHOT_KIND,
        "takenAt": format_time(inputs.taken_at),
        "source": inputs.source,
        "resourceNames": {
            "count": n.count,
            "memory": n.memory,
            "memoryPercentage": n.memory_percentage,
            "cores": n.cores,
            "priority": n.priority,
            "source": inputs.names_source,
        },
        "nodes": list(inputs.nodes),
        "pods": list(inputs.pods),
        "platforms": list(inputs.platforms),
    }


def save_snapshot(inputs: FitInputs, path: str | Path) -> None:
    """Write the snapshot file: JSON when the name ends in .json, else YAML."""
    doc = snapshot_document(inputs)
    text = json.dumps(doc, indent=2) + "\n" if str(path).endswith(".json") else yaml.safe_dump(doc, sort_keys=False)
    Path(path).write_text(text, encoding="utf-8")


def _list_of_maps(doc: Mapping[str, Any], key: str, where: str) -> tuple[Obj, ...]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise FitError(f"{where}: {key} must be a list of objects")
    return tuple(value)


def load_snapshot(path: str | Path) -> FitInputs:
    """Read a snapshot file ``save_snapshot`` wrote (FitError naming what is wrong)."""
    where = str(path)
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FitError(f"{where}: no such file (tenant-platform fit --save-snapshot FILE writes one)") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise FitError(f"{where}: cannot read it: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict) or doc.get("kind") != SNAPSHOT_KIND:
        raise FitError(f"{where}: not a {SNAPSHOT_KIND} (tenant-platform fit --save-snapshot FILE writes one)")
    if doc.get("apiVersion") != SNAPSHOT_API_VERSION:
        raise FitError(f"{where}: apiVersion {doc.get('apiVersion')!r}; this version reads {SNAPSHOT_API_VERSION}")
    taken = parse_time(doc.get("takenAt"))
    if taken is None:
        raise FitError(f"{where}: takenAt is not an RFC 3339 time")
    raw = doc.get("resourceNames") or {}
    try:
        parsed = ResourceNamesSource.model_validate(raw) if raw else None
    except pydantic.ValidationError:
        raise FitError(f"{where}: resourceNames needs count, memory, memoryPercentage, cores, priority") from None
    resource_names = (
        ResourceNames(
            count=parsed.count,
            memory=parsed.memory,
            memory_percentage=parsed.memory_percentage,
            cores=parsed.cores,
            priority=parsed.priority,
        )
        if parsed is not None
        else names.DEFAULT_NAMES
    )
    return FitInputs(
        taken_at=taken if taken.tzinfo else taken.replace(tzinfo=UTC),
        nodes=_list_of_maps(doc, "nodes", where),
        pods=_list_of_maps(doc, "pods", where),
        names=resource_names,
        names_source=parsed.source if parsed is not None else "defaults",
        platforms=_list_of_maps(doc, "platforms", where),
        source=f"snapshot {where} (taken {format_time(taken)} from {doc.get('source') or 'a cluster'})",
    )


# -- the share ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShareCheck:
    """The tenant's share in the pod's namespace, what the pod asks of it, and the verdict."""

    platform: str
    namespace: str
    hard: dict[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    asked: dict[str, int] = field(default_factory=dict)
    refused: str | None = None
    note: str = ""


def asked_of_quota(request: GpuRequest, resource_names: ResourceNames, *, memory_given: bool) -> dict[str, int]:
    """What quota admission counts for a one-container pod with this request: the card count,
    and the memory and cores as written in the container (per container, not per card)."""
    asked = {resource_names.count: max(1, request.cards), resource_names.cores: request.cores}
    if memory_given and request.mem_mib is not None:
        asked[resource_names.memory] = request.mem_mib
    return asked


def share_refusal(
    platform: str, namespace: str, hard: Mapping[str, int], used: Mapping[str, int], asked: Mapping[str, int]
) -> str | None:
    """Why quota admission refuses the pod (the first resource it would exceed), or None."""
    for resource, limit in hard.items():
        want = asked.get(resource, 0)
        if want and used.get(resource, 0) + want > limit:
            return (
                f"the GPU share of platform {platform} would be exceeded in namespace {namespace}: {resource} "
                f"{used.get(resource, 0)} used + {want} asked > {limit} (ResourceQuota {share_manifests.QUOTA_NAME})"
            )
    return None


def share_check(
    body: Mapping[str, Any], platform: TenantPlatform, namespace: str, asked: Mapping[str, int]
) -> ShareCheck | None:
    """The share check for a pod in ``namespace`` of ``platform`` (None: the platform has no share)."""
    share = platform.spec.gpu.share
    if share is None:
        return None
    status = body.get("status") or {}
    entry = next(
        (n for n in (status.get("gpuShare") or {}).get("namespaces") or [] if n.get("namespace") == namespace), None
    )
    note = ""
    if entry is not None and entry.get("hard"):
        hard = {str(k): int(v) for k, v in entry["hard"].items()}
        used = {str(k): int(v) for k, v in (entry.get("used") or {}).items()}
    else:
        recorded = (status.get("recorded") or {}).get("gpuResourceNames")
        share_names = share_manifests.names_from(ResourceNamesStatus.model_validate(recorded) if recorded else None)
        hard, used = share_manifests.amounts(share, share_names), {}
        note = f"status.gpuShare reports no use in namespace {namespace} yet: counted as none used"
    refused = share_refusal(platform.name, namespace, hard, used, asked)
    return ShareCheck(platform.name, namespace, hard, used, dict(asked), refused, note)


# -- the fit --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitReport:
    request: GpuRequest
    source: str
    taken_at: datetime
    nodes: tuple[nodefit.NodeAnswer, ...]
    share: ShareCheck | None = None
    notes: tuple[str, ...] = ()

    @property
    def fitting(self) -> list[str]:
        return [a.node for a in self.nodes if a.fits]


def _platform(inputs: FitInputs, name: str) -> tuple[Obj, TenantPlatform]:
    body = next((b for b in inputs.platforms if (b.get("metadata") or {}).get("name") == name), None)
    if body is None:
        raise FitError(f"{constants.KIND} {name} is not in {inputs.source or 'the input'}")
    try:
        return body, TenantPlatform.from_body({**body, "metadata": {"name": name, "uid": ""}})
    except pydantic.ValidationError as exc:
        raise FitError(
            f"{constants.KIND} {name} has a spec this version cannot read: {exc.errors()[0]['msg']}"
        ) from None


def evaluate(
    inputs: FitInputs,
    request: GpuRequest,
    *,
    memory_given: bool = True,
    platform: str | None = None,
    namespace: str | None = None,
) -> FitReport:
    """Every GPU node's answer for ``request`` (pure: from ``inputs`` only), with the share of
    ``platform`` applied to a pod in ``namespace`` (default: the platform's spec.namespace)."""
    snapshot = ClusterSnapshot(clock=lambda: inputs.taken_at)
    snapshot.replace_all(inputs.nodes, inputs.pods)
    view = snapshot.view()
    selectors: tuple[health.Selector, ...] = ()
    timeout = DEFAULT_LOCK_TIMEOUT
    check: ShareCheck | None = None
    notes: list[str] = []
    if platform is not None:
        body, parsed = _platform(inputs, platform)
        selector = health.spec_selector(parsed.spec.gpu.node_selector)
        selectors = (selector,) if selector is not None else ()
        timeout = parse_duration(parsed.spec.gpu.hami.node_lock_timeout)
        where = namespace or parsed.spec.namespace
        if where not in parsed.spec.all_namespaces:
            raise FitError(
                f"namespace {where} is not one of platform {platform}'s ({', '.join(parsed.spec.all_namespaces)})"
            )
        check = share_check(body, parsed, where, asked_of_quota(request, inputs.names, memory_given=memory_given))
        if check is None:
            notes.append(f"platform {platform} has no GPU share (spec.gpu.share): no quota bounds the pod")
        elif check.note:
            notes.append(check.note)
    elif namespace is not None:
        raise FitError("--namespace needs --platform (it picks which of the platform's quotas counts)")
    facts = GpuFacts.of_view(view, names=inputs.names, names_source=inputs.names_source, selectors=selectors)
    found = nodefit.capacities(facts, now=inputs.taken_at, lock_timeout=timeout)
    refused = check.refused if check is not None else None
    answers = tuple(nodefit.answers(facts, found, request, refused=refused))
    if not answers:
        notes.append("no GPU node found (no GPU capacity, NVIDIA label, HAMi register annotation or selector)")
    return FitReport(request, inputs.source, inputs.taken_at, answers, check, tuple(notes))


# -- output ---------------------------------------------------------------------------------------


def request_phrase(request: GpuRequest) -> str:
    memory = f"{request.mem_mib} MiB" if request.mem_mib is not None else "a whole card's memory"
    cards = f"{request.cards} card" + ("s" if request.cards != 1 else "")
    return f"{cards}, each {memory} and {request.cores}% cores"


def to_json(report: FitReport) -> Obj:
    out: Obj = {
        "request": {
            "cards": report.request.cards,
            "memoryMiB": report.request.mem_mib,
            "coresPercent": report.request.cores,
        },
        "source": report.source,
        "at": format_time(report.taken_at),
        "fits": report.fitting,
        "nodes": [
            {
                "name": a.node,
                "fits": a.fits,
                **({"reason": a.reason} if a.reason else {}),
                "cards": list(a.cards),
                **({"cardReasons": dict(a.card_reasons)} if a.card_reasons else {}),
                **({"notes": list(a.notes)} if a.notes else {}),
            }
            for a in report.nodes
        ],
    }
    if report.share is not None:
        s = report.share
        out["share"] = {
            "platform": s.platform,
            "namespace": s.namespace,
            "hard": s.hard,
            "used": s.used,
            "asked": s.asked,
            **({"refused": s.refused} if s.refused else {}),
        }
    if report.notes:
        out["notes"] = list(report.notes)
    return out


def format_text(report: FitReport) -> str:
    lines = [f"request: {request_phrase(report.request)} (from {report.source})"]
    if report.share is not None:
        s = report.share
        lines.append(
            f"share:   platform {s.platform}, namespace {s.namespace}: "
            + ("refused" if s.refused else "within the share")
            + f" (hard {s.hard}, used {s.used}, asked {s.asked})"
        )
    width = max([4, *(len(a.node) for a in report.nodes)])
    lines.append(f"{'NODE':<{width}}  FITS  REASON")
    for a in report.nodes:
        detail = a.reason or f"cards {', '.join(a.cards[: max(1, report.request.cards)])}"
        lines.append(f"{a.node:<{width}}  {'yes' if a.fits else 'no':<4}  {detail}")
        lines += [f"{'':<{width}}        note: {n}" for n in a.notes]
    lines += [f"note: {n}" for n in report.notes]
    count = len(report.fitting)
    lines.append("")
    lines.append(f"{count} of {len(report.nodes)} GPU nodes can take it now.")
    return "\n".join(lines)


def request_of(cards: int | None, memory: int | None, cores: int | None) -> GpuRequest:
    return GpuRequest(cards=cards if cards is not None else 1, mem_mib=memory, cores=cores or 0)


def summary(nodes: Sequence[Obj], pods: Sequence[Obj], platforms: Sequence[Obj]) -> str:
    return f"{len(nodes)} nodes, {len(pods)} HAMi pods, {len(platforms)} TenantPlatforms"
