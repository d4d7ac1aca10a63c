"""A watch-fed read cache in front of ``Kube``: a no-op reconcile pass makes no API request.

``CachedKube`` is a ``Kube`` (steps take it unchanged) whose reads are answered from informers
(kube/informer.py) for a configured set of scopes, and from the API for everything else:

- ``get``: from an informer whose scope holds the object. A scope without label requirements is
  complete, so a miss there is an answer ("absent"); a miss in a label-selected scope (our
  children) falls through to a GET, since the object may exist without our labels, unless a
  synced names-only scope of that kind (metadata only: which objects exist) covers the name and
  does not hold it: then "absent" is the answer too (a ConfigMap of ours not yet written, e.g.
  the edge trust ConfigMap, without a GET per pass; a hand-made one of that name is in the
  names-only scope, so it is still read, and adopted or reported, as before).
- ``list``: from an informer whose scope contains the request (same or wider namespace, label
  requirements implied by the request's equality selector, or the same single name); filtered
  by the request's selector. Anything else (set-based selectors, other field selectors) is a LIST.
- Discovery (``served``, ``resource``, and a GET of ``/apis/<group>/<version>``): the document is
  kept until any CustomResourceDefinition changes (a CRD informer with no store).
- ``can_i``: SubjectAccessReview answers are kept per review namespace (kube/reviews.py has the
  rules): a Role or RoleBinding event in namespace X drops only the answers of reviews in X, a
  ClusterRole or ClusterRoleBinding event (or a relist of those events-only watches) drops all.
  An answer obtained within ``RBAC_SETTLE_SECONDS`` after the last such event (in its namespace,
  or cluster-wide) is not kept: the API server's authorizer may lag behind our watch.
- The one-node sample (``GET /api/v1/nodes?limit=1``, the DNS step's distribution evidence) is
  kept for ``node_sample_ttl`` seconds: a node's distribution labels do not change at run time.
- Writes go to the API; the response updates the store (read-your-writes), and the watch event
  echoing it is recognised by its resourceVersion and reported to nobody. A ``replace`` answered
  409 (stale resourceVersion) reads the object from the API into the store, so the caller's
  re-read and retry see the change before the watch brings it.

Until an informer has completed its first listing (and while it relists after a failure) reads
in its scope go to the API, so a slow or forbidden watch costs requests, never correctness.
Secrets are not cached unless an admin granted ``list`` and ``watch`` of them: the operator may
not list or watch Secrets by default (docs/security.md). kube/secretwatch.py asks with
SelfSubjectAccessReviews (again after an RBAC change that can affect the answer: in the Secret's
namespace, or cluster-wide): granted for every Secret (and given ``secret_scopes``), it runs
those scopes, main.py's label-selected one holding our own Secrets and a names-only one, read as
above (ours from the first, "absent" from the second, a GET for an unlabelled Secret that
exists); granted for a named Secret, it watches that one by name; otherwise Secret GETs go to
the API.

Listeners: an event on a "child" scope calls ``on_child(platform name)`` with the object's
``tenancy.dev/tenant-platform`` label (the operator wakes that platform's loop, so a child
changed by hand is repaired from the event); an event on a "fact" scope calls ``on_fact()``,
unless the scope's ``concerns`` names the platforms the event concerns (the CoreDNS ConfigMap:
a platform writing its own block wakes only itself): then ``on_child`` for each of them.
"""

from __future__ import annotations

import builtins
import copy
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes.client

from tenant_platform.api import constants
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.kube.informer import (
    RBAC_KINDS,
    Informer,
    Scope,
    key_of,
    operator_scopes,
    parse_selector,
    selector_matches,
)
from tenant_platform.kube.reviews import ReviewAnswers, affected_namespace
from tenant_platform.kube.secretwatch import RecentReads, SecretWatches

log = logging.getLogger("tenant_platform.kube.cache")

RBAC_SETTLE_SECONDS = 2.0
SECRET_WATCH_POOL = 256
_DISCOVERY = re.compile(r"^/apis?(/[^/]+){1,2}$")


@dataclass
class _Shared:
    """The cache's assigned state, shared by the client and its ``fenced`` views."""

    hits: int = 0
    misses: int = 0
    rbac_listings: int = len(RBAC_KINDS)
    """Completed listings of the RBAC watches when answers were last checked (one each at first)."""
    node_sample: tuple[float, Obj] | None = None


class CachedKube(Kube):
    """``Kube`` with reads served from watch-fed informers (see the module docstring)."""

    def __init__(
        self,
        base: Kube,
        scopes: Sequence[Scope],
        *,
        on_child: Callable[[str], None] | None = None,
        on_fact: Callable[[], None] | None = None,
        node_sample_ttl: float = 600.0,
        watch_timeout: int = 300,
        clock: Callable[[], float] = time.monotonic,
        watcher: Kube | None = None,
        secret_scopes: Sequence[Scope] = (),
    ) -> None:
        super().__init__(base.api)
        self.counter = base.counter
        self.default_namespace = base.default_namespace
        self.on_child = on_child
        self.on_fact = on_fact
        self.node_sample_ttl = node_sample_ttl
        self.clock = clock
        # NB: each informer holds one pooled connection for its long-poll watch; they get a client
        # of their own with room for all, so reconcile requests never wait for (or evict) them.
        # ``watcher``: such a client built by the caller (a target's, whose TLS context is not in
        # its configuration: kube/remote.py ``watch_client``).
        if watcher is None:
            configuration = copy.copy(base.api.configuration)
            configuration.connection_pool_maxsize = len(scopes) + 2
            watcher = Kube(kubernetes.client.ApiClient(configuration))
            watcher.counter = base.counter
        self.watcher = watcher
        self.informers = [Informer(watcher, s, listener=self._listener(s), watch_timeout=watch_timeout) for s in scopes]
        # NB: one long-running watch (one pooled connection) per granted Secret: a pool of their own.
        secret_configuration = copy.copy(base.api.configuration)
        secret_configuration.connection_pool_maxsize = SECRET_WATCH_POOL
        secret_watcher = Kube(kubernetes.client.ApiClient(secret_configuration))
        secret_watcher.counter = base.counter
        self.secrets = SecretWatches(
            base,
            secret_watcher,
            listener=self._listener,
            settle=RBAC_SETTLE_SECONDS,
            clock=clock,
            watch_timeout=watch_timeout,
            cluster_scopes=secret_scopes,
        )
        self.recent_secrets = RecentReads(clock)
        self._lock = threading.Lock()
        self.reviews: ReviewAnswers[tuple[Any, ...], tuple[bool, str]] = ReviewAnswers(settle=RBAC_SETTLE_SECONDS)
        """Access-review answers by review namespace (kube/reviews.py); guarded by ``_lock``."""
        self._documents: dict[str, Obj | None] = {}
        # NB: mutable state lives in one shared object: ``fenced`` views (kube/client.py) are
        # shallow copies, so a value assigned on a view would be lost when the pass ends.
        self._shared = _Shared()
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def hits(self) -> int:
        return self._shared.hits

    @hits.setter
    def hits(self, value: int) -> None:
        self._shared.hits = value

    @property
    def misses(self) -> int:
        return self._shared.misses

    @misses.setter
    def misses(self, value: int) -> None:
        self._shared.misses = value

    # ---- life cycle ------------------------------------------------------------------------------

    def start(self) -> CachedKube:
        for informer in self.informers:
            thread = threading.Thread(
                target=informer.run, args=(self._stopped,), name=f"cache-{informer.scope.kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop every informer; waits at most ``timeout`` in all (not per informer: a thread still
        inside a watch ends when it returns, and they are daemon threads), so a graceful shutdown
        still releases the leader Lease before the process is killed."""
        self._stopped.set()
        self.secrets.stop()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """True once every informer completed its first listing (False after ``timeout``)."""
        deadline = time.monotonic() + timeout
        return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in self.informers)

    def stats(self) -> dict[str, Any]:
        """Objects held per scope, and reads answered from the cache or the API."""
        return {
            "objects": {i.scope.describe(): len(i) for i in self.informers if i.scope.keep},
            "hits": self.hits,
            "misses": self.misses,
            "reviews": len(self.reviews),
            "secretWatches": len(self.secrets.informers()),
            "secretsClusterWide": self.secrets.cluster_wide(),
        }

    # ---- listeners -------------------------------------------------------------------------------

    def _listener(self, scope: Scope) -> Callable[[str, Obj | None, Obj | None], None]:
        def listen(event_type: str, old: Obj | None, new: Obj | None) -> None:
            if scope.role == "rbac":
                namespace = affected_namespace(scope.kind, old, new)
                with self._lock:
                    self.reviews.changed(namespace, self.clock())
                self.secrets.forget(namespace)
            elif scope.role == "crd":
                with self._lock:
                    self._documents.clear()
                    self._discovered.clear()
            elif scope.role == "child" and self.on_child is not None:
                for name in _platforms_of(old, new):
                    self.on_child(name)
            elif scope.role in ("fact", "secret"):
                # One of ours (labelled before and after) concerns its platform only: no platform
                # reads another's labelled objects as a fact (the pod guard's takeover skips them),
                # so each platform's own policies do not wake every other platform. Anything else
                # (a fact, someone else's certificate rotated) may concern any platform.
                owners = [_platforms_of(o) for o in (old, new) if o]
                concerned = scope.concerns(old, new) if scope.concerns is not None else None
                if owners and all(owners) and self.on_child is not None:
                    for name in sorted({n for names in owners for n in names}):
                        self.on_child(name)
                elif concerned is not None and self.on_child is not None:
                    for name in concerned:
                        self.on_child(name)
                elif self.on_fact is not None:
                    self.on_fact()

        return listen

    # ---- which informer answers --------------------------------------------------------------------

    def _for_get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Iterable[Informer]:
        yield from (i for i in self._covering(api_version, kind, namespace, name) if i.scope.holds_objects)

    def _covering(self, api_version: str, kind: str, namespace: str | None, name: str) -> Iterable[Informer]:
        """Synced informers of that kind whose scope includes (namespace, name)."""
        granted = self.secrets.informers() if (api_version, kind) == ("v1", "Secret") else []
        for informer in [*self.informers, *granted]:
            s = informer.scope
            if (s.api_version, s.kind) != (api_version, kind) or not informer.synced.is_set():
                continue
            if s.namespace is not None and s.namespace != namespace:
                continue
            if s.name is not None and s.name != name:
                continue
            yield informer

    def _known_absent(self, api_version: str, kind: str, namespace: str | None, name: str) -> bool:
        """A synced names-only scope covers the name and holds no object of that name."""
        return any(
            i.scope.names_only and not i.scope.labels and i.get(namespace, name) is None
            for i in self._covering(api_version, kind, namespace, name)
        )

    def _for_list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        wanted: dict[str, str | None],
        field_selector: str | None,
    ) -> Informer | None:
        for informer in self.informers:
            s = informer.scope
            if not s.holds_objects or (s.api_version, s.kind) != (api_version, kind) or not informer.synced.is_set():
                continue
            if s.namespace is not None and s.namespace != namespace:
                continue
            if field_selector != s.field_selector:
                continue
            if all(k in wanted and (v is None or wanted[k] == v) for k, v in s.labels):
                return informer
        return None

    # ---- reads -----------------------------------------------------------------------------------

    secret_max_age: float = 0.0
    """Set on a view by ``reusing_secrets``: Secret reads younger than this are reused."""

    def reusing_secrets(self, max_age: float) -> CachedKube:
        """A view (as ``fenced``) whose Secret GETs reuse a read of the last ``max_age`` seconds."""
        view = copy.copy(self)
        view.secret_max_age = max_age
        return view

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        secret = (api_version, kind) == ("v1", "Secret") and bool(namespace)
        if secret and self._rbac_watched():
            self.secrets.informer(str(namespace), name)  # starts (or stops) its watch where RBAC says so
        for informer in self._for_get(api_version, kind, namespace, name):
            found = informer.get(namespace, name)
            if found is not None or informer.scope.complete:
                self.hits += 1
                return found
        if self._known_absent(api_version, kind, namespace, name):
            self.hits += 1
            return None
        if secret:
            reused, found = self.recent_secrets.recent(str(namespace), name, self.secret_max_age)
            if reused:
                self.hits += 1
                return found
        self.misses += 1
        log.debug("cache: GET %s %s/%s from the API", kind, namespace or "-", name)
        found = super().get(api_version, kind, name, namespace)
        if found is not None:
            self._remember(found, api_version, kind)
        elif secret:
            self.recent_secrets.note(str(namespace), name, None)
        return found

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        wanted = parse_selector(label_selector)
        if wanted is not None:
            informer = self._for_list(api_version, kind, namespace, wanted, field_selector)
            if informer is not None:
                self.hits += 1
                return informer.items(namespace, wanted)
        self.misses += 1
        return super().list(api_version, kind, namespace, label_selector=label_selector, field_selector=field_selector)

    def list_shared(self, api_version: str, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        """Every held object of a kind, not copied (read-only, see ``Kube.list_shared``): a guard
        that reads every TenantPlatform on every pass costs no copy of N bodies."""
        informer = self._for_list(api_version, kind, namespace, {}, None)
        if informer is not None:
            self.hits += 1
            return informer.items(namespace, {}, shared=True)
        return super().list_shared(api_version, kind, namespace)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        stores_nothing: bool = False,
        accept: str = "application/json",
    ) -> Obj:
        if accept != "application/json":
            return super().request(method, path, body=body, query=query, timeout=timeout, accept=accept)
        if method == "GET" and not query and _DISCOVERY.match(path) and self._crds_watched():
            with self._lock:
                if path in self._documents:
                    doc = self._documents[path]
                    if doc is None:
                        raise errors.NotFound(404, "NotFound", f"{path} is not served")
                    self.hits += 1
                    return copy.deepcopy(doc)
            try:
                doc = super().request(method, path, timeout=timeout)
            except errors.NotFound:
                with self._lock:
                    self._documents[path] = None
                raise
            with self._lock:
                self._documents[path] = copy.deepcopy(doc)
            return doc
        if method == "GET" and path == "/api/v1/nodes" and query == {"limit": "1"}:
            with self._lock:
                sample = self._shared.node_sample
            if sample is not None and self.clock() - sample[0] < self.node_sample_ttl:
                self.hits += 1
                return copy.deepcopy(sample[1])
            doc = super().request(method, path, query=query, timeout=timeout)
            with self._lock:
                self._shared.node_sample = (self.clock(), copy.deepcopy(doc))
            return doc
        return super().request(
            method,
            path,
            body=body,
            query=query,
            content_type=content_type,
            timeout=timeout,
            stores_nothing=stores_nothing,
        )

    def _crds_watched(self) -> bool:
        return any(i.scope.role == "crd" and i.synced.is_set() for i in self.informers)

    def _rbac_watched(self) -> bool:
        """Whether every RBAC kind is watched (synced). A relist of one of them (after a watch gap,
        whose events may be lost; the informer reports none while it is not synced) drops every
        kept answer here, before any is read: its completed listings are counted."""
        rbac = [i for i in self.informers if i.scope.role == "rbac"]
        if {i.scope.kind for i in rbac if i.synced.is_set()} < set(RBAC_KINDS):
            return False
        listings = sum(i.lists for i in rbac)
        with self._lock:
            relisted = listings != self._shared.rbac_listings
            if relisted:
                self._shared.rbac_listings = listings
                self.reviews.changed(None, self.clock())
        if relisted:
            self.secrets.forget(None)
        return True

    def can_i(
        self,
        *,
        user: str,
        groups: Iterable[str],
        verb: str,
        resource: str,
        group: str = "",
        namespace: str = "",
        subresource: str = "",
    ) -> tuple[bool, str]:
        groups = tuple(groups)
        key = (user, groups, verb, resource, group, namespace, subresource)
        if not self._rbac_watched():
            return super().can_i(
                user=user, groups=groups, verb=verb, resource=resource, group=group, namespace=namespace,
                subresource=subresource,
            )  # fmt: skip
        with self._lock:
            kept = self.reviews.get(namespace, key)
            if kept is not None:
                self.hits += 1
                return kept
            asked_at = self.clock()
        answer = super().can_i(
            user=user, groups=groups, verb=verb, resource=resource, group=group, namespace=namespace,
            subresource=subresource,
        )  # fmt: skip
        with self._lock:
            # Kept only if no RBAC event that can affect it arrived meanwhile, and the last one settled.
            self.reviews.keep(namespace, key, answer, asked_at=asked_at, now=self.clock())
        return answer

    # ---- writes: the response updates the store ---------------------------------------------------

    def _remember(self, obj: Obj, api_version: str | None = None, kind: str | None = None) -> None:
        if not isinstance(obj, dict) or not obj.get("metadata"):
            return
        api_version = api_version or str(obj.get("apiVersion") or "")
        kind = kind or str(obj.get("kind") or "")
        namespace, name = key_of(obj)
        if (api_version, kind) == ("v1", "Secret") and namespace:
            self.recent_secrets.note(namespace, name, obj)
        for informer in self._covering(api_version, kind, namespace or None, name):
            informer.remember(obj)

    def _forget(self, api_version: str, kind: str, name: str, namespace: str | None) -> None:
        for informer in self._for_get(api_version, kind, namespace, name):
            informer.forget(namespace, name)

    def _before_write(self, obj: Obj) -> None:
        """A Secret about to be written is read from the API next time (also when the write fails)."""
        meta = obj.get("metadata") or {}
        if (obj.get("apiVersion"), obj.get("kind")) == ("v1", "Secret") and meta.get("namespace"):
            self.recent_secrets.drop(str(meta["namespace"]), str(meta.get("name") or ""))

    def apply(
        self, obj: Obj, *, dry_run: bool = False, force: bool = True, field_manager: str = constants.FIELD_MANAGER
    ) -> Obj:
        if not dry_run:
            self._before_write(obj)
        result = super().apply(obj, dry_run=dry_run, force=force, field_manager=field_manager)
        if not dry_run:
            self._remember(result, obj["apiVersion"], obj["kind"])
        return result

    def create(self, obj: Obj, *, dry_run: bool = False, as_user: str | None = None) -> Obj:
        if not dry_run:
            self._before_write(obj)
        result = super().create(obj, dry_run=dry_run, as_user=as_user)
        if not dry_run:
            self._remember(result, obj["apiVersion"], obj["kind"])
        return result

    def replace(self, obj: Obj) -> Obj:
        try:
            result = super().replace(obj)
        except errors.Conflict:
            # The resourceVersion we sent is stale: the caller re-reads and retries (the Corefile
            # edit, concerns/dns/step.py), and a re-read from the store, before the watch brings the
            # change, would give it the same stale object, so all its retries would fail alike.
            self._refresh(obj)
            raise
        self._remember(result, obj["apiVersion"], obj["kind"])
        return result

    def _refresh(self, obj: Obj) -> None:
        """Read ``obj`` from the API into the store (after a 409 on a precondition)."""
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        namespace, name = key_of(obj)
        if not any(True for _ in self._covering(api_version, kind, namespace or None, name)):
            return
        try:
            live = super().get(api_version, kind, name, namespace or None)
        except errors.KubeError:
            return
        if live is None:
            self._forget(api_version, kind, name, namespace or None)
        else:
            self._remember(live, api_version, kind)

    def merge_patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        result = super().merge_patch(api_version, kind, name, patch, namespace=namespace, subresource=subresource)
        self._remember(result, api_version, kind)
        return result

    def json_patch(
        self, api_version: str, kind: str, name: str, ops: builtins.list[Obj], *, namespace: str | None = None
    ) -> Obj:
        result = super().json_patch(api_version, kind, name, ops, namespace=namespace)
        self._remember(result, api_version, kind)
        return result

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        uid: str | None = None,
    ) -> bool:
        gone = super().delete(api_version, kind, name, namespace, propagation=propagation, uid=uid)
        if (api_version, kind) == ("v1", "Secret") and namespace:
            self.recent_secrets.drop(namespace, name)
        # NB: an object with finalizers lingers until they are removed; the watch reports it.
        # Dropping it now would make a complete scope answer "absent" too early, so keep it.
        return gone


def _platforms_of(*objects: Obj | None) -> list[str]:
    """The platforms named by the objects' ``tenancy.dev/tenant-platform`` labels."""
    names = {((o.get("metadata") or {}).get("labels") or {}).get(constants.LABEL_PLATFORM) for o in objects if o}
    return sorted(str(n) for n in names if n)


__all__ = ["CachedKube", "Scope", "operator_scopes", "selector_matches"]
