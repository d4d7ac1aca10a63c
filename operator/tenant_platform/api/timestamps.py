"""Timestamps as the Kubernetes API writes them (RFC 3339, UTC, ``...Z``), both ways.

Here rather than in status/ because kube/ (token expiry) reads them too, and kube/ imports
nothing above api/.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def format_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the API writes them (``...Z``), or None when absent or malformed."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
