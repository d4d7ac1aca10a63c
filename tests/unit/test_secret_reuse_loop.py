"""The platform loop's Secret clock (handlers.platform_loop): a pass woken early by an event reuses
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

from tenant_platform import handlers
from tenant_platform.config import Settings


class Stopped:
    """What kopf passes a daemon: falsy until stopped."""

    def __init__(self) -> None:
        self.flag = False

    def __bool__(self) -> bool:
        return self.flag


def test_event_passes_reuse_secrets_and_the_timer_pass_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    drift = 2.0
    state = handlers.OperatorState(Settings(drift_interval=drift, identity="test"))
    handlers.install(state)
    passes: list[tuple[float, bool]] = []
    started = time.monotonic()

    def record(name: str, *, gpu_only: bool = False, reuse_secrets: bool = False) -> tuple[float, bool]:
        passes.append((round(time.monotonic() - started, 1), reuse_secrets))
        return (0.5 if len(passes) == 1 else drift), False  # the first pass asks for a requeue

    monkeypatch.setattr(handlers, "reconcile_once", record)
    stopped = Stopped()

    def later(seconds: float, action: Any) -> None:
        threading.Timer(seconds, action).start()

    later(1.0, lambda: state.wake("p"))  # a child's or fact's event: early, reuses
    later(2.6, lambda: state.wake_fresh("p"))  # the platform's spec changed: early, but fresh

    async def drive() -> None:
        loop = asyncio.create_task(handlers.platform_loop("p", stopped, logging.getLogger("test")))
        await asyncio.sleep(3.5)
        stopped.flag = True
        await asyncio.wait_for(loop, 10)

    try:
        asyncio.run(drive())
    finally:
        handlers.install(None)
    reuse = [r for _, r in passes]
    # first pass (fresh), its requeue at 0.5 s and the event's at 1 s (both reuse), the drift
    # timer's at ~2 s (fresh: the early passes did not postpone it), the platform change's (fresh)
    assert reuse == [False, True, True, False, False], passes
    assert 1.8 <= passes[3][0] <= 2.4, passes
