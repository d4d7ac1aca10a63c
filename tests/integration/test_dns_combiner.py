"""Many platforms' DNS steps at once against one Corefile, on the real API server (issue 27).

The DNS steps of one process hand their Corefile edits to one combiner
(concerns/dns/combiner.py): edits waiting together go out in one PUT, with the resourceVersion
precondition. Each test has a scratch CoreDNS setup of its own (tests/integration/test_dns.py
``scratch``) and runs the steps in threads, as the operator's pool does. ``GatedKube`` makes the
batching deterministic without timing: its first Corefile PUT waits until every other step's
edit waits in the combiner's queue, so the next PUT carries all of them.

And DNSReady's reload grace: another platform's block written does not turn a settled platform
to ReloadPending; after a start (a new combiner) the fallback is the operator's last write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from networking_support import context, run
from test_dns import corefile_of, running_pod, scratch  # noqa: F401 (scratch is a fixture)
from tests.support import platform_body, sole_condition

from tenant_platform.api.reasons import DNS
from tenant_platform.concerns.dns import combiner
from tenant_platform.concerns.dns.coredns import changed_at
from tenant_platform.concerns.dns.step import DnsStep
from tenant_platform.formats import corefile
from tenant_platform.framework.base import StepResult
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.seed import STOCK_COREFILE
from tenant_platform.testing.wait import wait_for

HOST = "istio-ingressgateway.istio-system.svc.cluster.local"


@pytest.fixture
def kube(crd: Kube) -> Kube:
    return crd


class GatedKube(Kube):
    """A Kube whose first ConfigMap PUT waits until ``waiting`` edits are queued in ``combiner``
    for ``key``; ``race`` (optional) is run once, just before the second ConfigMap PUT (an
    admin's edit landing between the combiner's read and its write)."""

    combiner: combiner.CorefileCombiner
    key: combiner.Key
    waiting: int
    gated: threading.Event
    race: Callable[[], None] | None

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj.get("kind") == "ConfigMap":
            if not self.gated.is_set():
                self.gated.set()
                wait_for(lambda: self.combiner.queued(self.key) == self.waiting, "the other edits queued", 60)
            elif self.race is not None:
                race, self.race = self.race, None
                race()
        return super().replace(obj)


def gated_kube(control_plane: ControlPlane, step: DnsStep, waiting: int) -> GatedKube:
    gated = GatedKube.from_kubeconfig(str(control_plane.kubeconfig_path))
    assert isinstance(gated, GatedKube)
    gated.combiner = step.combiner
    gated.key = combiner.key_of(gated, step.target)
    gated.waiting = waiting
    gated.gated = threading.Event()
    gated.race = None
    return gated


def run_together(step: DnsStep, kube: GatedKube, bodies: list[dict[str, Any]]) -> dict[str, StepResult]:
    """The first platform's step alone until its PUT is gated, then every other one, in threads."""
    results: dict[str, StepResult] = {}
    failures: list[BaseException] = []

    def one(body: dict[str, Any]) -> None:
        try:
            results[body["metadata"]["name"]] = run(step, kube, body)
        except BaseException as exc:
            failures.append(exc)

    first = threading.Thread(target=one, args=(bodies[0],))
    first.start()
    wait_for(kube.gated.is_set, "the first Corefile PUT", 60)
    others = [threading.Thread(target=one, args=(body,)) for body in bodies[1:]]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join(120)
    assert not failures, failures
    return results


def test_platforms_converging_together_write_the_corefile_once_each_in_fewer_puts(
    kube: Kube,
    control_plane: ControlPlane,
    scratch: Callable[..., DnsStep],  # noqa: F811
    unique_name: str,
) -> None:
    step = scratch()
    bodies = [platform_body(f"{unique_name}-{i}", f"{unique_name}-{i}") for i in range(8)]
    gated = gated_kube(control_plane, step, waiting=len(bodies) - 1)
    results = run_together(step, gated, bodies)

    for body in bodies:
        status, reason, message = sole_condition(results[body["metadata"]["name"]])
        assert (status, reason) == ("True", DNS.CONFIGURED), message
    text = corefile_of(kube, step.target.namespace)
    names = [body["metadata"]["name"] for body in bodies]
    assert sorted(corefile.platforms(text)) == sorted(names)  # every block, exactly once
    for body in bodies:
        block = corefile.block_for(text, body["metadata"]["name"])
        assert block is not None and block.body == [f"rewrite name exact {body['spec']['domain']} {HOST}"]
    # 8 platforms, 2 PUTs (the first edit came alone; the 7 others waited and went together), no 409.
    assert gated.counter.by_verb.get("PUT") == 2
    counts = step.combiner.counts(gated.key)
    assert (counts.edits, counts.puts, counts.conflicts, counts.largest) == (8, 2, 0, 7)

    # Again, nothing to change: no PUT at all.
    before = gated.counter.by_verb.get("PUT")
    for body in bodies:
        assert sole_condition(run(step, gated, body))[:2] == ("True", DNS.CONFIGURED)
    assert gated.counter.by_verb.get("PUT") == before

    # Cleanup goes through the combiner too and removes only each one's block.
    for body in bodies[:4]:
        assert step.cleanup(context(gated, body)).done
    assert sorted(corefile.platforms(corefile_of(kube, step.target.namespace))) == sorted(names[4:])


def test_an_admin_edit_and_a_refused_domain_in_one_batch_lose_nobody_s_edit(
    kube: Kube,
    control_plane: ControlPlane,
    scratch: Callable[..., DnsStep],  # noqa: F811
    unique_name: str,
) -> None:
    """The batch's PUT loses a race with an admin who edits the Corefile by hand (a kubectl-style
    PUT between the combiner's read and its write) and puts in a rewrite of one platform's
    domain: the combiner re-reads, the guard refuses that platform's edit on the fresh text, and
    the others' edits go out in the next PUT, beside the admin's change."""
    step = scratch()
    ns = step.target.namespace
    bodies = [platform_body(f"{unique_name}-{i}", f"{unique_name}-{i}") for i in range(5)]
    taken = bodies[3]
    domain = taken["spec"]["domain"]
    gated = gated_kube(control_plane, step, waiting=len(bodies) - 1)

    def admin() -> None:
        live = kube.get("v1", "ConfigMap", "coredns", ns)
        text = live["data"]["Corefile"].replace("cache 30", "cache 31")
        live["data"]["Corefile"] = corefile.upsert_block(text, "intruder", domain, HOST)
        kube.replace(live)

    gated.race = admin
    results = run_together(step, gated, bodies)

    status, reason, message = sole_condition(results[taken["metadata"]["name"]])
    assert (status, reason) == ("False", DNS.DOMAIN_HELD_BY_ANOTHER_PLATFORM), message
    assert "TenantPlatform intruder already rewrites" in message
    for body in bodies:
        if body is not taken:
            status, reason, message = sole_condition(results[body["metadata"]["name"]])
            assert (status, reason) == ("True", DNS.CONFIGURED), message
    text = corefile_of(kube, ns)
    assert "cache 31" in text  # the admin's edit kept
    assert sorted(corefile.platforms(text)) == sorted(
        ["intruder", *(b["metadata"]["name"] for b in bodies if b is not taken)]
    )
    # The first PUT, the batch's that got 409, and its retry with the refused edit dropped.
    assert gated.counter.by_verb.get("PUT") == 3
    counts = step.combiner.counts(gated.key)
    assert (counts.puts, counts.conflicts) == (3, 1)


def test_another_platform_s_block_written_does_not_turn_a_settled_platform_to_reload_pending(
    kube: Kube,
    scratch: Callable[..., DnsStep],  # noqa: F811
    unique_name: str,
) -> None:
    step = scratch()
    ns = step.target.namespace
    a = platform_body(f"{unique_name}-a", f"{unique_name}-a")
    b = platform_body(f"{unique_name}-b", f"{unique_name}-b")
    assert sole_condition(run(step, kube, a))[:2] == ("True", DNS.CONFIGURED)  # no CoreDNS pod yet
    a_written = changed_at(kube.get("v1", "ConfigMap", "coredns", ns))
    assert a_written is not None
    # A CoreDNS pod started when a's block was written: it loaded that change.
    running_pod(kube, ns, a_written)
    status, reason, message = sole_condition(run(step, kube, a))
    assert (status, reason) == ("True", DNS.CONFIGURED), message
    assert "started after the change" in message

    time.sleep(1.1)  # the API server's managedFields times have a resolution of one second
    status, reason, message = sole_condition(run(step, kube, b))
    assert (status, reason) == ("False", DNS.RELOAD_PENDING), message  # b's own block: after the pod started
    b_written = changed_at(kube.get("v1", "ConfigMap", "coredns", ns))
    assert b_written is not None and b_written > a_written  # what the ConfigMap's write time says now

    # a's block did not change: a stays settled (it used to turn ReloadPending for 150 s here).
    status, reason, message = sole_condition(run(step, kube, a))
    assert (status, reason) == ("True", DNS.CONFIGURED), message
    assert "started after the change" in message

    # After a start (a new combiner: nothing noted), a's block first seen takes the operator's last
    # write of the ConfigMap: conservative, never falsely Ready.
    restarted = DnsStep(target=step.target, combiner=combiner.CorefileCombiner())
    status, reason, message = sole_condition(run(restarted, kube, a))
    assert (status, reason) == ("False", DNS.RELOAD_PENDING), message
    later = datetime.now(UTC) + timedelta(minutes=5)
    assert sole_condition(run(restarted, kube, a, now=later))[:2] == ("True", DNS.CONFIGURED)
    assert corefile.platforms(corefile_of(kube, ns)) == [a["metadata"]["name"], b["metadata"]["name"]]
    assert corefile_of(kube, ns) != STOCK_COREFILE
