"""The dashboard's and the alerts' queries, checked against what the operator really exports.

The scrape is real: two TenantPlatforms are reconciled (every step) against the test control
plane with its seeded GPU nodes (one of them with DNS it cannot verify from outside the cluster:
DNSReady Unknown), a third one's target cannot be reached for longer than its progress deadline
(Stalled True), a fourth one's deletion is blocked (cleanup run by an identity without
permissions, so the pipeline itself records the deletion start), the client's requests
are counted as main.run has them counted (kube/observed.py), and the operator's registry is
served by ``metrics.serve`` and fetched over HTTP. Then:

- ``promtool check metrics`` lints the scrape (naming conventions);
- the GPU series are there once, without a ``platform`` label, though two platforms report them;
- every metric selector of deploy/monitoring/grafana-dashboard.json and of the PrometheusRule
  selects samples of the scrape, and every label the queries match on, group by or print in a
  legend exists on the metrics they use;
- every dashboard query, run by promtool over the scrape (as ``promtool test rules`` input
  series, counters increasing), returns data.

promtool is built from the Go module proxy by hack/build-tools.sh (tenant_platform.testing.tools).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from tests.support import platform_body

from tenant_platform import metrics, reconcile
from tenant_platform.api import constants
from tenant_platform.config import Settings
from tenant_platform.kube import errors, observed
from tenant_platform.kube.client import Kube
from tenant_platform.testing import tools
from tenant_platform.testing.controlplane import ControlPlane

pytestmark = pytest.mark.timeout(1500)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "monitoring" / "grafana-dashboard.json"
PLAIN_RULE = ROOT / "deploy" / "monitoring" / "prometheusrule.yaml"
HOLD = "example.com/hold"  # a finalizer of no controller: keeps the third platform deleting
# Grafana's variables, as the dashboard's defaults expand them.
GRAFANA_VARIABLES = {"$platform": ".*", "$__rate_interval": "5m"}
# Series Prometheus itself adds (the scrape's `up`), not the operator.
PROMETHEUS_SERIES = frozenset({"up"})
PROMQL_WORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
    | {"sum", "max", "min", "avg", "count", "absent", "rate", "increase", "histogram_quantile", "time", "vector"}
    | {"label_values"}
)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Scrape:
    text: str
    samples: list[Sample]
    types: dict[str, str]  # sample name -> family type

    def of(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]


def _no_permissions(crd: Kube, control_plane: ControlPlane, tmp: Path) -> Kube:
    """A client for a ServiceAccount no RBAC binds: every cleanup write is Forbidden."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": "default"}}
    with contextlib.suppress(errors.Conflict):
        crd.create(account)
    token, _ = crd.request_token("default", "nobody", expiration_seconds=3600)
    return Kube.from_kubeconfig(str(control_plane.kubeconfig_for_token(token, tmp / "nobody.kubeconfig")))


@pytest.fixture(scope="module")
def scrape(crd: Kube, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrape]:
    tmp = tmp_path_factory.mktemp("scrape")
    fresh = metrics.Metrics(CollectorRegistry())
    names = ["scrape-a", "scrape-b", "scrape-stalled", "scrape-gone"]
    stop_counting = observed.observe(metrics.record_api_request)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "METRICS", fresh)
        try:
            crd.create(platform_body("scrape-a", edgeCertificate={"issuer": "SelfSigned"}))
            crd.create(platform_body("scrape-b", dns={"management": "External"}, gpu={"share": {"cards": 1}}))
            # A target whose kubeconfig Secret does not exist: no step runs; a day later, Stalled.
            missing = {"kubeconfigSecret": {"namespace": "default", "name": "scrape-no-such-secret"}}
            crd.create(platform_body("scrape-stalled", target=missing))
            crd.create(platform_body("scrape-gone", metadata={"finalizers": [HOLD]}))
            for name in ("scrape-a", "scrape-b"):
                body = crd.get(constants.API_VERSION, constants.KIND, name)
                assert body is not None
                reconcile.run(body, kube=crd, settings=Settings(), now=datetime.now(UTC))
            for now in (datetime.now(UTC), datetime.now(UTC) + timedelta(days=1)):
                body = crd.get(constants.API_VERSION, constants.KIND, "scrape-stalled")
                assert body is not None
                reconcile.run(body, kube=crd, settings=Settings(), now=now)
            crd.delete(constants.API_VERSION, constants.KIND, "scrape-gone")
            deleting = crd.get(constants.API_VERSION, constants.KIND, "scrape-gone")
            assert deleting is not None and deleting["metadata"].get("deletionTimestamp")
            outcome = reconcile.cleanup(
                deleting,
                kube=_no_permissions(crd, control_plane, tmp),
                settings=Settings(),
                now=datetime.now(UTC),
                write_status=False,
            )
            assert not outcome.finished, "cleanup without permissions must be blocked"
            server = metrics.serve(0, addr="127.0.0.1", registry=fresh.registry)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as resp:
                    text = resp.read().decode()
            finally:
                server.shutdown()
                server.server_close()
        finally:
            for name in names:
                try:
                    crd.merge_patch(constants.API_VERSION, constants.KIND, name, {"metadata": {"finalizers": None}})
                    crd.delete(constants.API_VERSION, constants.KIND, name)
                except errors.NotFound:
                    pass
            stop_counting()
    (tmp / "metrics.txt").write_text(text)
    samples: list[Sample] = []
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.append(Sample(s.name, dict(s.labels), s.value))
            types[s.name] = family.type
    yield Scrape(text, samples, types)


def promtool(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.tool_path("promtool")), *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=False
    )


# -- the queries ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    where: str
    expr: str
    legend: str = ""


def dashboard_queries() -> list[Query]:
    board = json.loads(DASHBOARD.read_text())
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            out.append(
                Query(f"panel {panel['title']!r} {target['refId']}", target["expr"], target.get("legendFormat", ""))
            )
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            out.append(Query(f"variable {variable['name']}", variable["query"]["query"]))
    return out


def alert_queries() -> list[Query]:
    rule = yaml.safe_load(PLAIN_RULE.read_text())
    return [Query(f"alert {r['alert']}", r["expr"]) for g in rule["spec"]["groups"] for r in g["rules"]]


def expand(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, op, value)


SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def parse(expr: str) -> tuple[list[Selector], set[str]]:
    """(metric selectors, labels named in by/on/... clauses) of a PromQL expression or label_values()."""
    expr = expand(expr)
    grouping = {label.strip() for clause in GROUPING.findall(expr) for label in clause.split(",") if label.strip()}
    without_groups = GROUPING.sub("", expr)
    label_values = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", without_groups.strip())
    if label_values:
        return [Selector(label_values.group(1), ())], {label_values.group(2)}
    stripped = re.sub(r"\[[^\]]*\]", "", without_groups)  # range selectors
    selectors = []
    for name, braces in SELECTOR.findall(stripped):
        if name in PROMQL_WORDS or re.fullmatch(r"[0-9.e+-]+", name):
            continue
        selectors.append(Selector(name, tuple(MATCHER.findall(braces or ""))))
    return selectors, grouping


def matches(sample: Sample, matchers: tuple[tuple[str, str, str], ...]) -> bool:
    for label, op, value in matchers:
        actual = sample.labels.get(label, "")
        if (
            (op == "=" and actual != value)
            or (op == "!=" and actual == value)
            or (op == "=~" and not re.fullmatch(value, actual))
            or (op == "!~" and re.fullmatch(value, actual))
        ):
            return False
    return True


def test_parse_finds_selectors_groupings_and_typos() -> None:
    selectors, grouping = parse(
        'histogram_quantile(0.95, sum by (step, le) (rate(x_bucket{platform=~"$platform"}[$__rate_interval])))'
    )
    assert selectors == [Selector("x_bucket", (("platform", "=~", ".*"),))]
    assert grouping == {"step", "le"}
    assert parse("label_values(tenant_platform_condition, platform)") == (
        [Selector("tenant_platform_condition", ())],
        {"platform"},
    )
    assert [s.metric for s in parse("time() - a_seconds > 900 or vector(0)")[0]] == ["a_seconds"]


# -- the tests ------------------------------------------------------------------------------------


def test_promtool_lints_the_scrape(scrape: Scrape, tmp_path: Path) -> None:
    proc = promtool("check", "metrics", cwd=tmp_path, stdin=scrape.text)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_scrape_follows_the_conventions(scrape: Scrape) -> None:
    names = {s.name for s in scrape.samples}
    assert not {n for n in names if n.endswith("_created")}
    assert not {n for n in names if n.endswith(("_mib", "_percent"))}
    info = scrape.of("tenant_platform_build_info")
    assert [s.value for s in info] == [1.0]
    assert set(info[0].labels) == {"version", "python_version", "kopf_version"}
    # scrape-a issues its certificate; scrape-b (External, same default Secret name) reads it.
    expiry = scrape.of("tenant_platform_edge_certificate_expiry_timestamp_seconds")
    assert sorted(s.labels["platform"] for s in expiry) == ["scrape-a", "scrape-b"]
    assert all(s.value > datetime.now(UTC).timestamp() for s in expiry)  # a point in time, not seconds left
    assert {s.labels["step"] for s in scrape.of("tenant_platform_reconcile_step_errors_total")} >= {"gpu", "dns"}
    # The operator's own work has no platform label; each condition has one series, its status.
    own = ("tenant_platform_reconcile_step", "tenant_platform_reconcile_passes", "tenant_platform_api_requests")
    assert all("platform" not in s.labels for s in scrape.samples if s.name.startswith(own))
    series = scrape.of("tenant_platform_condition")
    conditions = [(s.labels["platform"], s.labels["type"]) for s in series]
    assert len(conditions) == len(set(conditions)) and {s.value for s in series} == {1}
    assert {p for p, _ in conditions} == {"scrape-a", "scrape-b", "scrape-stalled"}
    statuses = {(s.labels["platform"], s.labels["type"]): s.labels["status"] for s in series}
    assert statuses[("scrape-b", "DNSReady")] == "Unknown"
    assert statuses[("scrape-stalled", "Stalled")] == "True"
    requests = {(s.labels["verb"], s.labels["code"]): s.value for s in scrape.of("tenant_platform_api_requests_total")}
    assert requests[("GET", "200")] > 0 and requests[("PATCH", "200")] > 0, requests
    assert [s.labels for s in scrape.of("tenant_platform_deletion_started_timestamp_seconds")] == [
        {"platform": "scrape-gone"}
    ]


def test_gpu_series_are_exported_once_withoutplatform_body(scrape: Scrape) -> None:
    gpu = [s for s in scrape.samples if s.name.startswith("tenant_platform_gpu_")]
    assert gpu, "the seeded GPU nodes must show"
    assert all("platform" not in s.labels for s in gpu)
    keys = [(s.name, tuple(sorted(s.labels.items()))) for s in gpu]
    assert len(keys) == len(set(keys)), "one series per node or model, though two platforms report them"
    ratios = [s.value for s in gpu if s.name.endswith("_ratio")]
    assert ratios and all(0 <= r <= 1 for r in ratios)
    by_model = {s.labels["model"]: s.value for s in scrape.of("tenant_platform_gpu_model_cards")}
    by_node = sum(s.value for s in scrape.of("tenant_platform_gpu_node_cards"))
    assert sum(by_model.values()) == by_node


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_every_query_uses_metrics_and_labels_the_scrape_has(scrape: Scrape, source: str) -> None:
    queries = dashboard_queries() if source == "dashboard" else alert_queries()
    assert queries
    problems = []
    for query in queries:
        selectors, grouping = parse(query.expr)
        assert selectors, f"{query.where}: no metric in {query.expr!r}"
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", query.legend))
        for selector in selectors:
            if selector.metric in PROMETHEUS_SERIES:
                continue
            have = scrape.of(selector.metric)
            if not have:
                problems.append(f"{query.where}: {selector.metric} is not in the scrape")
                continue
            labels = {label for s in have for label in s.labels}
            for label in {m[0] for m in selector.matchers} | grouping | legend:
                if label not in labels:
                    problems.append(f"{query.where}: {selector.metric} has no label {label!r} (has {sorted(labels)})")
            if not any(matches(s, selector.matchers) for s in have):
                problems.append(f"{query.where}: {selector.metric}{selector.matchers} selects nothing")
    assert not problems, "\n".join(problems)


def _input_series(scrape: Scrape, minutes: int) -> list[dict[str, str]]:
    """The scrape as promtool input: gauges held, counters and histograms growing by their value per minute."""
    out = []
    for s in scrape.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        growing = scrape.types[s.name] in ("counter", "histogram") and not s.name.endswith("_sum")
        values = f"{s.value:g}+{s.value:g}x{minutes}" if growing else f"{s.value:g}x{minutes}"
        out.append({"series": f"{s.name}{{{labels}}}", "values": values})
    return out


def test_every_dashboard_query_returns_data(scrape: Scrape, tmp_path: Path) -> None:
    """Each query as an alert `count(<query>) > 0`, expected to fire over the scraped series."""
    queries = [q for q in dashboard_queries() if not q.expr.startswith("label_values(")]
    rules = [
        {"alert": f"Query{i}", "expr": f"count({expand(q.expr)}) > 0", "annotations": {"query": q.where}}
        for i, q in enumerate(queries)
    ]
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    tests = {
        "rule_files": ["queries.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _input_series(scrape, 15),
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": f"Query{i}",
                        "exp_alerts": [{"exp_labels": {}, "exp_annotations": {"query": q.where}}],
                    }
                    for i, q in enumerate(queries)
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    proc = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
