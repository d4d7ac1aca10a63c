"""The steps: ``STEPS``, one per concern, in pass order (namespaces first, since most children
live in them; the mesh is checked before the pod guard is judged), and ``HANDOFF``, the
install-values hand-off, which the pipeline runs as a phase of its own after every concern (it
reads all they recorded)."""

from __future__ import annotations

from typing import Any

import tenant_platform.concerns.apiaddresses.step
import tenant_platform.concerns.dns.step
import tenant_platform.concerns.edgecert.step
import tenant_platform.concerns.gateway.step
import tenant_platform.concerns.gpu.step
import tenant_platform.concerns.gpushare.step
import tenant_platform.concerns.installer.step
import tenant_platform.concerns.installvalues.step
import tenant_platform.concerns.mesh.step
import tenant_platform.concerns.namespaces.step
import tenant_platform.concerns.objectstore.step
import tenant_platform.concerns.podguard.step
import tenant_platform.concerns.pullsecrets.step
import tenant_platform.concerns.storage.step
from tenant_platform.framework.contract import Step

STEPS: list[Step[Any]] = [
    tenant_platform.concerns.namespaces.step.STEP,
    tenant_platform.concerns.installer.step.STEP,
    # mesh before podguard: the mesh's sidecar-style dry run sees the guard as the previous pass
    # left it (so a denial of the injected pod is reported as such), and the guard then judges.
    tenant_platform.concerns.mesh.step.STEP,
    tenant_platform.concerns.podguard.step.STEP,
    tenant_platform.concerns.gateway.step.STEP,
    tenant_platform.concerns.edgecert.step.STEP,
    tenant_platform.concerns.dns.step.STEP,
    tenant_platform.concerns.storage.step.STEP,
    tenant_platform.concerns.apiaddresses.step.STEP,
    tenant_platform.concerns.pullsecrets.step.STEP,
    tenant_platform.concerns.objectstore.step.STEP,
    tenant_platform.concerns.gpu.step.STEP,
    # after gpu: the quotas use the resource names it recorded in this pass.
    tenant_platform.concerns.gpushare.step.STEP,
]

HANDOFF: Step[Any] = tenant_platform.concerns.installvalues.step.STEP
