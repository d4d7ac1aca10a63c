"""The steps: ``STEPS``, one per concern, in pass order (namespaces first, since most children
live in them; the mesh is checked before the pod guard is judged), and ``HANDOFF``, the
install-values hand-off, which the pipeline runs as a phase of its own after every concern (it
reads all they recorded)."""

from __future__ import annotations

from typing import Any

from tenant_platform.concerns.apiaddresses import step as apiaddresses
from tenant_platform.concerns.dns import step as dns
from tenant_platform.concerns.edgecert import step as edgecert
from tenant_platform.concerns.gateway import step as gateway
from tenant_platform.concerns.gpu import step as gpu
from tenant_platform.concerns.gpushare import step as gpushare
from tenant_platform.concerns.installer import step as installer
from tenant_platform.concerns.installvalues import step as installvalues
from tenant_platform.concerns.mesh import step as mesh
from tenant_platform.concerns.namespaces import step as namespaces
from tenant_platform.concerns.objectstore import step as objectstore
from tenant_platform.concerns.podguard import step as podguard
from tenant_platform.concerns.pullsecrets import step as pullsecrets
from tenant_platform.concerns.storage import step as storage
from tenant_platform.framework.contract import Step
from tenant_platform.framework.legacy import contract_step

STEPS: list[Step[Any]] = [
    contract_step(namespaces.STEP),
    contract_step(installer.STEP),
    # mesh before podguard: the mesh's sidecar-style dry run sees the guard as the previous pass
    # left it (so a denial of the injected pod is reported as such), and the guard then judges.
    contract_step(mesh.STEP),
    contract_step(podguard.STEP),
    contract_step(gateway.STEP),
    contract_step(edgecert.STEP),
    contract_step(dns.STEP),
    contract_step(storage.STEP),
    contract_step(apiaddresses.STEP),
    contract_step(pullsecrets.STEP),
    contract_step(objectstore.STEP),
    contract_step(gpu.STEP),
    # after gpu: the quotas use the resource names it recorded in this pass.
    gpushare.STEP,
]

HANDOFF: Step[Any] = contract_step(installvalues.STEP)
