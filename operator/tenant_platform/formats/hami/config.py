"""HAMi's resource names from its ``hami-scheduler-device`` ConfigMap (``device-config.yaml``)."""

from __future__ import annotations

from typing import Final

import yaml

from tenant_platform.formats.hami.names import HamiParseError, ResourceNames

_CONFIG_KEYS: Final = {
    "resourceCountName": "count",
    "resourceMemoryName": "memory",
    "resourceMemoryPercentageName": "memory_percentage",
    "resourceCoreName": "cores",
    "resourcePriorityName": "priority",
}


def resource_names_from_config(text: str) -> ResourceNames:
    """Names from ``device-config.yaml`` of the ``hami-scheduler-device`` ConfigMap.

    Keys missing under ``nvidia`` keep their defaults. Raises HamiParseError for YAML that is
    not a mapping or a name that is not a non-empty string.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HamiParseError(f"device-config.yaml is not YAML: {_first_line(str(exc))}") from None
    if doc is None:
        return ResourceNames()
    if not isinstance(doc, dict):
        raise HamiParseError("device-config.yaml is not a mapping")
    nvidia = doc.get("nvidia") or {}
    if not isinstance(nvidia, dict):
        raise HamiParseError("device-config.yaml: 'nvidia' is not a mapping")
    values: dict[str, str] = {}
    for key, attr in _CONFIG_KEYS.items():
        if key not in nvidia:
            continue
        value = nvidia[key]
        if not isinstance(value, str) or not value:
            raise HamiParseError(f"device-config.yaml: nvidia.{key} must be a non-empty string")
        values[attr] = value
    return ResourceNames(**values)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
