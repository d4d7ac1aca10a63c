"""One writer at a time for the Corefile: the DNS steps of this process combine their edits.

Every TenantPlatform under ``management: CoreDNS`` on a ``corefile`` cluster keeps its marked block
in the one ConfigMap kube-system/coredns. Edited one platform at a time, N platforms converging
together race for that object (a read-modify-write PUT each, and a 409 for most of them, issue 27).
Here the DNS steps of this process hand their edit (``Edit``: a function text -> text, and the
platform's domain guard) to the ``CorefileCombiner``; one thread at a time (the leader, whichever
step arrived when nobody was writing) takes every edit waiting for that ConfigMap, applies them in
order to the freshest object it knows (the last one it wrote or read, else a GET), each edit judged
first by its own guard on the text it is about to change (a refusal drops that edit only: its
caller gets its Refused, the others go through), and makes one PUT with the resourceVersion
precondition. On 409 it re-reads and applies all of them again (the guards again too, with a fresh
list of TenantPlatforms), up to ``verdict.MAX_ATTEMPTS`` times, then every waiter gets
CorefileConflict. No write when nothing changes. Every waiter gets the object as written (or as
read, when its edit changed nothing), or its own error.

Other writers (a second replica, an admin's kubectl) are still kept out by the precondition.
Waiting is bounded: a waiter whose edit no leader has finished within ``WAIT_SECONDS`` makes it
itself, alone; when a leader's read or write fails with an API error other than 409, the leader
gets the error and the others go back to the queue once (one of them leads next, with its own
client), then get the error too. Edits are idempotent (our block put right, or removed), so an
edit made twice (a waiter that gave up on a slow leader) writes nothing the second time.

Thread-safe (the scheduler's pool threads); no asyncio. Cleanup (the block's removal) goes
through the same path.

``BlockLedger``: when each platform's own block last changed, so that DNSReady waits for the
CoreDNS pods' reload after a change of the platform's own block only (``ReloadPending``), not after
another platform's. The ConfigMap's managedFields say only when the operator last wrote the object,
whichever block it changed, and the read cache does not hold managedFields at all.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tenant_platform.concerns.dns import verdict
from tenant_platform.concerns.dns.coredns import COREFILE_KEY, CoreDNSTarget, changed_at, corefile_text
from tenant_platform.formats import corefile
from tenant_platform.kube import errors
from tenant_platform.kube.client import Kube, Obj

log = logging.getLogger("tenant_platform.concerns.dns")
Logger = logging.Logger | logging.LoggerAdapter[Any]

WAIT_SECONDS = 30.0
"""How long a step waits for a leader to make its edit before making it alone."""
CONFLICT_LOG = "Corefile in %s/%s changed while we edited it; retrying"

Key = tuple[str, str, str]
"""(API server, namespace, ConfigMap name): the object the edits go to."""


def key_of(kube: Kube, target: CoreDNSTarget) -> Key:
    """The Corefile ConfigMap ``kube`` reaches through ``target``."""
    return (kube.server, target.namespace, target.config_map)


class CorefileConflict(Exception):
    """The Corefile kept changing under us for dns.MAX_ATTEMPTS attempts."""


Judge = Callable[[Obj, bool], Exception | None]
"""A platform's domain guard: given the ConfigMap with the text its edit is about to change, and
whether to list the TenantPlatforms again (a retry), the exception its caller gets (Refused), or
None to go ahead."""


@dataclass(eq=False)
class Edit:
    """One platform's edit of the Corefile, handed to the combiner, and its outcome."""

    platform: str
    change: Callable[[str], str]
    """The edit (idempotent): the text with the platform's block put right, or removed."""
    kube: Kube
    """The caller's client: used when the caller leads (or edits alone)."""
    judge: Judge | None = None
    """None: no guard (a removal)."""
    seen: Obj | None = None
    """The ConfigMap as the caller read it (saves a GET when it is the freshest)."""
    logger: Logger = log
    result: Obj | None = None
    error: BaseException | None = None
    done: bool = False
    taken: bool = False
    """A leader holds it (it is no longer in the queue)."""
    failures: int = 0
    """Leaders that failed with it (an API error other than 409)."""

    def finish(self, *, result: Obj | None = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.done = result, error, True

    def outcome(self) -> Obj:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


@dataclass
class Counts:
    """What the combiner did for one ConfigMap (tests and benchmarks read it)."""

    edits: int = 0
    batches: int = 0
    puts: int = 0
    conflicts: int = 0
    largest: int = 0


def _rv(obj: Obj | None) -> int:
    try:
        return int(((obj or {}).get("metadata") or {}).get("resourceVersion") or -1)
    except ValueError:
        return -1


def _with_text(live: Obj, text: str) -> Obj:
    """``live`` (not copied deeply) with ``text`` as its Corefile: what a guard judges."""
    return {**live, "data": {**(live.get("data") or {}), COREFILE_KEY: text}}


class CorefileCombiner:
    """Combines the concurrent Corefile edits of this process (see the module docstring)."""

    def __init__(self, *, wait: float = WAIT_SECONDS, attempts: int = verdict.MAX_ATTEMPTS) -> None:
        self.wait = wait
        self.attempts = attempts
        self.ledger = BlockLedger()
        self._cond = threading.Condition()
        self._queues: dict[Key, list[Edit]] = {}
        self._leading: set[Key] = set()
        self._latest: dict[Key, Obj] = {}
        self._counts: dict[Key, Counts] = {}

    def queued(self, key: Key) -> int:
        """How many edits of ``key`` wait for a leader."""
        with self._cond:
            return len(self._queues.get(key, ()))

    def counts(self, key: Key) -> Counts:
        with self._cond:
            return copy.copy(self._counts.setdefault(key, Counts()))

    def edit(self, key: Key, edit: Edit) -> Obj:
        """Make ``edit`` (with whatever else waits for ``key``); the object as written, or as read
        when nothing changed. Raises the edit's own error (Refused from its judge,
        CorefileConflict, CorefileError, an API error)."""
        deadline = time.monotonic() + self.wait
        alone: Edit | None = None
        batch: list[Edit] = []
        with self._cond:
            self._counts.setdefault(key, Counts()).edits += 1
            self._queues.setdefault(key, []).append(edit)
            while True:
                if edit.done:
                    return edit.outcome()
                if key not in self._leading and not edit.taken:
                    batch = self._queues.pop(key, [])
                    for item in batch:
                        item.taken = True
                    self._leading.add(key)
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    alone = self._give_up(key, edit)
                    break
                self._cond.wait(remaining)
        if alone is not None:
            edit.logger.info(
                "No leader made the Corefile edit of %s in %.0f s; making it alone", edit.platform, self.wait
            )
            self._run(key, alone, [alone])
            return alone.outcome()
        try:
            self._run(key, edit, batch)
        finally:
            with self._cond:
                self._leading.discard(key)
                self._cond.notify_all()
        return edit.outcome()

    def _give_up(self, key: Key, edit: Edit) -> Edit:
        """Called with the lock held: a copy of ``edit`` to make alone (the original, if a leader
        holds it, is finished by that leader and ignored)."""
        queue = self._queues.get(key, [])
        if edit in queue:
            queue.remove(edit)
        return Edit(edit.platform, edit.change, edit.kube, edit.judge, edit.seen, edit.logger)

    def _freshest(self, key: Key, batch: list[Edit]) -> Obj | None:
        with self._cond:
            known = [self._latest.get(key), *(e.seen for e in batch)]
        found = [obj for obj in known if obj is not None]
        return max(found, key=_rv) if found else None

    def _remember(self, key: Key, obj: Obj) -> None:
        with self._cond:
            if _rv(obj) >= _rv(self._latest.get(key)):
                self._latest[key] = obj

    def _run(self, key: Key, leader: Edit, batch: list[Edit]) -> None:
        """Make the edits of ``batch`` with ``leader``'s client; every edit ends finished, or (an
        API error, a follower's first) back in the queue."""
        with self._cond:
            counts = self._counts.setdefault(key, Counts())
            counts.batches += 1
            counts.largest = max(counts.largest, len(batch))
        try:
            self._attempt(key, leader, batch)
        except errors.KubeError as exc:
            with self._cond:
                for item in batch:
                    if item.done:
                        continue
                    if item is leader or item.failures:
                        item.finish(error=exc)
                    else:  # another leader (with its own client) tries once more
                        item.failures += 1
                        item.taken = False
                        self._queues.setdefault(key, []).append(item)
        except BaseException as exc:
            for item in batch:
                if not item.done:
                    item.finish(error=exc)
            raise

    def _attempt(self, key: Key, leader: Edit, batch: list[Edit]) -> None:
        _, namespace, name = key
        kube = leader.kube
        live = self._freshest(key, batch)
        active = list(batch)
        for attempt in range(self.attempts):
            if live is None:
                live = kube.get("v1", "ConfigMap", name, namespace)
                if live is None:
                    raise errors.NotFound(404, "NotFound", f"ConfigMap {namespace}/{name} disappeared")
                self._remember(key, live)
            text = corefile_text(live)
            new = text
            for item in list(active):
                refusal = None
                if item.judge is not None:
                    refusal = item.judge(_with_text(live, new), bool(attempt or item.failures))
                if refusal is None:
                    try:
                        new = item.change(new)
                        continue
                    except corefile.CorefileError as exc:
                        refusal = exc
                item.finish(error=refusal)
                active.remove(item)
            if not active:
                return
            if new == text:
                for item in active:
                    item.finish(result=live)
                return
            body = copy.deepcopy(live)
            body.setdefault("apiVersion", "v1")
            body.setdefault("kind", "ConfigMap")
            body["metadata"].pop("managedFields", None)  # keep the server's record of field owners
            body.setdefault("data", {})[COREFILE_KEY] = new
            with self._cond:
                self._counts[key].puts += 1
            try:
                written = kube.replace(body)
            except errors.Conflict:
                with self._cond:
                    self._counts[key].conflicts += 1
                leader.logger.info(CONFLICT_LOG, namespace, name)
                live = None
                continue
            self._remember(key, written)
            self.ledger.note_write(key, written)
            for item in active:
                item.finish(result=written)
            return
        message = verdict.kept_changing(CoreDNSTarget(namespace=namespace, config_map=name)).condition.message
        for item in active:
            item.finish(error=CorefileConflict(message))


# -- when each platform's own block last changed -------------------------------------------------


@dataclass
class _Noted:
    rv: int = -1
    """The resourceVersion of the newest object noted (older reads are ignored)."""
    last_write: datetime | None = None
    """Our newest write of the object seen (managedFields, server time)."""
    blocks: dict[str, tuple[tuple[str, ...], datetime | None]] = field(default_factory=dict)
    """Per platform: its block's lines (markers included) and when they last changed (None: unknown)."""


def block_lines(text: str) -> dict[str, tuple[str, ...]] | None:
    """Each marked block's lines by platform; None for a Corefile whose markers cannot be read."""
    try:
        found = corefile.marked_blocks(text)
    except corefile.CorefileError:
        return None
    lines = text.splitlines()
    return {b.platform: tuple(lines[b.start : b.end + 1]) for b in found}


class BlockLedger:
    """When each platform's own block in the Corefile last changed, as this process saw it.

    A write of ours (``note_write``) changes the blocks it changes at the write's time (the
    server's, from the response's managedFields); a block not noted before (``note_read``: the
    first pass after a start) takes the time of the operator's last write of the object (the
    managedFields of an object read from the API, else our newest write seen here; unknown
    without either, as before this record); a block that changed without a write of ours (an
    admin, another replica) takes the time the read saw it, unless the object's managedFields say
    the operator wrote it later than noted: never earlier than the change, so never falsely
    Ready. Thread-safe; held per ConfigMap for the process's life (a few lines per platform).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._noted: dict[Key, _Noted] = {}

    def note_write(self, key: Key, written: Obj) -> None:
        self._note(key, written, seen=changed_at(written), ours=True)

    def note_read(self, key: Key, live: Obj | None, *, now: datetime) -> None:
        if live is not None:
            self._note(key, live, seen=now, ours=False)

    def _note(self, key: Key, obj: Obj, *, seen: datetime | None, ours: bool) -> None:
        rv = _rv(obj)
        written_at = changed_at(obj)
        with self._lock:
            noted = self._noted.setdefault(key, _Noted())
            if rv >= 0 and rv == noted.rv:  # the object already noted: its blocks are as noted
                self._later_write(noted, written_at)
                return
        # Parsed only for an object not noted yet (every pass of every platform reads the same one).
        blocks = block_lines(corefile_text(obj))
        if blocks is None:
            return
        with self._lock:
            noted = self._noted.setdefault(key, _Noted())
            if rv < noted.rv:
                return  # an older object than one already noted (a read cache behind our write)
            noted.rv = rv
            self._later_write(noted, written_at)
            for platform, lines in blocks.items():
                held = noted.blocks.get(platform)
                if held is not None and held[0] == lines:
                    continue
                if ours:
                    when = written_at or seen
                elif held is None:
                    when = written_at or noted.last_write
                else:
                    before = held[1]
                    later = written_at is not None and (before is None or written_at > before)
                    when = written_at if later else seen
                noted.blocks[platform] = (lines, when)
            for gone in set(noted.blocks) - set(blocks):
                del noted.blocks[gone]

    @staticmethod
    def _later_write(noted: _Noted, written_at: datetime | None) -> None:
        if written_at is not None and (noted.last_write is None or written_at > noted.last_write):
            noted.last_write = written_at

    def changed_at(self, key: Key, platform: str) -> tuple[bool, datetime | None]:
        """(noted, when): whether ``platform``'s block is noted, and when it last changed (None:
        unknown)."""
        with self._lock:
            noted = self._noted.get(key)
            held = noted.blocks.get(platform) if noted is not None else None
        return (False, None) if held is None else (True, held[1])


COMBINER = CorefileCombiner()
"""The process's combiner (every DnsStep shares it unless given another)."""


def shared() -> CorefileCombiner:
    return COMBINER
