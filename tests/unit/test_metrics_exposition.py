"""What the operator exports on /metrics, and that every alert uses only that.

The exposition comes from a private registry filled through the same helpers reconcile calls
(``record_conditions``, ``observe_step``, ...), served by ``metrics.serve`` over real HTTP.
"""

from __future__ import annotations

import logging
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tenant_platform import __version__, metrics
from tenant_platform.api import constants
from tenant_platform.kube import observed
from tenant_platform.reconcile import registry

ROOT = Path(__file__).resolve().parents[2]
PLAIN_RULE = ROOT / "deploy" / "monitoring" / "prometheusrule.yaml"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

# PromQL words that are not metric names (functions, operators, modifiers).
PROMQL_WORDS = frozenset(
    {"time", "and", "or", "unless", "bool", "offset", "sum", "max", "min", "avg", "count", "absent"}
    | {"rate", "increase", "changes", "max_over_time", "min_over_time", "absent_over_time", "vector"}
)


@pytest.fixture
def private_metrics(monkeypatch: pytest.MonkeyPatch) -> Iterator[metrics.Metrics]:
    """The module-level helpers, pointed at a fresh registry."""
    fresh = metrics.Metrics(CollectorRegistry())
    monkeypatch.setattr(metrics, "METRICS", fresh)
    yield fresh


def fill(m: metrics.Metrics, platform: str = "kamiwaza") -> None:
    """One series of every metric, through the helpers the operator calls where there is one."""
    metrics.record_conditions(
        platform,
        [
            {"type": "Ready", "status": "False"},
            {"type": "Stalled", "status": "False"},
            {"type": "GatewayReady", "status": "Unknown"},
        ],
    )
    metrics.observe_step(platform, "namespaces", 0.2, failed=False)
    metrics.observe_step(platform, "dns", 0.1, failed=True)
    metrics.record_pass(platform, partial=False)
    metrics.record_api_request("GET", "200")
    metrics.record_success(platform, NOW)
    metrics.record_deletion_started(platform, NOW)
    metrics.record_edge_certificate_expiry(platform, "kamiwaza-edge-tls", NOW)
    m.pod_guard_violations.labels(platform).set(2)
    metrics.record_gpu_share(platform, {"nvidia.com/gpu": 0.5})
    metrics.record_gpu(
        platform,
        nodes={"gpu-1": dict.fromkeys(metrics.GPU_NODE_GAUGES, 1.0)},
        models={"NVIDIA H200": dict.fromkeys(metrics.GPU_MODEL_GAUGES, 1.0)},
        blocking_locks={"gpu-1": False},
    )


def exported_names(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def metric_names_in(expr: str) -> set[str]:
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", expr))
    unknown = words - PROMQL_WORDS - {"up"} - {w for w in words if w.startswith("tenant_platform_")}
    assert not unknown, f"unexpected words in {expr!r}: {unknown}"
    return words - PROMQL_WORDS


def test_serve_exposes_every_metric_over_http(private_metrics: metrics.Metrics) -> None:
    fill(private_metrics)
    server = metrics.serve(0, addr="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            assert response.status == 200
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    names = exported_names(text)
    for expected in (
        "tenant_platform_condition",
        "tenant_platform_reconcile_step_duration_seconds_bucket",
        "tenant_platform_reconcile_step_errors_total",
        "tenant_platform_reconcile_passes_total",
        "tenant_platform_api_requests_total",
        "tenant_platform_leader",
        "tenant_platform_last_successful_reconcile_timestamp_seconds",
        "tenant_platform_edge_certificate_expiry_timestamp_seconds",
        "tenant_platform_gpu_node_lock_blocking",
        "tenant_platform_gpu_node_memory_free_bytes",
        "tenant_platform_gpu_node_cores_used_ratio",
        "tenant_platform_build_info",
        "tenant_platform_gpu_model_cards",
        "tenant_platform_pod_guard_pods_would_be_denied",
        "tenant_platform_deletion_started_timestamp_seconds",
        "tenant_platform_quota_used_ratio",
    ):
        assert expected in names
    assert all(name.startswith("tenant_platform_") for name in names)
    assert not [name for name in names if name.endswith("_created")], "_created series are switched off"
    assert not [name for name in names if name.endswith(("_mib", "_percent"))], "base units only"
    # One series per condition type: the status it has (no 0-valued series for the other two).
    assert 'tenant_platform_condition{platform="kamiwaza",status="False",type="Ready"} 1.0' in text
    assert 'tenant_platform_condition{platform="kamiwaza",status="True",type="Ready"}' not in text
    assert 'tenant_platform_condition{platform="kamiwaza",status="Unknown",type="GatewayReady"} 1.0' in text
    assert 'tenant_platform_reconcile_step_duration_seconds_count{step="namespaces"} 1.0' in text
    assert 'tenant_platform_reconcile_step_errors_total{step="dns"} 1.0' in text
    assert 'tenant_platform_reconcile_passes_total{kind="full"} 1.0' in text
    assert 'tenant_platform_reconcile_passes_total{kind="partial"} 0.0' in text
    assert 'tenant_platform_api_requests_total{code="200",verb="GET"} 1.0' in text


def test_forget_platform_drops_every_series(private_metrics: metrics.Metrics) -> None:
    fill(private_metrics, "doomed")
    fill(private_metrics, "kept")
    metrics.forget_platform("doomed")
    text = "\n".join(
        f"{s.name}{s.labels}" for f in private_metrics.registry.collect() for s in f.samples if "platform" in s.labels
    )
    assert "'platform': 'doomed'" not in text
    assert "'platform': 'kept'" in text
    # The GPU series are the cluster's: "kept" still reports them.
    assert private_metrics.gpu.current() is not None
    assert "tenant_platform_deletion_started_timestamp_seconds{'platform': 'kept'}" in text


# -- cardinality ------------------------------------------------------------------------------------

# Every condition a platform can have (with spec.target: TargetReachable too).
ALL_CONDITION_TYPES = (*constants.SUMMARY_TYPES, *constants.CONCERN_TYPES, constants.TARGET_REACHABLE)


def reconciled(m: metrics.Metrics, platform: str, passes: int = 3) -> None:
    """What the operator records for one platform with everything on: every step of the pipeline
    (one failing), every condition, the per-platform gauges, a deletion under way, GPU capacity."""
    for n in range(passes):
        for step in [*registry.STEPS, registry.HANDOFF]:
            metrics.observe_step(platform, step.name, 0.01 * n, failed=step.name == "dns")
        metrics.record_pass(platform, partial=False)
        metrics.observe_step(platform, "gpu", 0.01, failed=False)
        metrics.record_pass(platform, partial=True)
        status = ("True", "False", "Unknown")[n % 3]  # every status, in turn
        metrics.record_conditions(platform, [{"type": t, "status": status} for t in ALL_CONDITION_TYPES])
    for verb, code in (("GET", "200"), ("PATCH", "200"), ("GET", "404"), ("WATCH", "200"), ("GET", "<error>")):
        metrics.record_api_request(verb, code)
    metrics.record_success(platform, NOW)
    metrics.record_deletion_started(platform, NOW)
    metrics.record_edge_certificate_expiry(platform, f"{platform}-edge-tls", NOW)
    m.pod_guard_violations.labels(platform).set(2)
    metrics.record_gpu(
        platform,
        nodes={"gpu-1": dict.fromkeys(metrics.GPU_NODE_GAUGES, 1.0)},
        models={"NVIDIA H200": dict.fromkeys(metrics.GPU_MODEL_GAUGES, 1.0)},
        blocking_locks={"gpu-1": False},
    )


def series(m: metrics.Metrics) -> set[str]:
    """Every series the registry exposes (name and labels)."""
    text = generate_latest(m.registry).decode()
    return {f"{s.name}{sorted(s.labels.items())}" for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.mark.parametrize("more", [1, 9])
def test_each_platform_adds_at_most_twenty_series(private_metrics: metrics.Metrics, more: int) -> None:
    reconciled(private_metrics, "p-0")
    one = series(private_metrics)
    for i in range(1, 1 + more):
        reconciled(private_metrics, f"p-{i}")
    added = (len(series(private_metrics)) - len(one)) / more
    assert added <= metrics.SERIES_PER_PLATFORM, f"{added} series per platform"
    assert added == len(ALL_CONDITION_TYPES) + 4  # one per condition, + success, certificate, pod guard, deletion
    # The operator's own work: the same series however many platforms.
    own = {s for s in series(private_metrics) if "platform" not in s}
    assert own == {s for s in one if "platform" not in s}


def test_no_histogram_or_counter_has_a_platform_label(private_metrics: metrics.Metrics) -> None:
    reconciled(private_metrics, "p-0")
    for family in private_metrics.registry.collect():
        if family.type in ("histogram", "counter", "summary"):
            assert all("platform" not in s.labels for s in family.samples), family.name


def test_the_benchmark_reads_passes_and_step_times_without_a_platform_label(private_metrics: metrics.Metrics) -> None:
    """benchmarks/reconcile_bench.py: passes over every platform (then per platform: / platforms)."""
    from benchmarks import reconcile_bench  # noqa: PLC0415 - the benchmark's parsers only

    for platform in ("p-0", "p-1"):
        reconciled(private_metrics, platform, passes=3)
    text = generate_latest(private_metrics.registry).decode()
    assert reconcile_bench.passes(text) == 6
    assert reconcile_bench.passes(text, "partial") == 6
    seconds, runs = reconcile_bench.step_totals(text)["namespaces"]
    assert runs == 6 and seconds == pytest.approx(2 * (0.0 + 0.01 + 0.02))
    assert reconcile_bench.step_totals(text)["gpu"][1] == 12  # full and partial passes


def conditions_of(m: metrics.Metrics, platform: str) -> dict[str, tuple[str, float]]:
    """type -> (status, value) of the platform's tenant_platform_condition series."""
    out: dict[str, tuple[str, float]] = {}
    for family in m.registry.collect():
        for s in family.samples:
            if s.name == "tenant_platform_condition" and s.labels["platform"] == platform:
                assert s.labels["type"] not in out, f"two series for {s.labels['type']}"
                out[s.labels["type"]] = (s.labels["status"], s.value)
    return out


def test_a_status_flip_replaces_the_series(private_metrics: metrics.Metrics) -> None:
    metrics.record_conditions("p", [{"type": "Ready", "status": "False"}, {"type": "GPUReady", "status": "True"}])
    assert conditions_of(private_metrics, "p") == {"Ready": ("False", 1.0), "GPUReady": ("True", 1.0)}
    metrics.record_conditions("p", [{"type": "Ready", "status": "Unknown"}, {"type": "GPUReady", "status": "True"}])
    assert conditions_of(private_metrics, "p") == {"Ready": ("Unknown", 1.0), "GPUReady": ("True", 1.0)}
    metrics.record_conditions("p", [{"type": "Ready", "status": "True"}])  # GPUReady no longer reported
    assert conditions_of(private_metrics, "p") == {"Ready": ("True", 1.0)}
    metrics.record_conditions("q", [{"type": "Ready", "status": "False"}])
    metrics.forget_platform("p")
    assert conditions_of(private_metrics, "p") == {}
    assert conditions_of(private_metrics, "q") == {"Ready": ("False", 1.0)}


def test_a_pass_logs_its_step_timings_at_debug(
    private_metrics: metrics.Metrics, caplog: pytest.LogCaptureFixture
) -> None:
    metrics.observe_step("p", "namespaces", 0.25, failed=False)
    metrics.observe_step("q", "namespaces", 9.0, failed=False)  # another platform's pass
    metrics.observe_step("p", "dns", 1.5, failed=True)
    with caplog.at_level(logging.DEBUG, logger="tenant_platform.metrics"):
        metrics.record_pass("p", partial=False)
        metrics.observe_step("p", "gpu", 0.125, failed=False)
        metrics.record_pass("p", partial=True)
    assert [r.getMessage() for r in caplog.records] == [
        "full pass of TenantPlatform p: 1.750s in 2 steps: dns 1.500s (failed), namespaces 0.250s",
        "partial pass of TenantPlatform p: 0.125s in 1 steps: gpu 0.125s",
    ]
    assert private_metrics.passes.labels("full")._value.get() == 1
    assert private_metrics.passes.labels("partial")._value.get() == 1
    # A pass that ended without record_pass (it raised): its steps do not leak into the next one.
    metrics.observe_step("q", "namespaces", 0.5, failed=False)
    with caplog.at_level(logging.DEBUG, logger="tenant_platform.metrics"):
        metrics.record_pass("q", partial=False)
    assert caplog.records[-1].getMessage().endswith("in 1 steps: namespaces 0.500s")
    metrics.forget_platform("q")
    assert private_metrics.timings.take("q") == {}


def test_api_requests_are_counted_through_the_observer(private_metrics: metrics.Metrics) -> None:
    stop = observed.observe(metrics.record_api_request)
    try:
        observed.report("GET", 200)
        observed.report("GET", 200)
        observed.report("PATCH", 409)
        observed.report("WATCH", None)
    finally:
        stop()
    observed.report("GET", 200)  # no longer observed
    counts = {
        (s.labels["verb"], s.labels["code"]): s.value
        for f in private_metrics.registry.collect()
        for s in f.samples
        if s.name == "tenant_platform_api_requests_total"
    }
    assert counts == {("GET", "200"): 2, ("PATCH", "409"): 1, ("WATCH", "<error>"): 1}


def _alert_exprs() -> list[tuple[str, str]]:
    rule = yaml.safe_load(PLAIN_RULE.read_text())
    return [(r["alert"], r["expr"]) for group in rule["spec"]["groups"] for r in group["rules"]]


def test_every_alert_uses_only_exported_metrics(private_metrics: metrics.Metrics) -> None:
    fill(private_metrics)
    exported = exported_names(generate_latest(private_metrics.registry).decode())
    alerts = _alert_exprs()
    assert {name for name, _ in alerts} >= {
        "TenantPlatformNotReady",
        "TenantPlatformStalled",
        "TenantPlatformEdgeCertificateExpiringSoon",
        "TenantPlatformHAMiNodeLockBlocking",
        "TenantPlatformReconcileStale",
        "TenantPlatformDeletionStuck",
        "TenantPlatformOperatorDown",
        "TenantPlatformOperatorNoLeader",
        "TenantPlatformGPUShareAbove90Percent",
    }
    for name, expr in alerts:
        used = metric_names_in(expr)
        assert used, f"{name} uses no metric"
        # `up` is Prometheus' own series about the scrape (TenantPlatformOperatorDown).
        assert used - {"up"} <= exported, f"{name} uses {used - exported}, which the operator does not export"


def test_name_extraction_catches_typos() -> None:
    assert metric_names_in('time() - tenant_platform_x{a="b"} > 3') == {"tenant_platform_x"}
    with pytest.raises(AssertionError, match="unexpected words"):
        metric_names_in("tenant_platfrom_condition == 0 or up == 0")
    assert metric_names_in('absent(up{job="x"} == 1)') == {"up"}


DOCS = ROOT / "docs" / "metrics-and-alerts.md"


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (lower case, punctuation dropped, - for spaces)."""
    anchors = set()
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)  # a # in a code block is no heading
    for heading in re.findall(r"^#{1,6} +(.+?) *$", prose, re.M):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return anchors


def test_every_alert_has_a_runbook_url_whose_anchor_exists() -> None:
    rule = yaml.safe_load(PLAIN_RULE.read_text())
    anchors = github_anchors(DOCS.read_text())
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            url = r["annotations"]["runbook_url"]
            path, _, anchor = url.partition("#")
            # Absolute (Alertmanager links it): this release's page on GitHub by default.
            assert (
                path
                == f"https://github.com/tenancy-dev/tenant-platform-operator/blob/v{__version__}/docs/metrics-and-alerts.md"
            ), url
            assert anchor == r["alert"].lower(), url
            assert anchor in anchors, f"{r['alert']}: docs/metrics-and-alerts.md has no heading for #{anchor}"


def test_anchor_function() -> None:
    markdown = "## Alerts\n### TenantPlatformNotReady\n#### The `up` series, 2 ways\n```sh\n# no\n```\n"
    assert github_anchors(markdown) == {
        "alerts",
        "tenantplatformnotready",
        "the-up-series-2-ways",
    }
