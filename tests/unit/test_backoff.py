"""Back-off with full jitter (kube/backoff.py), with a seeded random source: exponential
ceilings, capped, never below the floor, reset on success, and spread (not synchronised)."""

from __future__ import annotations

import random
import threading

import pytest

from tenant_platform import scheduler
from tenant_platform.kube import errors
from tenant_platform.kube.backoff import Backoff
from tenant_platform.observe import cluster, reflector


@pytest.mark.parametrize(
    ("failures", "ceiling"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 32.0), (7, 60.0), (50, 60.0), (10_000, 60.0)],
)
def test_ceiling_doubles_up_to_the_cap(failures: int, ceiling: float) -> None:
    assert Backoff(base=1.0, cap=60.0).ceiling(failures) == ceiling


def test_waits_are_drawn_below_the_ceiling_and_reset_on_success() -> None:
    backoff = Backoff(base=1.0, cap=60.0, rng=random.Random(7))
    waits = [backoff.next() for _ in range(10)]
    for n, wait in enumerate(waits, start=1):
        assert 0.0 <= wait <= backoff.ceiling(n)
    # Deterministic with a seeded source: the same seed gives the same waits.
    again = Backoff(base=1.0, cap=60.0, rng=random.Random(7))
    assert [again.next() for _ in range(10)] == waits
    backoff.reset()
    assert backoff.failures == 0 and backoff.next() <= 1.0


def test_floor_is_respected() -> None:
    class Zero:
        def uniform(self, a: float, b: float) -> float:
            return a

    backoff = Backoff(base=2.0, cap=30.0, floor=0.5, rng=Zero())
    assert [backoff.next() for _ in range(3)] == [0.5, 0.5, 0.5]


def test_full_jitter_spreads_clients_that_failed_together() -> None:
    """A hundred loops failing five times at the same moment: their fifth waits cover the range
    [0, 16 s] instead of all landing on 16 s."""
    rng = random.Random(13)
    fifth = []
    for _ in range(100):
        backoff = Backoff(base=1.0, cap=60.0, rng=rng)
        for _ in range(4):
            backoff.next()
        fifth.append(backoff.next())
    assert max(fifth) <= 16.0
    assert min(fifth) < 4.0 and max(fifth) > 12.0
    assert len({round(w, 3) for w in fifth}) > 90


@pytest.mark.parametrize(("base", "cap", "floor"), [(0.0, -1.0, 0.0), (2.0, 1.0, 0.0), (1.0, 2.0, 1.5)])
def test_rejects_inconsistent_settings(base: float, cap: float, floor: float) -> None:
    with pytest.raises(ValueError):
        Backoff(base=base, cap=cap, floor=floor)


class Recording(threading.Event):
    """A stop flag whose waits return at once and are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return self.is_set()


def test_the_watch_backs_off_with_jitter_after_410s_and_resets_after_a_clean_watch() -> None:
    from tests.unit.test_gpu_snapshot import ScriptedKube  # noqa: PLC0415

    stopped = Recording()
    gone = errors.KubeError(410, "Expired", "too old resource version")
    kube = ScriptedKube([gone, gone, gone, [], gone, errors.Transient(0, "ConnectionError", "reset")], stopped)
    watcher = reflector.Reflector(kube, cluster.ClusterSnapshot(), "pods", rng=random.Random(3))  # type: ignore[arg-type]
    watcher.run(stopped, resource_version="1")
    ceilings = [0.5, 1.0, 2.0, 0.5, 1.0]  # three in a row, a watch that ended in order, two more
    assert len(stopped.waits) == len(ceilings), stopped.waits
    for wait, ceiling in zip(stopped.waits, ceilings, strict=True):
        assert 0.0 <= wait <= ceiling
    assert len(set(stopped.waits)) == len(ceilings)  # jittered, not fixed steps
    assert watcher.lists == 4  # every 410 relists


def test_the_platform_loop_backs_off_per_platform() -> None:
    on_error, on_crash = scheduler.retry_backoffs()
    assert on_error.ceiling(1) == scheduler.ERROR_RETRY_BASE_SECONDS and on_error.cap == scheduler.ERROR_RETRY_SECONDS
    assert on_crash.ceiling(1) == scheduler.CRASH_RETRY_BASE_SECONDS and on_crash.cap == scheduler.CRASH_RETRY_SECONDS
    assert all(scheduler.RETRY_FLOOR_SECONDS <= on_error.next() <= 60.0 for _ in range(20))
