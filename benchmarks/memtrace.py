"""tracemalloc inside the operator process, on request from the benchmark (``--tracemalloc``).

The benchmark starts the operator with benchmarks/memhook/ on ``PYTHONPATH``, whose
``sitecustomize`` calls ``install()`` when ``TENANT_PLATFORM_BENCH_MEMTRACE`` names a directory.
A daemon thread then starts tracing (``start``: once the operator serves, before the first
platform) and waits for a request file ``<label>.request``, collects garbage, takes a snapshot and writes
``<label>.json``: the traced total, the total per structure (``classify``: the innermost frame
in our package, kopf or prometheus_client decides which) and the largest allocation sites with a
short traceback. The benchmark compares two such reports (``slope``): growth per platform by
structure. Tracing costs CPU and memory of its own (not in the traced figures; VmRSS with
tracing on is not the figure to quote).
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

ENV = "TENANT_PLATFORM_BENCH_MEMTRACE"
FRAMES_ENV = "TENANT_PLATFORM_BENCH_MEMTRACE_FRAMES"
HOOK_DIR = Path(__file__).resolve().parent / "memhook"

# (path fragment of the innermost frame of ours/kopf's that allocated, structure name), first match.
RULES: tuple[tuple[str, str], ...] = (
    ("tenant_platform/kube/informer.py", "read cache: informer stores (watched objects)"),
    ("tenant_platform/kube/cache.py", "read cache: scopes, indexes"),
    ("tenant_platform/kube/watchstream.py", "read cache: objects from watch events (held by the stores)"),
    ("tenant_platform/kube/secretwatch.py", "Secret reads and watches"),
    ("tenant_platform/kube/reviews.py", "access-review answers"),
    ("tenant_platform/kube/client.py", "API client (responses, copies)"),
    ("tenant_platform/kube/", "API client: other kube/"),
    ("tenant_platform/framework/statuswriter.py", "status writer"),
    ("tenant_platform/metrics.py", "Prometheus series (ours)"),
    ("prometheus_client/", "Prometheus series (library)"),
    ("tenant_platform/scheduler.py", "scheduler (loops, queues)"),
    ("tenant_platform/handlers.py", "kopf handlers (ours)"),
    ("tenant_platform/reconcile/", "reconcile pipeline"),
    ("tenant_platform/observe/", "GPU snapshot (observe/)"),
    ("tenant_platform/gpuwatch.py", "GPU snapshot (observe/)"),
    ("tenant_platform/concerns/", "concern steps"),
    ("tenant_platform/api/", "models (api/)"),
    ("tenant_platform/", "other tenant_platform"),
    ("kopf/", "kopf (per-object state, watches, tasks)"),
    ("pydantic", "pydantic (outside our frames)"),
)


def classify(frames: list[str]) -> str:
    """The structure of a trace, from its frames' filenames, innermost first."""
    for filename in frames:
        name = filename.replace("\\", "/")
        for fragment, structure in RULES:
            if fragment in name:
                return structure
    return "other (interpreter, libraries)"


def _site(frames: list[tuple[str, int]]) -> str:
    for filename, lineno in frames:
        name = filename.replace("\\", "/")
        for marker in ("tenant_platform/", "kopf/", "prometheus_client/"):
            if marker in name:
                return name[name.rindex(marker) :] + f":{lineno}"
    filename, lineno = frames[0]
    return f"{filename.rsplit('/', 2)[-1]}:{lineno}"


def report(top: int = 150) -> dict[str, Any]:
    """The traced memory now, by structure and by allocation site (see the module docstring)."""
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__))
    )
    structures: dict[str, list[int]] = {}
    sites: dict[str, list[int]] = {}
    total = 0
    for stat in snapshot.statistics("traceback"):
        frames = [(f.filename, f.lineno) for f in reversed(stat.traceback)]  # innermost first
        structure = classify([f for f, _ in frames])
        size = stat.size
        total += size
        row = structures.setdefault(structure, [0, 0])
        row[0] += size
        row[1] += stat.count
        site = f"{structure} @ {_site(frames)}"
        srow = sites.setdefault(site, [0, 0])
        srow[0] += size
        srow[1] += stat.count
    ranked = sorted(sites.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "tracedMiB": round(total / 2**20, 2),
        "structures": {
            k: {"KiB": round(v[0] / 1024, 1), "blocks": v[1]}
            for k, v in sorted(structures.items(), key=lambda kv: -kv[1][0])
        },
        "sites": {k: {"KiB": round(v[0] / 1024, 1), "blocks": v[1]} for k, v in ranked},
    }


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def malloc_trim() -> dict[str, Any]:
    """glibc's ``malloc_trim(0)`` in this process: VmRSS before and after, in MiB (how much of the
    resident memory was freed heap not yet given back to the system)."""
    import ctypes  # noqa: PLC0415

    gc.collect()
    before = _rss_kib()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return {"rssBeforeMiB": round(before / 1024, 1), "rssAfterMiB": round(_rss_kib() / 1024, 1)}


def trim(directory: Path, timeout: float = 120) -> dict[str, Any]:
    """Ask the operator process for ``malloc_trim`` (benchmark side) and wait for its answer."""
    (directory / "trim.json").unlink(missing_ok=True)
    (directory / "trim.request").write_text("")
    path = directory / "trim.json"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no malloc_trim answer")
        time.sleep(0.2)
    time.sleep(0.1)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def _serve(directory: Path, frames: int) -> None:
    while True:
        start = directory / "start.request"
        if start.exists():
            tracemalloc.start(frames)
            start.unlink()
        trim = directory / "trim.request"
        if trim.exists():
            (directory / "trim.json").write_text(json.dumps(malloc_trim()))
            trim.unlink()
        for request in sorted(directory.glob("*.request")):
            label = request.stem
            try:
                out = report()
            except Exception as exc:  # the benchmark shows it rather than waiting forever
                out = {"error": repr(exc)}
            tmp = directory / f"{label}.json.tmp"
            tmp.write_text(json.dumps(out, indent=1))
            tmp.rename(directory / f"{label}.json")
            request.unlink()
        time.sleep(0.5)


def install() -> None:
    """Called by memhook/sitecustomize.py in the operator process when ``ENV`` is set."""
    directory = os.environ.get(ENV)
    if not directory:
        return
    frames = int(os.environ.get(FRAMES_ENV) or 8)
    threading.Thread(target=_serve, args=(Path(directory), frames), name="bench-memtrace", daemon=True).start()


def start(directory: Path, timeout: float = 60) -> None:
    """Start tracing in the operator process now (benchmark side; what was allocated before, the
    imports and start-up, is not traced: tracing from the first import made start-up too slow)."""
    request = directory / "start.request"
    request.write_text("")
    deadline = time.monotonic() + timeout
    while request.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("tracemalloc not started")
        time.sleep(0.2)


def take(directory: Path, label: str, timeout: float = 600) -> dict[str, Any]:
    """Ask the operator process for a report (benchmark side) and wait for it."""
    (directory / f"{label}.request").write_text("")
    path = directory / f"{label}.json"
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no tracemalloc report {label} after {timeout} s")
        time.sleep(0.5)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def slope(a: dict[str, Any], pa: int, b: dict[str, Any], pb: int) -> dict[str, Any]:
    """KiB per platform by structure between two reports at ``pa`` and ``pb`` platforms, most first."""
    n = max(pb - pa, 1)
    names = set(a.get("structures", {})) | set(b.get("structures", {}))
    rows = {
        s: (b["structures"].get(s, {}).get("KiB", 0.0) - a["structures"].get(s, {}).get("KiB", 0.0)) / n for s in names
    }
    sites = set(a.get("sites", {})) | set(b.get("sites", {}))
    site_rows = {s: (b["sites"].get(s, {}).get("KiB", 0.0) - a["sites"].get(s, {}).get("KiB", 0.0)) / n for s in sites}
    return {
        "platforms": [pa, pb],
        "tracedKiBPerPlatform": round((b["tracedMiB"] - a["tracedMiB"]) * 1024 / n, 1),
        "structuresKiBPerPlatform": {k: round(v, 1) for k, v in sorted(rows.items(), key=lambda kv: -kv[1])},
        "sitesKiBPerPlatform": {
            k: round(v, 1) for k, v in sorted(site_rows.items(), key=lambda kv: -kv[1])[:25] if abs(v) >= 0.5
        },
    }
