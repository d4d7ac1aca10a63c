"""benchmarks/memtrace.py (``reconcile_bench --tracemalloc``): the structure a trace is counted
under, a report taken in this process, and the growth per platform between two reports."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from benchmarks import memtrace


def test_the_innermost_frame_of_ours_or_kopfs_decides_the_structure() -> None:
    informer = "/x/operator/tenant_platform/kube/informer.py"
    kopf = "/venv/site-packages/kopf/_cogs/clients/api.py"
    assert memtrace.classify(["/usr/lib/python3.11/copy.py", informer, kopf]).startswith("read cache: informer")
    assert memtrace.classify(["/usr/lib/python3.11/json/decoder.py", kopf]).startswith("kopf")
    assert memtrace.classify(["/usr/lib/python3.11/asyncio/events.py"]) == "other (interpreter, libraries)"


held: list[dict[str, str]] = []


def test_a_report_counts_what_is_held_under_its_structure() -> None:
    tracemalloc.start(4)
    try:
        before = memtrace.report()
        held.extend({"key": f"value-{i}" * 4} for i in range(2000))
        after = memtrace.report()
    finally:
        tracemalloc.stop()
        held.clear()
    growth = memtrace.slope(before, 1, after, 3)  # "2 platforms" apart
    grown = growth["structuresKiBPerPlatform"]["other (interpreter, libraries)"]
    assert grown > 100  # 2,000 dicts with a string each: well over 200 KiB, over 2 "platforms"
    assert growth["tracedKiBPerPlatform"] >= grown - 10  # tracedMiB is rounded to 0.01 MiB
    site = next(iter(growth["sitesKiBPerPlatform"]))
    assert Path(__file__).name in site


def test_slope_is_growth_per_platform_by_structure() -> None:
    a = {"tracedMiB": 1.0, "structures": {"s": {"KiB": 100.0}, "t": {"KiB": 50.0}}, "sites": {}}
    b = {"tracedMiB": 2.0, "structures": {"s": {"KiB": 400.0}, "u": {"KiB": 30.0}}, "sites": {}}
    growth = memtrace.slope(a, 10, b, 20)
    assert growth["tracedKiBPerPlatform"] == 102.4
    assert growth["structuresKiBPerPlatform"] == {"s": 30.0, "u": 3.0, "t": -5.0}
