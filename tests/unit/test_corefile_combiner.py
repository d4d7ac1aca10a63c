"""The Corefile write combiner's logic (concerns/dns/combiner.py), without an API server.

What is judged here is the combiner's own bookkeeping: who leads, what one batch writes, what
each waiter gets. ``Store`` below stands in for the one ConfigMap (a resourceVersion precondition
and nothing else); what the API server does with the PUTs is shown against the real one in
tests/integration/test_dns_combiner.py. ``BlockLedger``: when each platform's block last changed.
"""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tenant_platform.api import constants
from tenant_platform.concerns.dns.combiner import BlockLedger, CorefileCombiner, CorefileConflict, Edit
from tenant_platform.formats import corefile
from tenant_platform.kube import errors
from tenant_platform.testing.seed import STOCK_COREFILE

HOST = "istio-ingressgateway.istio-system.svc.cluster.local"
KEY = ("https://fake", "kube-system", "coredns")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def config_map(text: str, rv: int, written: datetime | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "coredns", "namespace": "kube-system", "resourceVersion": str(rv)}
    if written is not None:
        meta["managedFields"] = [{"manager": constants.FIELD_MANAGER, "operation": "Update", "time": stamp(written)}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"Corefile": text}}


class Store:
    """One ConfigMap behind a resourceVersion precondition; ``hold`` makes a PUT wait."""

    server = KEY[0]

    def __init__(self, text: str = STOCK_COREFILE) -> None:
        self.obj = config_map(text, 1)
        self.lock = threading.Lock()
        self.puts = 0
        self.gets = 0
        self.before_put: Any = None
        self.fail: errors.KubeError | None = None
        self.clock = T0

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        with self.lock:
            self.gets += 1
            return copy.deepcopy(self.obj)

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.before_put is not None:
            self.before_put(self)
        with self.lock:
            self.puts += 1
            if self.fail is not None:
                fail, self.fail = self.fail, None
                raise fail
            if body["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
                raise errors.Conflict(409, "Conflict", "the object has been modified")
            self.clock += timedelta(seconds=1)
            rv = int(self.obj["metadata"]["resourceVersion"]) + 1
            self.obj = config_map(body["data"]["Corefile"], rv, self.clock)
            return copy.deepcopy(self.obj)

    def edit_by_hand(self, change: Any) -> None:
        with self.lock:
            rv = int(self.obj["metadata"]["resourceVersion"]) + 1
            self.obj = config_map(change(self.obj["data"]["Corefile"]), rv)

    @property
    def text(self) -> str:
        return str(self.obj["data"]["Corefile"])


def upsert(name: str) -> Any:
    return lambda text: corefile.upsert_block(text, name, f"{name}.example.com", HOST)


def edit(store: Any, name: str, **kwargs: Any) -> Edit:
    return Edit(name, kwargs.pop("change", upsert(name)), store, **kwargs)


def record(combiner: CorefileCombiner, item: Edit, outcomes: dict[str, Any]) -> None:
    """Make ``item``'s edit; its outcome (the object, or the exception) under its platform."""
    try:
        outcomes[item.platform] = combiner.edit(KEY, item)
    except Exception as exc:
        outcomes[item.platform] = exc


def run_together(combiner: CorefileCombiner, store: Store, edits: list[Edit]) -> dict[str, Any]:
    """The first edit alone, its PUT held until every other one waits in the queue; then the rest."""
    outcomes: dict[str, Any] = {}

    def one(item: Edit) -> None:
        record(combiner, item, outcomes)

    released = threading.Event()

    def hold(_: Store) -> None:
        if not released.is_set():
            released.set()
            for _ in range(2000):
                if combiner.queued(KEY) == len(edits) - 1:
                    return
                threading.Event().wait(0.005)
            raise AssertionError("the other edits never queued")

    store.before_put = hold
    first = threading.Thread(target=one, args=(edits[0],))
    first.start()
    assert released.wait(10)
    others = [threading.Thread(target=one, args=(item,)) for item in edits[1:]]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join(30)
    return outcomes


def test_waiting_edits_go_out_in_one_put_each_in_order_and_every_waiter_gets_the_written_object() -> None:
    combiner, store = CorefileCombiner(), Store()
    names = [f"p{i}" for i in range(6)]
    outcomes = run_together(combiner, store, [edit(store, n) for n in names])
    assert store.puts == 2  # the first alone (it was alone when it came), the other five together
    written = corefile.platforms(store.text)
    assert written[0] == "p0" and sorted(written) == names  # each block once (the batch in queue order)
    assert all(outcomes[n]["metadata"]["resourceVersion"] in ("2", "3") for n in names)
    assert all(outcomes[n] == store.obj for n in names[1:])
    counts = combiner.counts(KEY)
    assert (counts.batches, counts.puts, counts.conflicts, counts.largest) == (2, 2, 0, 5)


def test_a_refused_edit_is_dropped_and_its_caller_gets_the_refusal_the_others_go_through() -> None:
    combiner, store = CorefileCombiner(), Store()
    seen: list[str] = []

    def refuse(cm: dict[str, Any], fresh: bool) -> Exception | None:
        seen.append(cm["data"]["Corefile"])
        return ValueError("held by another platform")

    edits = [edit(store, "p0"), edit(store, "p1"), edit(store, "bad", judge=refuse), edit(store, "p3")]
    outcomes = run_together(combiner, store, edits)
    assert isinstance(outcomes["bad"], ValueError)
    assert sorted(corefile.platforms(store.text)) == ["p0", "p1", "p3"]
    # The guard judged the text it would have changed: the first write in, its own block not.
    assert seen and "p0" in corefile.platforms(seen[0]) and "bad" not in corefile.platforms(seen[0])
    assert store.puts == 2


def test_a_409_re_reads_and_applies_every_edit_again_keeping_the_other_writer_s_change() -> None:
    combiner, store = CorefileCombiner(), Store()
    fresh: list[bool] = []

    def judge(cm: dict[str, Any], retry: bool) -> Exception | None:
        fresh.append(retry)
        return None

    def race(s: Store) -> None:
        s.before_put = None
        s.edit_by_hand(lambda text: text.replace("cache 30", "cache 31"))

    store.before_put = race
    result = combiner.edit(KEY, edit(store, "p0", judge=judge, seen=copy.deepcopy(store.obj)))
    assert store.puts == 2 and combiner.counts(KEY).conflicts == 1
    assert "cache 31" in store.text and corefile.platforms(store.text) == ["p0"]
    assert result == store.obj
    assert fresh == [False, True]  # the guard again on the retry, with the TenantPlatforms listed again


def test_nothing_changes_no_put_and_the_waiter_gets_the_object_as_read() -> None:
    combiner, store = CorefileCombiner(), Store(corefile.upsert_block(STOCK_COREFILE, "p0", "p0.example.com", HOST))
    assert combiner.edit(KEY, edit(store, "p0")) == store.obj
    assert store.puts == 0


def test_kept_changing_gives_every_waiter_corefile_conflict() -> None:
    combiner, store = CorefileCombiner(attempts=3), Store()
    store.before_put = lambda s: s.edit_by_hand(lambda text: text + "# again\n")
    with pytest.raises(CorefileConflict, match="changed under the operator"):
        combiner.edit(KEY, edit(store, "p0"))
    assert store.puts == 3 and corefile.platforms(store.text) == []


def test_a_failed_leader_gets_its_error_and_its_followers_try_again_under_a_new_leader() -> None:
    combiner, store = CorefileCombiner(), Store()
    store.fail = errors.Forbidden(403, "Forbidden", "the leader's client may not")
    failing_first = {"done": False}

    def hold_then_fail(s: Store) -> None:
        # The first PUT (p0 alone) waits for the others, then fails with 403.
        if not failing_first["done"]:
            failing_first["done"] = True
            for _ in range(2000):
                if combiner.queued(KEY) == 3:
                    return
                threading.Event().wait(0.005)

    store.before_put = hold_then_fail
    outcomes: dict[str, Any] = {}

    def one(item: Edit) -> None:
        record(combiner, item, outcomes)

    first = threading.Thread(target=one, args=(edit(store, "p0"),))
    first.start()
    while not failing_first["done"]:
        threading.Event().wait(0.005)
    others = [threading.Thread(target=one, args=(edit(store, f"p{i}"),)) for i in (1, 2, 3)]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join(30)
    assert isinstance(outcomes["p0"], errors.Forbidden)
    assert sorted(corefile.platforms(store.text)) == ["p1", "p2", "p3"]
    assert store.puts == 2  # the failed one, then the three followers together under a new leader
    assert all(isinstance(outcomes[f"p{i}"], dict) for i in (1, 2, 3))


def test_a_waiter_whose_leader_is_slow_makes_its_edit_alone_in_bounded_time() -> None:
    combiner, store = CorefileCombiner(wait=0.2), Store()
    stuck = threading.Event()
    go = threading.Event()

    def slow(s: Store) -> None:
        if not stuck.is_set():
            stuck.set()
            go.wait(30)

    store.before_put = slow
    leader = threading.Thread(target=combiner.edit, args=(KEY, edit(store, "p0")))
    leader.start()
    assert stuck.wait(10)
    written = combiner.edit(KEY, edit(store, "p1"))  # returns although the leader is still stuck
    assert corefile.block_for(written["data"]["Corefile"], "p1") is not None
    go.set()
    leader.join(30)
    assert corefile.platforms(store.text) == ["p1", "p0"]  # nobody's edit lost (p0's retried after a 409)


# -- BlockLedger ------------------------------------------------------------------------------------


def with_blocks(*names: str, host: str = HOST) -> str:
    text = STOCK_COREFILE
    for name in names:
        text = corefile.upsert_block(text, name, f"{name}.example.com", host)
    return text


def test_another_platform_s_block_written_leaves_a_block_s_time_alone() -> None:
    ledger = BlockLedger()
    ledger.note_write(KEY, config_map(with_blocks("a"), 2, T0))
    ledger.note_write(KEY, config_map(with_blocks("a", "b"), 3, T0 + timedelta(minutes=5)))
    assert ledger.changed_at(KEY, "a") == (True, T0)
    assert ledger.changed_at(KEY, "b") == (True, T0 + timedelta(minutes=5))
    # A read of the same object (from the cache: no managedFields) changes nothing.
    ledger.note_read(KEY, config_map(with_blocks("a", "b"), 3), now=T0 + timedelta(minutes=6))
    assert ledger.changed_at(KEY, "a") == (True, T0)


def test_a_block_first_seen_takes_the_operator_s_last_write_of_the_object_never_earlier() -> None:
    ledger = BlockLedger()
    later = T0 + timedelta(minutes=3)
    # After a start: the object as read from the API carries our last write's time.
    ledger.note_read(KEY, config_map(with_blocks("a", "b"), 7, later), now=later + timedelta(minutes=1))
    assert ledger.changed_at(KEY, "a") == (True, later)
    # From the read cache (no managedFields) and no write seen: unknown, as before the ledger.
    other = ("https://fake", "kube-system", "other")
    ledger.note_read(other, config_map(with_blocks("a"), 7), now=later)
    assert ledger.changed_at(other, "a") == (True, None)
    assert ledger.changed_at(other, "nobody") == (False, None)


def test_a_block_changed_by_someone_else_counts_from_when_it_was_seen_and_stale_reads_are_ignored() -> None:
    ledger = BlockLedger()
    ledger.note_write(KEY, config_map(with_blocks("a"), 2, T0))
    seen = T0 + timedelta(minutes=10)
    ledger.note_read(KEY, config_map(with_blocks("a", host="elsewhere.svc"), 5), now=seen)
    assert ledger.changed_at(KEY, "a") == (True, seen)
    # An older object (a cache behind our write) does not count.
    ledger.note_read(KEY, config_map(with_blocks("a"), 4), now=seen + timedelta(minutes=1))
    assert ledger.changed_at(KEY, "a") == (True, seen)
    # The block removed: no longer noted.
    ledger.note_write(KEY, config_map(STOCK_COREFILE, 6, seen + timedelta(minutes=2)))
    assert ledger.changed_at(KEY, "a") == (False, None)
