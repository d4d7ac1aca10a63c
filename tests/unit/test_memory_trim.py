"""The operator's periodic ``malloc_trim`` (main.trim_memory): it trims until stopped, and a C
library without the call (musl, macOS) makes it a no-op rather than an error."""

from __future__ import annotations

import threading

import pytest

from tenant_platform import main


def test_trims_every_interval_until_stopped() -> None:
    stop = threading.Event()
    calls: list[int] = []

    def trim() -> int:
        calls.append(1)
        if len(calls) == 3:
            stop.set()
        return 1

    assert main.trim_memory(stop, interval=0.001, trim=trim) == 3


def test_a_stopped_process_does_not_trim() -> None:
    stop = threading.Event()
    stop.set()
    assert main.trim_memory(stop, interval=0.001, trim=lambda: 1) == 0


def test_glibc_trim_runs_here() -> None:
    # This machine's (and the image's, Debian) C library is glibc: the call exists and returns 0 or 1.
    trim = main.malloc_trim()
    assert trim is not None
    assert trim() in (0, 1)


def test_without_the_call_nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main.ctypes.util, "find_library", lambda _name: None)
    assert main.malloc_trim() is None
    assert main.trim_memory(threading.Event(), interval=0.001, trim=None) == 0
