"""The cold path is safe (issue 25, item 8): no pipeline in the build and test scripts can fail
after the work is done.

Under ``set -o pipefail`` a pipeline fails when any command in it fails, and a reader that stops
early (``head``, ``grep -q``, ``grep -m``) makes the writer die of SIGPIPE if it is still writing:
``etcd --version | head -1`` failed a finished build 20 times in 300 on a busy machine. The scripts
take a command's whole output first and cut it in the shell instead. The rule is checked on every
script (a sourced library, without a shebang, runs under its caller's pipefail), and the control
plane build's tail (hack/control-plane-finish.sh, the code that failed) runs here against a fake
etcd whose --version writes several lines slowly and more than a pipe holds."""

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
    if not pipefail(text) and text.startswith("#!"):
        return  # a library (no shebang) runs under its caller's options: checked as if pipefail
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    offending = [line.strip() for line in code if EARLY_READERS.search(line)]
    assert not offending, f"{script.name}: a reader that stops early under pipefail: {offending}"


def test_the_rule_is_real_a_writer_still_writing_fails_the_pipeline() -> None:
    """What the rule guards against, shown with bash itself: the writer gets SIGPIPE (exit 141)."""
    early = subprocess.run(["bash", "-c", "set -o pipefail; yes | head -1 >/dev/null"], check=False)
    assert early.returncode == 141
    whole = subprocess.run(["bash", "-c", "set -o pipefail; out=$(seq 3); echo \"${out%%$'\\n'*}\""], check=False)
    assert whole.returncode == 0


FINISH = ROOT / "hack" / "control-plane-finish.sh"
ETCD_FIRST_LINE = "etcd Version: 3.6.99"
# etcd --version as a busy machine delivers it: the first line, a pause, then more lines than a pipe
# buffer holds (64 KiB), so a reader that closes after the first line always leaves it writing.
FAKE_ETCD = f"""#!/usr/bin/env bash
echo '{ETCD_FIRST_LINE}'
sleep 0.2
echo 'Git SHA: 0000000'
sleep 0.2
for i in $(seq 4000); do echo "Go Version: go1.99 OS/Arch: linux/amd64 padding line $i of a long version text"; done
"""
FAKE_APISERVER = "#!/usr/bin/env bash\necho 'Kubernetes v1.99.0'\n"


def fake_build(tmp_path: Path) -> tuple[Path, Path]:
    """A finished build's work directory (fake binaries) and the cache directory it moves to."""
    work, out = tmp_path / ".build.XXXX", tmp_path / "k8s-v1.99.0-etcd-v3.6.99"
    (work / "bin").mkdir(parents=True)
    for name, text in (("etcd", FAKE_ETCD), ("kube-apiserver", FAKE_APISERVER)):
        (work / "bin" / name).write_text(text)
        (work / "bin" / name).chmod(0o755)
    out.mkdir()
    (out / "stale").write_text("a previous, incomplete build")
    return work, out


def run_bash(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script`` under the build scripts' options, with hack/control-plane-finish.sh sourced."""
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail\nsource "{FINISH}"\n{script}', "bash", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_control_plane_builds_tail_survives_a_slow_large_etcd_version(tmp_path: Path) -> None:
    work, out = fake_build(tmp_path)
    # The old tail's pipeline, against the same fake: the reader closes after one line, etcd is
    # killed by SIGPIPE while writing, and pipefail fails the finished build (exit 141).
    old = run_bash('"$1/bin/etcd" --version | head -1 >&2', str(work))
    assert old.returncode == 141, old
    assert old.stderr.strip() == ETCD_FIRST_LINE
    # The build's tail as hack/build-control-plane.sh runs it: the whole output, then its first line.
    done = run_bash('finish_control_plane "$1" "$2" v1.99.0 v3.6.99 "$(date +%s)"', str(work), str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.splitlines() == ["Kubernetes v1.99.0", ETCD_FIRST_LINE]
    assert not work.exists() and sorted(p.name for p in out.iterdir()) == ["STAMP", "bin"]
    stamp = dict(line.split("=", 1) for line in (out / "STAMP").read_text().splitlines())
    assert (stamp["k8s"], stamp["etcd"]) == ("v1.99.0", "v3.6.99") and int(stamp["built_in_seconds"]) >= 0


def test_the_build_script_runs_that_tail() -> None:
    text = (ROOT / "hack" / "build-control-plane.sh").read_text()
    assert 'source "$here/control-plane-finish.sh"' in text
    code = [line.strip() for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert 'finish_control_plane "$work" "$out" "$k8s_version" "$etcd_version" "$start"' in code
    assert not [line for line in code if "--version" in line and "etcd" in line]  # only the tail reads it
