"""The alert rules, checked and unit-tested by promtool against the series the operator exposes.

promtool is built from the Go module proxy by hack/build-tools.sh. Input series are not typed in
by hand: each comes from the exposition of a private registry filled through the operator's own
helpers (``record_conditions``, ``record_success``, ...), so a renamed metric or label breaks
these tests; where the series change over time (``timeline``), the operator's helpers are called
minute by minute and each minute's exposition becomes that minute's samples. Covered:
deploy/monitoring/prometheusrule.yaml (the chart's defaults) and the chart rendered with a
non-default drift interval.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tenant_platform import __version__, metrics
from tenant_platform.testing import tools

# The first test to need helm or promtool builds it (minutes on a cold Go cache).
pytestmark = pytest.mark.timeout(1500)

ROOT = Path(__file__).resolve().parents[2]
PLAIN_RULE = ROOT / "deploy" / "monitoring" / "prometheusrule.yaml"
CHART = ROOT / "deploy" / "helm" / "tenant-platform"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture
def m(monkeypatch: pytest.MonkeyPatch) -> Iterator[metrics.Metrics]:
    fresh = metrics.Metrics(CollectorRegistry())
    monkeypatch.setattr(metrics, "METRICS", fresh)
    yield fresh


def exposed(m: metrics.Metrics) -> dict[str, float]:
    """promtool series selector -> current value, for every sample the registry exposes."""
    out = {}
    for family in text_string_to_metric_families(generate_latest(m.registry).decode()):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}"] = sample.value
    return out


def held(series: dict[str, float], minutes: int) -> list[dict[str, str]]:
    """Each exposed series at its current value for ``minutes`` scrapes."""
    return [{"series": s, "values": f"{v:g}x{minutes}"} for s, v in sorted(series.items())]


def timeline(m: metrics.Metrics, minutes: int, at: Callable[[int], None]) -> list[dict[str, str]]:
    """The exposition scraped each minute, 0 to ``minutes``, after ``at(minute)`` recorded what the
    operator would: a series missing from a scrape it was in before gets a staleness marker (what
    Prometheus writes for a series gone from its target), then no samples."""
    samples: dict[str, list[str]] = {}
    for minute in range(minutes + 1):
        at(minute)
        now = exposed(m)
        for selector in now:
            samples.setdefault(selector, ["_"] * minute)
        for selector, values in samples.items():
            if selector in now:
                values.append(f"{now[selector]:g}")
            else:
                values.append("stale" if values and values[-1] not in ("_", "stale") else "_")
    return [{"series": s, "values": " ".join(v)} for s, v in sorted(samples.items())]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.tool_path("promtool")), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def rules_file(rule: dict[str, Any], tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def run_tests(tmp_path: Path, rules: Path, tests: list[dict[str, Any]]) -> None:
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests})
    )
    proc = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# The default runbook: this release's docs/metrics-and-alerts.md on GitHub (an absolute URL
# Alertmanager can link; metrics.prometheusRule.runbookURL overrides it).
RUNBOOKS = f"https://github.com/tenancy-dev/tenant-platform-operator/blob/v{__version__}/docs/metrics-and-alerts.md"


def alert(
    name: str, labels: dict[str, str], summary: str, description: str, runbooks: str = RUNBOOKS
) -> dict[str, Any]:
    annotations = {"summary": summary, "description": description, "runbook_url": f"{runbooks}#{name.lower()}"}
    return {"exp_labels": labels, "exp_annotations": annotations}


def test_rules_pass_promtool_check(tmp_path: Path) -> None:
    rules = rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path)
    proc = promtool("check", "rules", "--lint=all", "--lint-fatal", rules.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 10 rules found" in proc.stdout


def _not_ready(platform: str) -> dict[str, Any]:
    return alert(
        "TenantPlatformNotReady",
        {"platform": platform, "type": "Ready", "severity": "warning"},
        f"TenantPlatform {platform} has not been Ready for 15m.",
        f"The Ready condition of TenantPlatform {platform} is not True. Its message names each concern that is "
        f"not ready: kubectl get tenantplatform {platform} "
        f"-o jsonpath='{{.status.conditions[?(@.type==\"Ready\")].message}}'",
    )


def test_condition_alerts(m: metrics.Metrics, tmp_path: Path) -> None:
    metrics.record_conditions("red", [{"type": "Ready", "status": "False"}, {"type": "Stalled", "status": "True"}])
    metrics.record_conditions("green", [{"type": "Ready", "status": "True"}, {"type": "Stalled", "status": "False"}])
    metrics.record_conditions("amber", [{"type": "Ready", "status": "Unknown"}])
    # One series per condition: the status it has, never a 0-valued one for the other statuses.
    conditions = {s: v for s, v in exposed(m).items() if s.startswith("tenant_platform_condition{")}
    assert len(conditions) == 5 and set(conditions.values()) == {1}
    not_ready = [_not_ready(p) for p in ("amber", "red")]
    stalled = alert(
        "TenantPlatformStalled",
        {"platform": "red", "type": "Stalled", "status": "True", "severity": "warning"},
        "TenantPlatform red is stalled and needs a person.",
        "The operator cannot make progress on TenantPlatform red without a person: an invalid spec, or a "
        "concern not ready past spec.progressDeadlineSeconds (the Stalled condition's reason and message name it).",
    )
    run_tests(
        tmp_path,
        rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path),
        [
            {
                "interval": "1m",
                "input_series": held(exposed(m), 30),
                "alert_rule_test": [
                    {"eval_time": "14m", "alertname": "TenantPlatformNotReady", "exp_alerts": []},
                    {"eval_time": "16m", "alertname": "TenantPlatformNotReady", "exp_alerts": not_ready},
                    {"eval_time": "30s", "alertname": "TenantPlatformStalled", "exp_alerts": []},
                    {"eval_time": "2m", "alertname": "TenantPlatformStalled", "exp_alerts": [stalled]},
                ],
            }
        ],
    )


def test_not_ready_survives_a_status_flip_and_goes_with_its_platform(m: metrics.Metrics, tmp_path: Path) -> None:
    """Ready False, then Unknown (the series changes its status label): one alert, its 15 minutes
    counted from the first; a platform that recovers or is deleted leaves no series behind."""

    def at(minute: int) -> None:
        metrics.record_conditions("flapping", [{"type": "Ready", "status": "False" if minute < 10 else "Unknown"}])
        metrics.record_conditions("fixed", [{"type": "Ready", "status": "False" if minute < 10 else "True"}])
        if minute < 20:
            metrics.record_conditions("deleted", [{"type": "Ready", "status": "False"}])
        elif minute == 20:
            metrics.forget_platform("deleted")
        metrics.record_conditions("back", [{"type": "Ready", "status": "Unknown" if 5 <= minute < 8 else "False"}])

    series = timeline(m, 40, at)
    selectors = [s["series"] for s in series]
    assert 'tenant_platform_condition{platform="flapping",status="False",type="Ready"}' in selectors
    assert 'tenant_platform_condition{platform="flapping",status="Unknown",type="Ready"}' in selectors
    run_tests(
        tmp_path,
        rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path),
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "14m", "alertname": "TenantPlatformNotReady", "exp_alerts": []},
                    {
                        "eval_time": "16m",
                        "alertname": "TenantPlatformNotReady",
                        "exp_alerts": [_not_ready(p) for p in ("back", "deleted", "flapping")],
                    },
                    {
                        "eval_time": "25m",
                        "alertname": "TenantPlatformNotReady",
                        "exp_alerts": [_not_ready(p) for p in ("back", "flapping")],
                    },
                ],
            }
        ],
    )


def _no_leader() -> dict[str, Any]:
    return alert(
        "TenantPlatformOperatorNoLeader",
        {"severity": "critical"},
        "No TenantPlatform operator replica has led for 5m.",
        "No replica holds the leader Lease (tenant_platform_leader is 0 on every replica, or no replica exports it): "
        "no TenantPlatform is reconciled meanwhile. Check the Lease tenant-platform-operator in the operator's "
        "namespace (its holder and renew time) and the operator replicas' logs.",
    )


def test_no_leader(tmp_path: Path) -> None:
    """Two replicas, each exporting tenant_platform_leader from its own registry (record_leader)."""
    replicas = {"a": metrics.Metrics(CollectorRegistry()), "b": metrics.Metrics(CollectorRegistry())}

    def leaders(schedule: dict[str, Callable[[int], bool | None]], minutes: int = 20) -> list[dict[str, str]]:
        """Replica -> minute -> leading (None: not scraped), as each replica's exposition shows it."""
        out = []
        for replica, leading in schedule.items():
            values = []
            for minute in range(minutes + 1):
                now = leading(minute)
                if now is None:
                    values.append("stale" if values and values[-1] not in ("_", "stale") else "_")
                    continue
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(metrics, "METRICS", replicas[replica])
                    metrics.record_leader(now)
                (value,) = [v for s, v in exposed(replicas[replica]).items() if s.startswith("tenant_platform_leader{")]
                values.append(f"{value:g}")
            out.append({"series": f'tenant_platform_leader{{instance="{replica}:8080"}}', "values": " ".join(values)})
        return out

    rules = rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path)
    run_tests(
        tmp_path,
        rules,
        [
            {  # one leads, the other stands by; at 8m a hand-over (a minute without a leader)
                "interval": "1m",
                "input_series": leaders({"a": lambda t: t < 8, "b": lambda t: t >= 9}),
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": []},
                    {"eval_time": "15m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": []},
                ],
            },
            {  # both up, neither leads from minute 2 on
                "interval": "1m",
                "input_series": leaders({"a": lambda t: t < 2, "b": lambda t: False}),
                "alert_rule_test": [
                    {"eval_time": "6m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": []},
                    {"eval_time": "8m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": [_no_leader()]},
                ],
            },
            {  # the leader's process goes away at minute 3, the standby never takes over
                "interval": "1m",
                "input_series": leaders({"a": lambda t: True if t < 3 else None, "b": lambda t: False}),
                "alert_rule_test": [
                    {"eval_time": "7m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": []},
                    {"eval_time": "9m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": [_no_leader()]},
                ],
            },
            {  # no replica exports the gauge at all
                "interval": "1m",
                "input_series": [{"series": 'up{job="tenant-platform-operator-metrics"}', "values": "0x20"}],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": []},
                    {"eval_time": "6m", "alertname": "TenantPlatformOperatorNoLeader", "exp_alerts": [_no_leader()]},
                ],
            },
        ],
    )


def test_certificate_and_lock_alerts(m: metrics.Metrics, tmp_path: Path) -> None:
    # promtool's clock starts at the Unix epoch: expiry times are set relative to it.
    metrics.record_edge_certificate_expiry("red", "red-tls", EPOCH + timedelta(days=10, minutes=1))
    metrics.record_edge_certificate_expiry("green", "green-tls", EPOCH + timedelta(days=30))
    metrics.record_edge_certificate_expiry("black", "black-tls", EPOCH + timedelta(seconds=30))
    # Two platforms report the same cluster: one blocking lock is one alert, without a platform label.
    for platform in ("red", "green"):
        metrics.record_gpu(platform, nodes={}, models={}, blocking_locks={"gpu-1": True, "gpu-2": False})
    soon = alert(
        "TenantPlatformEdgeCertificateExpiringSoon",
        {"platform": "red", "secret": "red-tls", "severity": "warning"},
        "The edge certificate red-tls of TenantPlatform red expires in 10d 0h 0m 0s.",
        "Renew the certificate in Secret red-tls (issuer External), or check why the operator did not rotate it "
        "(issuer SelfSigned rotates renewBefore ahead of expiry).",
    )
    expired = alert(
        "TenantPlatformEdgeCertificateExpired",
        {"platform": "black", "secret": "black-tls", "severity": "critical"},
        "The edge certificate black-tls of TenantPlatform black has expired.",
        "Clients of the platform's gateway get TLS errors. Replace the certificate in Secret black-tls.",
    )
    lock = alert(
        "TenantPlatformHAMiNodeLockBlocking",
        {"node": "gpu-1", "severity": "warning"},
        "HAMi's scheduling lock on GPU node gpu-1 is malformed and blocks GPU binds there.",
        "HAMi cannot read the lock, so every GPU pod's bind to node gpu-1 fails until someone removes the node's "
        "hami.io/mutex.lock annotation (HAMi never takes such a lock over). GPUReady of any TenantPlatform with "
        "HAMi reporting on is False (MalformedNodeLock) and names it; status.gpu.nodes shows the lock.",
    )
    run_tests(
        tmp_path,
        rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path),
        [
            {
                "interval": "1m",
                "input_series": held(exposed(m), 10),
                "alert_rule_test": [
                    {"eval_time": "1m", "alertname": "TenantPlatformEdgeCertificateExpiringSoon", "exp_alerts": [soon]},
                    {"eval_time": "1m", "alertname": "TenantPlatformEdgeCertificateExpired", "exp_alerts": [expired]},
                    {"eval_time": "4m", "alertname": "TenantPlatformHAMiNodeLockBlocking", "exp_alerts": []},
                    {"eval_time": "6m", "alertname": "TenantPlatformHAMiNodeLockBlocking", "exp_alerts": [lock]},
                ],
            }
        ],
    )


JOB = "tenant-platform-operator-metrics"


def _down(job: str = JOB, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return alert(
        "TenantPlatformOperatorDown",
        {"severity": "critical", **(labels or {})},
        "The TenantPlatform operator has not been scraped successfully for 5m.",
        f"No target of job {job} is up: the operator is not running, not ready, or Prometheus no longer "
        "discovers it. No TenantPlatform is reconciled meanwhile and the other TenantPlatform alerts cannot fire.",
    )


def test_operator_down(tmp_path: Path) -> None:
    """`up` is Prometheus' series about the scrape: down, gone from discovery, one of two replicas down."""

    def up(instance: str, values: str, job: str = JOB) -> dict[str, str]:
        return {"series": f'up{{job="{job}",instance="{instance}:8080"}}', "values": values}

    rules = rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path)
    run_tests(
        tmp_path,
        rules,
        [
            {  # scraped fine for 5 minutes, then down
                "interval": "1m",
                "input_series": [up("10.0.0.1", "1x4 0x20")],
                "alert_rule_test": [
                    {"eval_time": "9m", "alertname": "TenantPlatformOperatorDown", "exp_alerts": []},
                    {"eval_time": "11m", "alertname": "TenantPlatformOperatorDown", "exp_alerts": [_down()]},
                ],
            },
            {  # never discovered (only another job's target exists)
                "interval": "1m",
                "input_series": [up("10.0.0.9", "1x20", job="node-exporter")],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "TenantPlatformOperatorDown", "exp_alerts": []},
                    {"eval_time": "6m", "alertname": "TenantPlatformOperatorDown", "exp_alerts": [_down()]},
                ],
            },
            {  # one of two processes down: the other still serves
                "interval": "1m",
                "input_series": [up("10.0.0.1", "0x20"), up("10.0.0.2", "1x20")],
                "alert_rule_test": [
                    {"eval_time": "15m", "alertname": "TenantPlatformOperatorDown", "exp_alerts": []},
                ],
            },
        ],
    )


def _stale_alert(platform: str, age: str, threshold: int) -> dict[str, Any]:
    return alert(
        "TenantPlatformReconcileStale",
        {"platform": platform, "severity": "warning"},
        f"TenantPlatform {platform} has not been reconciled successfully for {age}.",
        f"No reconcile of TenantPlatform {platform} ran every step successfully for three drift intervals "
        f"({threshold}s). Check the operator's log and tenant_platform_reconcile_step_errors_total; a paused "
        "platform also stops reconciling.",
    )


def _success_series(m: metrics.Metrics, minutes: int) -> list[dict[str, str]]:
    # "red" last succeeded at time 0 (promtool's clock starts at the Unix epoch); "green"
    # succeeds on every scrape, as the drift timer makes it.
    metrics.record_success("red", EPOCH)
    metrics.record_success("green", EPOCH)
    series = []
    for selector, value in exposed(m).items():
        if selector.startswith("tenant_platform_build_info{"):
            continue
        assert value == 0, selector
        values = "0+60x" if 'platform="green"' in selector else "0x"
        series.append({"series": selector, "values": f"{values}{minutes}"})
    return series


def test_reconcile_stale_and_deletion_stuck(m: metrics.Metrics, tmp_path: Path) -> None:
    series = _success_series(m, 40)
    metrics.record_deletion_started("doomed", EPOCH)
    deletion = [s for s in held(exposed(m), 40) if "deletion_started" in s["series"]]
    assert len(deletion) == 1
    stuck = alert(
        "TenantPlatformDeletionStuck",
        {"platform": "doomed", "severity": "warning"},
        "Deletion of TenantPlatform doomed has been stuck for 16m 0s.",
        "The operator finishes or gives up cleanup within 10 minutes, so its delete handler has stopped running. "
        "Check the operator's log; docs/uninstall.md says how to release the finalizer by hand.",
    )
    run_tests(
        tmp_path,
        rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path),
        [
            {
                "interval": "1m",
                "input_series": series + deletion,
                "alert_rule_test": [
                    {"eval_time": "15m", "alertname": "TenantPlatformReconcileStale", "exp_alerts": []},
                    {
                        "eval_time": "16m",
                        "alertname": "TenantPlatformReconcileStale",
                        "exp_alerts": [_stale_alert("red", "16m 0s", 900)],
                    },
                    {"eval_time": "15m", "alertname": "TenantPlatformDeletionStuck", "exp_alerts": []},
                    {"eval_time": "16m", "alertname": "TenantPlatformDeletionStuck", "exp_alerts": [stuck]},
                ],
            }
        ],
    )


def render_rule(*values: str) -> dict[str, Any]:
    args = [str(tools.tool_path("helm")), "template", "tenant-platform", str(CHART), "--namespace", "monitoring-test"]
    args += ["--api-versions", "monitoring.coreos.com/v1", "--set", "metrics.prometheusRule.enabled=true"]
    for value in values:
        args += ["--set", value]
    args += ["--show-only", "templates/prometheusrule.yaml"]
    return yaml.safe_load(subprocess.run(args, capture_output=True, text=True, check=True).stdout)


def test_chart_rules_follow_drift_interval_and_values(m: metrics.Metrics, tmp_path: Path) -> None:
    rule = render_rule(
        "operator.driftInterval=60",
        "metrics.prometheusRule.deletionStuckAfter=2h",
        "metrics.prometheusRule.certificateExpiryDays=7",
        "metrics.prometheusRule.notReadyFor=5m",
        "metrics.prometheusRule.alertLabels.team=platform",
        "metrics.prometheusRule.operatorJob=tp-operator",
        "metrics.prometheusRule.runbookURL=https://docs.example.com/tp/metrics-and-alerts.html",
    )
    exprs = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert exprs["TenantPlatformOperatorDown"]["expr"] == 'absent(up{job="tp-operator"} == 1)'
    assert exprs["TenantPlatformNotReady"]["annotations"]["runbook_url"] == (
        "https://docs.example.com/tp/metrics-and-alerts.html#tenantplatformnotready"
    )
    assert exprs["TenantPlatformDeletionStuck"]["expr"].endswith("> 7200")
    assert "< 604800 and" in exprs["TenantPlatformEdgeCertificateExpiringSoon"]["expr"]
    assert exprs["TenantPlatformNotReady"]["for"] == "5m"
    assert all(r["labels"]["team"] == "platform" for r in exprs.values())
    rules = rules_file(rule, tmp_path)
    proc = promtool("check", "rules", "--lint=all", "--lint-fatal", rules.name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = _stale_alert("red", "4m 0s", 180)
    expected["exp_labels"]["team"] = "platform"
    expected["exp_annotations"]["runbook_url"] = (
        "https://docs.example.com/tp/metrics-and-alerts.html#tenantplatformreconcilestale"
    )
    run_tests(
        tmp_path,
        rules,
        [
            {
                "interval": "1m",
                "input_series": _success_series(m, 10),
                "alert_rule_test": [
                    {"eval_time": "3m", "alertname": "TenantPlatformReconcileStale", "exp_alerts": []},
                    {"eval_time": "4m", "alertname": "TenantPlatformReconcileStale", "exp_alerts": [expected]},
                ],
            }
        ],
    )


def test_plain_rule_is_the_chart_default(tmp_path: Path) -> None:
    """deploy/monitoring/prometheusrule.yaml is the chart's rendering (hack/sync-deploy.py)."""
    plain = yaml.safe_load(PLAIN_RULE.read_text())
    chart = render_rule()
    assert plain["spec"] == chart["spec"]
    assert plain["kind"] == "PrometheusRule"


def test_promql_examples_in_docs_parse(tmp_path: Path) -> None:
    """Every ```promql block in docs/ is valid PromQL (checked as recording rules)."""
    rules = []
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for block in re.findall(r"```promql\n(.*?)```", doc.read_text(), re.S):
            for line in block.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    rules.append({"record": f"docs:example_{len(rules)}", "expr": line.strip()})
    assert rules, "no promql examples found in docs/"
    (tmp_path / "examples.yaml").write_text(yaml.safe_dump({"groups": [{"name": "docs", "rules": rules}]}))
    proc = promtool("check", "rules", "examples.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_gpu_share_alert(m: metrics.Metrics, tmp_path: Path) -> None:
    """TenantPlatformGPUShareAbove90Percent: one alert per platform and resource above 90 % of its
    share for 15 minutes; a dip below resets the wait; 90 % exactly does not fire."""
    metrics.record_gpu_share("red", {"nvidia.com/gpu": 1.0, "nvidia.com/gpumem": 0.95, "nvidia.com/gpucores": 0.5})
    metrics.record_gpu_share("green", {"nvidia.com/gpu": 0.9})
    metrics.record_gpu_share("amber", {"nvidia.com/gpu": 0.95})
    series = {k: v for k, v in exposed(m).items() if k.startswith("tenant_platform_quota_")}
    assert set(series) == {
        'tenant_platform_quota_used_ratio{platform="red",resource="nvidia.com/gpu"}',
        'tenant_platform_quota_used_ratio{platform="red",resource="nvidia.com/gpumem"}',
        'tenant_platform_quota_used_ratio{platform="red",resource="nvidia.com/gpucores"}',
        'tenant_platform_quota_used_ratio{platform="green",resource="nvidia.com/gpu"}',
        'tenant_platform_quota_used_ratio{platform="amber",resource="nvidia.com/gpu"}',
    }
    inputs = held(series, 30)
    for item in inputs:  # amber dips to 0.5 for one minute at minute 10
        if 'platform="amber"' in item["series"]:
            item["values"] = "0.95x9 0.5 0.95x20"

    def above(platform: str, resource: str, value: str) -> dict[str, Any]:
        return alert(
            "TenantPlatformGPUShareAbove90Percent",
            {"platform": platform, "resource": resource, "severity": "warning"},
            f"TenantPlatform {platform} has used more than 90 % of its GPU share of {resource} for 15 minutes.",
            f"The pods of TenantPlatform {platform} request {value} of its share of {resource}; new pods asking "
            "for more are refused once a namespace's quota is used up. status.gpuShare shows the use per "
            f"namespace: kubectl get tenantplatform {platform} -o jsonpath='{{.status.gpuShare}}'",
        )

    red = [above("red", "nvidia.com/gpu", "100%"), above("red", "nvidia.com/gpumem", "95%")]
    run_tests(
        tmp_path,
        rules_file(yaml.safe_load(PLAIN_RULE.read_text()), tmp_path),
        [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {"eval_time": "14m", "alertname": "TenantPlatformGPUShareAbove90Percent", "exp_alerts": []},
                    {"eval_time": "16m", "alertname": "TenantPlatformGPUShareAbove90Percent", "exp_alerts": red},
                    {
                        "eval_time": "27m",
                        "alertname": "TenantPlatformGPUShareAbove90Percent",
                        "exp_alerts": [above("amber", "nvidia.com/gpu", "95%"), *red],
                    },
                ],
            }
        ],
    )
    # The series follow the share: a resource dropped from it, then the share itself, go.
    metrics.record_gpu_share("red", {"nvidia.com/gpu": 0.5})
    assert [k for k in exposed(m) if 'platform="red"' in k] == [
        'tenant_platform_quota_used_ratio{platform="red",resource="nvidia.com/gpu"}'
    ]
    metrics.forget_platform("red")
    assert not [k for k in exposed(m) if 'platform="red"' in k]
