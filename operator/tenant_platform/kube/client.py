"""A small synchronous client over the official `kubernetes` package's ApiClient.

Why not DynamicClient: it runs discovery over every group on start (dozens of requests, and
read RBAC on everything). We know the kinds we touch, so paths come from RESOURCES, with a
lazy per-group-version discovery fallback for anything else.

Every call is counted (reads and writes apart) so benchmarks and tests can assert, for example,
that a no-op resync performs zero writes.

NB: the generated client defaults to strategic-merge patch for dict bodies; every PATCH here
sets its content type explicitly (apply-patch+yaml for server-side apply, merge-patch+json
otherwise), since custom resources reject strategic merge.
"""

from __future__ import annotations

import builtins
import copy
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3

from tenant_platform.api import constants
from tenant_platform.api.timestamps import parse_time
from tenant_platform.kube import connect, errors, observed
from tenant_platform.kube.objects import Obj, intent_hash, is_subset
from tenant_platform.kube.resources import RESOURCES
from tenant_platform.kube.watchstream import watch_stream
from tenant_platform.kube.wire import NAMESPACE_NAME, WRITES, b64, gv_path, namespace_of, parse_warnings, path_segment

# Accept headers asking the API server for objects' metadata only (PartialObjectMetadata): what an
# informer that keeps only which names exist reads (kube/informer.py, ``Scope.names_only``).
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_ONLY_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

__all__ = [
    "METADATA_ONLY",
    "METADATA_ONLY_LIST",
    "RESOURCES",
    "Kube",
    "Obj",
    "RequestCounter",
    "b64",
    "intent_hash",
    "is_subset",
    "namespace_of",
    "parse_warnings",
    "path_segment",
]


@dataclass
class RequestCounter:
    """Counts API requests by verb class. Thread-safe."""

    reads: int = 0
    writes: int = 0
    by_verb: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, method: str, dry_run: bool) -> None:
        with self._lock:
            key = f"{method}{' (dry-run)' if dry_run else ''}"
            self.by_verb[key] = self.by_verb.get(key, 0) + 1
            if method in ("GET", "WATCH") or dry_run:
                self.reads += 1
            else:
                self.writes += 1

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.reads, self.writes


class Kube:
    """API access for one identity. Safe to share between threads."""

    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.api = api_client
        self.counter = RequestCounter()
        self._discovered: dict[str, dict[str, tuple[str, bool]]] = {}
        self.write_gate: Callable[[], bool] | None = None
        """When set, every request that would persist something first asks it; False refuses the
        request with errors.NotLeading before anything is sent (leader election's fence)."""

    def sibling(self) -> Kube:
        """Another wrapper over the same connection (identity, pool), with its own counter and no
        write gate: the leader-election loop writes its Lease through one."""
        twin = Kube(self.api)
        twin.default_namespace = self.default_namespace
        return twin

    def _check_write(self, method: str, path: str, *, dry_run: bool) -> None:
        if self.write_gate is not None and method not in ("GET", "WATCH") and not dry_run and not self.write_gate():
            raise errors.NotLeading(method, path)

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> Kube:
        """Load a kubeconfig file (None: $KUBECONFIG or ~/.kube/config), else in-cluster config."""
        configuration, namespace = connect.load_configuration(path, context)
        kube = cls(kubernetes.client.ApiClient(configuration))
        kube.default_namespace = namespace
        return kube

    def connection_info(self) -> dict[str, Any]:
        """What kopf needs to log in with the same identity: server, CA, client cert or token."""
        return connect.connection_info(self.api.configuration, self.default_namespace)

    default_namespace: str | None = None
    write_check: Callable[[str], None] | None = None
    """Called with the namespace of every namespaced write (not dry runs) before it is sent; it
    raises (errors.NotOwned) to refuse it. Set on a view made by ``fenced``."""

    def fenced(self, check: Callable[[str], None]) -> Kube:
        """A view of this client (same connection, counter and discovery) whose namespaced writes
        first pass ``check(namespace)``."""
        view = copy.copy(self)
        view.write_check = check
        return view

    @property
    def server(self) -> str:
        return str(self.api.configuration.host)

    # ---- paths --------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) for a kind; discovers the group-version once when unknown."""
        known = RESOURCES.get((api_version, kind))
        if known:
            return known
        if api_version not in self._discovered:
            doc = self.request("GET", gv_path(api_version))
            self._discovered[api_version] = {
                r["kind"]: (r["name"], bool(r["namespaced"])) for r in doc.get("resources", []) if "/" not in r["name"]
            }
        found = self._discovered[api_version].get(kind)
        if not found:
            raise errors.NotFound(404, "NotFound", f"{kind} is not served by {api_version}")
        return found

    def path(
        self,
        api_version: str,
        kind: str,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The request path; every name, namespace and subresource is one quoted path segment.

        A value the API server could read as more than one segment (``kube-system/secrets/x?``)
        stays one (``kube-system%2Fsecrets%2Fx%3F``); a namespace that is not a DNS-1123 label
        (no namespace can have such a name), and a name that would walk the path (``.``, ``..``)
        or vanish ("" where a value was given), raise Invalid before any request is made.
        """
        plural, namespaced = self.resource(api_version, kind)
        parts = [gv_path(api_version)]
        if namespaced and namespace:
            if not NAMESPACE_NAME.fullmatch(namespace):
                raise errors.Invalid(
                    400,
                    "InvalidNamespace",
                    f"namespace {namespace!r} is not a DNS-1123 label, so no such namespace exists",
                )
            parts += ["namespaces", path_segment(namespace, "namespace")]
        parts.append(plural)
        if name is not None:
            parts.append(path_segment(name, "name"))
        if subresource is not None:
            parts.append(path_segment(subresource, "subresource"))
        return "/".join(parts)

    # ---- raw ------------------------------------------------------------------------------

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
        """One API request; returns the decoded JSON body (or {} when empty).

        ``stores_nothing`` marks a POST that persists nothing (reviews), counted as a read.
        ``accept``: e.g. ``METADATA_ONLY_LIST`` for a listing of the objects' metadata only.
        """
        query = query or {}
        persists_nothing = stores_nothing or query.get("dryRun") == "All"
        self._check_write(method, path, dry_run=persists_nothing)
        self._fence(method, path, query)
        self.counter.add(method, dry_run=persists_nothing)
        headers = {"Accept": accept, "Content-Type": content_type}
        data = self._call(method, path, query=query, headers=headers, body=body, timeout=timeout)
        if not data:
            return {}
        decoded = json.loads(data)
        return decoded if isinstance(decoded, dict) else {"items": decoded}

    def text(self, path: str, *, query: dict[str, str] | None = None, timeout: float = 30.0) -> str:
        """One GET whose answer is text, not JSON (a pod's log: ``.../pods/<name>/log``)."""
        query = query or {}
        self.counter.add("GET", dry_run=False)
        headers = {"Accept": "text/plain, */*", "Content-Type": "application/json"}
        data = self._call("GET", path, query=query, headers=headers, body=None, timeout=timeout)
        return data.decode("utf-8", errors="replace")

    def _fence(self, method: str, path: str, query: dict[str, str]) -> None:
        """Pass a namespaced write (not a dry run) through ``write_check`` before it is sent or counted."""
        if self.write_check is not None and method in WRITES and query.get("dryRun") != "All":
            namespace = namespace_of(path)
            if namespace:
                self.write_check(namespace)

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str],
        headers: dict[str, str],
        body: Any,
        timeout: float,
        warnings: builtins.list[str] | None = None,
    ) -> bytes:
        """The raw response body; ``warnings``, when given, receives the ``Warning`` header texts."""
        # NB: kubernetes>=37 splits a request into param_serialize (auth, URL) and call_api
        # (transport), and raises for HTTP errors only in its deserializer, which we skip.
        try:
            method_, url, headers_, body_, post = self.api.param_serialize(
                method,
                path,
                query_params=list(query.items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self.api.call_api(method_, url, headers_, body_, post, _request_timeout=timeout)
            raw = resp.read()  # type: ignore[no-untyped-call]
            if warnings is not None:
                warnings.extend(parse_warnings(resp.headers.getlist("Warning")))
        except kubernetes.client.exceptions.ApiException as exc:
            observed.report(method, exc.status)
            raise errors.from_response(int(exc.status or 0), exc.body) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            observed.report(method, None)
            raise errors.Transient(0, "ConnectionError", str(exc)) from None
        observed.report(method, int(resp.status))
        if not 200 <= int(resp.status) < 300:
            raise errors.from_response(int(resp.status), raw)
        return bytes(raw or b"")

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        accept: str = "application/json",
    ) -> Iterator[Obj]:
        """Stream watch events (``{"type", "object"}``, bookmarks included) from ``resource_version``.

        Ends when the server closes the watch (after ``timeout_seconds``). An expired
        ``resource_version`` raises a KubeError with status 410: list again, then watch from the
        list's resourceVersion. Connection trouble raises Transient.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if field_selector:
            query["fieldSelector"] = field_selector
        if label_selector:
            query["labelSelector"] = label_selector
        self.counter.add("WATCH", dry_run=False)
        path = self.path(api_version, kind, namespace=namespace)
        yield from watch_stream(self.api, path, query, timeout_seconds, accept=accept)

    # ---- reads ------------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            return self.request("GET", self.path(api_version, kind, name, namespace))
        except errors.NotFound:
            return None

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[Obj]:
        """All objects of a kind (following continue tokens), across namespaces when None."""
        query: dict[str, str] = {"limit": "500"}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        path = self.path(api_version, kind, namespace=namespace)
        items: list[Obj] = []
        while True:
            page = self.request("GET", path, query=query)
            for item in page.get("items", []):
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item)
            token = page.get("metadata", {}).get("continue")
            if not token:
                return items
            query["continue"] = token

    def list_shared(self, api_version: str, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        """As ``list``, for callers that only read: a caching client (kube/cache.py) answers with
        the objects it holds, not copies, so the caller must never change what it gets."""
        return self.list(api_version, kind, namespace)

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves a kind, by discovery of its group-version."""
        try:
            doc = self.request("GET", gv_path(api_version))
        except errors.NotFound:
            return False
        return any(r.get("kind") == kind and "/" not in r.get("name", "") for r in doc.get("resources", []))

    def server_version(self) -> tuple[int, int, str]:
        """(major, minor, gitVersion) of the API server."""
        doc = self.request("GET", "/version")
        minor = "".join(ch for ch in str(doc.get("minor", "0")) if ch.isdigit()) or "0"
        return int(doc.get("major", "1") or 1), int(minor), str(doc.get("gitVersion", ""))

    # ---- writes -----------------------------------------------------------------------------

    def apply(
        self, obj: Obj, *, dry_run: bool = False, force: bool = True, field_manager: str = constants.FIELD_MANAGER
    ) -> Obj:
        """Server-side apply ``obj`` (full intent) under ``field_manager`` (default: our one).

        ``force`` takes over fields other managers own; without it a conflict is a 409 naming them.
        """
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        query = {"fieldManager": field_manager, "force": "true" if force else "false"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request(
            "PATCH", path, body=json.dumps(obj), query=query, content_type="application/apply-patch+yaml"
        )

    def ensure(self, obj: Obj, *, live: Obj | bool | None = False) -> tuple[Obj, bool]:
        """Apply ``obj`` only when the live object differs from it; returns (object, written).

        The intent's hash is stored in an annotation. An apply is skipped when the live object
        carries the same hash (so no field we used to own needs removing) and every desired field
        still has the desired value (so nobody drifted it). ``live`` may be passed in when the
        caller already read it (``None`` meaning known-absent); otherwise it is fetched.
        """
        desired = copy.deepcopy(obj)
        digest = intent_hash(desired)
        desired.setdefault("metadata", {}).setdefault("annotations", {})[constants.ANNOTATION_APPLIED_HASH] = digest
        meta = desired["metadata"]
        if live is False:
            current = self.get(desired["apiVersion"], desired["kind"], meta["name"], meta.get("namespace"))
        else:
            current = live if isinstance(live, dict) else None
        if current is not None and is_subset(desired, current):
            return current, False
        return self.apply(desired), True

    def create(self, obj: Obj, *, dry_run: bool = False, as_user: str | None = None) -> Obj:
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace"))
        query = {"fieldManager": constants.FIELD_MANAGER}
        if dry_run:
            query["dryRun"] = "All"
        return self.request("POST", path, body=obj, query=query)

    def create_with_warnings(self, obj: Obj, *, dry_run: bool = True) -> tuple[Obj, builtins.list[str]]:
        """POST ``obj`` (a server-side dry run unless ``dry_run`` is False); returns (object, warnings).

        ``warnings`` are the texts of the response's ``Warning`` headers, e.g. from a
        ValidatingAdmissionPolicy bound with action Warn. Errors raise as in ``create``, with the
        failed response's warnings in ``KubeError.warnings``.
        """
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace"))
        query = {"fieldManager": constants.FIELD_MANAGER}
        if dry_run:
            query["dryRun"] = "All"
        self._check_write("POST", path, dry_run=dry_run)
        self._fence("POST", path, query)
        self.counter.add("POST", dry_run=dry_run)
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        warnings: builtins.list[str] = []
        try:
            data = self._call("POST", path, query=query, headers=headers, body=obj, timeout=30.0, warnings=warnings)
        except errors.KubeError as exc:
            exc.warnings = warnings
            raise
        decoded = json.loads(data) if data else {}
        return (decoded if isinstance(decoded, dict) else {}), warnings

    def replace(self, obj: Obj) -> Obj:
        """PUT with the object's resourceVersion as a precondition (Conflict when it moved)."""
        meta = obj["metadata"]
        path = self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        return self.request("PUT", path, body=obj, query={"fieldManager": constants.FIELD_MANAGER})

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
        path = self.path(api_version, kind, name, namespace, subresource)
        return self.request(
            "PATCH",
            path,
            body=patch,
            query={"fieldManager": constants.FIELD_MANAGER},
            content_type="application/merge-patch+json",
        )

    def json_patch(
        self, api_version: str, kind: str, name: str, ops: builtins.list[Obj], *, namespace: str | None = None
    ) -> Obj:
        path = self.path(api_version, kind, name, namespace)
        return self.request(
            "PATCH",
            path,
            body=ops,
            query={"fieldManager": constants.FIELD_MANAGER},
            content_type="application/json-patch+json",
        )

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
        """Delete; returns False when it was already gone. ``uid`` adds a precondition."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", self.path(api_version, kind, name, namespace), body=body)
        except errors.NotFound:
            return False
        return True

    # ---- authn/authz --------------------------------------------------------------------------

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
        """A SubjectAccessReview: (allowed, reason)."""
        attrs: Obj = {"verb": verb, "resource": resource, "group": group}
        if namespace:
            attrs["namespace"] = namespace
        if subresource:
            attrs["subresource"] = subresource
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": list(groups), "resourceAttributes": attrs},
        }
        result = self.request(
            "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review, stores_nothing=True
        )
        status = result.get("status", {})
        return bool(status.get("allowed")), str(status.get("reason", ""))

    def may_i(self, *, verb: str, resource: str, namespace: str = "", name: str = "", group: str = "") -> bool:
        """A SelfSubjectAccessReview: may this client's own identity do it (stores nothing)."""
        attrs: Obj = {"verb": verb, "resource": resource, "group": group}
        if namespace:
            attrs["namespace"] = namespace
        if name:
            attrs["name"] = name
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        result = self.request(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review, stores_nothing=True
        )
        return bool((result.get("status") or {}).get("allowed"))

    def request_token(
        self,
        namespace: str,
        service_account: str,
        *,
        expiration_seconds: int,
        audiences: builtins.list[str] | None = None,
    ) -> tuple[str, datetime]:
        """Mint a token for a ServiceAccount (TokenRequest); returns (token, expiry)."""
        body: Obj = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds},
        }
        if audiences:
            body["spec"]["audiences"] = audiences
        path = self.path("v1", "ServiceAccount", service_account, namespace, "token")
        result = self.request("POST", path, body=body)
        status = result.get("status", {})
        expiry = parse_time(status.get("expirationTimestamp")) or (
            datetime.now(UTC) + timedelta(seconds=expiration_seconds)
        )
        return str(status["token"]), expiry

    def ca_data(self) -> str | None:
        """The CA bundle this client trusts (PEM), for building kubeconfigs."""
        path = self.api.configuration.ssl_ca_cert
        if not path:
            return None
        with open(path, encoding="utf-8") as fh:
            return fh.read()
