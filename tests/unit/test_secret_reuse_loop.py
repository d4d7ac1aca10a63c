"""The platform loop's Secret clock (scheduler.platform_loop): a pass woken early by an event reuses
recent Secret reads and keeps the drift timer's time; the drift timer's own pass, the first pass
and a pass for a change of the platform itself read Secrets from the API. ``reconcile_once`` is
replaced by a recorder (no API: the loop's scheduling only)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from tenant_platform import handlers, scheduler
from tenant_platform.config import Settings
from tenant_platform.state import OperatorState, install


class Stopped:
    """What kopf passes an async daemon: falsy until stopped; ``await stopped.wait()`` returns then."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float | None = None) -> Stopped:
        await asyncio.wait_for(self.event.wait(), timeout)
        return self

    def set(self) -> None:
        self.event.set()


def test_event_passes_reuse_secrets_and_the_timer_pass_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    drift = 2.0
    state = OperatorState(Settings(drift_interval=drift, identity="test"))
    install(state)
    passes: list[tuple[float, bool]] = []
    started = time.monotonic()

    def record(name: str, *, gpu_only: bool = False, reuse_secrets: bool = False) -> tuple[float, bool]:
        passes.append((round(time.monotonic() - started, 1), reuse_secrets))
        return (0.5 if len(passes) == 1 else drift), False  # the first pass asks for a requeue

    monkeypatch.setattr(scheduler, "reconcile_once", record)
    stopped = Stopped()

    def later(seconds: float, action: Any) -> None:
        threading.Timer(seconds, action).start()

    later(1.0, lambda: state.wake("p"))  # a child's or fact's event: early, reuses
    later(2.6, lambda: state.wake_fresh("p"))  # the platform's spec changed: early, but fresh

    async def drive() -> None:
        loop = asyncio.create_task(handlers.platform_loop("p", stopped, logging.getLogger("test")))
        await asyncio.sleep(3.5)
        stopped.set()
        await asyncio.wait_for(loop, 10)

    try:
        asyncio.run(drive())
    finally:
        install(None)
    reuse = [r for _, r in passes]
    # first pass (fresh), its requeue at 0.5 s and the event's at 1 s (both reuse), the drift
    # timer's at ~2 s (fresh: the early passes did not postpone it), the platform change's (fresh)
    assert reuse == [False, True, True, False, False], passes
    assert 1.8 <= passes[3][0] <= 2.4, passes
