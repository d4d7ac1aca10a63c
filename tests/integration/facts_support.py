"""Helpers for the facts and preflight integration tests (storage, API addresses, pull secrets,
object store, install values, check): our CRD, TenantPlatforms, one reconcile pass, waits."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests import support

from tenant_platform import reconcile
from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.config import Settings
from tenant_platform.framework.base import StepContext, StepResult
from tenant_platform.kube.client import Kube
from tenant_platform.testing.controlplane import ControlPlane
from tenant_platform.testing.steps import reconcile_step

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "crds" / "tenancy.dev_tenantplatforms.yaml"


def kube_for(cp: ControlPlane) -> Kube:
    return Kube.from_kubeconfig(str(cp.kubeconfig_path))


def install_crd(cp: ControlPlane) -> None:
    """Apply our CRD (idempotent) and wait until it is served."""
    cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{constants.CRD_NAME}")


def create_namespace(kube: Kube, name: str, *, adoptable_by: str | None = None) -> None:
    """Create a namespace and wait for its default ServiceAccount (pods need it to be admitted).

    An admin prepares it for the TenantPlatform of the same name (``adoptable_by`` another): the
    annotation ``tenancy.dev/adoptable-by`` lets that platform adopt it.
    """
    support.create_namespace(kube, name, wait_sa=True, adoptable_by=adoptable_by or name)


def create_platform(kube: Kube, name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return kube.create(support.platform_body(name, namespace, **spec))


def get_platform(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None, f"TenantPlatform {name} is gone"
    return body


def patch_spec(kube: Kube, name: str, spec: dict[str, Any]) -> None:
    kube.merge_patch(constants.API_VERSION, constants.KIND, name, {"spec": spec})


def reconcile_once(
    kube: Kube, name: str, *, now: datetime | None = None, settings: Settings | None = None
) -> reconcile.Outcome:
    """One full pass (every registered step) on the live object; writes its status."""
    return reconcile.run(
        get_platform(kube, name), kube=kube, settings=settings or Settings(), now=now or datetime.now(UTC)
    )


def run_step(
    step: Any,
    kube: Kube,
    body: dict[str, Any],
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    settings: Settings | None = None,
) -> StepResult:
    """One step alone, as reconcile.run would call it."""
    ctx = StepContext(
        platform=TenantPlatform.from_body(body),
        kube=kube,
        settings=settings or Settings(),
        now=now or datetime.now(UTC),
        dry_run=dry_run,
    )
    result: StepResult = reconcile_step(step, ctx)
    return result


def dockerconfigjson(auths: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps({"auths": auths}).encode()).decode()


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()
