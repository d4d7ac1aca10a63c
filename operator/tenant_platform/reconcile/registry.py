"""The steps: ``STEPS``, one per concern, in pass order (namespaces first, since most children
live in them; the mesh is checked before the pod guard is judged), and ``HANDOFF``, the
install-values hand-off, which the pipeline runs as a phase of its own after every concern (it
reads all they recorded)."""

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
    # mesh before podguard: the mesh's sidecar-style dry run sees the guard as the previous pass
    # left it (so a denial of the injected pod is reported as such), and the guard then judges.
    mesh.STEP,
    podguard.STEP,
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
