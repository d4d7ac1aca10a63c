"""Every catalogue class (api/reasons.py) is covered by its step's table-driven evaluate tests.

Each step's tests/unit/test_<concern>_evaluate.py (GPU: test_gpu_verdict.py) holds module-level
tables of rows, one per reason (or a table written inline in ``pytest.mark.parametrize``); here
every member of the condition type's class must appear in one of them (rows are dataclasses,
tuples, dicts or ``pytest.param``; any nesting).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator
from enum import StrEnum
from types import ModuleType
from typing import Any

import pytest

from tenant_platform.api import constants, reasons

TABLES = {
    constants.NAMESPACES_READY: "test_namespaces_evaluate",
    constants.INSTALLER_READY: "test_installer_evaluate",
    constants.POD_GUARD_READY: "test_podguard_evaluate",
    constants.MESH_READY: "test_mesh_evaluate",
    constants.GATEWAY_READY: "test_gateway_evaluate",
    constants.EDGE_CERTIFICATE_READY: "test_edgecert_evaluate",
    constants.DNS_READY: "test_dns_evaluate",
    constants.STORAGE_READY: "test_storage_evaluate",
    constants.PULL_SECRETS_READY: "test_pullsecrets_evaluate",
    constants.OBJECT_STORE_READY: "test_objectstore_evaluate",
    constants.GPU_READY: "test_gpu_verdict",
    constants.GPU_SHARE_READY: "test_gpushare_evaluate",
    constants.TARGET_REACHABLE: "test_target_evaluate",
}


def members(value: Any, depth: int = 0) -> Iterator[StrEnum]:
    """Every StrEnum member inside a table (its rows and their fields)."""
    if isinstance(value, StrEnum):
        yield value
    elif depth > 6 or isinstance(value, (str, bytes, type)):
        return
    elif isinstance(value, dict):
        for item in value.values():
            yield from members(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from members(item, depth + 1)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from members(getattr(value, f.name), depth + 1)
    elif type(value).__name__ == "ParameterSet":  # pytest.param(...)
        yield from members(value.values, depth + 1)


def tables(module: ModuleType) -> set[StrEnum]:
    """The reasons in the module's row tables: its upper-case module-level lists and dicts, and the
    argument values of its tests' ``parametrize`` marks."""
    found: set[StrEnum] = set()
    for name, value in vars(module).items():
        if name.isupper() and isinstance(value, (list, dict, tuple)):
            found.update(members(value))
        for mark in getattr(value, "pytestmark", []) if callable(value) else []:
            if mark.name == "parametrize":
                found.update(members(list(mark.args[1:])))
    return found


def test_every_condition_type_has_a_table() -> None:
    # TargetReachable is not a concern of a step: the pipeline reports it (spec.target only).
    assert set(TABLES) == set(reasons.CATALOGUE) == {*constants.CONCERN_TYPES, constants.TARGET_REACHABLE}


@pytest.mark.parametrize("type_", TABLES)
def test_every_reason_of_the_type_has_a_row(type_: str) -> None:
    covered = {m.value for m in tables(importlib.import_module(TABLES[type_]))}
    missing = sorted({r.value for r in reasons.CATALOGUE[type_]} - covered)
    assert not missing, f"{TABLES[type_]}.py has no row for {type_} reasons {missing}"
