"""The install hand-off: the recorded facts as a values document, and the ConfigMap holding it.

Pure: the same (platform name, tenant namespace, recorded facts) always gives the same text, byte
for byte, whether the facts come from this reconcile pass (the installvalues step) or from a live
TenantPlatform's ``status.recorded`` (``tenant-platform facts``). Two things make that hold:
nested mappings are written with sorted keys (the API server returns a custom resource's status
with sorted keys, a pass builds them in insertion order), and the top level follows one fixed
order, known facts first, then any other fact alphabetically.

The facts arrive typed (api/status/recorded.py ``Recorded``, parsed from ``status.recorded``). The
document carries every recorded fact under the name it has in ``status.recorded``, plus
``global.imagePullSecrets`` in the ``[{name: ...}]`` form Helm charts take, because the checklist
lists the pull secrets there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from tenant_platform.api.status.recorded import Recorded

VALUES_KEY = "values.yaml"

# The facts most installs look for first, in the order a reader expects them.
KNOWN_ORDER: tuple[str, ...] = (
    "domain",
    "namespace",
    "storageClassName",
    "storageVolumeBindingMode",
    "kubernetesAPI",
    "gateway",
    "sidecarStyle",
    "edgeCertificate",
    "imagePullSecrets",
    "objectStore",
    "gpuNodes",
)


def _sorted(value: Any) -> Any:
    """A deep copy with every mapping's keys sorted (lists keep their order)."""
    if isinstance(value, Mapping):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted(v) for v in value]
    return value


def values_document(*, namespace: str, recorded: Recorded) -> dict[str, Any]:
    """The values as a mapping: ``namespace``, every recorded fact, then ``global``.

    ``recorded`` is ``status.recorded`` (it includes ``domain``). A ``namespace`` key inside
    ``recorded`` is ignored: the tenant namespace comes from the spec.
    """
    facts = {k: v for k, v in recorded.dump().items() if k not in ("namespace", "global")}
    facts["namespace"] = namespace
    doc: dict[str, Any] = {}
    for key in KNOWN_ORDER:
        if key in facts:
            doc[key] = _sorted(facts[key])
    for key in sorted(facts):
        if key not in doc:
            doc[key] = _sorted(facts[key])
    doc["global"] = {"imagePullSecrets": [{"name": name} for name in recorded.pull_secret_names]}
    return doc


def render_values(*, platform_name: str, namespace: str, recorded: Recorded) -> str:
    """The values document as YAML text, with a short header naming its source."""
    header = (
        f"# Install values recorded by tenant-platform-operator for TenantPlatform {platform_name}.\n"
        "# Regenerated whenever a recorded fact changes: edits made here are overwritten.\n"
    )
    body = yaml.safe_dump(
        values_document(namespace=namespace, recorded=recorded),
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1000,
    )
    return header + body


def render_config_map(
    *, platform_name: str, namespace: str, config_map_name: str, recorded: Recorded
) -> dict[str, Any]:
    """The hand-off ConfigMap (without our labels and owner reference; the step stamps those)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name, "namespace": namespace},
        "data": {VALUES_KEY: render_values(platform_name=platform_name, namespace=namespace, recorded=recorded)},
    }
