"""The list-and-watch side of the GPU snapshot (observe/cluster.py): ``Reflector`` keeps one kind
(Nodes or live Pods) of a ``ClusterSnapshot`` current in a thread, as client-go's reflector
does; ``load_from_api`` fills one from a single listing (``check``, tests and benchmarks).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from tenant_platform.formats.hami import bounds
from tenant_platform.kube import errors
from tenant_platform.kube.backoff import Backoff, Uniform
from tenant_platform.observe.cluster import KINDS, LIVE_PODS, ClusterSnapshot

if TYPE_CHECKING:
    from tenant_platform.kube.client import Kube

__all__ = ["RELIST_BACKOFF_BASE", "RELIST_BACKOFF_CAP", "Reflector", "load_from_api"]


def load_from_api(kube: Kube, snapshot: ClusterSnapshot | None = None) -> ClusterSnapshot:
    """Fill a snapshot (a new one unless given) from one listing of Nodes and live Pods.

    For ``check``, tests and benchmarks; the operator itself is fed by watches. Two paged LISTs:
    all Nodes, and Pods in every namespace that are not Succeeded or Failed.
    """
    nodes = kube.list("v1", "Node")
    pods = kube.list("v1", "Pod", field_selector=LIVE_PODS)
    target = snapshot if snapshot is not None else ClusterSnapshot()
    target.replace_all(nodes, pods)
    return target


# The watches' back-off (see Reflector): full jitter from 0.5 s doubling to 30 s.
RELIST_BACKOFF_BASE: Final = 0.5
RELIST_BACKOFF_CAP: Final = 30.0


class Reflector:
    """Keep one kind (Nodes or Pods) of a snapshot current: list, then watch; relist when needed.

    As client-go's reflector does: a complete (paged) listing replaces that kind's content, so
    objects deleted while nobody watched cannot linger; the watch resumes from the last
    resourceVersion seen (bookmarks keep it fresh) and a 410 Gone (expired resourceVersion)
    triggers a new listing. Every failure, a 410 included, waits before the next attempt:
    exponential back-off with full jitter (kube/backoff.py: at most 0.5 s, 1 s, 2 s, ... up to
    30 s; a 410 alone at most 0.5 s), reset once a watch ends in order; three failures in a row
    relist. The jitter keeps the relists of both kinds (and of both replicas) after an API server
    outage from arriving together. ``run`` returns when ``stopped`` is set (checked between
    events, so within ``watch_timeout`` at worst: run it in a daemon thread).
    """

    def __init__(
        self,
        kube: Kube,
        snapshot: ClusterSnapshot,
        kind: str,
        *,
        watch_timeout: int = 300,
        page_size: int = 500,
        log: logging.Logger | None = None,
        rng: Uniform | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}")
        self.kube = kube
        self.snapshot = snapshot
        self.kind = kind
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.log = log or logging.getLogger("tenant_platform.observe")
        self.lists = 0
        self.watches = 0
        self.events = 0
        self.errors = 0
        self.backoff = Backoff(base=RELIST_BACKOFF_BASE, cap=RELIST_BACKOFF_CAP, rng=rng)

    @property
    def _api(self) -> tuple[str, str, str | None]:
        return ("v1", "Node", None) if self.kind == "nodes" else ("v1", "Pod", LIVE_PODS)

    def list_once(self) -> str:
        """One complete paged listing into the snapshot; returns its resourceVersion.

        Pages are consumed one at a time (only the kept fields outlive a page), so the process
        never holds the whole listing's JSON at once.
        """
        api_version, kind, selector = self._api
        self.snapshot.mark_stale(self.kind, f"relisting {self.kind}")  # kept from an earlier mark
        query = {"limit": str(self.page_size)}
        if selector:
            query["fieldSelector"] = selector
        path = self.kube.path(api_version, kind)
        listed = {"resourceVersion": ""}

        def items() -> Iterator[dict[str, Any]]:
            while True:
                page = self.kube.request("GET", path, query=query)
                meta = page.get("metadata") or {}
                listed["resourceVersion"] = str(meta.get("resourceVersion", ""))
                yield from page.get("items") or ()
                if not meta.get("continue"):
                    return
                query["continue"] = str(meta["continue"])

        if self.kind == "nodes":
            self.snapshot.replace_nodes(items())
        else:
            self.snapshot.replace_pods(items())
        self.lists += 1
        return listed["resourceVersion"]

    def watch_once(self, resource_version: str, stopped: threading.Event) -> str:
        """Apply watch events until the server ends the watch; returns the last resourceVersion."""
        api_version, kind, selector = self._api
        self.watches += 1
        for event in self.kube.watch(
            api_version,
            kind,
            resource_version=resource_version,
            field_selector=selector,
            timeout_seconds=self.watch_timeout,
        ):
            obj = event.get("object") or {}
            resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or resource_version)
            kind_ = event.get("type")
            if kind_ != "ERROR":
                self.snapshot.mark_current(self.kind)  # the watch delivers (bookmarks too)
            if kind_ != "BOOKMARK":
                self.events += 1
                if self.kind == "nodes":
                    self.snapshot.handle_node_event(kind_, obj)
                else:
                    self.snapshot.handle_pod_event(kind_, obj)
            if stopped.is_set():
                break
        self.snapshot.mark_current(self.kind)  # the server ended the watch in order
        return resource_version

    def run(self, stopped: threading.Event, resource_version: str = "") -> None:
        """List (unless ``resource_version`` says where to resume), then watch, until stopped."""
        failures = 0
        while not stopped.is_set():
            try:
                if not resource_version:
                    resource_version = self.list_once()
                resource_version = self.watch_once(resource_version, stopped)
                failures = 0
                self.backoff.reset()
            except errors.KubeError as exc:
                self.errors += 1
                failures += 1
                if exc.status != 410:
                    self.snapshot.mark_stale(self.kind, f"watching {self.kind} failed: {bounds.shorten(str(exc), 120)}")
                if exc.status == 410 or failures >= 3:
                    resource_version = ""  # expired, or stuck: start over with a listing
                if stopped.is_set():
                    return  # the operator is shutting down; the watch ended with it
                delay = self.backoff.next()
                if exc.status != 410:
                    self.log.warning("watching %s failed (%s); retrying in %.1fs", self.kind, exc, delay)
                stopped.wait(delay)
            except Exception as exc:
                self.errors += 1
                failures += 1
                resource_version = ""
                self.snapshot.mark_stale(self.kind, f"watching {self.kind} crashed: {bounds.shorten(repr(exc), 120)}")
                self.log.exception("watching %s crashed; listing again", self.kind)
                stopped.wait(self.backoff.next())
