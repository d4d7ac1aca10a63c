"""Typed status: pydantic models for the status sections and for ``status.recorded``.

One module per concern (``api/status/<concern>.py``) holds the models its step records and the
section it owns; this package's root holds the base class. Steps build these models and hand
them over (``dump`` turns one into the JSON the API server stores); the install-values hand-off
reads them back typed. Field names are snake_case in Python and camelCase on the wire.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class StatusModel(BaseModel):
    """Base of every status model: camelCase on the wire, frozen, unknown keys kept out."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    def dump(self) -> dict[str, Any]:
        """The JSON the API server stores: camelCase keys, unset optional fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @classmethod
    def load(cls, value: Any) -> Any:
        """Parse what ``dump`` produced (or an older status); ``None`` stays ``None``."""
        return None if value is None else cls.model_validate(value)
