"""A HAMi pod's allocation annotation (``hami.io/vgpu-devices-allocated``) and what it holds.

Containers end with ``;``; devices inside a container are ``UUID,NVIDIA,<MiB>,<cores>`` and end
with ``:``. From v2.9 the init-container segments come first. MIG UUIDs may carry a
``[tpl-slot]`` suffix (up to v2.9), stripped before matching a card. ``parse_pod_devices``
raises HamiParseError with a short, bounded reason for anything HAMi would not write (oversized
values, non-ASCII or out-of-range numbers, see formats/hami/bounds.py) and is memoised on the raw string
in a cache bounded in bytes; ``pod_card_usage`` counts what one pod
holds per card the way HAMi's scheduler does (v2.10's init-container rule).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tenant_platform.formats.hami.bounds import MAX_CARDS, ParseCache, ascii_int, check_id, check_size, show
from tenant_platform.formats.hami.names import HamiParseError


class PodLike(Protocol):
    """What capacity and lock checks read of a HAMi pod (observe's PodInfo satisfies it)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def phase(self) -> str: ...
    @property
    def bind_phase(self) -> str: ...
    @property
    def allocated(self) -> str: ...
    @property
    def init_containers(self) -> int: ...
    @property
    def app_containers(self) -> int: ...
    @property
    def init_exit_codes(self) -> tuple[int | None, ...]: ...


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    uuid: str
    vendor: str
    mem_mib: int
    cores: int


def strip_mig_suffix(uuid: str) -> str:
    """``GPU-aaa[1g.10gb-0]`` -> ``GPU-aaa``: HAMi up to v2.9 appends the MIG template and slot."""
    if uuid.endswith("]") and "[" in uuid:
        return uuid[: uuid.index("[")]
    return uuid


Devices = tuple[tuple[ContainerDevice, ...], ...]


def parse_pod_devices(value: str) -> Devices:
    """One tuple of devices per container segment, in annotation order; HamiParseError if malformed.

    ``;`` alone (or an empty string) means no container holds a device.
    """
    check_size(value)
    return cache(value)


def _parse_pod_devices(value: str) -> Devices:
    if not value.strip():
        return ()
    segments = value.split(";")
    if segments[-1].strip() == "":
        segments = segments[:-1]  # every segment ends with ';'
    containers = []
    total = 0
    for position, segment in enumerate(segments):
        devices = []
        for entry in segment.split(":"):
            if not entry.strip():
                continue
            fields = [f.strip() for f in entry.split(",")]
            if len(fields) != 4:
                raise HamiParseError(f"container {position}: device {show(entry)} does not have 4 fields")
            uuid = strip_mig_suffix(fields[0])
            if not uuid:
                raise HamiParseError(f"container {position}: device {show(entry)} has no UUID")
            check_id(uuid, f"container {position}: UUID")
            check_id(fields[1], f"container {position}: vendor")
            mem = ascii_int(fields[2], f"container {position}: memory")
            cores = ascii_int(fields[3], f"container {position}: cores")
            total += 1
            if total > MAX_CARDS * 16:
                raise HamiParseError(f"more than {MAX_CARDS * 16} devices allocated")
            devices.append(ContainerDevice(uuid, fields[1], mem, cores))
        containers.append(tuple(devices))
    return tuple(containers)


cache: ParseCache[Devices] = ParseCache(_parse_pod_devices)
"""The memo of ``parse_pod_devices`` (``cache.clear()``, ``cache.bytes``)."""


@dataclass(frozen=True, slots=True)
class CardUse:
    mem_mib: int = 0
    cores: int = 0
    slots: int = 0


def pod_card_usage(
    containers: Sequence[Sequence[ContainerDevice]],
    *,
    init_containers: int = 0,
    app_containers: int | None = None,
    init_exit_codes: Sequence[int | None] = (),
) -> dict[str, CardUse]:
    """What one pod holds on each card (UUID), the way HAMi's scheduler counts it.

    From v2.9 the annotation lists the init containers first; that layout is recognised when the
    segment count equals ``init_containers + app_containers`` (otherwise every segment counts as
    an app container, as before v2.9). v2.10's rule, per card: memory and cores are the larger of
    the peak over init containers and the sum over app containers, slots = max(1, app entries).
    Once every init container has exited 0, only app containers count.
    """
    init: Sequence[Sequence[ContainerDevice]] = ()
    apps: Sequence[Sequence[ContainerDevice]] = containers
    if init_containers and app_containers is not None and len(containers) == init_containers + app_containers:
        init, apps = containers[:init_containers], containers[init_containers:]
    app_mem: Counter[str] = Counter()
    app_cores: Counter[str] = Counter()
    app_slots: Counter[str] = Counter()
    for container in apps:
        for device in container:
            app_mem[device.uuid] += device.mem_mib
            app_cores[device.uuid] += device.cores
            app_slots[device.uuid] += 1
    init_done = bool(init) and len(init_exit_codes) == init_containers and all(code == 0 for code in init_exit_codes)
    if not init or init_done:
        return {uuid: CardUse(app_mem[uuid], app_cores[uuid], app_slots[uuid]) for uuid in app_slots}
    peak_mem: dict[str, int] = {}
    peak_cores: dict[str, int] = {}
    for container in init:
        mem: Counter[str] = Counter()
        cores: Counter[str] = Counter()
        for device in container:
            mem[device.uuid] += device.mem_mib
            cores[device.uuid] += device.cores
        for uuid in mem:
            peak_mem[uuid] = max(peak_mem.get(uuid, 0), mem[uuid])
            peak_cores[uuid] = max(peak_cores.get(uuid, 0), cores[uuid])
    return {
        uuid: CardUse(
            max(peak_mem.get(uuid, 0), app_mem[uuid]),
            max(peak_cores.get(uuid, 0), app_cores[uuid]),
            max(1, app_slots[uuid]),
        )
        for uuid in sorted(set(peak_mem) | set(app_slots))
    }
