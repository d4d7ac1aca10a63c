"""How kube/cache.py reads Secrets: watches of single Secrets an admin allowed the operator to watch
by name, or two cluster-wide Secret informers where an admin granted ``list`` and ``watch`` of all
Secrets (``SecretWatches``), and recent reads event-woken passes may reuse (``RecentReads``).

The operator may not list or watch Secrets (docs/security.md), so each Secret a step reads is a
GET by name on every pass. RBAC can grant ``list`` and ``watch`` of one named object (a rule with
``resourceNames``; the API server authorizes a list or watch whose field selector is
``metadata.name=<name>`` as a request for that name). When an admin grants that for a Secret a
platform reads (docs/performance.md has a sample Role), the cache watches that one Secret and
answers its GETs from the watch:

- The first GET of a Secret (namespace, name) asks two SelfSubjectAccessReviews (``list`` and
  ``watch`` of that name, as the operator's own identity). Both allowed: an informer for that one
  Secret starts (field selector on the name), and GETs are answered from it once it has listed.
  Otherwise the answer "not granted" is kept and GETs go to the API, as before.
- Answers are dropped when an RBAC object that can affect them changes (the cache's RBAC watches
  call ``forget``): a Role or RoleBinding in the Secret's namespace, or any ClusterRole or
  ClusterRoleBinding (kube/reviews.py has the rules), and asked again at the next GET: a grant
  added later is picked up, and the watch of a Secret whose grant was removed is stopped (until
  then its informer, refused, stops answering and GETs go to the API). An answer asked within
  ``settle`` seconds after such a change (or before it) is not kept.
- The Secret's events wake the platform its ``tenancy.dev/tenant-platform`` label names (ours:
  the self-signed certificate, the kubeconfig Secret), else every platform (someone else's
  certificate rotated): a rotated or deleted Secret is acted on at once, not at the drift timer.

Memory: each watched Secret is held whole (minus managedFields) for the process's life, private
keys included; without a grant nothing is held. Cost: one long-running watch (one connection and
one thread) per granted Secret.

Cluster-wide (the opt-in for large fleets: Helm value ``rbac.watchSecrets``, or the kustomize
component deploy/components/watch-secrets; docs/security.md weighs it): given ``cluster_scopes``
(main.py passes ``SECRET_SCOPES``), the first Secret GET also asks two SelfSubjectAccessReviews,
``list`` and ``watch`` of ``secrets`` at cluster scope. Both allowed: one informer per scope starts
instead of any per-name watch (those running are stopped, and no name is asked about), so the
cost is two watches whatever the number of platforms. main.py's two scopes are the label-selected
one holding our own Secrets whole, and a names-only one (metadata only) over every Secret, which
kube/cache.py uses as it uses the names-only ConfigMap scope: a Secret of ours is answered from
the first, a name in neither is answered "absent", an unlabelled Secret that exists (an admin's
certificate) is still a GET. Like the per-name answers, this one is dropped on any RBAC change
and asked again at the next GET: a grant removed stops both informers (GETs as before).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj
from tenant_platform.kube.informer import Informer, Listener, Scope
from tenant_platform.kube.reviews import ReviewAnswers

log = logging.getLogger("tenant_platform.kube.cache")

Key = tuple[str, str]
"""(namespace, name)"""


@dataclass
class _Watch:
    informer: Informer
    stopped: threading.Event
    thread: threading.Thread


class SecretWatches:
    """Per-Secret watches where RBAC grants them (see the module docstring)."""

    def __init__(
        self,
        kube: Kube,
        watcher: Kube,
        *,
        listener: Callable[[Scope], Listener],
        settle: float,
        clock: Callable[[], float],
        watch_timeout: int = 300,
        cluster_scopes: Sequence[Scope] = (),
    ) -> None:
        self.kube = kube  # asks the access reviews (counted as the cache's reads)
        self.watcher = watcher  # runs the watches (a client with its own connection pool)
        self.listener = listener
        self.clock = clock
        self.watch_timeout = watch_timeout
        self._lock = threading.Lock()
        self._granted: ReviewAnswers[str, bool] = ReviewAnswers(settle=settle)  # by namespace, then name
        self._watches: dict[Key, _Watch] = {}
        self._closed = False
        self.cluster_scopes = tuple(cluster_scopes)
        self._cluster_granted: bool | None = None  # None: not asked since the last RBAC change
        self._cluster: list[_Watch] = []

    def informer(self, namespace: str, name: str) -> Informer | None:
        """The synced informer answering GETs of this Secret, or None (then GET it). Decides, and
        starts or stops the watch, when no answer about the grant is kept."""
        key = (namespace, name)
        if self.cluster_scopes:
            with self._lock:
                decided = self._cluster_granted is not None
            if not decided:
                self._decide_cluster()
            if self.cluster_wide():
                return None  # the cluster-wide informers answer (kube/cache.py finds them in ``informers``)
        with self._lock:
            decided = self._granted.get(namespace, name) is not None
        if not decided:
            self._decide(key)
        with self._lock:
            watch = self._watches.get(key)
        if watch is None or not watch.informer.synced.is_set():
            return None
        return watch.informer

    def _decide(self, key: Key) -> None:
        namespace, name = key
        asked_at = self.clock()
        try:
            granted = all(
                self.kube.may_i(verb=verb, resource="secrets", namespace=namespace, name=name)
                for verb in ("list", "watch")
            )
        except errors.KubeError as exc:
            log.debug("cache: cannot tell whether Secret %s/%s may be watched (%s)", namespace, name, exc)
            return
        with self._lock:
            if self._closed:
                return
            self._granted.keep(namespace, name, granted, asked_at=asked_at, now=self.clock())
            watch = self._watches.get(key)
            if granted and watch is None and not self._cluster:
                self._watches[key] = self._start(key)
                log.info("cache: watching Secret %s/%s by name (granted list and watch)", namespace, name)
            elif not granted and watch is not None:
                del self._watches[key]
                watch.stopped.set()
                log.info("cache: no longer watching Secret %s/%s (grant removed)", namespace, name)

    def _decide_cluster(self) -> None:
        asked_at = self.clock()
        try:
            granted = all(self.kube.may_i(verb=verb, resource="secrets") for verb in ("list", "watch"))
        except errors.KubeError as exc:
            log.debug("cache: cannot tell whether every Secret may be watched (%s)", exc)
            return
        stopped: list[_Watch] = []
        with self._lock:
            if self._closed:
                return
            # A cluster-scoped answer: only a cluster-wide RBAC change (or one too close to the
            # question) keeps it from being kept.
            if self._granted.settled("", asked_at, self.clock()):
                self._cluster_granted = granted
            if granted and not self._cluster:
                self._cluster = [self._run(scope, "cache-secrets") for scope in self.cluster_scopes]
                # Per-name watches are no longer needed: the cluster-wide informers cover every name.
                stopped = list(self._watches.values())
                self._watches.clear()
                log.info("cache: watching Secrets cluster-wide (granted list and watch of every Secret)")
            elif not granted and self._cluster:
                stopped, self._cluster = self._cluster, []
                log.info("cache: no longer watching Secrets cluster-wide (grant removed)")
        for watch in stopped:
            watch.stopped.set()

    def cluster_wide(self) -> bool:
        """Whether the cluster-wide informers run (they answer once they have listed)."""
        with self._lock:
            return bool(self._cluster)

    def _start(self, key: Key) -> _Watch:
        namespace, name = key
        scope = Scope("v1", "Secret", namespace=namespace, name=name, role="secret")
        return self._run(scope, f"cache-secret-{name}")

    def _run(self, scope: Scope, thread_name: str) -> _Watch:
        informer = Informer(self.watcher, scope, listener=self.listener(scope), watch_timeout=self.watch_timeout)
        stopped = threading.Event()
        thread = threading.Thread(target=informer.run, args=(stopped,), name=thread_name, daemon=True)
        thread.start()
        return _Watch(informer, stopped, thread)

    def informers(self) -> list[Informer]:
        with self._lock:
            return [w.informer for w in [*self._cluster, *self._watches.values()]]

    def decided(self, namespace: str) -> int:
        """How many grant answers are kept for Secrets in ``namespace``."""
        with self._lock:
            return self._granted.count(namespace)

    def forget(self, namespace: str | None = None) -> None:
        """RBAC changed in ``namespace`` (None: a cluster-wide change): the grants of Secrets there
        (None: all, and the cluster-wide grant, which only ClusterRoles and ClusterRoleBindings
        decide) are asked again at the next GET."""
        with self._lock:
            self._granted.changed(namespace, self.clock())
            if not namespace:
                self._cluster_granted = None

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            watches = [*self._cluster, *self._watches.values()]
            self._watches.clear()
            self._cluster = []
        for watch in watches:
            watch.stopped.set()


class RecentReads:
    """Secrets as last read or written, for passes allowed to reuse a recent read.

    The operator's drift-timer passes read every Secret from the API (or its granted watch); a
    pass woken by an event (a child or fact changed, the loop's own requeue) may take a Secret read
    within ``max_age`` seconds instead (``CachedKube.reusing_secrets``; scheduler.py passes the drift
    interval), so a burst of events costs no Secret GETs. A Secret the operator writes is noted from
    the write's response; one it deletes is dropped. Entries not refreshed within ``horizon``
    seconds (a deleted platform's) are dropped.
    """

    def __init__(self, clock: Callable[[], float], *, horizon: float = 3600.0) -> None:
        self.clock = clock
        self.horizon = horizon
        self._lock = threading.Lock()
        self._reads: dict[Key, tuple[float, Obj | None]] = {}

    def recent(self, namespace: str, name: str, max_age: float) -> tuple[bool, Obj | None]:
        """(True, the Secret or None when absent) if read within ``max_age`` seconds, else (False, None)."""
        if max_age <= 0:
            return False, None
        with self._lock:
            entry = self._reads.get((namespace, name))
        if entry is None or self.clock() - entry[0] >= max_age:
            return False, None
        return True, copy.deepcopy(entry[1])

    def note(self, namespace: str, name: str, obj: Obj | None) -> None:
        now = self.clock()
        with self._lock:
            self._reads[(namespace, name)] = (now, copy.deepcopy(obj))
            horizon = max(self.horizon, 0.0)
            for key in [k for k, (t, _) in self._reads.items() if now - t > horizon]:
                del self._reads[key]

    def drop(self, namespace: str, name: str) -> None:
        with self._lock:
            self._reads.pop((namespace, name), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._reads)
