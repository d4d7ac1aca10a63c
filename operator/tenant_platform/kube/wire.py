"""What goes over the wire: request path segments (quoted, never walked), the namespace a path
writes into, base64, and the API server's Warning headers."""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable

from tenant_platform.kube import errors

# One RFC 7234 warning value: code, agent, quoted text (backslash escapes), optional quoted date.
_WARNING = re.compile(r'(\d{3})\s+(\S+)\s+"((?:[^"\\]|\\.)*)"(?:\s+"[^"]*")?')


def parse_warnings(values: Iterable[str]) -> list[str]:
    """The texts of ``Warning`` header values (``299 - "text"``), unescaped, in order."""
    texts: list[str] = []
    for value in values:
        found = [re.sub(r"\\(.)", r"\1", m.group(3)) for m in _WARNING.finditer(value)]
        texts += found or [value.strip()]
    return texts


NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def path_segment(value: str, what: str = "name") -> str:
    """``value`` as exactly one URL path segment (percent-encoded, ``/`` and ``?`` included).

    Raises errors.Invalid for "", ``.`` and ``..``: quoting leaves them as they are, and a client
    or proxy may resolve them against the path (the API server refuses such names anyway).
    """
    if value in ("", ".", ".."):
        raise errors.Invalid(400, "InvalidPathSegment", f"{what} {value!r} cannot be part of a request path")
    return urllib.parse.quote(value, safe="")


WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_NAMESPACED_PATH = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)/namespaces/([^/]+)/[^/]")


def namespace_of(path: str) -> str | None:
    """The namespace an API path addresses objects in (None for cluster-scoped paths, including
    a Namespace object itself)."""
    found = _NAMESPACED_PATH.match(path)
    return urllib.parse.unquote(found.group(1)) if found else None


def gv_path(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def b64(value: str | bytes) -> str:
    raw = value.encode() if isinstance(value, str) else value
    return base64.b64encode(raw).decode()
