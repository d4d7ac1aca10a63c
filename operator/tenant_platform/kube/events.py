"""Events about our objects, posted as ``events.k8s.io/v1`` Events, from any thread.

Why not ``kopf.info``/``kopf.warn``: they read kopf's context variables, which are set only in
kopf's own handler tasks; reconcile passes run in our thread pool, where each call raised
``LookupError: settings_var`` and ended the pass.

Where: the API server accepts an Event about a cluster-scoped object only in the ``default``
(or ``kube-system``) namespace ("involvedObject.namespace: does not match event.namespace"
anywhere else), so that is where ours go; ``kubectl describe tp NAME`` and
``kubectl get events -n default --field-selector regarding.name=NAME`` show them.

De-duplication (bounded): the same (object, type, reason, note) within ``window`` seconds is
not posted again; the existing Event's ``series`` (count, lastObservedTime) is patched instead,
as client-go's recorder does. At most ``max_entries`` keys are remembered (least recently used
dropped first), so memory stays bounded however many distinct messages a cluster produces.
Posting is best effort: an API error is logged and never fails the caller.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.kube.lease import micro_time

log = logging.getLogger("tenant_platform.events")

API_VERSION = "events.k8s.io/v1"
CLUSTER_SCOPED_NAMESPACE = "default"
NOTE_LIMIT = 1024  # the API server rejects a longer note
FIELD_LIMIT = 128  # reason, action, reportingInstance


@dataclass
class _Posted:
    name: str
    namespace: str
    count: int
    first: float


class EventRecorder:
    """Posts Events for one reporting controller/instance; safe to share between threads."""

    def __init__(
        self,
        kube: Kube,
        *,
        controller: str,
        instance: str,
        window: float = 600.0,
        max_entries: int = 512,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.controller = controller
        self.instance = instance[:FIELD_LIMIT]
        self.window = window
        self.max_entries = max_entries
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._posted: OrderedDict[tuple[str, str, str, str], _Posted] = OrderedDict()
        self.posted = 0
        self.deduplicated = 0
        self.failed = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._posted)

    def post(
        self, regarding: Mapping[str, Any], type_: str, reason: str, note: str, *, action: str = "Reconcile"
    ) -> None:
        """Post (or count again) one Event about ``regarding`` (a body: apiVersion, kind, metadata)."""
        meta = regarding.get("metadata") or {}
        uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or CLUSTER_SCOPED_NAMESPACE)
        note = note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "..."
        key = (uid or name, type_, reason, note)
        now = self._monotonic()
        with self._lock:
            seen = self._posted.get(key)
            if seen is not None and now - seen.first < self.window:
                seen.count += 1
                self._posted.move_to_end(key)
                repeat: _Posted | None = _Posted(seen.name, seen.namespace, seen.count, seen.first)
            else:
                repeat = None
        try:
            if repeat is not None and self._bump(repeat):
                with self._lock:
                    self.deduplicated += 1
                return
            posted = self._create(regarding, namespace, type_, reason, note, action=action)
        except errors.KubeError as exc:
            with self._lock:
                self.failed += 1
            log.warning("could not post event %s about %s: %s", reason, name, exc)
            return
        with self._lock:
            self.posted += 1
            self._posted[key] = _Posted(posted, namespace, 1, now)
            self._posted.move_to_end(key)
            while len(self._posted) > self.max_entries:
                self._posted.popitem(last=False)

    def _create(
        self, regarding: Mapping[str, Any], namespace: str, type_: str, reason: str, note: str, *, action: str
    ) -> str:
        meta = regarding.get("metadata") or {}
        now = self._wall()
        # client-go names events <object>.<hex time>; the hash keeps names unique across replicas.
        suffix = hashlib.sha256(f"{self.instance}/{now.isoformat()}/{reason}/{note}".encode()).hexdigest()[:16]
        name = f"{str(meta.get('name') or 'object')[:200]}.{suffix}"
        ref: Obj = {
            "apiVersion": regarding.get("apiVersion"),
            "kind": regarding.get("kind"),
            "name": meta.get("name"),
        }
        if meta.get("uid"):
            ref["uid"] = meta["uid"]
        if meta.get("namespace"):
            ref["namespace"] = meta["namespace"]
        body: Obj = {
            "apiVersion": API_VERSION,
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action[:FIELD_LIMIT],
            "reason": reason[:FIELD_LIMIT],
            "note": note,
            "type": type_ if type_ in ("Normal", "Warning") else "Normal",
            "regarding": ref,
        }
        self.kube.request("POST", self.kube.path(API_VERSION, "Event", namespace=namespace), body=body)
        return name

    def _bump(self, seen: _Posted) -> bool:
        """Patch a repeated Event's series; False when it is gone (expired) and must be posted anew."""
        patch = {"series": {"count": seen.count, "lastObservedTime": micro_time(self._wall())}}
        try:
            self.kube.merge_patch(API_VERSION, "Event", seen.name, patch, namespace=seen.namespace)
        except errors.NotFound:
            return False
        return True
