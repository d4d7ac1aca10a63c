"""PURE HAMi knowledge (v2.4 to v2.10, see docs/gpu.md): no I/O, no clock (``now`` is passed in).

- ``names``: every HAMi annotation, label, resource name and constant the operator uses, and the
  error every parser raises (``HamiParseError``); observe/ imports its names from here.
- ``bounds``: limits on what other people's annotations can make us keep, parse or report, and
  the byte-bounded parse cache (every annotation is hostile input: see docs/gpu.md).
- ``config``: resource names from HAMi's ``hami-scheduler-device`` ConfigMap.
- ``register``: the node register annotation in all three formats, and the device-cordon list.
- ``allocations``: a pod's device allocation annotation and what it holds on each card.
- ``locks``: the node lock and whether it is stale.
- ``capacity``: GPU node detection, per-node capacity and the roll-ups status and metrics show.
- ``fit``: whether a request would fit a card or a node, in HAMi's order of checks.
- ``labels``: which GPU node labels a platform applies, given who holds which key.
- ``freshness``: what GPUReady says while the watched snapshot is not current.
- ``verdict``: the GPUReady decision, the ``status.gpu`` section and the recorded GPU facts.

Nothing here imports observe/, kube/, reconcile/, kopf or the Kubernetes client (import-linter).
"""
