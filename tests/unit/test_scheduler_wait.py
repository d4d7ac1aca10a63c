"""The platform loop's wait (scheduler.wait_for_pass): event-driven, no cluster. A wakeup set from
another thread ends it at once (or once the settle time after a pass is over), the deadline ends
it without a wakeup, a stop ends it without a pass, and a stale notification without a wakeup
does not."""

from __future__ import annotations

import asyncio
import threading
import time

from tenant_platform import scheduler
from tenant_platform.state import Wakeup


class Stopped:
    """What kopf passes an async daemon: falsy until stopped; ``await stopped.wait()`` returns then."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float | None = None) -> Stopped:
        await asyncio.wait_for(self.event.wait(), timeout)
        return self


def timed(
    wakeup: Wakeup, seconds: float, *, settle: float = 0.0, stop_after: float | None = None
) -> tuple[bool, float]:
    """(what wait_for_pass returned, after how many seconds)."""

    async def run() -> tuple[bool, float]:
        stopped = Stopped()
        if stop_after is not None:

            async def stop() -> None:
                await asyncio.sleep(stop_after)
                stopped.event.set()
                wakeup.notify()  # what platform_loop's stop watcher does

            task = asyncio.create_task(stop())
        started = time.monotonic()
        result = await scheduler.wait_for_pass(wakeup, stopped, seconds, settle=settle)
        if stop_after is not None:
            await task
        return result, time.monotonic() - started

    return asyncio.run(run())


def test_a_wakeup_from_another_thread_ends_the_wait_at_once() -> None:
    wakeup = Wakeup()
    threading.Timer(0.3, wakeup.set).start()
    result, took = timed(wakeup, 30.0)
    assert result and 0.25 <= took < 0.6, took


def test_a_wakeup_already_set_waits_for_the_settle_time_only() -> None:
    wakeup = Wakeup()
    wakeup.set()
    assert timed(wakeup, 30.0)[1] < 0.2  # the first pass: at once
    result, took = timed(wakeup, 30.0, settle=scheduler.WAKEUP_SETTLE_SECONDS)
    assert result and scheduler.WAKEUP_SETTLE_SECONDS <= took < 0.6, took
    # A deadline sooner than the settle time is kept.
    result, took = timed(wakeup, 0.1, settle=scheduler.WAKEUP_SETTLE_SECONDS)
    assert result and 0.1 <= took < 0.2, took


def test_the_deadline_ends_the_wait_and_a_notification_alone_does_not() -> None:
    wakeup = Wakeup()
    threading.Timer(0.1, wakeup.notify).start()  # e.g. a stale one: the flag is not set
    result, took = timed(wakeup, 0.5)
    assert result and 0.5 <= took < 0.8, took


def test_a_stop_ends_the_wait_without_a_pass() -> None:
    wakeup = Wakeup()
    result, took = timed(wakeup, 30.0, stop_after=0.2)
    assert not result and took < 0.5, took
