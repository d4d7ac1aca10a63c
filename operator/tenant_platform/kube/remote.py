"""Clients for other clusters, built from kubeconfig bytes held in a management-cluster Secret.

``client_from_kubeconfig(data)`` parses a kubeconfig itself instead of handing it to the
``kubernetes`` package's loader, because that loader does what a kubeconfig from a Secret must
never make the operator do: run ``exec`` and ``auth-provider`` plugins (a command of the Secret
writer's choosing, inside the operator), and read files named in the kubeconfig (the operator's
own ServiceAccount token, sent to a server of the Secret writer's choosing). Here only an https
server with an embedded CA (or the system trust), and a bearer token or an embedded client
certificate are accepted; anything else is ``KubeconfigError`` with a message that quotes no
value from the kubeconfig (it may hold credentials).

Key material stays in memory: the CA goes into the TLS context as data; a client certificate and
key pass through one private temporary file (0600, in a 0700 directory) only while the TLS context
loads them (Python's ``ssl`` reads a chain from files only), and the file is removed at once.

``TargetClients`` caches one client per (Secret, key, resourceVersion): a rotation of the
Secret's data gives a new resourceVersion, hence a new client on the next pass, and the client of
the old version is closed. Bounded (least recently used first out).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import ssl
import tempfile
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes.client
import urllib3
import yaml

from tenant_platform.kube.client import Kube

# Per-request bounds for a target: an unreachable tenant must not hold a reconcile thread for long.
CONNECT_TIMEOUT_SECONDS = 5.0
# Connections kept per target client (a pass is sequential; the GPU watches add two).
POOL_MAXSIZE = 4
MAX_CLIENTS = 256


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used; the message names what, never a value from it."""


@dataclass(frozen=True)
class Credentials:
    """What a kubeconfig's current context says, parsed (never logged: it holds secrets)."""

    server: str
    ca_pem: bytes | None
    token: str | None
    cert_pem: bytes | None
    key_pem: bytes | None
    tls_server_name: str | None = None

    def __repr__(self) -> str:  # never print credentials
        return f"Credentials(server={self.server!r})"


_REFUSED_USER_FIELDS = {
    "exec": "an exec credential plugin",
    "auth-provider": "an auth-provider plugin",
    "tokenFile": "a token file",
    "client-certificate": "a client certificate file",
    "client-key": "a client key file",
    "username": "basic authentication",
    "password": "basic authentication",
    "as": "impersonation",
    "as-groups": "impersonation",
    "as-uid": "impersonation",
}
_REFUSED_CLUSTER_FIELDS = {
    "certificate-authority": "a CA file",
    "insecure-skip-tls-verify": "insecure-skip-tls-verify",
    "proxy-url": "a proxy",
}


def parse_kubeconfig(data: bytes) -> Credentials:
    """The current context's server and credentials; KubeconfigError names what is wrong."""
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError:
        raise KubeconfigError("the kubeconfig is not valid YAML") from None
    if not isinstance(doc, dict):
        raise KubeconfigError("the kubeconfig is not a YAML mapping")
    current = doc.get("current-context")
    contexts = _named(doc, "contexts")
    if not current:
        if len(contexts) != 1:
            raise KubeconfigError("the kubeconfig has no current-context")
        current = next(iter(contexts))
    context = contexts.get(str(current))
    if context is None:
        raise KubeconfigError("the kubeconfig's current-context names no context")
    cluster = _named(doc, "clusters").get(str(context.get("cluster") or ""))
    user = _named(doc, "users").get(str(context.get("user") or ""))
    if cluster is None:
        raise KubeconfigError("the current context names no cluster of the kubeconfig")
    if user is None:
        raise KubeconfigError("the current context names no user of the kubeconfig")
    for key, what in _REFUSED_CLUSTER_FIELDS.items():
        if cluster.get(key):
            raise KubeconfigError(f"the kubeconfig's cluster uses {what}, which the operator refuses")
    for key, what in _REFUSED_USER_FIELDS.items():
        if user.get(key):
            raise KubeconfigError(f"the kubeconfig's user uses {what}, which the operator refuses")
    server = str(cluster.get("server") or "")
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme != "https" or not parsed.hostname:
        raise KubeconfigError("the kubeconfig's server is not an https URL with a host")
    token = user.get("token")
    cert = _data(user, "client-certificate-data")
    key_pem = _data(user, "client-key-data")
    if bool(cert) != bool(key_pem):
        raise KubeconfigError("the kubeconfig's user has a client certificate without its key (or a key alone)")
    if not token and not cert:
        raise KubeconfigError("the kubeconfig's user has neither a token nor client-certificate-data")
    return Credentials(
        server=server.rstrip("/"),
        ca_pem=_data(cluster, "certificate-authority-data"),
        token=str(token) if token else None,
        cert_pem=cert,
        key_pem=key_pem,
        tls_server_name=str(cluster["tls-server-name"]) if cluster.get("tls-server-name") else None,
    )


def _named(doc: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    items = doc.get(section) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"the kubeconfig's {section} is not a list")
    field = section[:-1]  # contexts -> context
    for item in items:
        if isinstance(item, dict) and isinstance(item.get(field), dict):
            out[str(item.get("name") or "")] = item[field]
    return out


def _data(section: dict[str, Any], key: str) -> bytes | None:
    value = section.get(key)
    if not value:
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise KubeconfigError(f"the kubeconfig's {key} is not base64") from None


def ssl_context(creds: Credentials) -> ssl.SSLContext:
    """A verifying TLS context holding the CA and the client certificate in memory."""
    context = urllib3.util.ssl_.create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
    try:
        if creds.ca_pem:
            context.load_verify_locations(cadata=creds.ca_pem.decode("ascii", errors="strict"))
        else:
            context.load_default_certs()
        if creds.cert_pem and creds.key_pem:
            _load_chain(context, creds.cert_pem, creds.key_pem)
    except (ssl.SSLError, UnicodeDecodeError, ValueError):
        raise KubeconfigError("the kubeconfig's CA or client certificate is not valid PEM") from None
    return context


def _load_chain(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a certificate and key through one private file, removed before returning."""
    with tempfile.TemporaryDirectory(prefix="tp-target-") as directory:  # 0700
        path = os.path.join(directory, "chain.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(cert.rstrip(b"\n") + b"\n" + key)
            context.load_cert_chain(path)
        finally:
            os.unlink(path)


def client_from_kubeconfig(data: bytes, *, read_timeout: float = 30.0) -> Kube:
    """A Kube for the kubeconfig's current context (no file, no plugin, no proxy)."""
    creds = parse_kubeconfig(data)
    configuration = kubernetes.client.Configuration()
    configuration.host = creds.server
    if creds.token:
        configuration.api_key = {"BearerToken": f"Bearer {creds.token}"}
    api = kubernetes.client.ApiClient(configuration)
    # Our own pool: the TLS context carries the key material; bounded timeouts; no retry (the next
    # pass is the retry) so a dead target costs one connect timeout, not four.
    pool_args: dict[str, Any] = {
        "ssl_context": ssl_context(creds),
        "cert_reqs": ssl.CERT_REQUIRED,
        "maxsize": POOL_MAXSIZE,
        "retries": urllib3.Retry(total=0, connect=0, read=0, redirect=0),
        "timeout": urllib3.Timeout(connect=CONNECT_TIMEOUT_SECONDS, read=read_timeout),
        "num_pools": 2,
    }
    if creds.tls_server_name:
        pool_args["server_hostname"] = creds.tls_server_name
    api.rest_client.pool_manager = _BoundedPool(**pool_args)
    return Kube(api)


class _BoundedPool(urllib3.PoolManager):
    """Splits the client's per-request total timeout so connecting takes at most
    CONNECT_TIMEOUT_SECONDS (the generated client passes ``Timeout(total=...)`` only)."""

    def urlopen(self, method: str, url: str, redirect: bool = True, **kw: Any) -> Any:  # type: ignore[override]
        timeout = kw.get("timeout")
        if isinstance(timeout, urllib3.Timeout) and isinstance(timeout.total, int | float):
            kw["timeout"] = urllib3.Timeout(connect=min(CONNECT_TIMEOUT_SECONDS, timeout.total), read=timeout.total)
        return super().urlopen(method, url, redirect, **kw)


def watch_client(kube: Kube, maxsize: int) -> Kube:
    """A client with the same credentials as ``kube`` (a client this module built) and a pool of
    its own holding ``maxsize`` connections, for long-poll watches (a per-target read cache): the
    TLS context (CA, client certificate) is the one already loaded, nothing is read again."""
    pool = kube.api.rest_client.pool_manager
    api = kubernetes.client.ApiClient(kube.api.configuration)
    if isinstance(pool, _BoundedPool):
        kw = {**pool.connection_pool_kw, "maxsize": maxsize}
        api.rest_client.pool_manager = _BoundedPool(num_pools=2, **kw)
    watcher = Kube(api)
    watcher.counter = kube.counter
    return watcher


def close(kube: Kube) -> None:
    """Close a client's connections (a rotated or forgotten target)."""
    with contextlib.suppress(Exception):  # closing is best effort
        kube.api.rest_client.pool_manager.clear()


class TargetClients:
    """One client per kubeconfig Secret version; thread-safe, bounded, least recently used out.

    ``get((namespace, name, key), resource_version, data)`` returns the cached client for that
    version of the Secret, or builds one (``build(data)``) and closes the client of any older
    version of the same Secret and key.
    """

    def __init__(self, build: Callable[[bytes], Kube] = client_from_kubeconfig, limit: int = MAX_CLIENTS) -> None:
        self._build = build
        self._limit = limit
        self._lock = threading.Lock()
        self._clients: OrderedDict[tuple[str, str, str], tuple[str, Kube]] = OrderedDict()
        self.built = 0
        """How many clients were built (a rotation builds one more)."""

    def get(self, secret: tuple[str, str, str], resource_version: str, data: bytes) -> Kube:
        with self._lock:
            cached = self._clients.get(secret)
            if cached is not None and cached[0] == resource_version:
                self._clients.move_to_end(secret)
                return cached[1]
        kube = self._build(data)  # raises KubeconfigError; outside the lock (it may be slow)
        with self._lock:
            old = self._clients.pop(secret, None)
            self._clients[secret] = (resource_version, kube)
            self.built += 1
            evicted = [self._clients.popitem(last=False)[1][1] for _ in range(len(self._clients) - self._limit)]
        for stale in ([old[1]] if old is not None and old[1] is not kube else []) + evicted:
            close(stale)
        return kube

    def version(self, secret: tuple[str, str, str]) -> str | None:
        """The Secret resourceVersion the cached client was built from (None: none cached)."""
        with self._lock:
            cached = self._clients.get(secret)
            return cached[0] if cached else None

    def cached(self) -> list[tuple[tuple[str, str, str], str, Kube]]:
        """Every cached client: (Secret key, resourceVersion, client)."""
        with self._lock:
            return [(key, version, kube) for key, (version, kube) in self._clients.items()]

    def forget(self, secret: tuple[str, str, str]) -> None:
        with self._lock:
            cached = self._clients.pop(secret, None)
        if cached is not None:
            close(cached[1])

    def __len__(self) -> int:
        with self._lock:
            return len(self._clients)


CLIENTS = TargetClients()
"""The process's target clients (the pipeline's default)."""
