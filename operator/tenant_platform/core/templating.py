"""The one jinja2 setup for every concern's templates (``concerns/<name>/templates/``):
StrictUndefined, no autoescape (YAML, not HTML; every user value goes through ``tojson``), each
template rendering exactly one object that is parsed with yaml.safe_load here, so no template text
leaves the package. One environment per templates folder."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2
import yaml


def templates_beside(module_file: str) -> Path:
    """The ``templates`` folder beside a concern's manifests module (pass ``__file__``)."""
    return Path(module_file).parent / "templates"


@functools.cache
def _environment(folder: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # YAML, not HTML; every value goes through tojson
        keep_trailing_newline=True,
    )


def render_object(folder: Path, template: str, **values: Any) -> dict[str, Any]:
    """Render ``template`` of ``folder`` with ``values`` and parse it; ValueError unless it is one object."""
    text = _environment(folder).get_template(template).render(**values)
    parsed = yaml.safe_load(text)
    if not isinstance(parsed, dict):
        raise ValueError(f"{template} did not render one object")
    return parsed
