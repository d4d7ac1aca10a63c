"""`tenant-platform diagnose`: one archive with what support asks first (docs/cli.md, "diagnose").

Read-only: every request is a GET or LIST, except the checks, which run as ``check`` does
(``preflight.run_check``: server-side dry runs and access reviews, which store nothing). A read
the identity may not make (403) or that fails is named in ``MISSING.txt`` with the right it
needs, and the archive is written anyway. A progress line per stage goes to stderr.

Redacted by construction, not by search alone:

- Secrets are never read: no request for a Secret or a ServiceAccount token is made, and the
  checks run through a client that refuses both before anything is sent (``SecretBlindKube``;
  the rows that needed one say so: run ``tenant-platform check`` for those);
- every object is reduced first (``scrub``): no ``managedFields``, no
  ``last-applied-configuration`` (it repeats the spec, environment included), and every
  container's ``env`` keeps names only (values and references replaced by REMOVED);
- only CoreDNS's Corefile is read of all ConfigMaps;
- every text written (objects, logs, events, check rows) then goes through logs.py's ``redact``
  (private keys, base64 PEM, JWTs, bearer credentials, ``token=``/``password:``... values).
"""

from __future__ import annotations

import copy
import io
import os
import tarfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import yaml

from tenant_platform import __version__, fitcli, preflight
from tenant_platform.api import constants
from tenant_platform.api.timestamps import format_time
from tenant_platform.concerns.gpu import health, nodefit
from tenant_platform.concerns.gpu.facts import GpuFacts
from tenant_platform.concerns.gpu.step import read_resource_names
from tenant_platform.formats.hami import names
from tenant_platform.formats.hami.names import HamiParseError
from tenant_platform.formats.hami.register import parse_cordon, parse_register
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.logs import redact
from tenant_platform.observe.cluster import ClusterSnapshot

OPERATOR_LABEL: Final = "app.kubernetes.io/name=tenant-platform-operator"
ROOT: Final = "tenant-platform-diagnose"
REMOVED: Final = "REMOVED"
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
LOG_TAIL_LINES: Final = 2000
LOG_LIMIT_BYTES: Final = 4 * 1024 * 1024
COREDNS: Final = ("kube-system", "coredns")
COREDNS_CUSTOM: Final = ("kube-system", "coredns-custom")

# The sections every archive has (a file each, even when it says nothing was found).
SECTIONS: Final = (
    "cluster/version.yaml",
    "platforms/platforms.yaml",
    "platforms/events.yaml",
    "operator/deployments.yaml",
    "operator/pods.yaml",
    "operator/events.yaml",
    "checks/checks.txt",
    "checks/checks.yaml",
    "gpu/nodes.yaml",
    "gpu/locks.yaml",
    "gpu/workloads.yaml",
    "gpu/pods.yaml",
    "gpu/pod-events.yaml",
    "gpu/webhook.yaml",
    "gpu/fit-snapshot.yaml",
    "dns/Corefile",
    "MISSING.txt",
    "README.txt",
)

T = TypeVar("T")


def default_name(now: datetime | None = None) -> str:
    moment = now or datetime.now(UTC)
    return f"tenant-platform-diagnose-{moment:%Y%m%dT%H%M%SZ}.tar.gz"


# -- redaction ------------------------------------------------------------------------------------


def _scrub_env(entries: Any) -> Any:
    if not isinstance(entries, list):
        return REMOVED
    kept = []
    for entry in entries:
        if isinstance(entry, Mapping):
            kept.append({"name": entry.get("name"), "value": REMOVED})
    return kept


def scrub(obj: Any) -> Any:
    """A copy of ``obj`` without managedFields, last-applied-configuration or any env value."""

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key == "managedFields":
                    continue
                if key == "env":
                    out[key] = _scrub_env(item)
                elif key == "annotations" and isinstance(item, Mapping):
                    out[key] = {k: walk(v) for k, v in item.items() if k != LAST_APPLIED}
                else:
                    out[key] = walk(item)
            return out
        if isinstance(value, list):
            return [walk(v) for v in value]
        return copy.copy(value)

    return walk(obj)


def secret_path(path: str) -> bool:
    """Whether a request path reads a Secret or mints a ServiceAccount token."""
    parts = path.split("?", maxsplit=1)[0].strip("/").split("/")
    return "secrets" in parts or parts[-1] == "token"


class SecretBlindKube(Kube):
    """A client that refuses every Secret and token request before it is sent (the checks)."""

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str],
        headers: dict[str, str],
        body: Any,
        timeout: float,
        warnings: list[str] | None = None,
    ) -> bytes:
        if secret_path(path):
            raise errors.Forbidden(
                403, "Forbidden", "tenant-platform diagnose never reads Secrets or tokens (run tenant-platform check)"
            )
        return super()._call(method, path, query=query, headers=headers, body=body, timeout=timeout, warnings=warnings)


# -- collecting -----------------------------------------------------------------------------------


def _dump(content: Any) -> str:
    if isinstance(content, str):
        return content
    return yaml.safe_dump(content, sort_keys=False, default_flow_style=False, allow_unicode=True)


@dataclass
class Collected:
    files: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)


class Collector:
    """Reads with one identity; what it cannot read goes to ``missing``, never raises."""

    def __init__(self, kube: Kube, progress: Callable[[str], None]) -> None:
        self.kube = kube
        self.progress = progress
        self.out = Collected()

    def add(self, path: str, content: Any) -> None:
        """A file of the archive: an object (YAML, scrubbed) or text, redacted either way."""
        text = content if isinstance(content, str) else _dump(scrub(content))
        self.out.files[path] = redact(text)

    def read(self, what: str, needs: str, func: Callable[[], T]) -> T | None:
        """``func()``, or None with a MISSING line saying what could not be read and why."""
        try:
            return func()
        except errors.Forbidden as exc:
            self.out.missing.append(f"{what}: refused (403). Needs: {needs}. ({redact(exc.message)[:300]})")
        except errors.KubeError as exc:
            self.out.missing.append(f"{what}: {exc.status} {exc.reason}: {redact(exc.message)[:300]}")
        return None

    def list(
        self, what: str, needs: str, api_version: str, kind: str, namespace: str | None = None, **kw: Any
    ) -> list[Obj] | None:
        return self.read(what, needs, lambda: self.kube.list(api_version, kind, namespace, **kw))


@dataclass
class State:
    """What later stages use of earlier ones' reads."""

    operator_namespace: str
    platforms: list[Obj] = field(default_factory=list)
    events: list[Obj] | None = None
    pods: list[Obj] | None = None
    nodes: list[Obj] | None = None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ref(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def _event(e: Mapping[str, Any]) -> Obj:
    involved = e.get("involvedObject") or {}
    return {
        "namespace": _meta(e).get("namespace"),
        "object": f"{involved.get('kind')}/{involved.get('namespace') or ''}/{involved.get('name')}",
        "type": e.get("type"),
        "reason": e.get("reason"),
        "message": e.get("message"),
        "count": e.get("count"),
        "first": e.get("firstTimestamp") or e.get("eventTime"),
        "last": e.get("lastTimestamp") or e.get("eventTime"),
        "source": (e.get("source") or {}).get("component") or e.get("reportingComponent"),
    }


def stage_cluster(c: Collector, s: State) -> None:
    version = c.read("the server version", "GET /version (any authenticated identity)", c.kube.server_version)
    c.add(
        "cluster/version.yaml",
        {
            "collectedAt": format_time(datetime.now(UTC)),
            "tool": __version__,
            "server": c.kube.server,
            "serverVersion": version[2] if version else None,
        },
    )


def stage_platforms(c: Collector, s: State) -> None:
    found = c.list(
        "TenantPlatforms", f"list {constants.PLURAL}.{constants.GROUP} (cluster)", constants.API_VERSION, constants.KIND
    )
    s.platforms = sorted(found or [], key=lambda b: str(_meta(b).get("name")))
    c.add("platforms/platforms.yaml", {"items": s.platforms})


def stage_events(c: Collector, s: State) -> None:
    s.events = c.list("Events", "list events (all namespaces)", "v1", "Event")
    names_ = {str(_meta(b).get("name")) for b in s.platforms}
    mine = [
        _event(e)
        for e in s.events or []
        if (e.get("involvedObject") or {}).get("kind") == constants.KIND
        and (e.get("involvedObject") or {}).get("name") in names_
    ]
    c.add("platforms/events.yaml", {"items": sorted(mine, key=lambda e: str(e["last"] or ""))})


def stage_operator(c: Collector, s: State) -> None:
    ns = s.operator_namespace
    deployments = c.list(
        f"the operator's Deployments in {ns}",
        f"list deployments.apps in namespace {ns}",
        "apps/v1",
        "Deployment",
        ns,
        label_selector=OPERATOR_LABEL,
    )
    c.add("operator/deployments.yaml", {"namespace": ns, "selector": OPERATOR_LABEL, "items": deployments or []})
    pods = c.list(
        f"the operator's pods in {ns}", f"list pods in namespace {ns}", "v1", "Pod", ns, label_selector=OPERATOR_LABEL
    )
    c.add("operator/pods.yaml", {"namespace": ns, "items": pods or []})
    for pod in pods or []:
        name = str(_meta(pod).get("name"))
        for container in (pod.get("spec") or {}).get("containers") or []:
            cname = str(container.get("name"))
            text = c.read(
                f"the log of {ns}/{name} container {cname}",
                f"get pods/log in namespace {ns}",
                _log(c.kube, ns, name, cname),
            )
            if text is not None:
                c.add(f"operator/logs/{name}.{cname}.log", text)
    local = [_event(e) for e in s.events or [] if _meta(e).get("namespace") == ns]
    c.add("operator/events.yaml", {"namespace": ns, "items": local})


def _log(kube: Kube, namespace: str, pod: str, container: str) -> Callable[[], str]:
    """Reads the last LOG_TAIL_LINES lines (at most LOG_LIMIT_BYTES) of one container's log."""
    path = kube.path("v1", "Pod", pod, namespace, subresource="log")
    query = {"container": container, "tailLines": str(LOG_TAIL_LINES), "limitBytes": str(LOG_LIMIT_BYTES)}
    return lambda: kube.text(path, query=query)


def stage_checks(c: Collector, s: State) -> None:
    blind = SecretBlindKube(c.kube.api)
    text: list[str] = []
    rows_by_platform: dict[str, Any] = {}
    for body in s.platforms:
        name = str(_meta(body).get("name"))
        try:
            rows, code = preflight.run_check(blind, body)
        except Exception as exc:  # a check that cannot run is a missing section, not a failed archive
            c.out.missing.append(f"the checks of {name}: {type(exc).__name__}: {redact(str(exc))[:300]}")
            continue
        rows_by_platform[name] = {"failed": bool(code), "rows": rows}
        text += [f"== {constants.KIND} {name}", preflight.format_table(rows), ""]
    if not s.platforms:
        text.append("No TenantPlatform was read: no checks ran.")
    text.append(
        "Rows that needed a Secret (edge certificate, pull secrets, object store credentials, the installer's "
        "kubeconfig, spec.target) say 'diagnose never reads Secrets': run tenant-platform check for those."
    )
    c.add("checks/checks.txt", "\n".join(text) + "\n")
    c.add("checks/checks.yaml", rows_by_platform)


def _decoded_node(node: Obj, capacity: Any, count: str) -> Obj:
    meta = _meta(node)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k in names.NODE_ANNOTATIONS}
    register = names.hami_annotation(annotations, names.REGISTER)
    decoded: Obj = {}
    if register is not None:
        try:
            parsed = parse_register(register[1])
            decoded["registerFormat"] = parsed.format
            decoded["cards"] = [
                {
                    "id": card.id,
                    "index": card.index,
                    "model": card.model,
                    "memoryMiB": card.devmem,
                    "coresPercent": card.devcore,
                    "slots": card.count,
                    "healthy": card.healthy,
                    "numa": card.numa,
                    "mode": card.mode,
                }
                for card in parsed.cards
            ]
        except HamiParseError as exc:
            decoded["registerError"] = str(exc)
    cordon = names.hami_annotation(annotations, names.CORDON)
    if cordon is not None:
        decoded["cordoned"] = sorted(parse_cordon(cordon[1]))
    status = node.get("status") or {}
    return {
        "name": meta.get("name"),
        "labels": meta.get("labels") or {},
        "taints": (node.get("spec") or {}).get("taints") or [],
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
        "capacity": {k: v for k, v in (status.get("capacity") or {}).items() if "/" in k},
        "allocatable": {k: v for k, v in (status.get("allocatable") or {}).items() if "/" in k},
        "conditions": [
            {"type": x.get("type"), "status": x.get("status"), "reason": x.get("reason")}
            for x in status.get("conditions") or []
        ],
        "hamiAnnotations": annotations,
        "decoded": decoded,
        "blockingTaints": health.blocking_taints(
            tuple(
                (str(t.get("key")), str(t.get("value") or ""), str(t.get("effect")))
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute")
            ),
            count,
        ),
        "capacityStatus": capacity.to_status(labelled=False).dump() if capacity is not None else None,
        "fit": capacity.fit.dump() if capacity is not None and capacity.cards else None,
    }


def _hami_namespaces(platforms: Iterable[Obj]) -> list[str]:
    found = {fitcli.DEFAULT_HAMI_NAMESPACE}
    for body in platforms:
        hami = (((body.get("spec") or {}).get("gpu") or {}).get("hami")) or {}
        if hami.get("configMapNamespace"):
            found.add(str(hami["configMapNamespace"]))
    return sorted(found)


def stage_gpu_nodes(c: Collector, s: State) -> None:
    s.nodes = c.list("Nodes", "list nodes (cluster)", "v1", "Node")
    s.pods = c.list("Pods", "list pods (all namespaces)", "v1", "Pod")
    hami_ns = _hami_namespaces(s.platforms)[0] if s.platforms else fitcli.DEFAULT_HAMI_NAMESPACE
    resource_names, source = names.DEFAULT_NAMES, "defaults"
    got = c.read(
        f"HAMi's ConfigMap {hami_ns}/{names.CONFIG_MAP}",
        f"get configmaps in namespace {hami_ns}",
        lambda: read_resource_names(c.kube, hami_ns),
    )
    if got is not None:
        resource_names, source = got
    live = [p for p in s.pods or [] if ((p.get("status") or {}).get("phase")) not in names.TERMINATED_PHASES]
    inputs = fitcli.FitInputs(
        taken_at=datetime.now(UTC).replace(microsecond=0),
        nodes=tuple(fitcli.trim_node(n) for n in s.nodes or []),
        pods=tuple(p for p in (fitcli.trim_pod(p) for p in live) if p is not None),
        names=resource_names,
        names_source=source,
        platforms=tuple(fitcli.trim_platform(b) for b in s.platforms),
        source=f"cluster {c.kube.server}",
    )
    c.add("gpu/fit-snapshot.yaml", fitcli.snapshot_document(inputs))
    snapshot = ClusterSnapshot()
    snapshot.replace_all(inputs.nodes, inputs.pods)
    facts = GpuFacts.of_view(snapshot.view(), names=resource_names, names_source=source)
    capacities = {
        cap.name: cap
        for cap in nodefit.capacities(facts, now=inputs.taken_at, lock_timeout=fitcli.DEFAULT_LOCK_TIMEOUT)
    }
    by_name = {str(_meta(n).get("name")): n for n in s.nodes or []}
    gpu_nodes = [_decoded_node(by_name[n], capacities.get(n), resource_names.count) for n in facts.gpu_nodes]
    c.add("gpu/nodes.yaml", {"resourceNames": {"count": resource_names.count, "source": source}, "items": gpu_nodes})
    locks = [
        {"node": name, **cap.lock.to_status().dump()}
        for name, cap in sorted(capacities.items())
        if cap.lock is not None
    ]
    c.add(
        "gpu/locks.yaml",
        {"lockTimeout": "5m (HAMi's default; a platform's spec.gpu.hami.nodeLockTimeout may differ)", "items": locks},
    )


def _gpu_pod(pod: Obj) -> bool:
    annotations = _meta(pod).get("annotations") or {}
    if any(k in names.POD_ANNOTATIONS for k in annotations):
        return True
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            if any(str(k).startswith(("nvidia.com/", "hami.io/")) for k in resources.get(section) or {}):
                return True
    return False


def stage_gpu_workloads(c: Collector, s: State) -> None:
    items: list[Obj] = []
    daemonsets = c.list("DaemonSets", "list daemonsets.apps (all namespaces)", "apps/v1", "DaemonSet") or []
    hami_namespaces = _hami_namespaces(s.platforms)
    for ds in daemonsets:
        w = health.workload(ds)
        if w.role or w.gpu_plugin or (w.namespace in hami_namespaces and "hami" in w.name):
            items.append(ds)
    for ns in hami_namespaces:
        for d in (
            c.list(f"Deployments in {ns}", f"list deployments.apps in namespace {ns}", "apps/v1", "Deployment", ns)
            or []
        ):
            w = health.workload(d)
            if w.role or "hami" in w.name:
                items.append(d)
    summary = [health.workload(o).status().dump() for o in items]
    c.add("gpu/workloads.yaml", {"hamiNamespaces": hami_namespaces, "summary": summary, "items": items})


def stage_gpu_pods(c: Collector, s: State) -> None:
    pods = [p for p in s.pods or [] if _gpu_pod(p)]
    out = []
    for pod in pods:
        meta = _meta(pod)
        spec = pod.get("spec") or {}
        out.append(
            {
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "node": spec.get("nodeName"),
                "schedulerName": spec.get("schedulerName"),
                "phase": (pod.get("status") or {}).get("phase"),
                "hamiAnnotations": {
                    k: v for k, v in (meta.get("annotations") or {}).items() if k in names.POD_ANNOTATIONS
                },
                "containers": [
                    {"name": x.get("name"), "image": x.get("image"), "resources": x.get("resources") or {}}
                    for x in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
                ],
                "conditions": (pod.get("status") or {}).get("conditions") or [],
            }
        )
    c.add("gpu/pods.yaml", {"items": out})
    refs = {(str(_meta(p).get("namespace")), str(_meta(p).get("name"))) for p in pods}
    events = [
        _event(e)
        for e in s.events or []
        if (e.get("involvedObject") or {}).get("kind") == "Pod"
        and ((e.get("involvedObject") or {}).get("namespace"), (e.get("involvedObject") or {}).get("name")) in refs
    ]
    c.add("gpu/pod-events.yaml", {"items": events})


def stage_webhook(c: Collector, s: State) -> None:
    items = []
    for body in s.platforms:
        status = body.get("status") or {}
        ready = next((x for x in status.get("conditions") or [] if x.get("type") == constants.GPU_READY), None)
        items.append(
            {
                "platform": _meta(body).get("name"),
                "webhook": (((status.get("gpu") or {}).get("health")) or {}).get("webhook"),
                "gpuReady": ready,
            }
        )
    c.add("gpu/webhook.yaml", {"source": "each platform's status.gpu.health.webhook", "items": items})


def stage_dns(c: Collector, s: State) -> None:
    ns, name = COREDNS
    found = c.read(
        f"ConfigMap {ns}/{name}", f"get configmaps in namespace {ns}", lambda: c.kube.get("v1", "ConfigMap", name, ns)
    )
    corefile = ((found or {}).get("data") or {}).get("Corefile")
    c.add("dns/Corefile", corefile if corefile is not None else f"# no Corefile read from ConfigMap {ns}/{name}\n")
    ns, name = COREDNS_CUSTOM
    custom = c.read(
        f"ConfigMap {ns}/{name}", f"get configmaps in namespace {ns}", lambda: c.kube.get("v1", "ConfigMap", name, ns)
    )
    if custom is not None:
        c.add("dns/coredns-custom.yaml", {"data": custom.get("data") or {}})


STAGES: Final[tuple[tuple[str, Callable[[Collector, State], None]], ...]] = (
    ("cluster", stage_cluster),
    ("platforms' specs and status", stage_platforms),
    ("events", stage_events),
    ("the operator's Deployment, pods and logs", stage_operator),
    ("the checks (as tenant-platform check runs them)", stage_checks),
    ("GPU nodes, HAMi annotations and node locks", stage_gpu_nodes),
    ("HAMi's and the device plugins' workloads", stage_gpu_workloads),
    ("GPU pods and their events", stage_gpu_pods),
    ("the webhook dry run", stage_webhook),
    ("CoreDNS", stage_dns),
)

README: Final = """\
tenant-platform diagnose archive ({version}, collected {at} from {server}).

Sections: cluster/ (versions), platforms/ (TenantPlatforms' spec and status, their events),
operator/ (the operator's Deployment, pods, recent logs, events in its namespace), checks/ (the
checklist as tenant-platform check runs it), gpu/ (GPU nodes with their labels and HAMi
annotations decoded, node locks, HAMi's and the device plugins' workloads, GPU pods' resources
and events, the webhook dry run from status, and fit-snapshot.yaml: tenant-platform fit
--snapshot gpu/fit-snapshot.yaml answers offline from it), dns/ (CoreDNS's Corefile).
MISSING.txt names every read that was refused or failed, with the right it needs.

Redacted by construction: no Secret or token was read; managedFields, last-applied-configuration
and every container environment value are removed; every text went through the operator's log
redaction (private keys, PEM, JWTs, bearer credentials, token/password values).
"""


def collect(
    kube: Kube,
    *,
    operator_namespace: str = "tenant-platform-system",
    progress: Callable[[str], None] = lambda line: None,
) -> Collected:
    """Run every stage; never raises for a refused or failed read (MISSING.txt)."""
    collector = Collector(kube, progress)
    state = State(operator_namespace)
    for index, (title, stage) in enumerate(STAGES, start=1):
        files, missing, started = len(collector.out.files), len(collector.out.missing), time.monotonic()
        try:
            stage(collector, state)
        except Exception as exc:  # a bug in one stage must not lose the others
            collector.out.missing.append(
                f"stage {title}: internal error {type(exc).__name__}: {redact(str(exc))[:300]}"
            )
        added, refused = len(collector.out.files) - files, len(collector.out.missing) - missing
        line = f"[{index}/{len(STAGES)}] {title}: {added} file(s)"
        if refused:
            line += f", {refused} read(s) missing"
        line += f" ({time.monotonic() - started:.1f}s)"
        collector.out.stages.append(line)
        progress(line)
    out = collector.out
    lines = ["Reads that were refused or failed (the archive has everything else):", ""]
    lines += [f"- {m}" for m in out.missing] or ["(none)"]
    out.files["MISSING.txt"] = redact("\n".join(lines) + "\n")
    out.files["README.txt"] = (
        README.format(version=__version__, at=format_time(datetime.now(UTC)), server=kube.server)
        + "\nStages:\n"
        + "\n".join(out.stages)
        + "\n"
    )
    return out


def write_archive(collected: Collected, path: str | os.PathLike[str]) -> None:
    """A .tar.gz with every file under ``tenant-platform-diagnose/``, readable by its owner only."""
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in sorted(collected.files.items()):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{ROOT}/{name}")
            info.size, info.mtime, info.mode = len(data), int(now), 0o600
            tar.addfile(info, io.BytesIO(data))
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(buffer.getvalue())
