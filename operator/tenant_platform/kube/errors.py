"""Our own small error hierarchy for API calls, so no other layer sees client exceptions.

KubeError                 any failed API call (status, reason, message)
 +-- NotFound             404
 +-- Conflict             409: AlreadyExists, or a resourceVersion precondition failed
 +-- Invalid              422 (and 400): the API rejected the object; message says why
 +-- Forbidden            403: RBAC or an admission policy said no
 +-- Transient            5xx, 429, timeouts, connection errors: retry later
 +-- NotOwned             never sent: a write into a namespace this platform does not own was
                          refused before it left the process (framework/base.py NamespaceClaims)
 +-- NotLeading           refused before sending: this process does not hold the leader Lease
"""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """A failed API call."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}
        self.warnings: list[str] = []
        """``Warning`` header texts of the failed response, where the caller asked for them
        (``Kube.create_with_warnings``): a Warn-only policy binding speaks even on a denial."""


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


class Invalid(KubeError):
    pass


class Forbidden(KubeError):
    pass


class Transient(KubeError):
    pass


class NotOwned(KubeError):
    """A write refused by the caller's write check (``Kube.fenced``): nothing was sent."""

    def __init__(self, namespace: str, message: str):
        super().__init__(409, "NamespaceNotOwned", message)
        self.namespace = namespace


class NotLeading(KubeError):
    """A write refused in-process because this operator is not (or no longer) the leader."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(0, "NotLeading", f"{method} {path} refused: this operator process does not hold the lease")


def from_response(status: int, raw: bytes | str | None) -> KubeError:
    """Map an HTTP status and a Status body to the right KubeError subclass."""
    body: dict[str, Any] = {}
    if raw:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                body = parsed
        except (ValueError, TypeError):
            body = {"message": raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or "")
    cls: type[KubeError]
    if status == 404:
        cls = NotFound
    elif status == 409:
        cls = Conflict
    elif status in (400, 422):
        cls = Invalid
    elif status in (401, 403):
        cls = Forbidden
    elif status == 429 or status >= 500 or status == 0:
        cls = Transient
    else:
        cls = KubeError
    return cls(status, reason or "Unknown", message, body)
