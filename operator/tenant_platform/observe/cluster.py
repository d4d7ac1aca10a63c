"""An in-memory, thread-safe snapshot of Nodes (GPU-relevant fields) and HAMi pods.

The operator keeps it current with two ``observe.reflector.Reflector`` threads (list, then watch,
per kind; started by gpuwatch.py); ``check``, tests and benchmarks fill one with
``observe.reflector.load_from_api``.
Steps take an immutable ``view()``.

Only what the GPU step needs is kept, never whole bodies (HAMi's annotation and label names
come from formats/hami/names.py):
- Every Node (a label selector in a platform's spec or on an ``nvidia`` RuntimeClass may make
  any node a GPU node), but only: uid, labels (minus the voluminous NFD/GFD families, of which
  the few we read are kept), HAMi annotations, extended resources, runtime handler names,
  NoSchedule/NoExecute taints (bounded: observe/objects.py), and which label keys each
  ``tenant-platform-operator/<platform>`` field manager owns (from managedFields).
- Pods with ``hami.io/vgpu-node`` (or ``4pd.io/``) that are not Succeeded or Failed: where
  HAMi placed them, what they hold, bind phase, container counts and init exit codes.

``changes`` counts relevant changes (a node heartbeat that changes nothing we keep does not
count), so a refresher can wait with ``wait_for_change`` and debounce status writes;
``changed_nodes(since)`` says which nodes those changes touched (a pod counts for the node HAMi
placed it on), or None for "any": a complete listing, or more changes than the bounded log keeps.
A node change that only moved which label keys platforms' field managers own is kept apart: it
touches the node only for those platforms (``changed_nodes(..., platform=)``), so one platform
labelling a node does not wake every other platform. ``synced``
is True once both kinds had a complete listing; ``stale_since`` is when a kind last stopped being
current (no complete listing yet, a relist in progress, a watch failing), None while both are.

Other people's objects are hostile input: every annotation value kept is bounded
(formats/hami/bounds.py: a longer one is kept as a short marker the parsers reject), a pod placed on a
"node" whose name no Node could have is dropped, and an object that cannot be read at all is
skipped and counted (``skipped``) instead of failing a whole listing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeVar

from tenant_platform.core.identities import LABEL_MANAGER_PREFIX, label_manager
from tenant_platform.observe.objects import MAX_NODE_NAME, NodeInfo, PodInfo, node_info, pod_info

if TYPE_CHECKING:
    pass

KINDS: Final = frozenset({"nodes", "pods"})
# Pods that ended are of no interest; the API server filters them out of lists and watches (a
# pod that ends arrives as DELETED).
LIVE_PODS: Final = "status.phase!=Succeeded,status.phase!=Failed"
# How many changes ``changed_nodes`` can look back over (older ones read as "any node").
CHANGE_LOG: Final = 10_000

__all__ = [
    "KINDS",
    "LABEL_MANAGER_PREFIX",
    "LIVE_PODS",
    "MAX_NODE_NAME",
    "SNAPSHOT",
    "Changes",
    "ClusterSnapshot",
    "ClusterView",
    "NodeInfo",
    "PodInfo",
    "label_manager",
    "node_info",
    "pod_info",
]

_log = logging.getLogger("tenant_platform.observe")
_Info = TypeVar("_Info", "NodeInfo", "PodInfo")


@dataclass(frozen=True)
class ClusterView:
    """An immutable view of the snapshot at one moment (``changes`` identifies it)."""

    nodes: Mapping[str, NodeInfo]
    pods_by_node: Mapping[str, tuple[PodInfo, ...]]
    pods: Mapping[tuple[str, str], PodInfo]
    changes: int
    synced: bool
    stale_since: datetime | None = None
    """When the snapshot last stopped being current (see ClusterSnapshot.stale_since)."""
    stale_why: str = ""

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        return self.pods.get((namespace, name))


class ClusterSnapshot:
    """The watched GPU state of the cluster. All methods are thread-safe and cheap."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._cond = threading.Condition()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[tuple[str, str], PodInfo] = {}
        self._by_node: dict[str, dict[tuple[str, str], PodInfo]] = {}
        # Node -> its pods as the views hand them out, rebuilt only for the nodes a change touches.
        self._placed: dict[str, tuple[PodInfo, ...]] = {}
        # The last view and what it was taken at (change number, staleness): reused until either moves.
        self._view: tuple[tuple[int, tuple[datetime, str] | None], ClusterView] | None = None
        self._changes = 0
        # (change number, nodes it touched or None for any, the platforms it concerns or None for
        # all), one entry per change.
        self._log: deque[tuple[int, tuple[str, ...] | None, frozenset[str] | None]] = deque(maxlen=CHANGE_LOG)
        self._synced_kinds: set[str] = set()
        self._clock = clock or (lambda: datetime.now(UTC))
        started = self._clock()
        # Kind -> (since when it is not current, why); both kinds until their first listing.
        self._stale: dict[str, tuple[datetime, str]] = {kind: (started, "not listed yet") for kind in KINDS}
        self.skipped = 0
        """Objects that could not be read at all (skipped; never seen in practice)."""

    # ---- state ---------------------------------------------------------------------------------

    @property
    def changes(self) -> int:
        with self._cond:
            return self._changes

    @property
    def synced(self) -> bool:
        """True once a complete listing of both Nodes and Pods went in."""
        with self._cond:
            return self._is_synced()

    def _is_synced(self) -> bool:
        return self._synced_kinds >= KINDS

    def mark_synced(self) -> None:
        """Declare the content complete (for callers that fed it event by event themselves)."""
        with self._cond:
            self._stale.clear()
            if not self._is_synced():
                self._synced_kinds |= KINDS
                self._bump()

    def mark_stale(self, kind: str, why: str) -> None:
        """``kind`` is not current from now on (a relist started, its watch failed), until
        ``mark_current``; an earlier mark keeps its time."""
        with self._cond:
            self._stale.setdefault(kind, (self._clock(), why))

    def mark_current(self, kind: str) -> None:
        """``kind`` is current again (a listing went in, or its watch delivers)."""
        with self._cond:
            self._stale.pop(kind, None)

    @property
    def stale_since(self) -> tuple[datetime, str] | None:
        """(since when, why) of the kind that stopped being current first; None when both are."""
        with self._cond:
            return min(self._stale.values()) if self._stale else None

    def wait_synced(self, timeout: float) -> bool:
        """Block until synced or ``timeout`` passes; return whether it is synced."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not self._is_synced():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def __len__(self) -> int:
        with self._cond:
            return len(self._nodes) + len(self._pods)

    def _bump(self, *nodes: str, only: frozenset[str] | None = None) -> None:
        """One more change, touching ``nodes`` (none named: any node); ``only``: it concerns only
        these platforms (their label ownership moved)."""
        self._changes += 1
        self._log.append((self._changes, nodes or None, only))
        self._cond.notify_all()

    def changed_nodes(
        self, since: int, upto: int | None = None, *, platform: str | None = None
    ) -> frozenset[str] | None:
        """The nodes the changes after ``since`` (up to ``upto``) touched; None when any may have
        changed (a listing replaced a kind, the snapshot became synced, or the log no longer
        reaches back to ``since``). With ``platform``: leaving out changes that only moved other
        platforms' label ownership."""
        with self._cond:
            last = self._changes if upto is None else upto
            if last <= since:
                return frozenset()
            if not self._log or self._log[0][0] > since + 1:
                return None
            touched: set[str] = set()
            for number, nodes, only in reversed(self._log):
                if number <= since:
                    break
                if number > last or (platform is not None and only is not None and platform not in only):
                    continue
                if nodes is None:
                    return None
                touched.update(nodes)
            return frozenset(touched)

    # ---- feeding -------------------------------------------------------------------------------

    def _read(self, convert: Callable[[Mapping[str, Any]], _Info | None], body: Mapping[str, Any]) -> _Info | None:
        """``convert(body)``; an object that cannot be read is skipped (counted), never raised."""
        try:
            return convert(body)
        except Exception:
            with self._cond:
                self.skipped += 1
            _log.warning("skipped an object the GPU snapshot cannot read", exc_info=True)
            return None

    def ingest_node(self, body: Mapping[str, Any]) -> bool:
        """Store a Node from a watch event (ADDED, MODIFIED or a listing); True when it changed."""
        name = str((body.get("metadata") or {}).get("name", ""))
        info = self._read(node_info, body)
        with self._cond:
            if info is None:
                return self._forget_node(name)
            old = self._nodes.get(name)
            if old == info:
                return False
            self._nodes[name] = info
            self._bump(name, only=_owners_moved(old, info))
            return True

    def forget_node(self, name: str) -> bool:
        """Drop a deleted Node; True when it was known."""
        with self._cond:
            return self._forget_node(name)

    def _forget_node(self, name: str) -> bool:
        if self._nodes.pop(name, None) is None:
            return False
        self._bump(name)
        return True

    def ingest_pod(self, body: Mapping[str, Any]) -> bool:
        """Store a Pod from a watch event; pods HAMi has not placed or that ended are dropped."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        info = self._read(pod_info, body)
        with self._cond:
            if info is None:
                return self._forget_pod(key)
            old = self._pods.get(key)
            if old == info:
                return False
            if old is not None and old.node != info.node:
                self._unindex(old, key)
            self._pods[key] = info
            self._by_node.setdefault(info.node, {})[key] = info
            self._retuple(info.node)
            self._bump(info.node, *((old.node,) if old is not None and old.node != info.node else ()))
            return True

    def forget_pod(self, namespace: str, name: str) -> bool:
        with self._cond:
            return self._forget_pod((namespace, name))

    def _forget_pod(self, key: tuple[str, str]) -> bool:
        old = self._pods.pop(key, None)
        if old is None:
            return False
        self._unindex(old, key)
        self._bump(old.node)
        return True

    def _unindex(self, old: PodInfo, key: tuple[str, str]) -> None:
        placed = self._by_node.get(old.node)
        if placed is not None:
            placed.pop(key, None)
            if not placed:
                del self._by_node[old.node]
        self._retuple(old.node)

    def _retuple(self, node: str) -> None:
        """Rebuild the pods tuple of one node the views hand out (after its pods changed)."""
        placed = self._by_node.get(node)
        if placed:
            self._placed[node] = tuple(placed.values())
        else:
            self._placed.pop(node, None)

    def handle_node_event(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """One watch event for a Node (type None: initial listing)."""
        if event_type == "DELETED":
            return self.forget_node(str((body.get("metadata") or {}).get("name", "")))
        return self.ingest_node(body)

    def handle_pod_event(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """One watch event for a Pod (type None: initial listing)."""
        if event_type == "DELETED":
            meta = body.get("metadata") or {}
            return self.forget_pod(str(meta.get("namespace", "")), str(meta.get("name", "")))
        return self.ingest_pod(body)

    def replace_nodes(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """Replace every Node with a complete listing (objects deleted meanwhile disappear)."""
        new_nodes = {info.name: info for body in nodes if (info := self._read(node_info, body)) is not None}
        with self._cond:
            self._nodes = new_nodes
            self._synced_kinds.add("nodes")
            self._stale.pop("nodes", None)
            self._bump()

    def replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        """Replace every Pod with a complete listing (objects deleted meanwhile disappear)."""
        new_pods = {
            (info.namespace, info.name): info for body in pods if (info := self._read(pod_info, body)) is not None
        }
        by_node: dict[str, dict[tuple[str, str], PodInfo]] = {}
        for key, info in new_pods.items():
            by_node.setdefault(info.node, {})[key] = info
        placed = {node: tuple(p.values()) for node, p in by_node.items()}
        with self._cond:
            self._pods, self._by_node, self._placed = new_pods, by_node, placed
            self._synced_kinds.add("pods")
            self._stale.pop("pods", None)
            self._bump()

    def replace_all(self, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> None:
        """Replace everything with a complete listing; the snapshot is then synced."""
        self.replace_nodes(nodes)
        self.replace_pods(pods)

    # ---- reading -------------------------------------------------------------------------------

    def view(self) -> ClusterView:
        """A consistent, immutable copy for one reconcile (O(nodes + pods), no parsing).

        The same view object is handed out again until something changes (``changes`` or the
        staleness), so platforms whose passes follow one change share one copy; the per-node pod
        tuples are rebuilt only for the nodes a change touched."""
        with self._cond:
            stale = min(self._stale.values()) if self._stale else None
            key = (self._changes, stale)
            if self._view is not None and self._view[0] == key:
                return self._view[1]
            view = ClusterView(
                nodes=MappingProxyType(dict(self._nodes)),
                pods_by_node=MappingProxyType(dict(self._placed)),
                pods=MappingProxyType(dict(self._pods)),
                changes=self._changes,
                synced=self._is_synced(),
                stale_since=stale[0] if stale else None,
                stale_why=stale[1] if stale else "",
            )
            self._view = (key, view)
            return view

    def node(self, name: str) -> NodeInfo | None:
        """One node as kept now (no copy of the rest)."""
        with self._cond:
            return self._nodes.get(name)

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until ``changes`` exceeds ``since`` or ``timeout`` passes; return ``changes``."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._changes <= since:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self._changes


def _owners_moved(old: NodeInfo | None, new: NodeInfo) -> frozenset[str] | None:
    """The platforms whose label ownership is all that differs between ``old`` and ``new``; None
    when anything else differs."""
    if old is None or replace(old, label_managers=new.label_managers) != new:
        return None
    before, after = old.label_managers, new.label_managers
    return frozenset(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


@dataclass(frozen=True)
class Changes:
    """The snapshot's changes between two change numbers (what the GPU refresher hands on)."""

    snapshot: ClusterSnapshot
    since: int
    upto: int

    def nodes(self, platform: str | None = None) -> frozenset[str] | None:
        """The nodes they touched (for ``platform``: see ``ClusterSnapshot.changed_nodes``)."""
        return self.snapshot.changed_nodes(self.since, self.upto, platform=platform)


# The operator process's snapshot, fed by gpuwatch.py.
SNAPSHOT: Final = ClusterSnapshot()
