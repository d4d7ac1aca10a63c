"""The steps: ``STEPS``, one per concern, in pass order (namespaces first, since most children
live in them), and ``HANDOFF``, the install-values hand-off, which the pipeline runs as a phase
of its own after every concern (it reads all they recorded)."""

from __future__ import annotations

from tenant_platform.reconcile import (
    apiaddresses,
    dns,
    edgecert,
    gateway,
    gpu,
    installer,
    installvalues,
    mesh,
    namespaces,
    objectstore,
    podguard,
    pullsecrets,
    storage,
)
from tenant_platform.reconcile.base import Step

STEPS: list[Step] = [
    namespaces.STEP,
    installer.STEP,
    podguard.STEP,
    mesh.STEP,
    gateway.STEP,
    edgecert.STEP,
    dns.STEP,
    storage.STEP,
    apiaddresses.STEP,
    pullsecrets.STEP,
    objectstore.STEP,
    gpu.STEP,
]

HANDOFF: Step = installvalues.STEP
