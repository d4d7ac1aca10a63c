"""The cold path is safe (issue 25, item 8): no pipeline in the build and test scripts can fail
after the work is done.

Under ``set -o pipefail`` a pipeline fails when any command in it fails, and a reader that stops
early (``head``, ``grep -q``, ``grep -m``) makes the writer die of SIGPIPE if it is still writing:
``etcd --version | head -1`` failed a finished build 20 times in 300 on a busy machine. The scripts
take a command's whole output first and cut it in the shell instead."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("hack/*.sh"), ROOT / ".ci" / "run"])
EARLY_READERS = re.compile(r"\|\s*(head\b|grep\s+(-\w*[qm]\w*)\b|sed\s+-n\s+'?1p)")


def pipefail(text: str) -> bool:
    return bool(re.search(r"^\s*set\s+-[a-z]*o\s+pipefail|^\s*set\s+-o\s+pipefail", text, re.M))


@pytest.mark.parametrize("script", SCRIPTS, ids=[str(s.relative_to(ROOT)) for s in SCRIPTS])
def test_no_pipeline_reads_only_the_start_of_its_input(script: Path) -> None:
    text = script.read_text()
    if not pipefail(text):
        return
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    offending = [line.strip() for line in code if EARLY_READERS.search(line)]
    assert not offending, f"{script.name}: a reader that stops early under pipefail: {offending}"


def test_the_rule_is_real_a_writer_still_writing_fails_the_pipeline() -> None:
    """What the rule guards against, shown with bash itself: the writer gets SIGPIPE (exit 141)."""
    early = subprocess.run(["bash", "-c", "set -o pipefail; yes | head -1 >/dev/null"], check=False)
    assert early.returncode == 141
    whole = subprocess.run(["bash", "-c", "set -o pipefail; out=$(seq 3); echo \"${out%%$'\\n'*}\""], check=False)
    assert whole.returncode == 0
