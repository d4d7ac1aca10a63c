"""PURE HAMi parsing and GPU capacity arithmetic: no I/O, no clock (``now`` is passed in).

What lives here (facts: HAMi v2.4 to v2.10, see docs/gpu.md):

- ``parse_register``: the node annotation ``hami.io/node-nvidia-register`` (or the legacy
  ``4pd.io/`` prefix) in its three formats: CSV ``id,count,devmem,devcore,type,numa,health``
  (up to v2.4), the same plus ``,index,mode`` (v2.5 to v2.7), and a JSON array (v2.8+), where
  every field is omitempty, so a missing ``health`` means unhealthy.
- ``parse_pod_devices``: a pod's ``hami.io/vgpu-devices-allocated``: containers end with ``;``,
  devices inside a container are ``UUID,NVIDIA,<MiB>,<cores>`` and end with ``:``. MIG UUIDs may
  carry a ``[tpl-slot]`` suffix, stripped before matching a card.
- ``pod_card_usage``: what one pod holds on each card, with v2.10's init-container rule.
- ``parse_lock``/``lock_state``: the node lock ``hami.io/mutex.lock`` and whether it is stale.
- ``node_capacity`` and the roll-ups (per node, per model, in total) that status and metrics show.
- ``card_fit``/``node_fit``: whether a request would fit a card, in HAMi's order of checks.
- ``resource_names_from_config``: resource names from the ``hami-scheduler-device`` ConfigMap.
- ``gpu_condition``: the GPUReady verdict from everything above.

Parsers raise ``HamiParseError`` with a short reason; callers turn it into status, never a crash.
Parsed values are immutable, and the two hot parsers are memoised on the raw string, so a
reconcile over thousands of nodes and pods parses only what changed since the last one.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal, Protocol

import yaml

from tenant_platform.api import constants
from tenant_platform.status import conditions
from tenant_platform.status.conditions import Condition

# -- names ----------------------------------------------------------------------------------------

PREFIX: Final = "hami.io/"
LEGACY_PREFIX: Final = "4pd.io/"  # HAMi up to v2.3.x
REGISTER: Final = "node-nvidia-register"
LOCK: Final = "mutex.lock"
CORDON: Final = "device-cordon"
HANDSHAKE: Final = "node-handshake"
POD_NODE: Final = "vgpu-node"
POD_ALLOCATED: Final = "vgpu-devices-allocated"
POD_BIND_PHASE: Final = "bind-phase"

ANNOTATION_REGISTER: Final = PREFIX + REGISTER
ANNOTATION_LOCK: Final = PREFIX + LOCK
ANNOTATION_POD_NODE: Final = PREFIX + POD_NODE
ANNOTATION_POD_ALLOCATED: Final = PREFIX + POD_ALLOCATED

# Node annotations the operator reads (either prefix).
NODE_ANNOTATION_SUFFIXES: Final = (REGISTER, LOCK, CORDON, HANDSHAKE)
POD_ANNOTATION_SUFFIXES: Final = (POD_NODE, POD_ALLOCATED, POD_BIND_PHASE)

# Labels that mark a GPU node (NVIDIA feature discovery and the NVIDIA chart).
GPU_PRESENT_LABELS: Final = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")
GFD_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
GFD_COUNT_LABEL: Final = "nvidia.com/gpu.count"
# Label prefixes the operator never writes (other owners, or the Kubernetes core).
FORBIDDEN_LABEL_PREFIXES: Final = (
    "nvidia.com/",
    "feature.node.kubernetes.io/",
    "tenancy.dev/",
    "kubernetes.io/",
    "node.kubernetes.io/",
    "node-role.kubernetes.io/",
)

TERMINATED_PHASES: Final = frozenset({"Succeeded", "Failed"})

# GPUReady reasons (CamelCase); docs/gpu.md explains each and what to do.
REASON_READY: Final = "GPUNodesReady"
REASON_NO_GPU_NODES: Final = "NoGPUNodes"
REASON_LABELS_PENDING: Final = "LabelsPending"
REASON_UNPARSEABLE: Final = "UnparseableAnnotation"
REASON_NO_DEVICES: Final = "NoDevicesRegistered"
REASON_NO_ALLOCATABLE: Final = "NoAllocatableGPUs"
REASON_UNHEALTHY: Final = "UnhealthyCards"
REASON_STALE_LOCK: Final = "StaleNodeLock"

LockStateName = Literal["active", "expired", "dangling", "leaked", "malformed"]


class HamiParseError(ValueError):
    """An annotation HAMi would not understand either; ``str(error)`` is the reason."""


def hami_annotation(annotations: Mapping[str, str], suffix: str) -> tuple[str, str] | None:
    """(key, value) of ``hami.io/<suffix>``, else of the legacy ``4pd.io/<suffix>``, else None."""
    for prefix in (PREFIX, LEGACY_PREFIX):
        key = prefix + suffix
        if key in annotations:
            return key, annotations[key]
    return None


# -- resource names -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceNames:
    """HAMi's extended-resource names for NVIDIA (chart values resourceName, resourceMem, ...)."""

    count: str = "nvidia.com/gpu"
    memory: str = "nvidia.com/gpumem"
    memory_percentage: str = "nvidia.com/gpumem-percentage"
    cores: str = "nvidia.com/gpucores"
    priority: str = "nvidia.com/priority"

    def to_status(self) -> dict[str, str]:
        return {
            "count": self.count,
            "memory": self.memory,
            "memoryPercentage": self.memory_percentage,
            "cores": self.cores,
            "priority": self.priority,
        }


DEFAULT_NAMES: Final = ResourceNames()

_CONFIG_KEYS: Final = {
    "resourceCountName": "count",
    "resourceMemoryName": "memory",
    "resourceMemoryPercentageName": "memory_percentage",
    "resourceCoreName": "cores",
    "resourcePriorityName": "priority",
}


def resource_names_from_config(text: str) -> ResourceNames:
    """Names from ``device-config.yaml`` of the ``hami-scheduler-device`` ConfigMap.

    Keys missing under ``nvidia`` keep their defaults. Raises HamiParseError for YAML that is
    not a mapping or a name that is not a non-empty string.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HamiParseError(f"device-config.yaml is not YAML: {_first_line(str(exc))}") from None
    if doc is None:
        return ResourceNames()
    if not isinstance(doc, dict):
        raise HamiParseError("device-config.yaml is not a mapping")
    nvidia = doc.get("nvidia") or {}
    if not isinstance(nvidia, dict):
        raise HamiParseError("device-config.yaml: 'nvidia' is not a mapping")
    values: dict[str, str] = {}
    for key, attr in _CONFIG_KEYS.items():
        if key not in nvidia:
            continue
        value = nvidia[key]
        if not isinstance(value, str) or not value:
            raise HamiParseError(f"device-config.yaml: nvidia.{key} must be a non-empty string")
        values[attr] = value
    return ResourceNames(**values)


# -- node register annotation ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card as the device plugin registers it."""

    id: str
    index: int
    count: int
    """Sharing slots (deviceSplitCount)."""
    devmem: int
    """MiB (x deviceMemoryScaling)."""
    devcore: int
    """Percent of the card (100 x deviceCoreScaling)."""
    model: str
    numa: int
    healthy: bool
    mode: str


@dataclass(frozen=True, slots=True)
class Register:
    cards: tuple[Card, ...]
    format: Literal["json", "csv", "csv-index-mode", "empty"]


_GO_BOOLS: Final = {
    "1": True,
    "t": True,
    "T": True,
    "true": True,
    "TRUE": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "false": False,
    "FALSE": False,
    "False": False,
}


@functools.lru_cache(maxsize=16384)
def parse_register(value: str) -> Register:
    """Parse a register annotation in any of HAMi's three formats; HamiParseError if malformed."""
    text = value.strip()
    if not text:
        return Register((), "empty")
    cards = _parse_register_json(text) if text.startswith(("[", "{")) else None
    register = Register(cards, "json") if cards is not None else _parse_register_csv(text)
    seen: set[str] = set()
    for card in register.cards:
        if card.id in seen:
            raise HamiParseError(f"card {card.id} is listed twice")
        seen.add(card.id)
    return register


def _parse_register_json(text: str) -> tuple[Card, ...]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise HamiParseError(f"invalid JSON: {exc}") from None
    if not isinstance(doc, list):
        raise HamiParseError("JSON register is not an array")
    cards = []
    for position, item in enumerate(doc):
        if not isinstance(item, dict):
            raise HamiParseError(f"entry {position} is not an object")
        card_id = item.get("id")
        if not isinstance(card_id, str) or not card_id:
            raise HamiParseError(f"entry {position} has no id")
        health = item.get("health", False)  # omitempty: absent means false, i.e. unhealthy
        if not isinstance(health, bool):
            raise HamiParseError(f"entry {position} ({card_id}): health is not a boolean")
        model = item.get("type", "")
        mode = item.get("mode", "")
        if not isinstance(model, str) or not isinstance(mode, str):
            raise HamiParseError(f"entry {position} ({card_id}): type and mode must be strings")
        cards.append(
            Card(
                id=card_id,
                index=_json_int(item, "index", position, card_id),
                count=_json_int(item, "count", position, card_id),
                devmem=_json_int(item, "devmem", position, card_id),
                devcore=_json_int(item, "devcore", position, card_id),
                model=model,
                numa=_json_int(item, "numa", position, card_id),
                healthy=health,
                mode=mode,
            )
        )
    return tuple(cards)


def _json_int(item: Mapping[str, Any], key: str, position: int, card_id: str) -> int:
    value = item.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HamiParseError(f"entry {position} ({card_id}): {key} is not a non-negative integer")
    return value


def _parse_register_csv(text: str) -> Register:
    entries = [entry.strip() for entry in text.split(":") if entry.strip()]
    cards = []
    widths = set()
    for position, entry in enumerate(entries):
        fields = [f.strip() for f in entry.split(",")]
        if len(fields) not in (7, 9):
            raise HamiParseError(
                f"entry {position} has {len(fields)} fields; expected 7 (HAMi up to v2.4) or 9 (v2.5 to v2.7)"
            )
        widths.add(len(fields))
        card_id = fields[0]
        if not card_id:
            raise HamiParseError(f"entry {position} has no id")
        if fields[6] not in _GO_BOOLS:
            raise HamiParseError(f"entry {position} ({card_id}): health {fields[6]!r} is not a boolean")
        cards.append(
            Card(
                id=card_id,
                index=_csv_int(fields[7], "index", position, card_id) if len(fields) == 9 else position,
                count=_csv_int(fields[1], "count", position, card_id),
                devmem=_csv_int(fields[2], "devmem", position, card_id),
                devcore=_csv_int(fields[3], "devcore", position, card_id),
                model=fields[4],
                numa=_csv_int(fields[5], "numa", position, card_id),
                healthy=_GO_BOOLS[fields[6]],
                mode=fields[8] if len(fields) == 9 else "",
            )
        )
    if len(widths) > 1:
        raise HamiParseError("entries mix the v2.4 (7 fields) and v2.5 (9 fields) formats")
    return Register(tuple(cards), "csv-index-mode" if widths == {9} else "csv")


def _csv_int(text: str, name: str, position: int, card_id: str) -> int:
    if not text.isdigit():
        raise HamiParseError(f"entry {position} ({card_id}): {name} {text!r} is not a non-negative integer")
    return int(text)


# -- pod allocation annotation --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    uuid: str
    vendor: str
    mem_mib: int
    cores: int


def strip_mig_suffix(uuid: str) -> str:
    """``GPU-aaa[1g.10gb-0]`` -> ``GPU-aaa``: HAMi up to v2.9 appends the MIG template and slot."""
    if uuid.endswith("]") and "[" in uuid:
        return uuid[: uuid.index("[")]
    return uuid


@functools.lru_cache(maxsize=65536)
def parse_pod_devices(value: str) -> tuple[tuple[ContainerDevice, ...], ...]:
    """One tuple of devices per container segment, in annotation order; HamiParseError if malformed.

    ``;`` alone (or an empty string) means no container holds a device.
    """
    if not value.strip():
        return ()
    segments = value.split(";")
    if segments[-1].strip() == "":
        segments = segments[:-1]  # every segment ends with ';'
    containers = []
    for position, segment in enumerate(segments):
        devices = []
        for entry in segment.split(":"):
            if not entry.strip():
                continue
            fields = [f.strip() for f in entry.split(",")]
            if len(fields) != 4:
                raise HamiParseError(f"container {position}: device {entry!r} does not have 4 fields")
            uuid = strip_mig_suffix(fields[0])
            if not uuid:
                raise HamiParseError(f"container {position}: device {entry!r} has no UUID")
            if not fields[2].isdigit() or not fields[3].isdigit():
                raise HamiParseError(f"container {position}: device {entry!r} has a non-numeric memory or cores")
            devices.append(ContainerDevice(uuid, fields[1], int(fields[2]), int(fields[3])))
        containers.append(tuple(devices))
    return tuple(containers)


@dataclass(frozen=True, slots=True)
class CardUse:
    mem_mib: int = 0
    cores: int = 0
    slots: int = 0


def pod_card_usage(
    containers: Sequence[Sequence[ContainerDevice]],
    *,
    init_containers: int = 0,
    app_containers: int | None = None,
    init_exit_codes: Sequence[int | None] = (),
) -> dict[str, CardUse]:
    """What one pod holds on each card (UUID), the way HAMi's scheduler counts it.

    From v2.9 the annotation lists the init containers first; that layout is recognised when the
    segment count equals ``init_containers + app_containers`` (otherwise every segment counts as
    an app container, as before v2.9). v2.10's rule, per card: memory and cores are the larger of
    the peak over init containers and the sum over app containers, slots = max(1, app entries).
    Once every init container has exited 0, only app containers count.
    """
    init: Sequence[Sequence[ContainerDevice]] = ()
    apps: Sequence[Sequence[ContainerDevice]] = containers
    if init_containers and app_containers is not None and len(containers) == init_containers + app_containers:
        init, apps = containers[:init_containers], containers[init_containers:]
    app_mem: Counter[str] = Counter()
    app_cores: Counter[str] = Counter()
    app_slots: Counter[str] = Counter()
    for container in apps:
        for device in container:
            app_mem[device.uuid] += device.mem_mib
            app_cores[device.uuid] += device.cores
            app_slots[device.uuid] += 1
    init_done = bool(init) and len(init_exit_codes) == init_containers and all(code == 0 for code in init_exit_codes)
    if not init or init_done:
        return {uuid: CardUse(app_mem[uuid], app_cores[uuid], app_slots[uuid]) for uuid in app_slots}
    peak_mem: dict[str, int] = {}
    peak_cores: dict[str, int] = {}
    for container in init:
        mem: Counter[str] = Counter()
        cores: Counter[str] = Counter()
        for device in container:
            mem[device.uuid] += device.mem_mib
            cores[device.uuid] += device.cores
        for uuid in mem:
            peak_mem[uuid] = max(peak_mem.get(uuid, 0), mem[uuid])
            peak_cores[uuid] = max(peak_cores.get(uuid, 0), cores[uuid])
    return {
        uuid: CardUse(
            max(peak_mem.get(uuid, 0), app_mem[uuid]),
            max(peak_cores.get(uuid, 0), app_cores[uuid]),
            max(1, app_slots[uuid]),
        )
        for uuid in sorted(set(peak_mem) | set(app_slots))
    }


# -- node lock ------------------------------------------------------------------------------------


class PodLike(Protocol):
    """What capacity and lock checks read of a HAMi pod (observe.cluster.PodInfo satisfies it)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def bind_phase(self) -> str: ...
    @property
    def allocated(self) -> str: ...
    @property
    def init_containers(self) -> int: ...
    @property
    def app_containers(self) -> int: ...
    @property
    def init_exit_codes(self) -> tuple[int | None, ...]: ...


PodLookup = Callable[[str, str], PodLike | None]


@dataclass(frozen=True, slots=True)
class NodeLock:
    since: datetime | None
    namespace: str
    pod: str
    state: LockStateName
    reason: str = ""
    """Why the lock is malformed or stale, as a phrase."""

    @property
    def stale(self) -> bool:
        return self.state != "active"

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"held": True}
        if self.since is not None:
            out["since"] = _rfc3339(self.since)
        out["pod"] = f"{self.namespace}/{self.pod}" if self.pod else ""
        out["state"] = self.state
        out["stale"] = self.stale
        if self.reason:
            out["reason"] = self.reason
        return out


def parse_lock(value: str) -> tuple[datetime, str, str]:
    """``<RFC3339>,<namespace>,<pod>`` (v2.4+) or a bare timestamp (legacy) -> (since, ns, pod)."""
    parts = value.split(",")
    if len(parts) not in (1, 3):
        raise HamiParseError(f"lock value has {len(parts)} comma-separated parts; expected 1 or 3")
    stamp = parts[0].strip()
    try:
        since = datetime.fromisoformat(stamp.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise HamiParseError(f"lock time {stamp!r} is not RFC 3339") from None
    if since.tzinfo is None:
        raise HamiParseError(f"lock time {stamp!r} has no time zone")
    if len(parts) == 1:
        return since, "", ""
    namespace, pod = parts[1].strip(), parts[2].strip()
    if not namespace or not pod:
        raise HamiParseError("lock value names no pod")
    return since, namespace, pod


def lock_state(value: str, *, now: datetime, timeout: timedelta, owner: PodLookup) -> NodeLock:
    """Classify a node lock, in this order: malformed, expired, dangling, leaked, else active.

    - expired: older than ``timeout`` (HAMi lets the next Bind take it over);
    - dangling: its pod is gone or terminated (HAMi still waits for the timeout);
    - leaked: its pod already finished binding (bind-phase success/failed) or runs, yet the lock
      is still held (the device plugin never released it);
    - a legacy lock (timestamp only) names no pod, so only its age can make it stale.
    """
    try:
        since, namespace, pod_name = parse_lock(value)
    except HamiParseError as exc:
        return NodeLock(None, "", "", "malformed", str(exc))
    age = now - since
    if age > timeout:
        return NodeLock(since, namespace, pod_name, "expired", f"older than {_duration(timeout)}")
    if not pod_name:
        return NodeLock(since, namespace, pod_name, "active")
    pod = owner(namespace, pod_name)
    if pod is None:
        return NodeLock(since, namespace, pod_name, "dangling", "its pod no longer exists")
    if pod.phase in TERMINATED_PHASES:
        return NodeLock(since, namespace, pod_name, "dangling", f"its pod has {pod.phase.lower()}")
    if pod.bind_phase in ("success", "failed"):
        return NodeLock(since, namespace, pod_name, "leaked", f"its pod's bind-phase is already {pod.bind_phase}")
    if pod.phase == "Running":
        return NodeLock(since, namespace, pod_name, "leaked", "its pod is already running")
    return NodeLock(since, namespace, pod_name, "active")


def lock_expires_in(lock: NodeLock, *, now: datetime, timeout: timedelta) -> float | None:
    """Seconds until an active lock turns expired (no watch event marks that moment)."""
    if lock.state != "active" or lock.since is None:
        return None
    return max(0.0, (lock.since + timeout - now).total_seconds())


# -- capacity -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CardState:
    card: Card
    cordoned: bool = False
    used_mem: int = 0
    used_cores: int = 0
    used_slots: int = 0

    @property
    def schedulable(self) -> bool:
        """HAMi places nothing on unhealthy or cordoned cards."""
        return self.card.healthy and not self.cordoned

    @property
    def free_mem(self) -> int:
        return self.card.devmem - self.used_mem

    @property
    def free_cores(self) -> int:
        return self.card.devcore - self.used_cores


@dataclass(frozen=True)
class NodeCapacity:
    """One node's HAMi capacity. Memory, cores and slots count schedulable cards only."""

    name: str
    registered: bool
    cards: tuple[CardState, ...] = ()
    pods: int = 0
    lock: NodeLock | None = None
    unparseable: str | None = None
    ignored_pods: tuple[str, ...] = ()
    register_format: str = ""

    @property
    def schedulable(self) -> tuple[CardState, ...]:
        return tuple(c for c in self.cards if c.schedulable)

    @property
    def unhealthy(self) -> tuple[CardState, ...]:
        return tuple(c for c in self.cards if not c.card.healthy)

    @property
    def cordoned(self) -> tuple[CardState, ...]:
        return tuple(c for c in self.cards if c.cordoned)

    @property
    def models(self) -> dict[str, int]:
        return dict(sorted(Counter(c.card.model for c in self.cards).items()))

    @property
    def main_model(self) -> str:
        counts = Counter(c.card.model for c in self.cards)
        if not counts:
            return ""
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    def totals(self) -> _Totals:
        totals = _Totals()
        for state in self.schedulable:
            totals.add(state)
        return totals

    def to_status(self, *, labelled: bool) -> dict[str, Any]:
        totals = self.totals()
        out: dict[str, Any] = {
            "name": self.name,
            "labelled": labelled,
            "registered": self.registered,
            "cards": len(self.cards),
            "models": self.models,
            **totals.to_status(),
            "unhealthyCards": len(self.unhealthy),
            "pods": self.pods,
            "lock": self.lock.to_status() if self.lock else {"held": False},
        }
        if self.cordoned:
            out["cordonedCards"] = len(self.cordoned)
        if self.unparseable is not None:
            out["unparseable"] = self.unparseable
        if self.ignored_pods:
            out["ignoredPods"] = list(self.ignored_pods)
        return out


@dataclass
class _Totals:
    mem_total: int = 0
    mem_used: int = 0
    cores_total: int = 0
    cores_used: int = 0
    slots_total: int = 0
    slots_used: int = 0

    def add(self, state: CardState) -> None:
        self.mem_total += state.card.devmem
        self.mem_used += state.used_mem
        self.cores_total += state.card.devcore
        self.cores_used += state.used_cores
        self.slots_total += state.card.count
        self.slots_used += state.used_slots

    def merge(self, other: _Totals) -> None:
        self.mem_total += other.mem_total
        self.mem_used += other.mem_used
        self.cores_total += other.cores_total
        self.cores_used += other.cores_used
        self.slots_total += other.slots_total
        self.slots_used += other.slots_used

    def to_status(self) -> dict[str, Any]:
        return {
            "slots": {"total": self.slots_total, "used": self.slots_used},
            "memoryMiB": {"total": self.mem_total, "used": self.mem_used, "free": self.mem_total - self.mem_used},
            "coresPercent": {
                "total": self.cores_total,
                "used": self.cores_used,
                "free": self.cores_total - self.cores_used,
            },
        }


def parse_cordon(value: str | None) -> frozenset[str]:
    """``hami.io/device-cordon`` (v2.10): comma-separated UUIDs excluded from new allocations."""
    if not value:
        return frozenset()
    return frozenset(strip_mig_suffix(part.strip()) for part in value.split(",") if part.strip())


def node_capacity(
    name: str,
    *,
    register: str | None,
    pods: Iterable[PodLike],
    now: datetime,
    lock_timeout: timedelta,
    owner: PodLookup,
    lock: str | None = None,
    cordon: str | None = None,
) -> NodeCapacity:
    """Compute one node's capacity from its annotations and the HAMi pods placed on it.

    ``register`` None: the node registers no devices. A malformed register makes the node
    ``unparseable`` (no cards, the reason kept); a malformed pod annotation skips that pod only.
    Pods that are Succeeded or Failed, and UUIDs not in the register, are ignored, as HAMi does.
    """
    node_lock = lock_state(lock, now=now, timeout=lock_timeout, owner=owner) if lock is not None else None
    if register is None:
        return NodeCapacity(name, registered=False, lock=node_lock)
    try:
        parsed = parse_register(register)
    except HamiParseError as exc:
        return NodeCapacity(name, registered=True, lock=node_lock, unparseable=str(exc))
    cordoned = parse_cordon(cordon)
    used: dict[str, list[int]] = {card.id: [0, 0, 0] for card in parsed.cards}
    count = 0
    ignored: list[str] = []
    for pod in pods:
        if pod.phase in TERMINATED_PHASES:
            continue
        try:
            containers = parse_pod_devices(pod.allocated)
        except HamiParseError as exc:
            ignored.append(f"{pod.namespace}/{pod.name}: {exc}")
            continue
        count += 1
        usage = pod_card_usage(
            containers,
            init_containers=pod.init_containers,
            app_containers=pod.app_containers,
            init_exit_codes=pod.init_exit_codes,
        )
        for uuid, use in usage.items():
            slot = used.get(uuid)
            if slot is None:
                continue  # not a card of this node: HAMi ignores it too
            slot[0] += use.mem_mib
            slot[1] += use.cores
            slot[2] += use.slots
    states = tuple(
        CardState(card, card.id in cordoned, used[card.id][0], used[card.id][1], used[card.id][2])
        for card in parsed.cards
    )
    return NodeCapacity(
        name,
        registered=True,
        cards=states,
        pods=count,
        lock=node_lock,
        ignored_pods=tuple(sorted(ignored)),
        register_format=parsed.format,
    )


def total_status(nodes: Sequence[NodeCapacity]) -> dict[str, Any]:
    """The cluster roll-up: nodes, cards, models, memory, cores, slots, unhealthy cards."""
    totals = _Totals()
    models: Counter[str] = Counter()
    unhealthy = 0
    cards = 0
    for node in nodes:
        totals.merge(node.totals())
        models.update(c.card.model for c in node.cards)
        unhealthy += len(node.unhealthy)
        cards += len(node.cards)
    return {
        "nodes": len(nodes),
        "cards": cards,
        "models": dict(sorted(models.items())),
        **totals.to_status(),
        "unhealthyCards": unhealthy,
    }


def model_rollup(nodes: Sequence[NodeCapacity]) -> dict[str, dict[str, int]]:
    """Per model: cards, memory total/free (MiB), cores free (%), over schedulable cards."""
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        for state in node.cards:
            entry = out.setdefault(
                state.card.model, {"cards": 0, "memory_total_mib": 0, "memory_free_mib": 0, "cores_free_percent": 0}
            )
            entry["cards"] += 1
            if state.schedulable:
                entry["memory_total_mib"] += state.card.devmem
                entry["memory_free_mib"] += state.free_mem
                entry["cores_free_percent"] += state.free_cores
    return dict(sorted(out.items()))


def summary_line(total: Mapping[str, Any]) -> str:
    """The GPUs printer column: ``<cards> cards / <free> MiB free``."""
    return f"{total.get('cards', 0)} cards / {total.get('memoryMiB', {}).get('free', 0)} MiB free"


# -- fit ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuRequest:
    """One container's GPU request: ``cards`` cards, each with this memory and these cores.

    ``mem_mib`` wins over ``mem_percent``; neither means the whole card (HAMi's default).
    """

    cards: int = 1
    mem_mib: int | None = None
    mem_percent: int | None = None
    cores: int = 0


def request_from_limits(limits: Mapping[str, Any], names: ResourceNames = DEFAULT_NAMES) -> GpuRequest | None:
    """A container's HAMi request from its resource limits; None when it asks for no GPU.

    A request for memory or cores only implies one card (HAMi's webhook adds it).
    """

    def number(key: str) -> int | None:
        raw = limits.get(key)
        if raw is None:
            return None
        text = str(raw).strip()
        return int(text) if text.isdigit() else None

    count, mem, percent, cores = (
        number(names.count),
        number(names.memory),
        number(names.memory_percentage),
        number(names.cores),
    )
    if count is None and mem is None and percent is None and cores is None:
        return None
    return GpuRequest(cards=count or 1, mem_mib=mem, mem_percent=None if mem is not None else percent, cores=cores or 0)


def card_fit(state: CardState, request: GpuRequest) -> str | None:
    """None when ``request`` fits this card, else why not; HAMi's order of checks (Fit)."""
    card = state.card
    if not card.healthy:
        return "the card is unhealthy"
    if state.cordoned:
        return "the card is cordoned"
    if state.used_slots >= card.count:
        return f"all {card.count} sharing slots are in use"
    if request.mem_mib is not None:
        mem = request.mem_mib
    elif request.mem_percent is not None:
        mem = card.devmem * request.mem_percent // 100
    else:
        mem = card.devmem
    if mem > state.free_mem:
        return f"needs {mem} MiB, {state.free_mem} MiB free"
    if request.cores > 100:
        return f"{request.cores}% cores is out of range (at most 100)"
    if request.cores == 100 and state.used_slots > 0:
        return "an exclusive (100%) cores request needs an unused card"
    if request.cores == 0 and state.used_cores >= card.devcore:
        return "no cores are free"
    if state.used_cores + request.cores > card.devcore:
        return f"needs {request.cores}% cores, {state.free_cores}% free"
    return None


@dataclass(frozen=True)
class Fit:
    fits: bool
    cards: tuple[str, ...] = ()
    """UUIDs of cards the request fits (the first ``request.cards`` of them would be used)."""
    reasons: Mapping[str, str] = field(default_factory=dict)
    """UUID -> why the request does not fit that card."""


def node_fit(node: NodeCapacity, request: GpuRequest) -> Fit:
    """Whether ``request`` fits on ``node``: it needs ``request.cards`` distinct fitting cards."""
    fitting = []
    reasons = {}
    for state in node.cards:
        why = card_fit(state, request)
        if why is None:
            fitting.append(state.card.id)
        else:
            reasons[state.card.id] = why
    return Fit(len(fitting) >= max(1, request.cards), tuple(fitting), reasons)


# -- GPU node detection ---------------------------------------------------------------------------


def quantity_int(value: Any) -> int:
    """An integer quantity such as ``8`` or ``2k``; 0 for anything else (never raises)."""
    text = str(value or "").strip()
    multipliers = {"k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
    for suffix, factor in sorted(multipliers.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor
    return int(text) if text.isdigit() else 0


def is_gpu_node(
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    capacity: Mapping[str, Any],
    count_resource: str = DEFAULT_NAMES.count,
) -> bool:
    """GPU capacity, NVIDIA feature-discovery labels, or a HAMi register annotation."""
    if quantity_int(capacity.get(count_resource)) > 0:
        return True
    if any(labels.get(key, "").lower() == "true" for key in GPU_PRESENT_LABELS):
        return True
    return hami_annotation(annotations, REGISTER) is not None


def forbidden_label(key: str) -> bool:
    return key.startswith(FORBIDDEN_LABEL_PREFIXES)


# -- GPUReady -------------------------------------------------------------------------------------


@dataclass
class Findings:
    """Everything GPUReady is decided from (built by the gpu step)."""

    labels_enabled: bool
    hami_enabled: bool
    gpu_nodes: int
    conflicts: list[str] = field(default_factory=list)
    """Sentences naming node, key and the other TenantPlatform."""
    pending: list[str] = field(default_factory=list)
    """Dry run: label changes that would be made, e.g. ``gpu-1: add gpu=on``."""
    nodes: Sequence[NodeCapacity] = ()
    labelled: frozenset[str] = frozenset()
    allocatable: Mapping[str, int] = field(default_factory=dict)
    """Node -> allocatable count of ``count_resource``."""
    count_resource: str = DEFAULT_NAMES.count
    lock_timeout: timedelta = timedelta(minutes=5)


def _names(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def gpu_condition(findings: Findings) -> Condition:
    """GPUReady from the findings. Every problem is named in the message; the reason is the
    most urgent one (conflict, pending labels, unparseable, no devices, no allocatable GPUs,
    unhealthy cards, stale lock)."""
    type_ = constants.GPU_READY
    if not findings.labels_enabled and not findings.hami_enabled:
        return conditions.true(
            type_,
            constants.REASON_DISABLED,
            "GPU node labels and HAMi reporting are both turned off (spec.gpu.nodeLabels.enabled, "
            "spec.gpu.hami.enabled).",
        )
    problems: list[tuple[str, str]] = []
    if findings.conflicts:
        problems.append(
            (
                constants.REASON_CONFLICT,
                " ".join(findings.conflicts)
                + " Neither platform overwrites the other: make spec.gpu.nodeLabels.labels agree.",
            )
        )
    if findings.pending:
        problems.append(
            (REASON_LABELS_PENDING, f"Would change GPU node labels: {_names(findings.pending, 10)} (dry run).")
        )
    if findings.hami_enabled:
        problems.extend(_hami_problems(findings))
    if problems:
        return conditions.false(type_, problems[0][0], " ".join(message for _, message in problems))
    if findings.gpu_nodes == 0:
        return conditions.true(
            type_,
            REASON_NO_GPU_NODES,
            "No GPU nodes found (no nvidia.com/gpu capacity, NVIDIA feature-discovery label or HAMi "
            "register annotation); GPUs are optional.",
        )
    message = f"{findings.gpu_nodes} GPU node(s)"
    if findings.labels_enabled:
        message += f", {len(findings.labelled)} labelled"
    if findings.hami_enabled:
        total = total_status(findings.nodes)
        message += f"; HAMi reports {summary_line(total)}"
    return conditions.true(type_, REASON_READY, message + ".")


def _hami_problems(findings: Findings) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    unparseable = [f"{n.name} ({n.unparseable})" for n in findings.nodes if n.unparseable is not None]
    if unparseable:
        out.append(
            (
                REASON_UNPARSEABLE,
                f"HAMi's register annotation cannot be parsed on node(s) {_names(unparseable)}; HAMi cannot "
                "schedule there either: check the device plugin version on those nodes.",
            )
        )
    silent = [n.name for n in findings.nodes if n.name in findings.labelled and not n.registered]
    if silent:
        out.append(
            (
                REASON_NO_DEVICES,
                f"Labelled GPU node(s) {_names(silent)} register no devices with HAMi (no "
                f"{ANNOTATION_REGISTER} annotation): check that HAMi's device plugin runs there "
                "(its DaemonSet selects the labels) and that the NVIDIA driver works.",
            )
        )
    empty = [n.name for n in findings.nodes if n.registered and n.unparseable is None and not n.cards]
    if empty:
        out.append((REASON_NO_DEVICES, f"Node(s) {_names(empty)} register an empty device list with HAMi."))
    no_alloc = [
        n.name
        for n in findings.nodes
        if n.registered and n.unparseable is None and n.cards and findings.allocatable.get(n.name, 0) <= 0
    ]
    if no_alloc:
        out.append(
            (
                REASON_NO_ALLOCATABLE,
                f"Node(s) {_names(no_alloc)} register cards with HAMi but advertise no allocatable "
                f"{findings.count_resource}, so HAMi's scheduler treats their devices as unhealthy: check "
                "the device plugin pod on each.",
            )
        )
    unhealthy = [f"{n.name} ({len(n.unhealthy)} of {len(n.cards)})" for n in findings.nodes if n.unhealthy]
    if unhealthy:
        out.append(
            (
                REASON_UNHEALTHY,
                f"Unhealthy GPU cards on node(s) {_names(unhealthy)}: HAMi places nothing on them; check "
                "the driver (nvidia-smi) and the device plugin logs.",
            )
        )
    stale = [
        f"{n.name} ({n.lock.state}: {_lock_phrase(n.lock)})"
        for n in findings.nodes
        if n.lock is not None and n.lock.stale
    ]
    if stale:
        out.append(
            (
                REASON_STALE_LOCK,
                f"Stale HAMi node lock on node(s) {_names(stale)}: new GPU pods cannot bind there until it "
                f"expires; remove the {ANNOTATION_LOCK} annotation from the node if its pod is done.",
            )
        )
    return out


def _lock_phrase(lock: NodeLock) -> str:
    parts = []
    if lock.since is not None:
        parts.append(f"held since {_rfc3339(lock.since)}")
    if lock.pod:
        parts.append(f"by {lock.namespace}/{lock.pod}")
    if lock.reason:
        parts.append(lock.reason)
    return ", ".join(parts)


# -- helpers --------------------------------------------------------------------------------------


def _rfc3339(moment: datetime) -> str:
    text = moment.isoformat()
    return text.replace("+00:00", "Z")


def _duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
