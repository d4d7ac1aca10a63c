"""Admission mode (api/admission.py) refuses what the CRD refuses, derived from the CRD itself.

- every CEL rule of the CRD is mirrored (or is a transition rule, which needs a stored object);
- every schema constraint of the CRD (pattern, lengths, item and property counts, bounds, set
  lists) is carried by the pydantic Field or by admission.CONSTRAINTS, with the same value;
- a value breaking each constraint, each enum and each type, generated from the CRD schema, is
  refused in admission mode with the field's path in the message, and still parses (or fails
  exactly as before) without it: the operator's parse of stored objects is unchanged.

tests/integration/test_render_rejects.py proves the same table of cases against the real API
server.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import pydantic
import pytest
import yaml

from tenant_platform.api import admission, models
from tenant_platform.cli_errors import field_errors

CRD = yaml.safe_load((Path(__file__).parents[2] / "crds" / "tenancy.dev_tenantplatforms.yaml").read_text())
SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
SPEC = SCHEMA["properties"]["spec"]
KEYWORDS = ("pattern", "maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
BOUNDS = ("minimum", "maximum")

# A spec that sets every optional object, so every constrained path exists.
FULL: dict[str, Any] = {
    "namespace": "kamiwaza",
    "domain": "kamiwaza.example.com",
    "installer": {"subjects": [{"kind": "User", "name": "alice"}]},
    "gpu": {
        "nodeSelector": {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["on"]}]},
        "share": {"cards": 2, "memoryMiB": 20000, "coresPercent": 150},
    },
    "objectStore": {
        "mode": "S3",
        "s3": {"endpoint": "https://s3.example.com", "bucket": "bucket", "credentialsSecret": {"name": "creds"}},
    },
    "edgeCertificate": {"issuer": "CertManager", "issuerRef": {"name": "letsencrypt", "kind": "ClusterIssuer"}},
}


def admit(spec: dict[str, Any]) -> models.TenantPlatform:
    return models.TenantPlatform.from_body({"metadata": {"name": "tp"}, "spec": spec}, admission_mode=True)


def cel_rules(schema: dict[str, Any], path: str = "spec") -> Iterator[tuple[str, dict[str, str]]]:
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path, rule
    for name, sub in (schema.get("properties") or {}).items():
        yield from cel_rules(sub, f"{path}.{name}")
    if "items" in schema:
        yield from cel_rules(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from cel_rules(schema["additionalProperties"], f"{path}{{}}")


def test_every_cel_rule_is_mirrored_or_a_transition_rule() -> None:
    messages = {rule["message"] for _, rule in cel_rules(SPEC)}
    assert messages == admission.MIRRORED | admission.TRANSITION_ONLY
    for _, rule in cel_rules(SPEC):
        assert ("oldSelf" in rule["rule"]) == (rule["message"] in admission.TRANSITION_ONLY), rule


# ---- schema constraints: the same values in the CRD and in (Field + CONSTRAINTS) ----------------


def _model_of(annotation: Any) -> type[pydantic.BaseModel] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, pydantic.BaseModel):
            return arg
        if typing.get_origin(arg) is list:
            inner = typing.get_args(arg)[0]
            if isinstance(inner, type) and issubclass(inner, pydantic.BaseModel):
                return inner
    return None


def _crd_constraints(schema: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {k: schema[k] for k in (*KEYWORDS, *BOUNDS) if k in schema}
    if schema.get("x-kubernetes-list-type") == "set":
        found["x-kubernetes-list-type"] = "set"
    for nested in ("items", "additionalProperties"):
        sub = schema.get(nested)
        if isinstance(sub, dict) and sub.get("type") != "object":
            inner = {k: sub[k] for k in KEYWORDS if k in sub}
            if inner:
                found[nested] = inner
    return found


def _model_constraints(model: type[pydantic.BaseModel], field: Any, alias: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for meta in field.metadata:
        if isinstance(meta, annotated_types.MaxLen):
            found["maxLength"] = meta.max_length
        elif isinstance(meta, annotated_types.Ge):
            found["minimum"] = meta.ge
        elif isinstance(meta, annotated_types.Le):
            found["maximum"] = meta.le
        elif getattr(meta, "pattern", None):
            found["pattern"] = meta.pattern
    for key, value in admission.CONSTRAINTS.get((model.__name__, alias), {}).items():
        assert key not in found or found[key] == value, f"{model.__name__}.{alias}: {key} twice"
        found[key] = value
    return found


def constrained_fields(
    schema: dict[str, Any], model: type[pydantic.BaseModel], path: str = "spec"
) -> Iterator[tuple[str, dict[str, Any], type[pydantic.BaseModel], str, Any]]:
    for name, sub in schema["properties"].items():
        field = next(f for n, f in model.model_fields.items() if (f.alias or n) == name)
        yield f"{path}.{name}", sub, model, name, field
        listed = sub.get("type") == "array" and sub["items"].get("type") == "object"
        inner = sub["items"] if listed else sub
        nested = _model_of(field.annotation)
        if nested is not None and "properties" in inner:
            yield from constrained_fields(inner, nested, f"{path}.{name}[0]" if listed else f"{path}.{name}")


FIELDS = list(constrained_fields(SPEC, models.TenantPlatformSpec))


@pytest.mark.parametrize(("path", "schema", "model", "alias", "field"), FIELDS, ids=[f[0] for f in FIELDS])
def test_crd_constraints_are_carried_by_the_model(
    path: str, schema: dict[str, Any], model: type[pydantic.BaseModel], alias: str, field: Any
) -> None:
    assert _model_constraints(model, field, alias) == _crd_constraints(schema), path


# ---- behaviour: one generated bad value per constraint, enum and type --------------------------


def _valid_item(schema: dict[str, Any], index: int) -> Any:
    if schema.get("type") == "object":
        return {"kind": "User", "name": f"user{index}"}
    if schema.get("pattern") == admission.PROXY_REPOSITORY:
        return f"registry.example.com/proxy{index}"
    return f"name{index}"


def violations(schema: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    kind = schema.get("type")
    wrong_type = {"string": 42, "integer": "42", "boolean": "true", "array": "x", "object": "x"}
    if kind in wrong_type:
        yield "type", wrong_type[kind]
    if "enum" in schema:
        yield "enum", "NotInTheEnum"
    if "pattern" in schema:
        yield "pattern", "NOT VALID!"
    if "maxLength" in schema:
        yield "maxLength", "a" * (schema["maxLength"] + 1)
    if "minLength" in schema:
        yield "minLength", "a" * (schema["minLength"] - 1)
    if "minimum" in schema:
        yield "minimum", schema["minimum"] - 1
    if "maximum" in schema:
        yield "maximum", schema["maximum"] + 1
    items = schema.get("items") or {}
    if "maxItems" in schema:
        yield "maxItems", [_valid_item(items, i) for i in range(schema["maxItems"] + 1)]
    if "minItems" in schema:
        yield "minItems", []
    if schema.get("x-kubernetes-list-type") == "set":
        yield "set", [_valid_item(items, 0), _valid_item(items, 0)]
    for keyword, value in violations(items) if items.get("type") == "string" else ():
        yield f"items.{keyword}", [value]
    if "maxProperties" in schema:
        yield "maxProperties", {f"k{i}": "v" for i in range(schema["maxProperties"] + 1)}
    if "minProperties" in schema:
        yield "minProperties", {}
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("type") == "string":
        for keyword, value in violations(extra):
            yield f"values.{keyword}", {"key": value}


def _set(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(spec)
    parts = path.split(".")[1:]
    target = doc
    for part in parts[:-1]:
        target = target.setdefault(part.removesuffix("[0]"), {})
        if part.endswith("[0]"):
            target = target[0]
    target[parts[-1]] = value
    return doc


CASES = [
    pytest.param(path, value, id=f"{path} {keyword}")
    for path, schema, *_ in FIELDS
    for keyword, value in violations(schema)
]


def test_the_full_spec_is_admitted() -> None:
    admit(FULL)


@pytest.mark.parametrize(("path", "value"), CASES)
def test_each_constraint_is_refused_naming_the_field(path: str, value: Any) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        admit(_set(FULL, path, value))
    lines = field_errors(caught.value)
    assert any(line.startswith(path) for line in lines), lines


def test_unknown_fields_are_refused_at_any_depth() -> None:
    for path in ("spec.colour", "spec.mesh.colour", "spec.objectStore.s3.credentialsSecret.colour"):
        with pytest.raises(pydantic.ValidationError) as caught:
            admit(_set(FULL, path, "blue"))
        assert field_errors(caught.value) == [f"{path}: unknown field (this CRD version has no such field)"]
    # The operator's parse of a stored object keeps them aside (a newer CRD), as before.
    parsed = models.TenantPlatform.from_body({"metadata": {"name": "tp"}, "spec": _set(FULL, "spec.mesh.colour", "x")})
    assert parsed.unknown_fields() == ["spec.mesh.colour"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"namespace": "kube-public"}, admission.MSG_NAMESPACE_SYSTEM),
        ({"namespace": "kube-anything"}, admission.MSG_NAMESPACE_SYSTEM),
        ({"additionalNamespaces": ["default"]}, admission.MSG_ADDITIONAL_SYSTEM),
        ({"additionalNamespaces": ["kamiwaza"]}, admission.MSG_ADDITIONAL_REPEATS),
        ({"namespace": "istio-system"}, admission.MSG_NAMESPACE_IS_MESH),
        ({"additionalNamespaces": ["istio-system"]}, admission.MSG_ADDITIONAL_MESH),
        ({"objectStore": {"mode": "S3"}}, admission.MSG_S3_REQUIRED),
        ({"mesh": {"injection": {"mode": "Revision"}}}, admission.MSG_REVISION_REQUIRED),
        ({"domain": "kamiwaza"}, admission.MSG_DOMAIN_SINGLE_LABEL),
        ({"domain": "api.svc"}, admission.MSG_DOMAIN_INTERNAL),
        ({"domain": "kubernetes.default.svc.cluster.local"}, admission.MSG_DOMAIN_INTERNAL),
        ({"domain": "metadata.google.internal"}, admission.MSG_DOMAIN_METADATA),
        ({"domain": "169-254-169-254.nip.io"}, admission.MSG_DOMAIN_METADATA),
        ({"domain": "10.0.0.1"}, admission.MSG_DOMAIN_IP),
        ({"installer": {"subjects": [{"kind": "ServiceAccount", "name": "ci"}]}}, admission.MSG_SUBJECT_NAMESPACE),
        (
            {"installer": {"subjects": [{"kind": "Group", "name": "ops", "namespace": "x"}]}},
            admission.MSG_SUBJECT_NAMESPACE,
        ),
        ({"installer": {"subjects": [{"kind": "Group", "name": "system:masters"}]}}, admission.MSG_SUBJECT_SYSTEM),
        ({"gpu": {"nodeLabels": {"labels": {"node-role.kubernetes.io/gpu": ""}}}}, admission.MSG_GPU_LABEL_PREFIX),
        ({"gpu": {"share": {"cards": 1, "coresPercent": 101}}}, admission.MSG_GPU_SHARE_CORES),
        ({"edgeCertificate": {"issuer": "CertManager"}}, admission.MSG_ISSUER_REF),
        ({"edgeCertificate": {"issuer": "SelfSigned", "issuerRef": {"name": "ca"}}}, admission.MSG_ISSUER_REF),
    ],
)
def test_each_cel_rule(spec: dict[str, Any], message: str) -> None:
    body = {"namespace": "kamiwaza", "domain": "kamiwaza.example.com", **spec}
    with pytest.raises(pydantic.ValidationError) as caught:
        admit(body)
    assert any(message in line for line in field_errors(caught.value))


@pytest.mark.parametrize(
    "domain", ["kamiwaza.example.com", "svc.example.com", "metadata.example.com", "a1.example.com", "x.internal.io"]
)
def test_ordinary_domains_pass(domain: str) -> None:
    assert admission.domain_rules(domain) == []


def test_the_metadata_name_is_checked() -> None:
    assert admission.metadata_name_rules("kamiwaza") == []
    assert admission.metadata_name_rules(None) == ["metadata.name is required"]
    assert admission.metadata_name_rules("Bad_Name")[0].startswith("metadata.name: should match")
    assert admission.metadata_name_rules("a" * 64) == ["metadata.name: may not be more than 63 bytes"]
