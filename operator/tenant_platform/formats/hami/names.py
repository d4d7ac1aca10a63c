"""HAMi's names, in one place: annotations, labels, resource names and constants.

Facts: HAMi v2.4 to v2.10 (docs/gpu.md). Up to v2.3.x the annotation prefix was ``4pd.io/``;
every node or pod annotation is read under either prefix (``hami.io/`` wins).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


class HamiParseError(ValueError):
    """An annotation HAMi would not understand either; ``str(error)`` is the reason."""


# -- annotations ----------------------------------------------------------------------------------

PREFIX: Final = "hami.io/"
LEGACY_PREFIX: Final = "4pd.io/"  # HAMi up to v2.3.x
PREFIXES: Final = (PREFIX, LEGACY_PREFIX)

# Node annotations (suffixes).
REGISTER: Final = "node-nvidia-register"
LOCK: Final = "mutex.lock"
CORDON: Final = "device-cordon"
HANDSHAKE: Final = "node-handshake"
# Pod annotations (suffixes).
POD_NODE: Final = "vgpu-node"
POD_ALLOCATED: Final = "vgpu-devices-allocated"
POD_BIND_PHASE: Final = "bind-phase"

ANNOTATION_REGISTER: Final = PREFIX + REGISTER
ANNOTATION_LOCK: Final = PREFIX + LOCK
ANNOTATION_POD_NODE: Final = PREFIX + POD_NODE
ANNOTATION_POD_ALLOCATED: Final = PREFIX + POD_ALLOCATED

# Node and pod annotations the operator reads (suffixes, and every key under either prefix).
NODE_ANNOTATION_SUFFIXES: Final = (REGISTER, LOCK, CORDON, HANDSHAKE)
POD_ANNOTATION_SUFFIXES: Final = (POD_NODE, POD_ALLOCATED, POD_BIND_PHASE)
NODE_ANNOTATIONS: Final = frozenset(prefix + suffix for prefix in PREFIXES for suffix in NODE_ANNOTATION_SUFFIXES)
POD_ANNOTATIONS: Final = frozenset(prefix + suffix for prefix in PREFIXES for suffix in POD_ANNOTATION_SUFFIXES)

# Pod bind phases the device plugin writes when it is done with a pod.
BIND_DONE: Final = frozenset({"success", "failed"})
# Pods in these phases hold nothing (HAMi's scheduler skips them).
TERMINATED_PHASES: Final = frozenset({"Succeeded", "Failed"})


def hami_annotation(annotations: Mapping[str, str], suffix: str) -> tuple[str, str] | None:
    """(key, value) of ``hami.io/<suffix>``, else of the legacy ``4pd.io/<suffix>``, else None."""
    for prefix in PREFIXES:
        key = prefix + suffix
        if key in annotations:
            return key, annotations[key]
    return None


# -- labels ---------------------------------------------------------------------------------------

# Labels that mark a GPU node (NVIDIA feature discovery and the NVIDIA chart).
GPU_PRESENT_LABELS: Final = ("nvidia.com/gpu.present", "feature.node.kubernetes.io/pci-10de.present")
GFD_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
GFD_COUNT_LABEL: Final = "nvidia.com/gpu.count"
GFD_MEMORY_LABEL: Final = "nvidia.com/gpu.memory"
# The NFD and GFD label families (often hundreds per node): a snapshot keeps only KEPT_VENDOR_LABELS.
VENDOR_LABEL_PREFIXES: Final = ("nvidia.com/", "feature.node.kubernetes.io/")
KEPT_VENDOR_LABELS: Final = frozenset({*GPU_PRESENT_LABELS, GFD_PRODUCT_LABEL, GFD_COUNT_LABEL, GFD_MEMORY_LABEL})
# Label prefixes the operator never writes (other owners, or the Kubernetes core).
FORBIDDEN_LABEL_PREFIXES: Final = (
    *VENDOR_LABEL_PREFIXES,
    "tenancy.dev/",
    "kubernetes.io/",
    "node.kubernetes.io/",
    "node-role.kubernetes.io/",
)


def forbidden_label(key: str) -> bool:
    return key.startswith(FORBIDDEN_LABEL_PREFIXES)


# -- resource names -------------------------------------------------------------------------------

# HAMi's ConfigMap naming the resources (chart values resourceName, resourceMem, ...).
CONFIG_MAP: Final = "hami-scheduler-device"
CONFIG_KEY: Final = "device-config.yaml"


@dataclass(frozen=True)
class ResourceNames:
    """HAMi's extended-resource names for NVIDIA (chart values resourceName, resourceMem, ...)."""

    count: str = "nvidia.com/gpu"
    memory: str = "nvidia.com/gpumem"
    memory_percentage: str = "nvidia.com/gpumem-percentage"
    cores: str = "nvidia.com/gpucores"
    priority: str = "nvidia.com/priority"


DEFAULT_NAMES: Final = ResourceNames()
