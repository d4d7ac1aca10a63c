"""`tenant-platform version`, `tenant-platform completion bash|zsh` and the help of every argument.

The bash script runs in a real bash here: each case fills COMP_WORDS as bash would for a command
line and calls the generated function. The operator's version as a cluster reports it is in
tests/integration/test_release.py (a real API server)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tenant_platform import __version__, cli, completion

ROOT = Path(__file__).resolve().parents[2]

UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "operator"))
    return subprocess.run(
        [sys.executable, "-m", "tenant_platform.cli", *args], capture_output=True, text=True, env=env, check=False
    )


Parsers = list[tuple[str, argparse.ArgumentParser]]


def parsers(parser: argparse.ArgumentParser, path: str = "tenant-platform") -> Parsers:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += parsers(sub, f"{path} {name}")
    return out


# ---- help ---------------------------------------------------------------------------------------


def test_every_argument_has_help() -> None:
    missing = []
    for path, parser in parsers(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                missing += [f"{path} {name}" for name in action.choices if not helps.get(name)]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_the_walk_sees_every_subcommand() -> None:
    names = {path for path, _ in parsers(cli.build_parser())}
    assert {"tenant-platform version", "tenant-platform completion", "tenant-platform run"} <= names


# ---- version ------------------------------------------------------------------------------------


def test_version_client_only(tmp_path: Path) -> None:
    proc = run("version", "--client", home=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, f"client:   {__version__}\n"), proc.stderr
    proc = run("version", "--client", "-o", "json", home=tmp_path)
    assert json.loads(proc.stdout) == {"client": {"version": __version__}}


def test_version_without_a_cluster_does_not_fail(tmp_path: Path) -> None:
    proc = run("version", home=tmp_path)  # no kubeconfig at all
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"client:   {__version__}"
    assert proc.stdout.splitlines()[1].startswith("operator: not reachable (no kubeconfig found")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE_KUBECONFIG)
    proc = run("version", "--kubeconfig", str(kubeconfig), "-o", "json", home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["client"] == {"version": __version__}
    assert report["cluster"]["reachable"] is False
    assert "https://127.0.0.1:1" in report["cluster"]["error"]


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("ghcr.io/tenancy-dev/tenant-platform-operator:0.2.0", "0.2.0"),
        ("registry.example.com:5000/tenant-platform-operator:1.2.3-rc.1", "1.2.3-rc.1"),
        ("registry.example.com:5000/tenant-platform-operator", None),
        ("registry.example.com/x:0.2.0@sha256:" + "a" * 64, "0.2.0"),
        ("registry.example.com/x@sha256:" + "a" * 64, None),
    ],
)
def test_image_version(image: str, tag: str | None) -> None:
    assert cli.image_version(image) == tag


def test_operator_version_from_a_deployment() -> None:
    deployment = {
        "metadata": {
            "name": "tenant-platform-operator",
            "namespace": "ops",
            "labels": {"app.kubernetes.io/version": "9"},
        },
        "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "operator", "image": "r/o:0.2.0"}]}}},
        "status": {"readyReplicas": 1},
    }
    assert cli.operator_version(deployment) == {
        "version": "0.2.0",
        "image": "r/o:0.2.0",
        "deployment": "ops/tenant-platform-operator",
        "ready": "1/2",
    }
    # Pinned by digest only: the chart's version label says which release it is.
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "r/o@sha256:" + "b" * 64
    assert cli.operator_version(deployment)["version"] == "9"


# ---- completion ---------------------------------------------------------------------------------


def complete(script: str, line: str) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), with the generated script loaded."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    program = (
        f"{script}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_tenant_platform\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.fixture(scope="module")
def bash_script() -> str:
    return completion.script(cli.build_parser(), "bash")


def test_bash_script_is_valid_bash(bash_script: str, tmp_path: Path) -> None:
    path = tmp_path / "tenant-platform.bash"
    path.write_text(bash_script)
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert bash_script.rstrip().endswith("complete -o default -F _tenant_platform tenant-platform")


def test_bash_completes_subcommands_flags_and_choices(bash_script: str) -> None:
    assert set(complete(bash_script, "tenant-platform ")) >= {
        "dev", "run", "render", "facts", "check", "version", "completion", "--version"
    }  # fmt: skip
    assert complete(bash_script, "tenant-platform ve") == ["version"]
    assert complete(bash_script, "tenant-platform run --log-level ") == ["debug", "info", "warning", "error"]
    assert complete(bash_script, "tenant-platform render -o j") == ["json"]
    assert complete(bash_script, "tenant-platform completion ") == ["bash", "zsh"]
    assert complete(bash_script, "tenant-platform version --cl") == ["--client"]
    assert complete(bash_script, "tenant-platform run --drift-interval ") == []  # a number: nothing offered
    assert "--file" in complete(bash_script, "tenant-platform check -")


def test_bash_completes_files_where_a_flag_takes_a_path(bash_script: str, tmp_path: Path) -> None:
    (tmp_path / "tp.yaml").write_text("")
    offered = complete(bash_script, f"tenant-platform render -f {tmp_path}/t")
    assert offered == [f"{tmp_path}/tp.yaml"]


def test_bash_offers_every_flag_of_every_subcommand(bash_script: str) -> None:
    _, subs = completion.commands(cli.build_parser())
    for command in subs:
        offered = set(complete(bash_script, f"tenant-platform {command.name} -"))
        assert offered == {f for o in command.options for f in o.flags}, command.name


def test_zsh_script_covers_every_subcommand_and_flag() -> None:
    script = completion.script(cli.build_parser(), "zsh")
    assert script.startswith("#compdef tenant-platform\n")
    _, subs = completion.commands(cli.build_parser())
    for command in subs:
        assert f"        '{command.name}:" in script or f"'{command.name}:" in script, command.name
        branch = script.split(f"                {command.name})\n", 1)[1].split("                    ;;", 1)[0]
        for option in command.options:
            for flag in option.flags:
                assert flag in branch, (command.name, flag)
    assert "':shell -- the shell to complete for:(bash zsh)'" in script
    assert "'(-o --output)'{-o,--output}'[output format (default\\: table)]:output:(table json yaml)'" in script
    # Every line is balanced shell quoting (a help text with a quote must not break the script).
    for line in script.splitlines():
        words = line.removesuffix("\\").replace("{", " ").replace("}", " ").replace(",", " ")
        shlex.split(words, comments=True)


def test_completion_command_prints_the_scripts(tmp_path: Path) -> None:
    for shell in completion.SHELLS:
        proc = run("completion", shell, home=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == completion.script(cli.build_parser(), shell)
    proc = run("completion", "fish", home=tmp_path)
    assert proc.returncode == 2
    assert "invalid choice: 'fish'" in proc.stderr
