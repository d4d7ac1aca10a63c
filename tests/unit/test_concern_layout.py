"""The layout docs/adding-a-concern.md promises: a concern lives in its own package, and only the
registry, the API model and a pinned list of documented exceptions know the concerns by name.

- Outside ``concerns/``, only ``reconcile/registry.py`` enumerates the concerns (it imports every
  concern's step); every other import of a concern module from outside is pinned in
  ``CROSS_IMPORTS`` with the reason, so a new one is a visible decision (edit the pin, say why).
- Every concern package has the modules of the recipe: ``step.py``, and ``verdict.py`` unless
  ``NO_VERDICT`` says why not.
- Every concern and every one of its modules is placed in the import-linter contracts of
  pyproject.toml: the "inside a concern" layers (exhaustive), the independence of concerns, and
  (for ``verdict.py`` and ``manifests.py``) the pure parts.
- Every concern condition type has a reasons class in the catalogue and one step that owns it.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

from tenant_platform.api import constants, reasons
from tenant_platform.reconcile import registry

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "operator" / "tenant_platform"
CONCERNS = PACKAGE / "concerns"
PREFIX = "tenant_platform.concerns"

REGISTRY = "tenant_platform.reconcile.registry"
PHASES = {"target": "spec.target: the pipeline connects before any step runs (concerns/target/step.py)"}
"""Concern packages that are not in ``registry.STEPS`` or ``HANDOFF``: phases the pipeline calls."""

CROSS_IMPORTS: dict[str, dict[str, str]] = {
    # module outside concerns/ -> {concern module it imports: why}
    "tenant_platform.main": {
        "tenant_platform.concerns.apiaddresses.verdict": "the informer scopes: the kubernetes Service and its "
        "EndpointSlices the step reads",
        "tenant_platform.concerns.dns.coredns": "the informer scopes: the CoreDNS ConfigMap and pods the step reads, "
        "and which platforms a Corefile change concerns",
    },
    "tenant_platform.state": {
        "tenant_platform.concerns.gpu.step": "GPU changes wake a partial pass of the GPU step only (SCOPES)",
        "tenant_platform.concerns.target.step": "the target phase: observing a reached target (TargetConnection)",
    },
    "tenant_platform.scheduler": {
        "tenant_platform.concerns.gpu.step": "a GPU-only wakeup runs the GPU step alone (COMPONENT)",
    },
    "tenant_platform.targetwatch": {
        "tenant_platform.concerns.target.step": "the target phase: a target's watches (TargetObservation)",
    },
    "tenant_platform.fitcli": {
        "tenant_platform.concerns.gpu.nodefit": "`tenant-platform fit`: the gpu step's own capacity and per-node fit",
        "tenant_platform.concerns.gpu.fit": "`tenant-platform fit`: the request it judges (GpuRequest)",
        "tenant_platform.concerns.gpu.facts": "`tenant-platform fit`: which nodes are GPU nodes, as the step decides",
        "tenant_platform.concerns.gpu.health": "`tenant-platform fit`: spec.gpu.nodeSelector as the step reads it",
        "tenant_platform.concerns.gpu.step": "`tenant-platform fit`: HAMi's resource names, as the step reads them",
        "tenant_platform.concerns.gpushare.manifests": "`tenant-platform fit --platform`: the share's quota "
        "amounts, as the gpushare step renders them",
    },
    "tenant_platform.diagnose": {
        "tenant_platform.concerns.gpu.nodefit": "`tenant-platform diagnose`: each GPU node's capacity and lock, as "
        "the gpu step computes them",
        "tenant_platform.concerns.gpu.facts": "`tenant-platform diagnose`: which nodes are GPU nodes",
        "tenant_platform.concerns.gpu.health": "`tenant-platform diagnose`: HAMi's and the device plugins' workloads, "
        "blocking taints",
        "tenant_platform.concerns.gpu.step": "`tenant-platform diagnose`: HAMi's resource names",
    },
    "tenant_platform.preflight": {
        "tenant_platform.concerns.installvalues.manifests": "`tenant-platform facts` renders the install values "
        "from a live status.recorded",
    },
    "tenant_platform.reconcile.pipeline": {
        "tenant_platform.concerns.target.step": "the target phase runs before every step",
    },
    "tenant_platform.reconcile.cleanup": {
        "tenant_platform.concerns.target.step": "the target phase runs before every cleanup",
    },
    "tenant_platform.testing.kubelet": {
        "tenant_platform.concerns.storage.manifests": "the played kubelet runs the storage write test's pods "
        "only: their labels, role and marker",
    },
}
"""Every import of a concern module from outside concerns/ except the registry's, as of today."""

NO_VERDICT = {
    "installvalues": "the hand-off owns no condition: it renders what the others recorded (manifests.py)",
}
"""Concern packages without a verdict.py, and why."""


def concern_names() -> list[str]:
    return sorted(p.name for p in CONCERNS.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """The names ``path`` imports: ``import a`` gives a, ``from a import b`` gives a.b (a module of
    package a, or a name in module a: ``concern_modules`` tells which)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def concern_modules(names: set[str]) -> set[str]:
    """The concern modules among imported names (``a.b`` for a class b of module a drops to a)."""
    modules: set[str] = set()
    for name in names:
        if name != PREFIX and not name.startswith(PREFIX + "."):
            continue
        parts = name.split(".")
        while len(parts) > 3 and not _is_module(parts):
            parts.pop()
        modules.add(".".join(parts))
    return modules


def _is_module(parts: list[str]) -> bool:
    path = PACKAGE.parent.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def outside_imports() -> dict[str, set[str]]:
    """Module outside concerns/ -> the concern modules it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if CONCERNS in path.parents:
            continue
        modules = concern_modules(imported(path))
        if modules:
            found[module_name(path)] = modules
    return found


def pyproject_contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}


def contract(prefix: str) -> dict[str, Any]:
    found = [c for name, c in pyproject_contracts().items() if name.startswith(prefix)]
    assert len(found) == 1, f"one import-linter contract named {prefix!r}... in pyproject.toml"
    return found[0]


def layer_names(layers: list[str]) -> set[str]:
    """``"(a) | b"`` -> {"a", "b"}."""
    return {part.strip().strip("()").strip() for layer in layers for part in layer.split("|")}


def test_only_the_registry_enumerates_the_concerns() -> None:
    imports = outside_imports()
    stepped = sorted(set(concern_names()) - set(PHASES))
    assert imports.pop(REGISTRY) == {f"{PREFIX}.{name}.step" for name in stepped}, (
        "reconcile/registry.py imports the step of every concern but the phases (PHASES) and nothing else"
    )
    pinned = {module: set(why) for module, why in CROSS_IMPORTS.items()}
    assert imports == pinned, (
        "an import of a concern from outside concerns/ changed: if it is meant, pin it in CROSS_IMPORTS "
        "with the reason (a new concern needs no such import: docs/adding-a-concern.md)"
    )


def test_the_registry_lists_every_concern_once() -> None:
    names = [step.name for step in (*registry.STEPS, registry.HANDOFF)]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(set(concern_names()) - set(PHASES))


def test_every_concern_has_the_modules_of_the_recipe() -> None:
    for name in concern_names():
        package = CONCERNS / name
        assert (package / "step.py").exists(), f"concerns/{name} has no step.py"
        has_verdict = (package / "verdict.py").exists()
        assert has_verdict != (name in NO_VERDICT), (
            f"concerns/{name}: verdict.py {'present' if has_verdict else 'missing'}; NO_VERDICT says otherwise"
        )


def test_every_concern_module_is_placed_in_the_import_contracts() -> None:
    inside = contract("inside a concern")
    layers = layer_names(inside["layers"])
    independent = set(contract("concerns are independent")["modules"])
    pure = set(contract("pure parts")["source_modules"])
    for name in concern_names():
        package = f"{PREFIX}.{name}"
        assert package in inside["containers"], f"{package} is not a container of the 'inside a concern' contract"
        assert package in independent, f"{package} is not in the independence contract"
        for path in sorted((CONCERNS / name).glob("*.py")):
            if path.stem == "__init__":
                continue
            assert path.stem in layers, f"concerns/{name}/{path.name} has no layer in the 'inside a concern' contract"
            if path.stem in ("verdict", "manifests"):
                assert f"{package}.{path.stem}" in pure, f"{package}.{path.stem} is not in the pure-parts contract"


def test_every_concern_condition_has_reasons_and_one_owner() -> None:
    owners: dict[str, list[str]] = {}
    for step in (*registry.STEPS, registry.HANDOFF):
        for type_ in step.condition_types:
            owners.setdefault(type_, []).append(step.name)
    for type_ in constants.CONCERN_TYPES:
        assert type_ in reasons.CATALOGUE, f"{type_} has no reasons class in api/reasons.py CATALOGUE"
        assert len(owners.get(type_, [])) == 1, f"{type_} is owned by {owners.get(type_)}"
    assert set(owners) == set(constants.CONCERN_TYPES)
