"""Which StorageClass the platform gets, decided from the listed classes. Pure.

A named class must exist. With no name, exactly one class must be marked default (the GA
annotation ``storageclass.kubernetes.io/is-default-class`` or its old beta twin, value "true").
Kubernetes itself tolerates several defaults (it picks the newest), but an install that lands on
one by accident is what this check exists to prevent, so several defaults is a failure naming them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_CLASS_ANNOTATIONS: tuple[str, ...] = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)

REASON_FOUND = "StorageClassFound"
REASON_NOT_FOUND = "StorageClassNotFound"
REASON_NO_DEFAULT = "NoDefaultStorageClass"
REASON_AMBIGUOUS = "AmbiguousDefaultStorageClass"


@dataclass(frozen=True)
class Selection:
    """The verdict: ``name`` is set only when a class was found (``ok``)."""

    ok: bool
    reason: str
    message: str
    """The whole verdict, including the volumeBindingMode note."""
    summary: str = ""
    """The verdict without that note."""
    name: str = ""
    default: bool = False
    provisioner: str = ""
    volume_binding_mode: str = "Immediate"


def is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(str(annotations.get(key, "")).lower() == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def _names(classes: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted(str(c["metadata"]["name"]) for c in classes)


def binding_note(name: str, mode: str) -> str:
    """A sentence about the class's volumeBindingMode (empty for Immediate)."""
    if mode == "WaitForFirstConsumer":
        return (
            f" StorageClass {name} uses volumeBindingMode WaitForFirstConsumer: a PVC stays Pending until a pod "
            "using it is scheduled, which is expected and not a fault."
        )
    return ""


def select_storage_class(classes: Sequence[Mapping[str, Any]], requested: str) -> Selection:
    """Pick the class for ``requested`` (empty: the cluster default) among ``classes``."""
    available = ", ".join(_names(classes)) or "none"
    if requested:
        match = next((c for c in classes if c["metadata"]["name"] == requested), None)
        if match is None:
            return Selection(
                ok=False,
                reason=REASON_NOT_FOUND,
                message=(
                    f"StorageClass {requested} named in spec.storage.storageClassName does not exist "
                    f"(classes in the cluster: {available}). Create it, or name an existing class."
                ),
            )
        chosen, how = match, "named in spec.storage.storageClassName"
    else:
        defaults = [c for c in classes if is_default(c)]
        if not defaults:
            return Selection(
                ok=False,
                reason=REASON_NO_DEFAULT,
                message=(
                    f"spec.storage.storageClassName is empty and no StorageClass is marked default "
                    f"(classes in the cluster: {available}). Name a class in spec.storage.storageClassName, or "
                    f"annotate one with {DEFAULT_CLASS_ANNOTATIONS[0]}=true."
                ),
            )
        if len(defaults) > 1:
            return Selection(
                ok=False,
                reason=REASON_AMBIGUOUS,
                message=(
                    f"spec.storage.storageClassName is empty and several StorageClasses are marked default: "
                    f"{', '.join(_names(defaults))}. Name one in spec.storage.storageClassName, or leave the "
                    "default annotation on only one."
                ),
            )
        chosen, how = defaults[0], "the cluster default"
    name = str(chosen["metadata"]["name"])
    provisioner = str(chosen.get("provisioner") or "")
    mode = str(chosen.get("volumeBindingMode") or "Immediate")
    summary = f"StorageClass {name} ({how}, provisioner {provisioner or 'unknown'}) exists."
    return Selection(
        ok=True,
        reason=REASON_FOUND,
        message=summary + binding_note(name, mode),
        summary=summary,
        name=name,
        default=is_default(chosen),
        provisioner=provisioner,
        volume_binding_mode=mode,
    )


def describe_pod(pod: Mapping[str, Any] | None) -> str:
    """One clause on where a write-test pod stands, for condition messages."""
    if pod is None:
        return "not created"
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = meta.get("name", "")
    phase = status.get("phase") or "Pending"
    details: list[str] = []
    if phase == "Pending":
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if not (pod.get("spec") or {}).get("nodeName"):
            if scheduled and scheduled.get("status") == "False" and scheduled.get("message"):
                details.append(f"not scheduled: {scheduled['message']}")
            else:
                details.append("not scheduled yet")
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            waiting = state["waiting"]
            text = f"container waiting: {waiting['reason']}"
            if waiting.get("message"):
                text += f" ({waiting['message']})"
            details.append(text)
        if "terminated" in state:
            term = state["terminated"]
            text = f"container exited with code {term.get('exitCode', '?')}"
            if term.get("message"):
                text += f": {str(term['message']).strip()}"
            details.append(text)
    suffix = f" ({'; '.join(details)})" if details else ""
    return f"pod {name} is {phase}{suffix}"


def describe_pvc(pvc: Mapping[str, Any] | None) -> str:
    if pvc is None:
        return "not created"
    name = (pvc.get("metadata") or {}).get("name", "")
    phase = (pvc.get("status") or {}).get("phase") or "Pending"
    return f"PVC {name} is {phase}"
