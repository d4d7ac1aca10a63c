"""Who hears of every request the client sends to the Kubernetes API: its verb and response code.

kube/ knows nothing of metrics (they are sibling layers): the operator's start-up (main.py)
subscribes ``metrics.record_api_request`` here, and ``Kube`` and ``watch_stream`` report each
request once its response status is known. Verbs are HTTP methods, ``WATCH`` for a watch; the
code is the response's status, ``<error>`` when there was no response (a connection error), as
client-go's ``rest_client_requests_total`` has it. Both sets are small, so are the series.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Observer = Callable[[str, str], None]
"""Called with (verb, code) for each request."""

NO_RESPONSE = "<error>"

_lock = threading.Lock()
_observers: tuple[Observer, ...] = ()


def observe(observer: Observer) -> Callable[[], None]:
    """Call ``observer(verb, code)`` for every request from now on; returns the unsubscribe."""
    global _observers  # noqa: PLW0603 - a process-wide list, swapped whole under the lock
    with _lock:
        _observers = (*_observers, observer)

    def stop() -> None:
        global _observers  # noqa: PLW0603
        with _lock:
            _observers = tuple(o for o in _observers if o is not observer)

    return stop


def report(verb: str, status: int | None) -> None:
    """One request answered with ``status`` (None or 0: no response)."""
    code = str(status) if status else NO_RESPONSE
    for observer in _observers:
        observer(verb, code)
