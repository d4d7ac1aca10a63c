"""Which GPU node labels to write and release, given who holds which key (pure planning).

Node labels are written with server-side apply under **one field manager per label key and
value**, shared by every platform that wants that value (``value_manager``): at most a handful
of managers per node, however many platforms there are. The node's managedFields record which
key=value is held; the platforms' specs (and, for each, its GPU nodes as of its last pass) say
who wants it. So, per node of the snapshot:

- **apply** ``key=value`` under its value manager when this platform wants it there and the
  manager does not hold it with that live value yet;
- a key held by one of our managers with **another value that a live platform wants** on this
  node is a **conflict**: left out, reported with the platforms wanting the held value (the
  holder keeps it; neither overwrites). Held with a value nobody wants any more, the stale
  holder is released and this platform's value applied;
- **release** every value manager on the node whose key=value no live platform wants there (a
  spec changed, a node stopped qualifying, a platform was deleted). A platform whose GPU nodes
  are not known yet (no pass since the operator started) counts as wanting its labels on every
  node, and when the platforms could not be read nothing is released: a label is never dropped
  under a platform that still wants it;
- earlier versions' **per-platform managers** (``label_manager``) are released: this
  platform's own, and those of platforms that no longer exist; what they held that a live
  platform wants is first applied under its value manager (a hand-over: the label never
  disappears).

A node whose holders already match writes nothing; a dry run reports the changes instead.
Writing the plan (and the conflicts only the API server can reveal) is concerns/gpu/labelwrites.py.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from tenant_platform.core.identities import LABEL_MANAGER_PREFIX as LABEL_MANAGER_PREFIX
from tenant_platform.core.identities import VALUE_MANAGER_PREFIX as VALUE_MANAGER_PREFIX
from tenant_platform.core.identities import label_manager as label_manager
from tenant_platform.formats.hami.names import forbidden_label

# The API server's limit on a field manager's length.
MAX_MANAGER_LENGTH: Final = 128


def value_manager(key: str, value: str) -> str:
    """The field manager that holds label ``key=value`` for every platform wanting it.

    Readable when it fits the API server's 128 characters; otherwise a digest of key and value
    (a label key may be 317 characters long).
    """
    readable = f"{VALUE_MANAGER_PREFIX}{key}={value}"
    if len(readable) <= MAX_MANAGER_LENGTH:
        return readable
    digest = hashlib.sha256(f"{key}\n{value}".encode()).hexdigest()[:40]
    return f"{VALUE_MANAGER_PREFIX}sha256-{digest}"


def held_value(manager: str, key: str) -> str | None:
    """The value a value manager of ``key`` stands for, when its name says it (not a digest)."""
    prefix = f"{VALUE_MANAGER_PREFIX}{key}="
    return manager[len(prefix) :] if manager.startswith(prefix) else None


class NodeLike(Protocol):
    """What the GPU step reads of a node (observe's NodeInfo satisfies it)."""

    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...
    @property
    def capacity(self) -> Mapping[str, str]: ...
    @property
    def allocatable(self) -> Mapping[str, str]: ...
    @property
    def label_managers(self) -> Mapping[str, frozenset[str]]: ...
    @property
    def label_holders(self) -> Mapping[str, tuple[str, ...]]: ...
    @property
    def runtime_handlers(self) -> tuple[str, ...]: ...
    @property
    def taints(self) -> tuple[tuple[str, str, str], ...]: ...


@dataclass(frozen=True)
class Wanter:
    """Another live TenantPlatform preparing the same cluster, and the labels it wants."""

    platform: str
    labels: Mapping[str, str]
    nodes: frozenset[str] | None = None
    """Its GPU nodes as of its last pass; None: not known yet (counts as every node)."""

    def wants(self, node: str, key: str, value: str) -> bool:
        return self.labels.get(key) == value and (self.nodes is None or node in self.nodes)


class Others:
    """The other live platforms, read at most once per pass and only when a node's plan needs
    them (a steady state, where every held label is one this platform wants, never does)."""

    def __init__(self, read: Callable[[], Sequence[Wanter] | None]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._done = False
        self._wanters: Sequence[Wanter] | None = None

    @classmethod
    def of(cls, wanters: Sequence[Wanter] | None) -> Others:
        return cls(lambda: wanters)

    @property
    def read(self) -> bool:
        """Whether they were needed (and read) so far."""
        return self._done

    def get(self) -> Sequence[Wanter] | None:
        """The wanters; None when they could not be read."""
        with self._lock:
            if not self._done:
                self._wanters = self._read()
                self._done = True
            return self._wanters

    def names(self) -> set[str] | None:
        wanters = self.get()
        return None if wanters is None else {w.platform for w in wanters}

    def wanting(self, node: str, key: str, value: str) -> list[str] | None:
        """The other platforms that want ``key=value`` on ``node``; None when not known."""
        wanters = self.get()
        if wanters is None:
            return None
        return sorted(w.platform for w in wanters if w.wants(node, key, value))


@dataclass(frozen=True)
class LabelJob:
    """One node's writes: applies (manager -> its one label), then releases (the uid is the
    precondition of each)."""

    node: str
    uid: str
    apply: Mapping[str, Mapping[str, str]]
    release: tuple[str, ...] = ()


@dataclass
class LabelPlan:
    jobs: list[LabelJob] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    """Sentences naming node, key and the other TenantPlatforms (known from the snapshot)."""
    pending: list[str] = field(default_factory=list)
    """Dry run: label changes that would be made, e.g. ``gpu-1: set gpu=on``."""


@dataclass
class LabelOutcome:
    """What labelling achieved this pass (the plan, plus what the API server answered)."""

    applied: dict[str, dict[str, str]] = field(default_factory=dict)
    """Node -> the labels applied this pass (writes only)."""
    conflicts: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)


def spec_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``spec.gpu.nodeLabels.labels`` without reserved keys (the CRD rejects them too)."""
    return {k: v for k, v in labels.items() if not forbidden_label(k)}


def conflict_sentence(node: NodeLike | None, *, name: str, key: str, value: str, others: Collection[str]) -> str:
    live = node.labels.get(key) if node else None
    holder = ", ".join(f"TenantPlatform {o}" for o in others) or "another TenantPlatform"
    held = f"{key}={live}" if live is not None else key
    return f"Node {name}: label {held} is held by {holder}; this platform wants {key}={value}."


class _NodePlan:
    """One node's applies, releases and conflicts (see the module docstring for the rules)."""

    def __init__(self, node: NodeLike, target: Mapping[str, str], *, platform: str, others: Others) -> None:
        self.node, self.target, self.platform, self.others = node, target, platform, others
        self.apply: dict[str, dict[str, str]] = {}
        self.release: list[str] = []
        self.conflicts: list[str] = []
        for key, value in sorted(target.items()):
            self._want(key, value)
        self._release_unwanted()
        if node.label_managers:
            self._release_earlier(others.names())

    def _wanted_by_others(self, key: str, value: str) -> list[str] | None:
        return self.others.wanting(self.node.name, key, value)

    def _want(self, key: str, value: str) -> None:
        node, mine = self.node, value_manager(key, value)
        live = node.labels.get(key)
        holders = node.label_holders.get(key, ())
        if live == value:
            if mine not in holders:
                self.apply[mine] = {key: value}
            return
        rivals = [h for h in holders if h != mine]
        earlier = [p for p, keys in node.label_managers.items() if p != self.platform and key in keys]
        if live is not None and (rivals or earlier):
            holding = self._wanted_by_others(key, live)
            live_names = self.others.names()
            if holding is not None and live_names is not None:
                holding = sorted(set(holding) | {p for p in earlier if p in live_names})
            if holding is None or holding:
                self.conflicts.append(
                    conflict_sentence(node, name=node.name, key=key, value=value, others=holding or [])
                )
                return
        # Held by nobody, by a person or another tool, or by a holder of ours nobody wants any more:
        # applied (concerns/gpu/labelwrites.py forces over all of these), which moves the key to us.
        self.apply[mine] = {key: value}

    def _release_unwanted(self) -> None:
        node = self.node
        for key, holders in node.label_holders.items():
            live = node.labels.get(key)
            for manager in holders:
                if manager in self.release or manager in self.apply:
                    continue
                if key in self.target and value_manager(key, self.target[key]) in self.apply:
                    continue  # our apply of this key takes it over from the stale holder
                value = live if live is not None and manager == value_manager(key, live) else None
                if value is not None and (self.target.get(key) == value):
                    continue
                if value is not None and self._wanted_by_others(key, value) != []:
                    continue  # wanted by another platform (or not known: kept)
                self.release.append(manager)

    def _release_earlier(self, live_names: set[str] | None) -> None:
        node = self.node
        for platform, keys in node.label_managers.items():
            if platform != self.platform and (live_names is None or platform in live_names):
                continue  # a live platform's own: its pass hands it over
            for key in sorted(keys):
                value = node.labels.get(key)
                if value is None:
                    continue
                manager = value_manager(key, value)
                if manager in self.apply or manager in node.label_holders.get(key, ()):
                    continue
                if self.target.get(key) == value or self._wanted_by_others(key, value) != []:
                    self.apply[manager] = {key: value}  # hand over before letting go
            self.release.append(label_manager(platform))

    def job(self) -> LabelJob | None:
        if not self.apply and not self.release:
            return None
        return LabelJob(self.node.name, self.node.uid, dict(self.apply), tuple(self.release))

    def pending(self) -> list[str]:
        """A dry run's account: labels set, and managers let go (a label stays when others hold it)."""
        node = self.node
        changes = [
            f"set {k}={v}" for labels in self.apply.values() for k, v in labels.items() if node.labels.get(k) != v
        ]
        for manager in self.release:
            if manager.startswith(VALUE_MANAGER_PREFIX):
                keys = [k for k, holders in node.label_holders.items() if manager in holders]
            else:
                keys = sorted(node.label_managers.get(manager[len(LABEL_MANAGER_PREFIX) :], ()))
            changes += [f"release {k}" for k in keys]
        return changes


def plan_labels(
    nodes: Mapping[str, NodeLike],
    gpu_nodes: Collection[str],
    wanted: Mapping[str, str],
    *,
    platform: str,
    dry_run: bool,
    others: Others | Sequence[Wanter] | None = (),
) -> LabelPlan:
    """This platform's label writes for every snapshot node, minus what needs no write.

    ``others``: the other live platforms preparing this cluster, or an ``Others`` reading them
    when first needed (None: they could not be read, so nothing shared is released and a held
    key is a conflict).
    """
    if not isinstance(others, Others):
        others = Others.of(others)
    plan = LabelPlan()
    for name in sorted(nodes):
        node = nodes[name]
        target = dict(wanted) if name in gpu_nodes else {}
        node_plan = _NodePlan(node, target, platform=platform, others=others)
        plan.conflicts += node_plan.conflicts
        if dry_run:
            changes = node_plan.pending()
            if changes:
                plan.pending.append(f"{name}: {', '.join(changes)}")
            continue
        job = node_plan.job()
        if job is not None:
            plan.jobs.append(job)
    return plan


def labelled_nodes(
    nodes: Mapping[str, NodeLike],
    gpu_nodes: Collection[str],
    labels: Mapping[str, str],
    applied: Mapping[str, Mapping[str, str]],
) -> frozenset[str]:
    """GPU nodes that carry every spec label (live, or as applied this pass)."""
    labelled = set()
    for name in gpu_nodes:
        effective = {**nodes[name].labels, **applied.get(name, {})}
        if labels and all(effective.get(k) == v for k, v in labels.items()):
            labelled.add(name)
    return frozenset(labelled)
