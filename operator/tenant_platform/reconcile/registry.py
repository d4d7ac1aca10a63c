"""The ordered list of steps. Each concern adds its singleton here (order matters: namespaces
first, since most children live in them; the install-values hand-off last, since it reads what
the others recorded)."""

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

# The hand-off reads what every other step recorded in the pass: it must stay last, so it is
# appended here, after the list, whatever is added to the list above.
STEPS.append(installvalues.STEP)
