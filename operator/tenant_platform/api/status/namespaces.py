"""What the namespaces step keeps in status: ``status.managed.namespaces``.

The step owns one key of the shared ``managed`` section (sections several steps contribute to are
merged one level deep): the namespaces it labelled, so one dropped from the spec is released on a
later pass. It records nothing in ``status.recorded``.
"""

from __future__ import annotations

from tenant_platform.api.status import StatusModel


class ManagedNamespaces(StatusModel):
    """``status.managed`` as far as the namespaces step is concerned."""

    namespaces: list[str]
    """The namespaces we labelled (created or adopted), sorted; kept until released."""
