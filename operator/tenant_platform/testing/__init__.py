"""Test and demo scaffolding: a real local control plane and a realistic seeded cluster.

Nothing in the operator imports this package; tests, benchmarks and the demo do. It may use the
Kubernetes client directly, because it stands in for a cluster rather than being part of one.
"""
