"""Best-effort network probes from the operator's own pod.

The API cannot say whether pods reach a registry: that depends on node and pod networking, proxies
and egress firewalls. The operator's pod is a pod too, so where it runs in the cluster
(``settings.in_cluster``) it resolves each registry host the pull Secrets cover and opens a TCP
connection to it (no TLS, no HTTP, nothing sent), and reports what happened in
``status.checks.registryProbes`` with ``bestEffort: true``.

Best effort means: a pass proves this pod's path only (another node or a NetworkPolicy in the
tenant namespace may differ), and a failure is a warning, never a condition, so it can never make
Ready false. Results are cached for CACHE_SECONDS so frequent reconciles do not hammer DNS.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

CHECK_NAME = "registryProbes"
DEFAULT_PORT = 443
TIMEOUT_SECONDS = 3.0
CACHE_SECONDS = 60.0
MAX_HOSTS = 16

_cache: dict[tuple[str, int], tuple[float, dict[str, Any]]] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Target:
    host: str
    port: int

    @property
    def label(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_target(registry: str) -> Target:
    """``reg.example.com`` -> (reg.example.com, 443); ``reg:5000`` -> (reg, 5000); ``[fd00::1]:5000``."""
    value = registry.strip()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":")
        return Target(host, int(port) if port.isdigit() else DEFAULT_PORT)
    if value.count(":") == 1:
        host, _, port = value.partition(":")
        if port.isdigit():
            return Target(host, int(port))
    return Target(value, DEFAULT_PORT)


def probe_target(target: Target, *, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
    """Resolve ``target.host`` and connect to the first address that accepts; never raises."""
    entry: dict[str, Any] = {"host": target.host, "port": target.port, "addresses": [], "reachable": False}
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        entry["error"] = f"DNS resolution failed: {exc}"
        return entry
    addresses = sorted({str(info[4][0]) for info in infos})
    entry["addresses"] = addresses
    errors: list[str] = []
    for family, type_, proto, _, sockaddr in infos:
        try:
            with socket.socket(family, type_, proto) as sock:
                sock.settimeout(timeout)
                sock.connect(sockaddr)
        except OSError as exc:
            errors.append(f"{sockaddr[0]}: {exc.strerror or exc}")
            continue
        entry["reachable"] = True
        return entry
    entry["error"] = "TCP connect failed: " + "; ".join(sorted(set(errors)))
    return entry


def probe_registries(
    registries: Iterable[str],
    *,
    timeout: float = TIMEOUT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    use_cache: bool = True,
) -> dict[str, Any]:
    """A ``status.checks`` entry for the given registry hosts (deduplicated, at most MAX_HOSTS)."""
    targets = sorted({parse_target(r) for r in registries if r.strip()}, key=lambda t: (t.host, t.port))[:MAX_HOSTS]
    now = clock()
    results: dict[Target, dict[str, Any]] = {}
    todo: list[Target] = []
    with _cache_lock:
        for target in targets:
            cached = _cache.get((target.host, target.port))
            if use_cache and cached and now - cached[0] < CACHE_SECONDS:
                results[target] = cached[1]
            else:
                todo.append(target)
    if todo:
        with ThreadPoolExecutor(max_workers=min(8, len(todo)), thread_name_prefix="probe") as pool:
            for target, entry in zip(todo, pool.map(lambda t: probe_target(t, timeout=timeout), todo), strict=True):
                results[target] = entry
        with _cache_lock:
            for target in todo:
                _cache[(target.host, target.port)] = (now, results[target])
    hosts = [results[t] for t in targets]
    failed = [f"{parse_label(h)} ({h.get('error', 'unreachable')})" for h in hosts if not h["reachable"]]
    if failed:
        message = (
            "From the operator's pod (best effort): could not reach "
            + ", ".join(failed)
            + ". Pods pulling from these registries may fail with ErrImagePull; check DNS, egress firewall "
            "rules and HTTP(S) proxies for the cluster's nodes."
        )
    else:
        message = (
            "From the operator's pod (best effort): resolved and connected to "
            + ", ".join(parse_label(h) for h in hosts)
            + ". This proves the operator pod's path only, not every node's."
        )
    return {"result": "Warn" if failed else "Pass", "bestEffort": True, "message": message, "hosts": hosts}


def parse_label(entry: dict[str, Any]) -> str:
    return Target(str(entry["host"]), int(entry["port"])).label


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
