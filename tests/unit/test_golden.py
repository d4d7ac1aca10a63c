"""`tenant-platform render` output for the sample and tests/golden/specs/, byte for byte.

A failure here means the rendered manifests changed. If the change is intended, run `make golden`
(python -m tests.golden.update) and commit the regenerated files with the change, so the review
shows the new policies, Gateway, RBAC or Corefile block as a diff (tests/golden/__init__.py).
"""

from __future__ import annotations

import pytest
from tests import golden

from tenant_platform import cli

SPECS = golden.specs()
HINT = "rendered output changed: run `make golden` and review the diff"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_manifest_matches_its_golden_file(name: str) -> None:
    directory = golden.GOLDEN / name
    files = golden.render(SPECS[name])
    stored = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    assert stored == sorted([*files, golden.INDEX]), HINT
    assert (directory / golden.INDEX).read_text(encoding="utf-8") == golden.index(files), HINT
    for file, content in files.items():
        assert (directory / file).read_text(encoding="utf-8") == content, f"{name}/{file}: {HINT}"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_command_prints_the_golden_files_in_order(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    directory = golden.GOLDEN / name
    order = (directory / golden.INDEX).read_text(encoding="utf-8").splitlines()
    expected = "---\n".join((directory / file).read_text(encoding="utf-8") for file in order)
    assert cli.main(["render", "-f", str(SPECS[name])]) == 0
    assert capsys.readouterr().out == expected, HINT


def test_no_golden_spec_goes_missing_or_duplicates_another() -> None:
    assert set(SPECS) >= {"sample", "external-issuer", "external-gateway-no-gpu", "staged-guard-custom-proxy"}
    rendered = [tuple(golden.render(path).values()) for path in SPECS.values()]
    assert len(set(rendered)) == len(rendered)
