"""Put on the operator's PYTHONPATH by ``reconcile_bench --tracemalloc`` (benchmarks/memtrace.py)."""

from benchmarks import memtrace

memtrace.install()
