"""docs/status.md explains every condition type and every reason of the catalogue (api/reasons.py),
each under its condition type, and lists no reason the catalogue lacks."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

import pytest

from tenant_platform.api import constants, reasons

ROOT = Path(__file__).resolve().parents[2]
STATUS = ROOT / "docs" / "status.md"
COMMON_SECTION = "Reasons any concern can report"
EVENTS_SECTION = "Events"
ROW = re.compile(r"^\| *(True|False|Unknown|Normal|Warning) *\| *([^|]+?) *\|", re.MULTILINE)


def sections() -> dict[str, str]:
    """Each ``##`` or ``###`` heading of docs/status.md -> the text up to the next heading."""
    parts = re.split(r"^#{2,3} (.+)$", STATUS.read_text(), flags=re.MULTILINE)
    return {title.strip(): text for title, text in zip(parts[1::2], parts[2::2], strict=True)}


def documented(section: str) -> set[str]:
    """The reasons a section's tables list (the second column of rows whose first is a status)."""
    found: set[str] = set()
    for _, cell in ROW.findall(sections().get(section, "")):
        found |= set(re.findall(r"`([A-Za-z0-9]+)`", cell))
    return found


# Heading in docs/status.md -> the reasons that section must list, and the only ones it may list.
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    COMMON_SECTION: ({r.value for r in reasons.Common}, {r.value for r in reasons.Common}),
    EVENTS_SECTION: ({r.value for r in reasons.Event}, {r.value for r in reasons.Event} | {"DeletionBlocked"}),
    **{type_: ({r.value for r in cls}, reasons.allowed(type_)) for type_, cls in reasons.CATALOGUE.items()},
    **{type_: (set(), reasons.allowed(type_)) for type_ in constants.SUMMARY_TYPES},
}


@pytest.mark.parametrize("section", EXPECTED)
def test_every_reason_is_documented_under_its_condition_type(section: str) -> None:
    must, may = EXPECTED[section]
    listed = documented(section)
    assert listed, f"docs/status.md has no reason table under '{section}'"
    missing = sorted(must - listed)
    assert not missing, f"docs/status.md does not explain {missing} under '{section}'"
    unknown = sorted(listed - may)
    assert not unknown, f"docs/status.md lists {unknown} under '{section}', which api/reasons.py does not allow there"


def test_every_summary_reason_is_documented() -> None:
    listed = set().union(*(documented(t) for t in constants.SUMMARY_TYPES))
    missing = sorted({r.value for r in reasons.Summary} - listed)
    assert not missing, f"docs/status.md does not explain {missing} under Ready, Reconciling or Stalled"


def test_every_reason_table_is_checked() -> None:
    """A reason table under a heading this test does not know would escape the check above."""
    unchecked = sorted(title for title in sections() if documented(title) and title not in EXPECTED)
    assert not unchecked, f"docs/status.md has reason tables under unchecked headings: {unchecked}"


def test_every_catalogue_class_has_a_section() -> None:
    classes: set[type[StrEnum]] = {reasons.Common, reasons.Summary, reasons.Event, *reasons.CATALOGUE.values()}
    in_module = {
        v for v in vars(reasons).values() if isinstance(v, type) and issubclass(v, StrEnum) and v is not StrEnum
    }
    assert in_module == classes, "a new class in api/reasons.py needs its section in docs/status.md and here"


def test_every_condition_type_is_documented() -> None:
    text = STATUS.read_text()
    for type_ in (*constants.SUMMARY_TYPES, *constants.CONCERN_TYPES):
        assert f"### {type_}" in text, type_


def test_concern_pages_exist() -> None:
    pages = set(re.findall(r"docs/[a-z-]+\.md", STATUS.read_text()))
    missing = sorted(p for p in pages if not (ROOT / p).is_file())
    assert not missing, f"docs/status.md points at missing pages: {missing}"
