"""Limits on what other people's annotations can make the operator keep, parse or report.

HAMi's annotations are written by the device plugin and scheduler, but any identity that may
create a pod in any namespace may also write them on its own pod. Every value is therefore
treated as hostile: bounded in size before it is stored or parsed (``bounded``, ``check_size``),
numbers are ASCII digits within Go's int32 (``ascii_int``), every text that reaches a status or a
message is shortened (``shorten``), and the parse caches are bounded in bytes (``ParseCache``).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from tenant_platform.formats.hami.names import HamiParseError

# The longest annotation value parsed (characters). HAMi writes about 100 characters per card
# or device; 64 KiB is far above any real value and far below the API server's 256 KiB limit.
MAX_ANNOTATION_CHARS: Final = 64 * 1024
# A stored value longer than MAX_ANNOTATION_CHARS is replaced by this marker and its length.
OVERSIZED: Final = "\x00oversized:"
# Longest text kept of a value in an error message, and of a note in status.
MAX_SHOWN_CHARS: Final = 40
MAX_NOTE_CHARS: Final = 200
# HAMi's numeric fields are Go int32.
MAX_INT: Final = 2**31 - 1
# Ids and model names longer than this are not HAMi's (UUIDs are 40 characters).
MAX_ID_CHARS: Final = 128
# At most this many cards per node register (real nodes have 1 to 16).
MAX_CARDS: Final = 128
# Byte budget of each parse cache. Small: a pass reuses each node's whole capacity while its
# annotations and pods are unchanged (concerns/gpu/capacity.py CapacityCache), so these serve the nodes a
# change touches, and the first pass over a big cluster parses every value whatever the budget.
CACHE_BYTES: Final = 4 * 1024 * 1024
# Byte budget of the per-node capacity cache (about 2.6 KB per node with 8 cards: 12,000 such nodes).
CAPACITY_CACHE_BYTES: Final = 32 * 1024 * 1024

_DIGITS: Final = frozenset("0123456789")


def bounded(value: str) -> str:
    """``value``, or the OVERSIZED marker with its length when it is too long to keep."""
    if len(value) <= MAX_ANNOTATION_CHARS:
        return value
    return f"{OVERSIZED}{len(value)}"


def check_size(value: str) -> None:
    """HamiParseError for a value too long to be HAMi's (or one ``bounded`` replaced)."""
    if value.startswith(OVERSIZED):
        length = value[len(OVERSIZED) :]
        raise HamiParseError(f"value is {length} characters long, over the {MAX_ANNOTATION_CHARS} HAMi ever writes")
    if len(value) > MAX_ANNOTATION_CHARS:
        raise HamiParseError(f"value is {len(value)} characters long, over the {MAX_ANNOTATION_CHARS} HAMi ever writes")


def shorten(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters (with ``...`` when cut), control characters escaped."""
    cleaned = text if text.isprintable() else text.encode("unicode_escape", "replace").decode("ascii")
    return cleaned if len(cleaned) <= limit else cleaned[: max(0, limit - 3)] + "..."


def show(text: str) -> str:
    """``repr`` of a shortened value, for error messages."""
    return repr(shorten(text))


def ascii_int(text: str, what: str) -> int:
    """A non-negative Go int32 written in ASCII digits; HamiParseError otherwise.

    ``str.isdigit`` accepts ``²`` and other Unicode digits, which ``int`` then rejects; HAMi's
    Go parser accepts neither.
    """
    if not text or len(text) > 10 or not _DIGITS.issuperset(text):
        raise HamiParseError(f"{what} {show(text)} is not a non-negative integer")
    value = int(text)
    if value > MAX_INT:
        raise HamiParseError(f"{what} {value} is larger than {MAX_INT}")
    return value


def bounded_int(value: object, what: str) -> int:
    """A JSON number that is a non-negative Go int32; HamiParseError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HamiParseError(f"{what} is not a non-negative integer")
    if value > MAX_INT:
        raise HamiParseError(f"{what} is larger than {MAX_INT}")
    return value


def check_id(value: str, what: str) -> str:
    """A card id or model name: printable and at most MAX_ID_CHARS characters."""
    if len(value) > MAX_ID_CHARS or not value.isprintable():
        raise HamiParseError(f"{what} {show(value)} is not printable or longer than {MAX_ID_CHARS} characters")
    return value


_R = TypeVar("_R")


class ParseCache(Generic[_R]):
    """Parse results (or the HamiParseError) by raw value, least recently used out first.

    Bounded in bytes (the raw values' size plus a per-entry estimate of the result), not in
    entries: 65,536 entries of 200 KB would be 13 GB. Values longer than MAX_ANNOTATION_CHARS
    never get here (``check_size`` runs first). Thread-safe.
    """

    def __init__(self, parse: Callable[[str], _R], *, max_bytes: int = CACHE_BYTES, cost: int = 512) -> None:
        self._parse = parse
        self._entries: OrderedDict[str, tuple[_R | HamiParseError, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self._cost = cost
        self.bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __call__(self, value: str) -> _R:
        with self._lock:
            found = self._entries.get(value)
            if found is not None:
                self._entries.move_to_end(value)
                self.hits += 1
        if found is None:
            self.misses += 1
            result: _R | HamiParseError
            try:
                result = self._parse(value)
            except HamiParseError as exc:
                result = exc
            size = 2 * sys.getsizeof(value) + self._cost  # the value, and a result about as large
            with self._lock:
                if value not in self._entries and size <= self.max_bytes:
                    self._entries[value] = (result, size)
                    self.bytes += size
                    while self.bytes > self.max_bytes:
                        _, (_, dropped) = self._entries.popitem(last=False)
                        self.bytes -= dropped
        else:
            result = found[0]
        if isinstance(result, HamiParseError):
            raise HamiParseError(str(result))
        return result

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0
