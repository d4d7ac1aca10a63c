"""PURE HAMi formats (v2.4 to v2.10, see docs/gpu.md): no I/O, no clock.

- ``names``: every HAMi annotation, label, resource name and constant the operator uses, and the
  error every parser raises (``HamiParseError``); observe/ imports its names from here.
- ``bounds``: limits on what other people's annotations can make us keep, parse or report, and
  the byte-bounded parse cache (every annotation is hostile input: see docs/gpu.md).
- ``config``: resource names from HAMi's ``hami-scheduler-device`` ConfigMap.
- ``register``: the node register annotation in all three formats, and the device-cordon list.
- ``allocations``: a pod's device allocation annotation and what it holds on each card.
- ``locks``: the node lock and whether it is stale.

What the operator decides from them (capacity, fit, labels, GPUReady) is the gpu concern
(concerns/gpu/).
"""
