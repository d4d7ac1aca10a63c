"""Small helpers shared by the tests (unit, integration, e2e).

- ``platform_body`` / ``platform``: a TenantPlatform object (a dict, as the API server takes it)
  or model, from spec fields.
- ``condition`` / ``find_condition``: a condition of a status (the camelCase dicts in
  ``status.conditions``); ``sole_condition``: the one condition a step reported (StepResult).
- ``release_image``: the image hack/release.sh --image put into dist/ (its OCI archive read:
  reference, manifest digest, config digest, config).
- ``wait_for`` is tenant_platform.testing.wait's, the one polling helper (the benchmarks and the
  demo use it too).
"""

from __future__ import annotations

import dataclasses
import json
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.framework.base import StepResult
from tenant_platform.kube.client import Kube
from tenant_platform.testing.wait import wait_for

__all__ = [
    "condition",
    "create_namespace",
    "find_condition",
    "platform",
    "platform_body",
    "release_image",
    "sole_condition",
    "wait_for",
]


def platform_body(
    name: str,
    namespace: str | None = None,
    *,
    uid: str | None = None,
    generation: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A TenantPlatform object: ``spec.namespace`` is ``namespace`` (default: ``name``),
    ``spec.domain`` ``<name>.example.com`` unless ``domain=`` is given, then the other ``spec``
    fields (camelCase, as in YAML). ``metadata`` holds the name, the ``uid`` and ``generation``
    when given and the other ``metadata`` fields (annotations, finalizers, deletionTimestamp);
    ``status`` is there only when given."""
    meta: dict[str, Any] = {"name": name}
    if uid is not None:
        meta["uid"] = uid
    if generation is not None:
        meta["generation"] = generation
    meta.update(metadata or {})
    body: dict[str, Any] = {
        "apiVersion": constants.API_VERSION,
        "kind": constants.KIND,
        "metadata": meta,
        "spec": {"namespace": namespace or name, "domain": f"{name}.example.com", **spec},
    }
    if status is not None:
        body["status"] = dict(status)
    return body


def platform(
    name: str,
    namespace: str | None = None,
    *,
    uid: str | None = None,
    generation: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> TenantPlatform:
    """The TenantPlatform model of ``platform_body(...)`` (same arguments)."""
    body = platform_body(name, namespace, uid=uid, generation=generation, metadata=metadata, status=status, **spec)
    return TenantPlatform.from_body(body)


def find_condition(status: Mapping[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The condition of type ``type_`` in a status (the dict itself, not a copy), or None when the
    status (or its conditions) is missing or has none of that type."""
    for cond in (status or {}).get("conditions") or []:
        if cond["type"] == type_:
            found: dict[str, Any] = cond
            return found
    return None


def condition(status: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    """The condition of type ``type_`` in a status; an AssertionError naming the conditions there
    when it has none of that type."""
    found = find_condition(status, type_)
    assert found is not None, f"no {type_} condition in {(status or {}).get('conditions')}"
    return found


def sole_condition(result: StepResult, type_: str | None = None) -> tuple[str, str, str]:
    """The one condition a step reported, as (status, reason, message); an AssertionError when it
    reported another number of them, or (``type_`` given) one of another type."""
    assert len(result.conditions) == 1, result.conditions
    (cond,) = result.conditions
    assert type_ is None or cond.type == type_, cond
    return cond.status, cond.reason, cond.message


def create_namespace(kube: Kube, name: str, *, wait_sa: bool = False, adoptable_by: str | None = None) -> None:
    """Create a namespace (if missing); with ``wait_sa``, wait for its default ServiceAccount,
    which pods need to be admitted. ``adoptable_by``: opt it in, as an admin does, for that
    TenantPlatform to adopt (annotation ``tenancy.dev/adoptable-by``)."""
    if kube.get("v1", "Namespace", name) is None:
        meta: dict[str, object] = {"name": name}
        if adoptable_by:
            meta["annotations"] = {"tenancy.dev/adoptable-by": adoptable_by}
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
    if wait_sa:
        wait_for(lambda: kube.get("v1", "ServiceAccount", "default", name), f"ServiceAccount {name}/default")


def shared_label_holders(kube: Kube) -> dict[str, dict[str, set[str]]]:
    """Node -> our node-label value managers (``tenant-platform-operator/labels/...``) -> the keys
    each owns there (from managedFields)."""
    prefix = "tenant-platform-operator/labels/"
    out: dict[str, dict[str, set[str]]] = {}
    for node in kube.list("v1", "Node"):
        for entry in node["metadata"].get("managedFields") or []:
            manager = str(entry.get("manager") or "")
            labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
            keys = {k[2:] for k in labels if k.startswith("f:")}
            if manager.startswith(prefix) and keys:
                out.setdefault(node["metadata"]["name"], {}).setdefault(manager, set()).update(keys)
    return out


def live_label_wanters(kube: Kube, *, besides: str = "") -> list[str]:
    """TenantPlatforms in the API server, not being deleted, that want node labels (the default)."""
    found = []
    for body in kube.list("tenancy.dev/v1alpha1", "TenantPlatform"):
        meta, spec = body["metadata"], body.get("spec") or {}
        labels = ((spec.get("gpu") or {}).get("nodeLabels") or {}).get("enabled", True)
        if meta["name"] != besides and not meta.get("deletionTimestamp") and labels:
            found.append(meta["name"])
    return found


@dataclasses.dataclass(frozen=True)
class ReleaseImage:
    """The image of a release: dist/'s OCI archive (one manifest), as its index and blobs say."""

    archive: Path
    reference: str
    """org.opencontainers.image.ref.name: the reference the chart and the install manifest deploy."""
    digest: str
    """The manifest's digest (sha256:...), what a pull by digest names."""
    config_digest: str
    """The config's digest (sha256:...): the image ID buildah gave the image it pushed."""
    config: dict[str, Any]
    layers: tuple[str, ...]


def release_image(dist: Path) -> ReleaseImage:
    (archive,) = dist.glob("*.oci.tar")
    with tarfile.open(archive) as tar:

        def read(name: str) -> Any:
            member = tar.extractfile(name)
            assert member is not None, f"{archive.name} has no {name}"
            return json.loads(member.read())

        (entry,) = read("index.json")["manifests"]
        manifest = read("blobs/" + entry["digest"].replace(":", "/"))
        config = read("blobs/" + manifest["config"]["digest"].replace(":", "/"))
    return ReleaseImage(
        archive=archive,
        reference=entry["annotations"]["org.opencontainers.image.ref.name"],
        digest=entry["digest"],
        config_digest=manifest["config"]["digest"],
        config=config,
        layers=tuple(layer["digest"] for layer in manifest["layers"]),
    )
