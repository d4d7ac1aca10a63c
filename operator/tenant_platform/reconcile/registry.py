"""The ordered list of steps. Each concern adds its singleton here (order matters: namespaces
first, since most children live in them; the install-values hand-off last, since it reads what
the others recorded)."""

from __future__ import annotations

from tenant_platform.reconcile import installer, namespaces
from tenant_platform.reconcile.base import Step

STEPS: list[Step] = [
    namespaces.STEP,
    installer.STEP,
]
