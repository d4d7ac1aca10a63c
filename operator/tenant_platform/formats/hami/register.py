"""HAMi's node register annotation (``hami.io/node-nvidia-register``) and device-cordon list.

The register value has three formats: CSV ``id,count,devmem,devcore,type,numa,health`` (up to
v2.4), the same plus ``,index,mode`` (v2.5 to v2.7), and a JSON array (v2.8+), where every field
is omitempty, so a missing ``health`` means unhealthy (and index and numa 0 are absent).
``hami.io/device-cordon`` (v2.10) lists comma-separated UUIDs excluded from new allocations.
``parse_register`` raises HamiParseError with a short, bounded reason for anything HAMi would not
write (formats/hami/bounds.py: oversized values, non-ASCII or out-of-range numbers, too many cards, deep or
truncated JSON) and is memoised on the raw string in a cache bounded in bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from tenant_platform.formats.hami.allocations import strip_mig_suffix
from tenant_platform.formats.hami.bounds import (
    MAX_CARDS,
    ParseCache,
    ascii_int,
    bounded_int,
    check_id,
    check_size,
    shorten,
)
from tenant_platform.formats.hami.names import HamiParseError

RegisterFormat = Literal["json", "csv", "csv-index-mode", "empty"]


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card as the device plugin registers it."""

    id: str
    index: int
    count: int
    """Sharing slots (deviceSplitCount)."""
    devmem: int
    """MiB (x deviceMemoryScaling)."""
    devcore: int
    """Percent of the card (100 x deviceCoreScaling)."""
    model: str
    numa: int
    healthy: bool
    mode: str


@dataclass(frozen=True, slots=True)
class Register:
    cards: tuple[Card, ...]
    format: RegisterFormat


_GO_BOOLS: Final = {
    "1": True,
    "t": True,
    "T": True,
    "true": True,
    "TRUE": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "false": False,
    "FALSE": False,
    "False": False,
}


def parse_register(value: str) -> Register:
    """Parse a register annotation in any of HAMi's three formats; HamiParseError if malformed."""
    check_size(value)
    return _CACHE(value)


def _parse_register(value: str) -> Register:
    text = value.strip()
    if not text:
        return Register((), "empty")
    cards = _parse_register_json(text) if text.startswith(("[", "{")) else None
    register = Register(cards, "json") if cards is not None else _parse_register_csv(text)
    if len(register.cards) > MAX_CARDS:
        raise HamiParseError(f"{len(register.cards)} cards registered; more than the {MAX_CARDS} a node can hold")
    seen: set[str] = set()
    for card in register.cards:
        if card.id in seen:
            raise HamiParseError(f"card {shorten(card.id)} is listed twice")
        seen.add(card.id)
    return register


def _parse_register_json(text: str) -> tuple[Card, ...]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise HamiParseError(f"invalid JSON: {shorten(str(exc), 80)}") from None
    except RecursionError:
        raise HamiParseError("invalid JSON: nested too deeply") from None
    if not isinstance(doc, list):
        raise HamiParseError("JSON register is not an array")
    cards = []
    for position, item in enumerate(doc):
        if not isinstance(item, dict):
            raise HamiParseError(f"entry {position} is not an object")
        card_id = item.get("id")
        if not isinstance(card_id, str) or not card_id:
            raise HamiParseError(f"entry {position} has no id")
        check_id(card_id, f"entry {position}: id")
        health = item.get("health", False)  # omitempty: absent means false, i.e. unhealthy
        if not isinstance(health, bool):
            raise HamiParseError(f"entry {position}: health is not a boolean")
        model = item.get("type", "")
        mode = item.get("mode", "")
        if not isinstance(model, str) or not isinstance(mode, str):
            raise HamiParseError(f"entry {position}: type and mode must be strings")
        check_id(model, f"entry {position}: type")
        check_id(mode, f"entry {position}: mode")
        cards.append(
            Card(
                id=card_id,
                index=_json_int(item, "index", position, card_id),
                count=_json_int(item, "count", position, card_id),
                devmem=_json_int(item, "devmem", position, card_id),
                devcore=_json_int(item, "devcore", position, card_id),
                model=model,
                numa=_json_int(item, "numa", position, card_id),
                healthy=health,
                mode=mode,
            )
        )
    return tuple(cards)


def _json_int(item: Mapping[str, Any], key: str, position: int, card_id: str) -> int:
    return bounded_int(item.get(key, 0), f"entry {position}: {key}")


def _parse_register_csv(text: str) -> Register:
    entries = [entry.strip() for entry in text.split(":") if entry.strip()]
    cards = []
    widths = set()
    for position, entry in enumerate(entries):
        fields = [f.strip() for f in entry.split(",")]
        if len(fields) not in (7, 9):
            raise HamiParseError(
                f"entry {position} has {len(fields)} fields; expected 7 (HAMi up to v2.4) or 9 (v2.5 to v2.7)"
            )
        widths.add(len(fields))
        card_id = fields[0]
        if not card_id:
            raise HamiParseError(f"entry {position} has no id")
        check_id(card_id, f"entry {position}: id")
        check_id(fields[4], f"entry {position}: type")
        if len(fields) == 9:
            check_id(fields[8], f"entry {position}: mode")
        if fields[6] not in _GO_BOOLS:
            raise HamiParseError(f"entry {position}: health {shorten(fields[6])!r} is not a boolean")
        cards.append(
            Card(
                id=card_id,
                index=_csv_int(fields[7], "index", position, card_id) if len(fields) == 9 else position,
                count=_csv_int(fields[1], "count", position, card_id),
                devmem=_csv_int(fields[2], "devmem", position, card_id),
                devcore=_csv_int(fields[3], "devcore", position, card_id),
                model=fields[4],
                numa=_csv_int(fields[5], "numa", position, card_id),
                healthy=_GO_BOOLS[fields[6]],
                mode=fields[8] if len(fields) == 9 else "",
            )
        )
    if len(widths) > 1:
        raise HamiParseError("entries mix the v2.4 (7 fields) and v2.5 (9 fields) formats")
    return Register(tuple(cards), "csv-index-mode" if widths == {9} else "csv")


def _csv_int(text: str, name: str, position: int, card_id: str) -> int:
    return ascii_int(text, f"entry {position}: {name}")


_CACHE: ParseCache[Register] = ParseCache(_parse_register)
cache = _CACHE
"""The memo of ``parse_register`` (``cache.clear()``, ``cache.bytes``)."""


def parse_cordon(value: str | None) -> frozenset[str]:
    """``hami.io/device-cordon`` (v2.10): comma-separated UUIDs excluded from new allocations.

    Only matched against registered card ids, so an oversized or garbage list cordons nothing.
    """
    if not value or len(value) > MAX_CARDS * 64:
        return frozenset()
    return frozenset(strip_mig_suffix(part.strip()) for part in value.split(",") if part.strip())
