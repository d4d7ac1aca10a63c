"""The recipe of docs/adding-a-concern.md, followed for a fourteenth concern, ``example``.

The test writes the concern package as real source files (``verdict.py``, ``manifests.py``,
``step.py``) into a temporary directory, importable as ``tenant_platform.concerns.example``, and
adds it to the API model (condition type ``ExampleReady`` in ``constants.CONCERN_TYPES``, its
reasons class in ``reasons.CATALOGUE``) and to the registry (``registry.STEPS``) through
monkeypatch only. Nothing else is touched: if the pipeline, the cleanup pass or ``render`` needed
an edit of their own for a new concern, these tests would fail.

``test_the_step_satisfies_the_typed_contract`` makes the same edits in a copy of the package, as
text (the recipe's diff: constants.py, reasons.py with the class in the ``Reason`` union,
registry.py), and runs mypy (strict) on the new concern there.
"""

from __future__ import annotations

import importlib
import inspect
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

import tenant_platform
from tenant_platform import cli, concerns, reconcile
from tenant_platform.api import constants, reasons
from tenant_platform.config import Settings
from tenant_platform.framework.contract import Step
from tenant_platform.kube.client import Kube
from tenant_platform.reconcile import registry

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings(drift_interval=30)
EXAMPLE_READY = "ExampleReady"
PACKAGE = "tenant_platform.concerns.example"

# -- the recipe's sources ----------------------------------------------------------------------------

# What api/reasons.py gains: one class per condition type (its members in the order the chain
# picks them). The test runs this text for the monkeypatched catalogue and pastes it into the
# copy mypy checks, so both see the same class.
REASONS_CLASS = '''
class Example(StrEnum):
    """ExampleReady (the recipe's example concern, tests/integration/test_concern_recipe.py)."""

    INPUT_READY = "InputReady"
    INPUT_NOT_FOUND = "InputNotFound"
    INPUT_NOT_READY = "InputNotReady"
'''

VERDICT_PY = '''
"""ExampleReady: the input ConfigMap says the example is ready (pure: no client, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Example
from tenant_platform.concerns.example import manifests
from tenant_platform.core import conditions
from tenant_platform.core.checks import Chain, Check
from tenant_platform.core.conditions import Condition
from tenant_platform.core.verdict import Verdict


@dataclass(frozen=True)
class ExampleFacts:
    """What ``gather`` read: the data of the input ConfigMap, None when it does not exist."""

    input: dict[str, str] | None


def input_missing(facts: ExampleFacts) -> Condition | None:
    if facts.input is not None:
        return None
    message = f"ConfigMap {manifests.INPUT} not found in the platform namespace."
    return conditions.false(constants.EXAMPLE_READY, Example.INPUT_NOT_FOUND, message)


def input_not_ready(facts: ExampleFacts) -> Condition | None:
    if (facts.input or {}).get("ready") == "true":
        return None
    message = f"ConfigMap {manifests.INPUT} does not say ready: \\"true\\"."
    return conditions.false(constants.EXAMPLE_READY, Example.INPUT_NOT_READY, message)


CHECKS = Chain[ExampleFacts, Condition](
    Check("input ConfigMap missing", input_missing),
    Check("input not ready", input_not_ready),
)


def evaluate(platform: TenantPlatform, facts: ExampleFacts) -> Verdict:
    """The first finding of ``CHECKS``, else InputReady; the output ConfigMap either way."""
    found = CHECKS.first(facts)
    condition = (
        found.value
        if found is not None
        else conditions.true(constants.EXAMPLE_READY, Example.INPUT_READY, "The input says ready.")
    )
    return Verdict(conditions=[condition], desired=manifests.render(platform))
'''

MANIFESTS_PY = '''
"""The example concern's one child: a ConfigMap in the platform namespace (pure render)."""

from __future__ import annotations

from tenant_platform.api.models import TenantPlatform
from tenant_platform.core.verdict import Manifest

COMPONENT = "example"
INPUT = "example-input"
"""The ConfigMap the step reads (a person writes it; the test does)."""
OUTPUT = "example-output"


def render(platform: TenantPlatform) -> list[Manifest]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": OUTPUT, "namespace": platform.spec.namespace},
            "data": {"domain": platform.spec.domain},
        }
    ]
'''

STEP_PY = '''
"""The example concern's step: gather (reads), evaluate (pure), apply (writes), cleanup, render."""

from __future__ import annotations

from tenant_platform.api import constants
from tenant_platform.api.models import TenantPlatform
from tenant_platform.api.reasons import Common
from tenant_platform.concerns.example import manifests
from tenant_platform.concerns.example.verdict import ExampleFacts, evaluate
from tenant_platform.core import conditions
from tenant_platform.core.verdict import Verdict
from tenant_platform.framework.base import CleanupResult, StepContext, apply_children, selector
from tenant_platform.framework.contract import Action, Given, Step
from tenant_platform.kube import errors
from tenant_platform.kube.client import Obj


class ExampleStep:
    name = manifests.COMPONENT
    condition_types: tuple[str, ...] = (constants.EXAMPLE_READY,)

    def action(self, platform: TenantPlatform) -> Action:
        return Action("reconcile the example")

    def gather(self, ctx: StepContext) -> ExampleFacts:
        live = ctx.kube.get("v1", "ConfigMap", manifests.INPUT, ctx.platform.spec.namespace)
        return ExampleFacts(input=None if live is None else dict(live.get("data") or {}))

    def evaluate(self, given: Given, facts: ExampleFacts) -> Verdict:
        return evaluate(given.platform, facts)

    def apply(self, ctx: StepContext, facts: ExampleFacts, verdict: Verdict) -> Verdict:
        outcome = apply_children(
            ctx,
            manifests.COMPONENT,
            verdict.desired,
            prune_kinds=[("v1", "ConfigMap")],
            prune_namespaces=[ctx.platform.spec.namespace],
        )
        if outcome.ok:
            return verdict
        reason = Common.FORBIDDEN if outcome.forbidden else Common.API_ERROR
        message = "Could not apply the example: " + "; ".join(outcome.errors)
        return verdict.but(conditions=[conditions.false(constants.EXAMPLE_READY, reason, message)], failed=True)

    def cleanup(self, ctx: StepContext) -> CleanupResult:
        namespace = ctx.platform.spec.namespace
        try:
            for item in ctx.kube.list("v1", "ConfigMap", namespace, label_selector=selector(ctx.name, self.name)):
                meta = item["metadata"]
                ctx.kube.delete("v1", "ConfigMap", meta["name"], namespace, uid=meta.get("uid"))
        except errors.KubeError as exc:
            return CleanupResult(False, f"Could not delete the example ConfigMap: {exc.message or exc}")
        return CleanupResult(True)

    def render(self, platform: TenantPlatform) -> list[Obj]:
        return manifests.render(platform)


STEP = ExampleStep()
CONTRACT: Step[ExampleFacts] = STEP
"""mypy checks here that the step implements the contract in full."""
'''

SOURCES = {
    "__init__.py": '"""The recipe\'s example concern."""\n',
    "verdict.py": VERDICT_PY,
    "manifests.py": MANIFESTS_PY,
}
SOURCES["step.py"] = STEP_PY


def write_package(root: Path) -> Path:
    """The concern package ``example`` under ``root`` (a folder standing in for concerns/)."""
    package = root / "example"
    package.mkdir(parents=True)
    for name, text in SOURCES.items():
        (package / name).write_text(text.lstrip(), encoding="utf-8")
    return package


def reasons_class() -> type[StrEnum]:
    namespace: dict[str, Any] = {"StrEnum": StrEnum}
    exec(REASONS_CLASS, namespace)
    cls: type[StrEnum] = namespace["Example"]
    return cls


# -- the concern added through monkeypatch only ------------------------------------------------------


@dataclass
class Added:
    step: Any
    """The module ``tenant_platform.concerns.example.step``."""
    reasons: type[StrEnum]


@pytest.fixture
def example(tmp_path: Path) -> Iterator[Added]:
    """The example concern importable and registered, for this test only (then all undone)."""
    write_package(tmp_path / "concerns")
    cls = reasons_class()
    with pytest.MonkeyPatch.context() as patch:
        # The package, as if it sat in concerns/.
        patch.setattr(concerns, "__path__", [*concerns.__path__, str(tmp_path / "concerns")])
        # The API model: the condition type and its reasons class.
        patch.setattr(constants, "EXAMPLE_READY", EXAMPLE_READY, raising=False)
        patch.setattr(constants, "CONCERN_TYPES", (*constants.CONCERN_TYPES, EXAMPLE_READY))
        patch.setattr(reasons, "Example", cls, raising=False)
        patch.setitem(reasons.CATALOGUE, EXAMPLE_READY, cls)
        reasons.allowed.cache_clear()  # allowed() caches each type's reasons
        try:
            step_module = importlib.import_module(f"{PACKAGE}.step")
            # The registry: the new step after the others.
            patch.setattr(registry, "STEPS", [*registry.STEPS, step_module.STEP])
            yield Added(step_module, cls)
        finally:
            for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
                del sys.modules[name]
    reasons.allowed.cache_clear()
    importlib.invalidate_caches()


def test_the_catalogue_knows_the_new_reasons(example: Added) -> None:
    assert reasons.allowed(EXAMPLE_READY) >= {r.value for r in example.reasons}
    assert {r.value for r in example.reasons} <= reasons.allowed(constants.RECONCILING)
    assert reasons.member("InputNotFound") is example.reasons("InputNotFound")
    verdict = importlib.import_module(f"{PACKAGE}.verdict")
    assert verdict.CHECKS.names == ("input ConfigMap missing", "input not ready")


def test_the_step_has_every_method_of_the_contract(example: Added) -> None:
    """The runtime shadow of the mypy check below: every protocol member, same parameters."""
    step = example.step.STEP
    assert step.name == "example" and step.condition_types == (EXAMPLE_READY,)
    assert not hasattr(step, "reconcile")
    for name in ("action", "gather", "evaluate", "apply", "cleanup", "render"):
        want = list(inspect.signature(getattr(Step, name)).parameters)[1:]
        assert list(inspect.signature(getattr(step, name)).parameters) == want, name


# -- the pipeline, the cleanup pass and render, against the real API server ---------------------------


def fresh(kube: Kube, name: str) -> dict[str, Any]:
    body = kube.get(constants.API_VERSION, constants.KIND, name)
    assert body is not None
    return body


def run(kube: Kube, name: str) -> dict[str, Any]:
    """One pass of reconcile.run; the status as the API server then holds it."""
    reconcile.run(fresh(kube, name), kube=kube, settings=SETTINGS, now=NOW)
    status: dict[str, Any] = fresh(kube, name)["status"]
    return status


def cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    found = [c for c in status.get("conditions", []) if c["type"] == type_]
    assert found, f"no {type_} condition in {status}"
    return found[0]


def set_input(kube: Kube, namespace: str, ready: str) -> None:
    """The input ConfigMap, as a person would write it (not with the operator's field manager)."""
    if kube.get("v1", "ConfigMap", "example-input", namespace) is None:
        kube.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "example-input", "namespace": namespace},
                "data": {"ready": ready},
            }
        )
    else:
        kube.merge_patch("v1", "ConfigMap", "example-input", {"data": {"ready": ready}}, namespace=namespace)


def test_a_new_concern_runs_through_the_pipeline(
    example: Added, crd: Kube, make_platform: Any, unique_name: str
) -> None:
    make_platform(unique_name, unique_name)

    # No input yet: the chain's first check decides.
    status = run(crd, unique_name)
    example_ready = cond(status, EXAMPLE_READY)
    assert (example_ready["status"], example_ready["reason"]) == ("False", "InputNotFound"), example_ready
    ready = cond(status, constants.READY)
    assert ready["status"] == "False"
    assert f"{EXAMPLE_READY}: InputNotFound" in ready["message"]
    assert [c["type"] for c in status["conditions"]].index(EXAMPLE_READY) > [
        c["type"] for c in status["conditions"]
    ].index(constants.GPU_READY), "status shows concerns in CONCERN_TYPES order"

    # The child is applied with our labels, in the platform's namespace.
    child = crd.get("v1", "ConfigMap", "example-output", unique_name)
    assert child is not None
    labels = child["metadata"]["labels"]
    assert labels[constants.LABEL_MANAGED_BY] == constants.MANAGED_BY_VALUE
    assert labels[constants.LABEL_PLATFORM] == unique_name
    assert labels[constants.LABEL_COMPONENT] == "example"
    assert child["data"] == {"domain": f"{unique_name}.example.com"}

    # The input exists but does not say ready: the second check.
    set_input(crd, unique_name, "false")
    status = run(crd, unique_name)
    assert cond(status, EXAMPLE_READY)["reason"] == "InputNotReady"
    ready = cond(status, constants.READY)
    assert ready["status"] == "False" and f"{EXAMPLE_READY}: InputNotReady" in ready["message"]

    # Flipped: ExampleReady True, and Ready no longer held back by it.
    set_input(crd, unique_name, "true")
    status = run(crd, unique_name)
    example_ready = cond(status, EXAMPLE_READY)
    assert (example_ready["status"], example_ready["reason"]) == ("True", "InputReady"), example_ready
    ready = cond(status, constants.READY)
    assert EXAMPLE_READY not in ready["message"], ready
    others_true = all(cond(status, t)["status"] == "True" for t in constants.CONCERN_TYPES if t != EXAMPLE_READY)
    assert (ready["status"] == "True") == others_true, ready

    # `tenant-platform render` includes the manifest (unstamped, as rendered).
    rendered = cli.render_manifests(fresh(crd, unique_name))
    assert {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "example-output", "namespace": unique_name},
        "data": {"domain": f"{unique_name}.example.com"},
    } in rendered

    # The deletion pass runs its cleanup: our child goes, the input (not ours) stays.
    outcome = reconcile.cleanup(fresh(crd, unique_name), kube=crd, settings=SETTINGS, now=NOW)
    assert outcome.finished and not outcome.gave_up, outcome.message
    assert outcome.results["example"].done, outcome.results["example"]
    assert list(outcome.results) == [step.name for step in reversed(reconcile.steps())]
    assert crd.get("v1", "ConfigMap", "example-output", unique_name) is None
    assert crd.get("v1", "ConfigMap", "example-input", unique_name) is not None


# -- the typed contract: the recipe's diff in a copy of the package, checked by mypy ----------------


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path.name}: expected one {old!r} (the recipe's anchor moved?)"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_the_step_satisfies_the_typed_contract(tmp_path: Path) -> None:
    """mypy --strict on the new concern, in a copy of the package with the recipe's edits of the
    API model and the registry made as text (about 10 s with a cold cache)."""
    source = Path(tenant_platform.__file__).parent
    copy = tmp_path / "src" / "tenant_platform"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    write_package(copy / "concerns")
    edit(
        copy / "api" / "constants.py",
        'GPU_READY: Final = "GPUReady"\n',
        f'GPU_READY: Final = "GPUReady"\nEXAMPLE_READY: Final = "{EXAMPLE_READY}"\n',
    )
    edit(copy / "api" / "constants.py", "    GPU_READY,\n)", "    GPU_READY,\n    EXAMPLE_READY,\n)")
    edit(copy / "api" / "reasons.py", "\n\nReason: TypeAlias = (", REASONS_CLASS + "\n\nReason: TypeAlias = (")
    edit(copy / "api" / "reasons.py", "    | Target\n)", "    | Target\n    | Example\n)")
    edit(
        copy / "api" / "reasons.py",
        "    constants.TARGET_REACHABLE: Target,\n}",
        "    constants.TARGET_REACHABLE: Target,\n    constants.EXAMPLE_READY: Example,\n}",
    )
    edit(
        copy / "reconcile" / "registry.py",
        "import tenant_platform.concerns.edgecert.step\n",
        "import tenant_platform.concerns.edgecert.step\nimport tenant_platform.concerns.example.step\n",
    )
    edit(
        copy / "reconcile" / "registry.py",
        "    tenant_platform.concerns.gpu.step.STEP,\n",
        "    tenant_platform.concerns.gpu.step.STEP,\n    tenant_platform.concerns.example.step.STEP,\n",
    )
    config = tmp_path / "mypy.ini"
    config.write_text(
        textwrap.dedent(
            """\
            [mypy]
            strict = True
            plugins = pydantic.mypy
            python_version = 3.11

            [mypy-kopf.*,kubernetes.*,lupa.*]
            ignore_missing_imports = True
            """
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "MYPYPATH": str(copy.parent)}
    env.pop("PYTHONPATH", None)
    modules = [f"{PACKAGE}.{m}" for m in ("step", "verdict", "manifests")] + ["tenant_platform.reconcile.registry"]
    args = [a for m in modules for a in ("-m", m)]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # And the contract is what mypy checked: a step missing a method is rejected.
    broken = copy / "concerns" / "example" / "step.py"
    edit(broken, "    def render(self", "    def render_missing(self")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1 and "Step[ExampleFacts]" in done.stdout, done.stdout + done.stderr
