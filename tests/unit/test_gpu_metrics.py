"""GPU gauges: cluster-wide, exported once however many platforms report them, and only what
the latest pass saw (a node or a model that is gone has no series)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from tenant_platform.metrics import Metrics


def series(metrics: Metrics, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(sample.labels.values()): sample.value
        for family in metrics.registry.collect()
        if family.name == name
        for sample in family.samples
    }


def test_gpu_series_have_no_platform_label_and_are_exported_once() -> None:
    metrics = Metrics(CollectorRegistry())
    for platform in ("a", "b", "c"):
        metrics.record_gpu(
            platform,
            nodes={"n1": {"cards": 8, "memory_free_bytes": 100.0}, "n2": {"cards": 4}},
            models={"H100": {"cards": 12}},
            blocking_locks={"n1": True, "n2": False},
        )
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("n1",): 8, ("n2",): 4}
    assert series(metrics, "tenant_platform_gpu_node_lock_blocking") == {("n1",): 1, ("n2",): 0}
    # sum by (model) adds up: 12 cards, not 36.
    assert series(metrics, "tenant_platform_gpu_model_cards") == {("H100",): 12}
    labels = {
        k
        for f in metrics.registry.collect()
        if f.name.startswith("tenant_platform_gpu_")
        for s in f.samples
        for k in s.labels
    }
    assert labels == {"node", "model"}


def test_latest_pass_wins_and_gone_nodes_have_no_series() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.record_gpu(
        "a", nodes={"n1": {"cards": 8}, "n2": {"cards": 4}}, models={"H100": {"cards": 12}}, blocking_locks={}
    )
    metrics.record_gpu("b", nodes={"n1": {"cards": 8}}, models={}, blocking_locks={"n1": False})
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("n1",): 8}
    assert series(metrics, "tenant_platform_gpu_model_cards") == {}
    assert series(metrics, "tenant_platform_gpu_node_memory_free_bytes") == {}

    # b stops reporting: a's last pass is what is left.
    metrics.forget_gpu("b")
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("n1",): 8, ("n2",): 4}
    # a pass of a again replaces its own entry.
    metrics.record_gpu("a", nodes={"n2": {"cards": 4}}, models={}, blocking_locks={"n2": True})
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("n2",): 4}
    metrics.forget_platform("a")
    assert series(metrics, "tenant_platform_gpu_node_cards") == {}
    assert series(metrics, "tenant_platform_gpu_node_lock_blocking") == {}


def test_gpu_families_are_described_without_samples() -> None:
    """The registry knows every GPU metric name before any pass (duplicate-name checks, HELP)."""
    metrics = Metrics(CollectorRegistry())
    names = {f.name for f in metrics.gpu.describe()}
    assert {"tenant_platform_gpu_node_memory_free_bytes", "tenant_platform_gpu_model_cores_used_ratio"} <= names
    assert "tenant_platform_gpu_node_lock_blocking" in names
    assert all(not f.samples for f in metrics.gpu.collect())
