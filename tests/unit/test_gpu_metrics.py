"""GPU gauges: set per node and per model, and dropped when a node, a model or a platform goes."""

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


def test_record_gpu_sets_and_drops_series() -> None:
    metrics = Metrics(CollectorRegistry())
    metrics.record_gpu(
        "a",
        nodes={"n1": {"cards": 8, "memory_free_mib": 100}, "n2": {"cards": 4}},
        models={"H100": {"cards": 12}},
        stale_locks={"n1": True, "n2": False},
    )
    metrics.record_gpu("b", nodes={"n1": {"cards": 8}}, models={}, stale_locks={})
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("a", "n1"): 8, ("a", "n2"): 4, ("b", "n1"): 8}
    assert series(metrics, "tenant_platform_gpu_node_lock_stale") == {("a", "n1"): 1, ("a", "n2"): 0}
    assert series(metrics, "tenant_platform_gpu_model_cards") == {("a", "H100"): 12}

    # n2 and the model went away for platform a; platform b is untouched.
    metrics.record_gpu("a", nodes={"n1": {"cards": 8}}, models={}, stale_locks={"n1": False})
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("a", "n1"): 8, ("b", "n1"): 8}
    assert series(metrics, "tenant_platform_gpu_node_memory_free_mib") == {}
    assert series(metrics, "tenant_platform_gpu_model_cards") == {}

    metrics.forget_gpu("b")
    assert series(metrics, "tenant_platform_gpu_node_cards") == {("a", "n1"): 8}
    metrics.forget_platform("a")
    assert series(metrics, "tenant_platform_gpu_node_cards") == {}
    assert series(metrics, "tenant_platform_gpu_node_lock_stale") == {}
