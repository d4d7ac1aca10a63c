"""The CRD in crds/ and the pydantic model must describe the same spec: fields, types, defaults.

Defaults are compared the way the API server applies them: a field's default is filled in, then
the defaults of its properties inside it, recursively.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pydantic
import pytest
import yaml

from tenant_platform.api import models

CRD = yaml.safe_load((Path(__file__).parents[2] / "crds" / "tenancy.dev_tenantplatforms.yaml").read_text())
SPEC_SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    if value is None and "default" in schema:
        value = schema["default"]
    if isinstance(value, dict) and schema.get("type") == "object" and "properties" in schema:
        value = dict(value)
        for name, sub in schema["properties"].items():
            filled = apply_defaults(sub, value.get(name))
            if filled is not None:
                value[name] = filled
    return value


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def check_type(path: str, annotation: Any, schema: dict[str, Any]) -> None:
    annotation, _ = _unwrap_optional(annotation)
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        assert schema["type"] == "object", path
        check_model(path, annotation, schema)
    elif origin is Literal:
        assert schema["type"] == "string", path
        assert sorted(schema["enum"]) == sorted(get_args(annotation)), f"{path}: enum differs"
    elif origin is list:
        assert schema["type"] == "array", path
        check_type(path + "[]", get_args(annotation)[0], schema["items"])
    elif origin is dict:
        assert schema["type"] == "object", path
        check_type(path + "{}", get_args(annotation)[1], schema["additionalProperties"])
    else:
        expected = {str: "string", bool: "boolean", int: "integer"}[annotation]
        assert schema["type"] == expected, f"{path}: CRD says {schema['type']}, model says {expected}"


def check_model(path: str, model: type[pydantic.BaseModel], schema: dict[str, Any]) -> None:
    fields = {(f.alias or n): f for n, f in model.model_fields.items()}
    crd_props = schema.get("properties", {})
    only_model, only_crd = sorted(set(fields) - set(crd_props)), sorted(set(crd_props) - set(fields))
    assert not only_model and not only_crd, f"{path}: only in model {only_model}, only in CRD {only_crd}"
    required = {alias for alias, f in fields.items() if f.is_required()}
    assert required == set(schema.get("required", [])), f"{path}: required fields differ"
    for alias, field in fields.items():
        check_type(f"{path}.{alias}", field.annotation, crd_props[alias])
        sub = crd_props[alias]
        if field.is_required():
            assert "default" not in sub, f"{path}.{alias}: required in the model but defaulted in the CRD"
            continue
        model_default = field.get_default(call_default_factory=True)
        if isinstance(model_default, pydantic.BaseModel):
            model_default = model_default.model_dump(by_alias=True, exclude_none=True)
        crd_default = apply_defaults(sub, None)
        if model_default is None:
            assert crd_default is None, f"{path}.{alias}: CRD has a default, the model does not"
        else:
            assert crd_default == model_default, (
                f"{path}.{alias}: CRD default {crd_default!r} != model {model_default!r}"
            )


def test_spec_schema_matches_model() -> None:
    check_model("spec", models.TenantPlatformSpec, SPEC_SCHEMA)


def test_patterns_match() -> None:
    assert SPEC_SCHEMA["properties"]["namespace"]["pattern"] == models.DNS1123_LABEL
    assert SPEC_SCHEMA["properties"]["domain"]["pattern"] == models.DNS1123_SUBDOMAIN
    ttl = SPEC_SCHEMA["properties"]["installer"]["properties"]["kubeconfigSecret"]["properties"]["tokenTTL"]
    assert ttl["pattern"] == models.DURATION


def test_minimal_spec_defaults_agree() -> None:
    body = {"namespace": "kamiwaza", "domain": "kamiwaza.example.com"}
    crd = apply_defaults(SPEC_SCHEMA, body)
    model = models.TenantPlatformSpec.model_validate(body).model_dump(by_alias=True, exclude_none=True)
    assert crd == model


def test_parity_check_catches_a_drift() -> None:
    drifted = yaml.safe_load(yaml.safe_dump(SPEC_SCHEMA))
    drifted["properties"]["deletionPolicy"]["default"] = "Delete"
    with pytest.raises(AssertionError, match="deletionPolicy"):
        check_model("spec", models.TenantPlatformSpec, drifted)
    drifted = yaml.safe_load(yaml.safe_dump(SPEC_SCHEMA))
    del drifted["properties"]["gpu"]["properties"]["hami"]["properties"]["nodeLockTimeout"]
    with pytest.raises(AssertionError, match="only in model"):
        check_model("spec", models.TenantPlatformSpec, drifted)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("24h", 86400, id="hours"),
        pytest.param("1h30m", 5400, id="compound"),
        pytest.param("90s", 90, id="seconds"),
        pytest.param("1.5h", 5400, id="fraction"),
        pytest.param("250ms", 0.25, id="milliseconds"),
    ],
)
def test_parse_duration(value: str, seconds: float) -> None:
    assert models.parse_duration(value).total_seconds() == seconds


@pytest.mark.parametrize("value", ["", "24", "h", "1d", "-5m", "5 m"])
def test_parse_duration_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        models.parse_duration(value)


# -- names: every field naming a Kubernetes object or namespace is constrained at apply time --------

NAME_FIELD = re.compile(r"(Name|name|Namespace|namespace|Namespaces|Secrets)$")
NOT_OBJECT_NAMES = {
    # User and Group names are free-form strings in RBAC (e.g. "alice@example.com", "system:x");
    # a ServiceAccount subject's name is an object name, constrained by the installer-subject rules.
    "spec.installer.subjects[].name",
}


def string_fields(path: str, schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, schema) of every string property and string array item under ``schema``."""
    found: list[tuple[str, dict[str, Any]]] = []
    for name, sub in (schema.get("properties") or {}).items():
        here = f"{path}.{name}"
        if sub.get("type") == "string":
            found.append((here, sub))
        elif sub.get("type") == "array" and (sub.get("items") or {}).get("type") == "string":
            found.append((here + "[]", sub["items"]))
        elif sub.get("type") == "array":
            found += string_fields(here + "[]", sub.get("items") or {})
        elif sub.get("type") == "object":
            found += string_fields(here, sub)
    return found


def test_every_name_field_has_a_pattern_and_a_max_length() -> None:
    names = [(p, s) for p, s in string_fields("spec", SPEC_SCHEMA) if NAME_FIELD.search(p.removesuffix("[]"))]
    assert len(names) >= 15  # the walk found them (a broken walk must not pass vacuously)
    missing = [p for p, s in names if p not in NOT_OBJECT_NAMES and not ("pattern" in s and "maxLength" in s)]
    assert not missing, f"name fields without a pattern and maxLength in the CRD: {missing}"
    assert "spec.gpu.hami.configMapNamespace" in dict(names)


def model_constraints(model: type[pydantic.BaseModel], path: str) -> dict[str, tuple[str | None, int | None]]:
    """path -> (pattern, max_length) of every str field of the model, recursively."""
    found: dict[str, tuple[str | None, int | None]] = {}
    for name, field in model.model_fields.items():
        here = f"{path}.{field.alias or name}"
        annotation, _ = _unwrap_optional(field.annotation)
        if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            found.update(model_constraints(annotation, here))
        elif get_origin(annotation) is list and isinstance(get_args(annotation)[0], type):
            item = get_args(annotation)[0]
            if issubclass(item, pydantic.BaseModel):
                found.update(model_constraints(item, here + "[]"))
        elif annotation is str:
            pattern = next((m.pattern for m in field.metadata if getattr(m, "pattern", None)), None)
            max_length = next((m.max_length for m in field.metadata if getattr(m, "max_length", None)), None)
            found[here] = (pattern, max_length)
    return found


def test_model_patterns_match_the_crd() -> None:
    """A pattern in the model is the CRD's, and a name field's CRD pattern is in the model too.

    (Other CRD patterns, such as objectStore.s3.endpoint's, may stay out of the model: its step
    names a bad value in a condition, for objects stored before the CRD had the pattern.)
    """
    crd = dict(string_fields("spec", SPEC_SCHEMA))
    model = model_constraints(models.TenantPlatformSpec, "spec")
    for path, (pattern, max_length) in model.items():
        schema = crd[path]
        if pattern is None and not NAME_FIELD.search(path):
            continue
        assert pattern == schema.get("pattern"), f"{path}: model pattern {pattern!r} != CRD {schema.get('pattern')!r}"
        if max_length is not None:
            assert max_length == schema.get("maxLength"), path
