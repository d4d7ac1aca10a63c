"""One watch-fed store per (kind, scope): list, then watch; relist after a gap. Used by kube/cache.py.

An ``Informer`` keeps the objects of one ``Scope`` (a kind, optionally one namespace, an
equality/existence label selector, or one name) current, as client-go's reflector does: a
complete paged listing replaces the store (so objects deleted while nobody watched cannot
linger), the watch resumes from the last resourceVersion seen (bookmarks keep it fresh), a 410
Gone relists, other errors back off (1 s doubling to 30 s, with up to 25 % jitter so many
informers do not retry in step) and three failures in a row relist. ``synced`` is set after the
first complete listing and cleared while a relist after a failure is pending, so a reader never
takes an answer from a store that may have missed events for long.

Memory: objects are kept whole except ``metadata.managedFields`` (often the largest part of a
small object, and read by no step), as compact copies (``compact``: keys and short strings
interned, shared by every held object); a scope with ``keep=False`` stores nothing and only reports
events, each with the object it carries (a deletion's as the old object: its namespace says which
access-review answers it drops); used for the RBAC kinds and CRDs, whose changes drop the
access-review and discovery answers; a ``names_only`` scope lists and watches metadata only
(PartialObjectMetadata) and keeps each object's namespace, name and resourceVersion: which
objects exist, nothing of their content.
"""

from __future__ import annotations

import copy
import logging
import random
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tenant_platform.api import constants
from tenant_platform.kube import errors
from tenant_platform.kube.client import METADATA_ONLY, METADATA_ONLY_LIST, Kube, Obj

log = logging.getLogger("tenant_platform.kube.cache")

Key = tuple[str, str]
"""(namespace or "", name)"""
Listener = Callable[[str, Obj | None, Obj | None], None]
"""Called with (event type, old object or None, new object or None) after a change."""


@dataclass(frozen=True)
class Scope:
    """What one informer holds.

    ``labels``: requirements every held object meets, each (key, value) for ``key=value`` or
    (key, None) for "the label exists". ``name``: a single object, field-selected by name.
    ``keep``: False stores nothing (events only). ``role`` says what its events mean to the
    cache: "child" (ours: wakes the platform named by its label), "fact" (wakes every platform),
    "rbac" (drops access-review answers), "crd" (drops discovery answers), "platform".
    """

    api_version: str
    kind: str
    namespace: str | None = None
    labels: tuple[tuple[str, str | None], ...] = ()
    name: str | None = None
    keep: bool = True
    role: str = "fact"
    absent_on_miss: bool = True
    """False: a miss still asks the API (a TenantPlatform just created may be read before its
    watch event arrives, and reading it as absent would park its loop until the drift timer)."""
    concerns: Callable[[Obj | None, Obj | None], tuple[str, ...] | None] | None = None
    """A "fact" scope's filter: given an event's (old, new), the platforms it concerns (only they
    are woken), or None for every platform (concerns/dns/coredns.py ``platforms_concerned``)."""
    names_only: bool = False
    """Keep only which objects exist (namespace, name, resourceVersion), listed and watched as
    metadata only (PartialObjectMetadata): never answers a read with an object, only "absent"
    for a name a label-selected scope of the same kind misses (kube/cache.py)."""

    @property
    def label_selector(self) -> str | None:
        parts = [k if v is None else f"{k}={v}" for k, v in self.labels]
        return ",".join(parts) or None

    @property
    def field_selector(self) -> str | None:
        return f"metadata.name={self.name}" if self.name else None

    @property
    def complete(self) -> bool:
        """Whether a miss means "does not exist" (no label requirement narrows the scope)."""
        return self.keep and not self.labels and self.absent_on_miss

    @property
    def holds_objects(self) -> bool:
        """Whether reads may be answered with what it holds (not for events-only or names-only)."""
        return self.keep and not self.names_only

    def describe(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        sel = self.label_selector or self.field_selector or "all"
        return f"{self.kind}{where} ({sel}{', names only' if self.names_only else ''})"

    def matches_labels(self, labels: dict[str, str]) -> bool:
        return all((k in labels) if v is None else labels.get(k) == v for k, v in self.labels)


def parse_selector(selector: str | None) -> dict[str, str | None] | None:
    """``a=b,c==d,e`` as {a: b, c: d, e: None}; None for anything else (``!=``, ``in``, ``!x``)."""
    if not selector:
        return {}
    out: dict[str, str | None] = {}
    for raw in selector.split(","):
        part = raw.strip()
        if not part or "!" in part or " " in part or "(" in part:
            return None
        if "=" in part:
            key, _, value = part.partition("==") if "==" in part else part.partition("=")
            out[key.strip()] = value.strip()
        else:
            out[part] = None
    return out


def selector_matches(wanted: dict[str, str | None], labels: dict[str, str]) -> bool:
    return all((k in labels) if v is None else labels.get(k) == v for k, v in wanted.items())


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _rv(obj: Obj | None) -> int | None:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    except ValueError:
        return None


SHORT = 64
"""Strings up to this length are interned in stored objects (``compact``)."""


def compact(value: Any) -> Any:
    """A copy of a decoded JSON value whose keys, and string values up to ``SHORT`` characters,
    are interned: every held object otherwise has its own copy of each key ("metadata",
    "lastTransitionTime", label keys...) and of repeated values ("True", a namespace, a label
    value). About 40 % less memory for a TenantPlatform with its status (docs/performance.md)."""
    if isinstance(value, dict):
        return {sys.intern(k) if type(k) is str else k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if type(value) is str and len(value) <= SHORT:
        return sys.intern(value)
    return value


def trim(obj: Obj, api_version: str, kind: str, *, names_only: bool = False) -> Obj:
    """The object as stored, a compact copy (``compact``): apiVersion and kind set, managedFields
    dropped (``names_only``: its namespace, name and resourceVersion alone). ``obj`` is not changed."""
    meta = obj.get("metadata") or {}
    if names_only:
        kept = {k: meta[k] for k in ("namespace", "name", "resourceVersion") if k in meta}
        return compact({"apiVersion": api_version, "kind": kind, "metadata": kept})  # type: ignore[no-any-return]
    stored: Obj = compact({k: v for k, v in obj.items() if k != "metadata"})
    stored["metadata"] = compact({k: v for k, v in meta.items() if k != "managedFields"})
    stored.setdefault("apiVersion", api_version)
    stored.setdefault("kind", kind)
    return stored


class Informer:
    """Keep the objects of one Scope current (see the module docstring)."""

    def __init__(self, kube: Kube, scope: Scope, *, listener: Listener | None = None, watch_timeout: int = 300) -> None:
        self.kube = kube
        self.scope = scope
        self.listener = listener
        self.watch_timeout = watch_timeout
        self.page_size = 500
        self.synced = threading.Event()
        self._store: dict[Key, Obj] = {}
        self._count = 0
        self._lock = threading.Lock()
        self.lists = 0
        self.watches = 0
        self.events = 0
        self.errors = 0
        self.forbidden = False

    # ---- reads (copies: callers may mutate what they get) --------------------------------------
    # NB: a held object is never changed in place (an event or a write's response replaces it), so
    # the copies are made after the lock is released: one reader copying many objects does not
    # hold up the watch thread and every other reader.

    def get(self, namespace: str | None, name: str) -> Obj | None:
        with self._lock:
            found = self._store.get((namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def items(self, namespace: str | None, wanted: dict[str, str | None], *, shared: bool = False) -> list[Obj]:
        """The held objects in ``namespace`` (None: all) matching ``wanted``; copies, or with
        ``shared`` the held objects themselves (read-only: the caller must not change them)."""
        with self._lock:
            found = [
                o
                for (ns, _), o in self._store.items()
                if (namespace is None or ns == namespace)
                and selector_matches(wanted, (o.get("metadata") or {}).get("labels") or {})
            ]
        return found if shared else copy.deepcopy(found)

    def __len__(self) -> int:
        with self._lock:
            return len(self._store) if self.scope.keep else self._count

    # ---- read-your-writes --------------------------------------------------------------------

    def remember(self, obj: Obj) -> None:
        """Store a write's response (when it is in scope and newer than what is held)."""
        if not self.scope.keep:
            return
        labels = (obj.get("metadata") or {}).get("labels") or {}
        key = key_of(obj)
        with self._lock:
            held = self._store.get(key)
            if not self.scope.matches_labels(labels):
                self._store.pop(key, None)
                return
            new, old = _rv(obj), _rv(held)
            if held is not None and new is not None and old is not None and new < old:
                return
            self._store[key] = self._trim(obj)  # a copy: the caller keeps ``obj``

    def forget(self, namespace: str | None, name: str) -> None:
        with self._lock:
            self._store.pop((namespace or "", name), None)

    def _trim(self, obj: Obj) -> Obj:
        return trim(obj, self.scope.api_version, self.scope.kind, names_only=self.scope.names_only)

    # ---- list and watch ------------------------------------------------------------------------

    def _path(self) -> str:
        return self.kube.path(self.scope.api_version, self.scope.kind, namespace=self.scope.namespace)

    def list_once(self) -> str:
        """One complete paged listing replacing the store; returns its resourceVersion."""
        query = {"limit": str(self.page_size)}
        if self.scope.label_selector:
            query["labelSelector"] = self.scope.label_selector
        if self.scope.field_selector:
            query["fieldSelector"] = self.scope.field_selector
        path = self._path()
        accept = METADATA_ONLY_LIST if self.scope.names_only else "application/json"
        fresh: dict[Key, Obj] = {}
        count = 0
        resource_version = ""

        def pages() -> Iterator[Obj]:
            nonlocal resource_version
            while True:
                page = self.kube.request("GET", path, query=query, accept=accept)
                meta = page.get("metadata") or {}
                resource_version = str(meta.get("resourceVersion", ""))
                yield from page.get("items") or ()
                if not meta.get("continue"):
                    return
                query["continue"] = str(meta["continue"])

        for item in pages():
            count += 1
            if self.scope.keep:
                fresh[key_of(item)] = self._trim(item)
        with self._lock:
            old = self._store
            self._store = fresh
            self._count = count
        self.lists += 1
        if self.listener is not None and self.lists > 1:
            # A relist after a gap: report what changed meanwhile (the first listing is no news).
            # NB: not "while synced": a gap clears ``synced`` before the relist, and the changes
            # missed in it are exactly what the listeners must hear of.
            for key in old.keys() | fresh.keys():
                before, after = old.get(key), fresh.get(key)
                if _rv(before) != _rv(after) or (before is None) != (after is None):
                    self.listener("RELISTED", before, after)
            if not self.scope.keep:
                self.listener("RELISTED", None, None)
        self.synced.set()
        return resource_version

    def _apply(self, event_type: str, obj: Obj) -> None:
        key = key_of(obj)
        with self._lock:
            held = self._store.get(key)
            if event_type == "DELETED":
                self._store.pop(key, None)
                self._count = max(0, self._count - 1)
                changed = True
            else:
                if held is not None and _rv(held) == _rv(obj):
                    return  # the echo of our own write, already remembered
                if self.scope.keep:
                    self._store[key] = self._trim(obj)
                if event_type == "ADDED":
                    self._count += 1
                changed = True
        if changed and self.listener is not None:
            if event_type == "DELETED":
                # NB: an events-only scope (or a miss) holds nothing: report the deleted object the
                # event carries, so a listener still learns its namespace (kube/reviews.py).
                self.listener(event_type, held if held is not None else obj, None)
            else:
                self.listener(event_type, held, obj)

    def watch_once(self, resource_version: str, stopped: threading.Event) -> str:
        """Apply watch events until the server ends the watch; returns the last resourceVersion."""
        self.watches += 1
        for event in self.kube.watch(
            self.scope.api_version,
            self.scope.kind,
            resource_version=resource_version,
            namespace=self.scope.namespace,
            field_selector=self.scope.field_selector,
            label_selector=self.scope.label_selector,
            timeout_seconds=self.watch_timeout,
            accept=METADATA_ONLY if self.scope.names_only else "application/json",
        ):
            obj = event.get("object") or {}
            resource_version = str((obj.get("metadata") or {}).get("resourceVersion") or resource_version)
            event_type = str(event.get("type") or "")
            if event_type in ("ADDED", "MODIFIED", "DELETED"):
                self.events += 1
                self._apply(event_type, obj)
            if stopped.is_set():
                break
        return resource_version

    def run(self, stopped: threading.Event, resource_version: str = "") -> None:
        """List (unless ``resource_version`` says where to resume), then watch, until ``stopped``
        (run it in a daemon thread)."""
        failures = 0
        while not stopped.is_set():
            try:
                if not resource_version:
                    resource_version = self.list_once()
                resource_version = self.watch_once(resource_version, stopped)
                failures = 0
            except errors.KubeError as exc:
                self.errors += 1
                failures += 1
                self.forbidden = isinstance(exc, errors.Forbidden)
                if exc.status == 410 or failures >= 3:
                    resource_version = ""  # expired, or stuck: start over with a listing
                    self.synced.clear()  # until the relist: readers go to the API
                if stopped.is_set():
                    return
                if exc.status != 410:
                    # A kind not served (Istio absent) or not allowed is retried quietly, slowly.
                    quiet = isinstance(exc, errors.NotFound | errors.Forbidden) and failures > 1
                    (log.debug if quiet else log.warning)(
                        "cache: watching %s failed (%s); retrying", self.scope.describe(), exc
                    )
                    stopped.wait(backoff(failures))
            except Exception:
                self.errors += 1
                failures += 1
                resource_version = ""
                self.synced.clear()
                log.exception("cache: watching %s crashed; listing again", self.scope.describe())
                stopped.wait(backoff(failures))


def backoff(failures: int, *, cap: float = 30.0, jitter: float = 0.25) -> float:
    """1 s doubling per failure up to ``cap``, plus up to ``jitter`` of it at random."""
    base = min(cap, 2.0 ** max(0, failures - 1))
    return base * (1.0 + random.uniform(0.0, jitter))  # spreading retries, not security


RBAC_KINDS = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def operator_scopes(
    *,
    child_kinds: Iterable[tuple[str, str]],
    fact_scopes: Iterable[Scope] = (),
) -> list[Scope]:
    """The scopes the operator caches: its children (by our platform label), the facts steps
    verify, TenantPlatforms, Namespaces, and the RBAC kinds and CRDs as invalidation signals."""
    scopes = [
        Scope(constants.API_VERSION, constants.KIND, role="platform", absent_on_miss=False),
        Scope("v1", "Namespace", role="child"),
    ]
    for api_version, kind in child_kinds:
        scopes.append(Scope(api_version, kind, labels=((constants.LABEL_PLATFORM, None),), role="child"))
    scopes += list(fact_scopes)
    scopes += [Scope("rbac.authorization.k8s.io/v1", kind, keep=False, role="rbac") for kind in RBAC_KINDS]
    scopes.append(Scope("apiextensions.k8s.io/v1", "CustomResourceDefinition", keep=False, role="crd"))
    return scopes
