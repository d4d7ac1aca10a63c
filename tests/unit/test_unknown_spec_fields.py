"""Version skew: an older operator reading a newer CRD's objects (api/models.py, the pipeline).

Unknown fields (which only a newer schema lets through the API server) are ignored and named;
wrong types and values of known fields are still an invalid spec; deletion parses leniently.
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from tests.support import platform_body

from tenant_platform.api.models import MAX_UNKNOWN_FIELDS, TenantPlatform
from tenant_platform.reconcile.pipeline import unknown_fields_note

# (id, spec additions, unknown field paths)
UNKNOWN_ROWS = [
    ("none", {}, []),
    ("top level", {"newFeature": {"enabled": True}}, ["spec.newFeature"]),
    ("nested", {"gpu": {"hami": {"schedulerName": "hami"}}}, ["spec.gpu.hami.schedulerName"]),
    (
        "in a list item",
        {"installer": {"subjects": [{"kind": "User", "name": "u", "x": 1}]}},
        ["spec.installer.subjects[0].x"],
    ),
    (
        "many are bounded",
        {f"field{i:02}": i for i in range(MAX_UNKNOWN_FIELDS + 5)},
        [*(f"spec.field{i:02}" for i in range(MAX_UNKNOWN_FIELDS)), "and 5 more"],
    ),
]


@pytest.mark.parametrize(("spec", "unknown"), [pytest.param(s, u, id=i) for i, s, u in UNKNOWN_ROWS])
def test_unknown_fields_are_ignored_and_named(spec: dict[str, Any], unknown: list[str]) -> None:
    platform = TenantPlatform.from_body(platform_body("tp", **spec))
    assert platform.unknown_fields() == unknown
    note = unknown_fields_note(platform)
    assert (note != "") == bool(unknown)
    assert len(note) < 2048


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param({"deletionPolicy": "Sometimes"}, "deletionPolicy", id="unknown enum value"),
        pytest.param({"gpu": {"hami": {"enabled": "maybe"}}}, "gpu.hami.enabled", id="wrong type"),
        pytest.param({"domain": "NOT A DOMAIN"}, "domain", id="pattern"),
    ],
)
def test_wrong_values_of_known_fields_are_still_invalid(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        TenantPlatform.from_body(platform_body("tp", **spec))
    assert field in ".".join(str(p) for p in caught.value.errors()[0]["loc"])


# (id, spec additions, dropped paths, or None when nothing can be parsed)
LENIENT_ROWS: list[tuple[str, dict[str, Any], list[str] | None]] = [
    ("valid", {}, []),
    ("new enum value", {"deletionPolicy": "Sometimes"}, ["spec.deletionPolicy"]),
    (
        "two bad fields",
        {"dns": {"management": "Route53"}, "gpu": {"nodeLabels": {"enabled": 3}}},
        ["spec.dns.management", "spec.gpu.nodeLabels.enabled"],
    ),
    ("bad list item", {"imagePullSecrets": ["ok", 7]}, ["spec.imagePullSecrets.1"]),
    ("missing required nested field", {"objectStore": {"mode": "S3", "s3": {"bucket": "b"}}}, ["spec.objectStore.s3"]),
    ("invalid domain", {"domain": "NOT A DOMAIN"}, None),
]


@pytest.mark.parametrize(("spec", "dropped"), [pytest.param(s, d, id=i) for i, s, d in LENIENT_ROWS])
def test_lenient_parse_for_cleanup(spec: dict[str, Any], dropped: list[str] | None) -> None:
    parsed = TenantPlatform.from_body_lenient(platform_body("tp", **spec))
    if dropped is None:
        assert parsed is None
        return
    assert parsed is not None
    platform, actually = parsed
    assert sorted(actually) == sorted(dropped)
    assert platform.spec.namespace == "tp"
    assert platform.spec.deletion_policy == "Retain"  # the cautious default
