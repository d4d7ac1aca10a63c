"""docs/status.md explains every condition type and shared reason the operator defines."""

from __future__ import annotations

import re
from pathlib import Path

from tenant_platform.api import constants

ROOT = Path(__file__).resolve().parents[2]
STATUS = ROOT / "docs" / "status.md"


def test_every_condition_type_is_documented() -> None:
    text = STATUS.read_text()
    for type_ in (*constants.SUMMARY_TYPES, *constants.CONCERN_TYPES):
        assert f"`{type_}`" in text or f"### {type_}" in text, type_


def test_every_shared_reason_is_documented() -> None:
    text = STATUS.read_text()
    reasons = {value for name, value in vars(constants).items() if name.startswith("REASON_")}
    missing = sorted(r for r in reasons if f"`{r}`" not in text)
    assert not missing, f"docs/status.md does not explain {missing}"


def test_concern_pages_exist() -> None:
    pages = set(re.findall(r"docs/[a-z-]+\.md", STATUS.read_text()))
    missing = sorted(p for p in pages if not (ROOT / p).is_file())
    assert not missing, f"docs/status.md points at missing pages: {missing}"
