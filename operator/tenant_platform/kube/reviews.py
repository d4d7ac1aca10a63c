"""Which access-review answers an RBAC change can affect: the bookkeeping behind the answers
kube/cache.py keeps (``CachedKube.can_i``) and the grants kube/secretwatch.py keeps.

An answer is kept per review namespace (``spec.resourceAttributes.namespace``; "" for a
cluster-scoped review). What an RBAC event drops follows from how the API server's RBAC
authorizer decides a review:

- A review in namespace X is decided by the ClusterRoleBindings and the RoleBindings **in X**;
  a RoleBinding in X refers to a Role in X or to a ClusterRole. So a Role or RoleBinding event in
  namespace X can change only answers of reviews in X: those are dropped, nothing else. The
  subjects do not matter: a RoleBinding in X naming a ServiceAccount of namespace Y grants in X,
  so it changes answers about that ServiceAccount in X (dropped), never in Y.
- A cluster-scoped review ("") is decided by ClusterRoleBindings alone: no namespaced object
  changes it.
- A ClusterRole (referenced from any RoleBinding, aggregated into others) or ClusterRoleBinding
  event drops every answer. So does an event whose namespace is unknown (a relist of an
  events-only scope reports "something changed" without an object: ``affected_namespace`` says None).
- Settling: the API server's authorizer follows RBAC through its own informers and may lag
  behind our watch, so an answer asked at time t in namespace X is kept only if the last change
  in X and the last cluster-wide change are both more than ``settle`` seconds before t (a
  cluster-scoped answer: the last cluster-wide change). An answer asked before a change and
  returned after it is therefore never kept.
- Memory: answers per (namespace, key) as asked; one change time per namespace that had an RBAC
  event, forgotten ``horizon`` seconds later (and all of them at a cluster-wide change, which
  supersedes them). So that a forgotten change time cannot let a stale answer in, an answer asked
  more than ``horizon - settle`` seconds before it is offered is not kept (requests time out long
  before that).

Pure (time is passed in) and not thread-safe: the caller holds its lock.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from tenant_platform.kube.client import Obj

NAMESPACED_RBAC_KINDS = ("Role", "RoleBinding")

K = TypeVar("K")
V = TypeVar("V")


def affected_namespace(kind: str, old: Obj | None, new: Obj | None) -> str | None:
    """The one namespace an RBAC event of ``kind`` can affect answers in, or None: every answer.

    A Role or RoleBinding event names its namespace (the API server sets ``metadata.namespace``
    from the request path; a client cannot choose another). A cluster-scoped kind, or an event
    without an object or without a namespace, affects everything.
    """
    if kind not in NAMESPACED_RBAC_KINDS:
        return None
    namespaces = {str((o.get("metadata") or {}).get("namespace") or "") for o in (old, new) if o is not None}
    if len(namespaces) != 1:
        return None
    (namespace,) = namespaces
    return namespace or None


class ReviewAnswers(Generic[K, V]):
    """Answers kept per review namespace, dropped by the RBAC changes that can affect them."""

    def __init__(self, *, settle: float, horizon: float = 300.0) -> None:
        if horizon <= settle:
            raise ValueError("horizon must exceed settle")
        self.settle = settle
        self.horizon = horizon
        self._answers: dict[str, dict[K, V]] = {}
        self._changed: dict[str, float] = {}
        self._changed_everywhere: float | None = None

    def get(self, namespace: str, key: K) -> V | None:
        return self._answers.get(namespace, {}).get(key)

    def changed(self, namespace: str | None, now: float) -> int:
        """An RBAC event affecting ``namespace`` (None or "": everything) at ``now``: drops the
        answers it can affect and starts their settle window. Returns how many were dropped."""
        if not namespace:
            dropped = len(self)
            self._answers.clear()
            self._changed.clear()
            self._changed_everywhere = now
            return dropped
        # Cluster-scoped answers ("") stay: a namespaced object does not affect them.
        dropped = len(self._answers.pop(namespace, {}))
        self._changed[namespace] = now
        for stale in [ns for ns, at in self._changed.items() if now - at > self.horizon]:
            del self._changed[stale]
        return dropped

    def last_change(self, namespace: str) -> float | None:
        """When the last RBAC event that can affect answers in ``namespace`` arrived (None: none known)."""
        here = self._changed.get(namespace) if namespace else None
        times = [t for t in (self._changed_everywhere, here) if t is not None]
        return max(times) if times else None

    def settled(self, namespace: str, asked_at: float, now: float) -> bool:
        """Whether an answer about ``namespace`` asked at ``asked_at`` may be kept at ``now``."""
        if now - asked_at > self.horizon - self.settle:
            return False
        last = self.last_change(namespace)
        return last is None or last < asked_at - self.settle

    def keep(self, namespace: str, key: K, value: V, *, asked_at: float, now: float) -> bool:
        """Keep an answer unless a relevant RBAC event arrived too close to (or after) ``asked_at``."""
        if not self.settled(namespace, asked_at, now):
            return False
        self._answers.setdefault(namespace, {})[key] = value
        return True

    def count(self, namespace: str) -> int:
        return len(self._answers.get(namespace, {}))

    def __len__(self) -> int:
        return sum(len(answers) for answers in self._answers.values())
