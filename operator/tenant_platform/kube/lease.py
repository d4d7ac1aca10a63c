"""Leader election over one ``coordination.k8s.io/v1`` Lease (the client-go algorithm, small).

Why not ``kubernetes.leaderelection``: it judges expiry by comparing wall clocks, has no fence for
writes in flight, and no way to tell a liveness probe that its loop is still turning. This is the
same protocol as client-go's leaderelection (so ``kubectl get lease`` reads as usual):

- a candidate GETs the Lease; it may take it when nobody holds it (absent, empty holder) or when
  the record has not changed for ``lease_duration`` seconds *as measured on its own monotonic
  clock since it first saw that record* (no clock comparison between machines);
- taking and renewing are PUTs carrying the read ``resourceVersion``, so of two candidates racing
  for an expired Lease exactly one wins (the other gets 409 Conflict and stays standby);
- the leader renews every ``retry_period``; when no renewal succeeded for ``renew_deadline``
  (< ``lease_duration``) it stops leading. ``is_leading()`` turns False at that same moment even if
  the loop thread is stuck, which is what the write fence (``Kube.write_gate``) asks, so the old
  leader stops writing at least ``lease_duration - renew_deadline`` seconds before anyone else
  may take over;
- on a graceful stop the leader releases the Lease (empty holder), so a standby takes over at its
  next retry instead of after ``lease_duration``.

A standby only reads (one GET per ``retry_period``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj

log = logging.getLogger("tenant_platform.lease")

API_VERSION = "coordination.k8s.io/v1"


@dataclass(frozen=True)
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def micro_time(now: datetime) -> str:
    """A MicroTime as the API server stores it (RFC 3339, microseconds, Z)."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate. ``run`` blocks: stand by, lead, return when leadership is lost or on ``stop``.

    Thread-safe readers: ``is_leading``, ``holder``, ``last_tick`` and ``last_renewal``
    (monotonic seconds) for metrics and /healthz.
    """

    def __init__(
        self,
        kube: Kube,
        config: LeaseConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.config = config
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._observed: tuple[str, str, str] | None = None  # (holder, renewTime, resourceVersion)
        self._observed_at = 0.0
        self._leading = False
        self._renewed_at = 0.0
        self.holder: str = ""
        self.last_tick: float = monotonic()
        self.transitions = 0

    # ---- state ------------------------------------------------------------------------------

    def is_leading(self) -> bool:
        """True while this process holds the Lease and renewed it within ``renew_deadline``."""
        with self._lock:
            return self._leading and self._monotonic() - self._renewed_at < self.config.renew_deadline

    @property
    def last_renewal(self) -> float:
        with self._lock:
            return self._renewed_at

    def _path(self, name: str | None = None) -> str:
        return self.kube.path(API_VERSION, "Lease", name, self.config.namespace)

    def _timeout(self) -> float:
        # One attempt must never outlast the time the leader has left to renew.
        return max(1.0, min(self.config.retry_period * 2, self.config.renew_deadline / 2))

    # ---- one attempt -------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One GET (+ one PUT or POST when we may take or renew); True when we hold the Lease now."""
        cfg = self.config
        now = self._wall()
        try:
            live: Obj | None = self.kube.request("GET", self._path(cfg.name), timeout=self._timeout())
        except errors.NotFound:
            live = None
        spec_now = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": 0,
        }
        if live is None:
            body = {
                "apiVersion": API_VERSION,
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": spec_now,
            }
            try:
                created = self.kube.request("POST", self._path(), body=body, timeout=self._timeout())
            except errors.Conflict:
                return False
            self._observe(created)
            return True
        spec: dict[str, Any] = live.get("spec") or {}
        self._observe(live)
        holder = str(spec.get("holderIdentity") or "")
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if holder and holder != cfg.identity and self._monotonic() - self._observed_at < duration:
            return False
        if holder == cfg.identity:
            spec_now["acquireTime"] = spec.get("acquireTime") or spec_now["acquireTime"]
            spec_now["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            spec_now["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        body = {
            "apiVersion": API_VERSION,
            "kind": "Lease",
            "metadata": {
                "name": cfg.name,
                "namespace": cfg.namespace,
                "resourceVersion": live["metadata"]["resourceVersion"],
            },
            "spec": spec_now,
        }
        try:
            updated = self.kube.request("PUT", self._path(cfg.name), body=body, timeout=self._timeout())
        except errors.Conflict:
            return False
        self._observe(updated)
        return True

    def _observe(self, lease: Obj) -> None:
        spec = lease.get("spec") or {}
        record = (
            str(spec.get("holderIdentity") or ""),
            str(spec.get("renewTime") or ""),
            str(lease.get("metadata", {}).get("resourceVersion") or ""),
        )
        with self._lock:
            if record != self._observed:
                self._observed = record
                self._observed_at = self._monotonic()
            self.holder = record[0]

    # ---- the loop ----------------------------------------------------------------------------

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except errors.KubeError as exc:
            log.warning("lease %s/%s: %s", self.config.namespace, self.config.name, exc)
            return False

    def _sleep(self, stop: threading.Event) -> None:
        # Jitter keeps candidates that started together from knocking in lockstep.
        stop.wait(self.config.retry_period * random.uniform(0.9, 1.1))

    def run(
        self,
        stop: threading.Event,
        *,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
    ) -> bool:
        """Stand by until we acquire the Lease, then lead until we lose it or ``stop`` is set.

        Returns True when leadership was lost (the caller should stop writing and exit), False
        when ``stop`` ended the loop (the caller releases the Lease once its writes are over).
        """
        log.info("standing by for lease %s/%s as %s", self.config.namespace, self.config.name, self.config.identity)
        while not stop.is_set():
            self.last_tick = self._monotonic()
            started = self._monotonic()
            if self._attempt():
                with self._lock:
                    self._leading = True
                    self._renewed_at = started
                    self.transitions += 1
                break
            self._sleep(stop)
        else:
            return False
        log.info("acquired lease %s/%s as %s", self.config.namespace, self.config.name, self.config.identity)
        on_started_leading()
        lost = False
        while not stop.is_set():
            self._sleep(stop)
            if stop.is_set():
                break
            self.last_tick = self._monotonic()
            started = self._monotonic()
            if self._attempt():
                with self._lock:
                    self._renewed_at = started
                continue
            if self.holder and self.holder != self.config.identity:
                log.error("lease %s taken over by %s", self.config.name, self.holder)
                lost = True
                break
            if not self.is_leading():
                log.error("could not renew lease %s for %ss", self.config.name, self.config.renew_deadline)
                lost = True
                break
        if lost:
            with self._lock:
                self._leading = False
            on_stopped_leading()
        return lost

    def step_down(self) -> None:
        """Stop counting as leader now (closes the write fence); ``release`` then frees the Lease."""
        with self._lock:
            self._leading = False

    def release(self) -> bool:
        """Give the Lease up if we still hold it (empty holder), so a standby takes over at once."""
        self.step_down()
        cfg = self.config
        try:
            live = self.kube.request("GET", self._path(cfg.name), timeout=self._timeout())
            spec = dict(live.get("spec") or {})
            if spec.get("holderIdentity") != cfg.identity:
                return False
            spec.update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time(self._wall())})
            live["spec"] = spec
            self.kube.request("PUT", self._path(cfg.name), body=live, timeout=self._timeout())
        except errors.KubeError as exc:
            log.warning("could not release lease %s: %s", cfg.name, exc)
            return False
        log.info("released lease %s/%s", cfg.namespace, cfg.name)
        return True
