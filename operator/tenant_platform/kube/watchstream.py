"""One watch request, streamed: events as dicts until the server closes it (kube/client.Kube.watch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes.client
import urllib3

from tenant_platform.kube import errors, observed


def watch_stream(
    api: kubernetes.client.ApiClient,
    path: str,
    query: dict[str, str],
    timeout_seconds: int,
    *,
    accept: str = "application/json",
) -> Iterator[dict[str, Any]]:
    """Stream the watch at ``path`` with ``query``; ERROR events raise, connection trouble raises
    Transient, and a half-read stream never goes back to the connection pool. ``accept``: e.g.
    ``kube.client.METADATA_ONLY`` for objects' metadata only."""
    try:
        method_, url, headers_, body_, post = api.param_serialize(
            "GET",
            path,
            query_params=list(query.items()),
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
        )
        resp = api.call_api(method_, url, headers_, body_, post, _request_timeout=(30.0, timeout_seconds + 30.0))
    except kubernetes.client.exceptions.ApiException as exc:
        observed.report("WATCH", exc.status)
        raise errors.from_response(int(exc.status or 0), exc.body) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        observed.report("WATCH", None)
        raise errors.Transient(0, "ConnectionError", str(exc)) from None
    observed.report("WATCH", int(resp.status))
    stream = resp.response
    drained = False
    try:
        if not 200 <= int(resp.status) < 300:
            raise errors.from_response(int(resp.status), stream.read())
        try:
            for line in stream:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise errors.from_response(int(status.get("code") or 500), json.dumps(status))
                yield event
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise errors.Transient(0, "ConnectionError", str(exc)) from None
        drained = True
    finally:
        # NB: a watch left half-read must not go back to the connection pool.
        if drained:
            stream.release_conn()
        else:
            stream.close()
