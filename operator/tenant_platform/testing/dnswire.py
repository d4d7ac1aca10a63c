"""The least of the DNS wire format (RFC 1035) a test needs: an A query over UDP, and a stub upstream.

``query_a(port, name)`` asks a server on 127.0.0.1 for ``name``'s A records and returns the rcode
and the (owner name, address) pairs of the answer section. ``StubUpstream`` is a resolver on a
free loopback port that answers every A question with one fixed address (TEST-NET-1) and every
other question with an empty NOERROR, and records the question names it received: a CoreDNS under
test forwards there instead of to the host's resolvers, so no query leaves the machine and a test
can see exactly which names reached "the internet" unchanged.

No dependency: the suite has no DNS library, and these two shapes are all it sends or answers.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Final, Self

TYPE_A: Final = 1
CLASS_IN: Final = 1
NOERROR: Final = 0
NXDOMAIN: Final = 3
UPSTREAM_ADDRESS: Final = "192.0.2.53"
"""The address ``StubUpstream`` answers every A question with (TEST-NET-1, routed nowhere)."""


class WireError(ValueError):
    """A message that does not parse."""


def encode_name(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        if not 0 < len(raw) < 64:
            raise WireError(f"bad label {label!r} in {name!r}")
        out += bytes([len(raw)]) + raw
    return out + b"\0"


def decode_name(message: bytes, offset: int) -> tuple[str, int]:
    """The (lower-cased, dot-terminated) name at ``offset`` and the offset after it (pointers followed)."""
    labels: list[str] = []
    end: int | None = None
    for _ in range(128):  # bounds a pointer loop
        if offset >= len(message):
            raise WireError("name runs past the message")
        length = message[offset]
        if length & 0xC0 == 0xC0:
            if end is None:
                end = offset + 2
            offset = ((length & 0x3F) << 8) | message[offset + 1]
            continue
        if length == 0:
            return ".".join(labels).lower() + ".", end if end is not None else offset + 1
        labels.append(message[offset + 1 : offset + 1 + length].decode("ascii"))
        offset += 1 + length
    raise WireError("name compression loop")


def encode_query(name: str, qtype: int = TYPE_A, *, ident: int | None = None) -> bytes:
    ident = random.randrange(1 << 16) if ident is None else ident
    header = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0)  # RD set, one question
    return header + encode_name(name) + struct.pack("!HH", qtype, CLASS_IN)


@dataclass(frozen=True)
class Answer:
    rcode: int
    addresses: list[tuple[str, str]]
    """(owner name, dotted IPv4) for every A record of the answer section, in order."""


def decode_answer(message: bytes, ident: int) -> Answer:
    if len(message) < 12:
        raise WireError("short message")
    got, flags, qdcount, ancount, _, _ = struct.unpack("!HHHHHH", message[:12])
    if got != ident or not flags & 0x8000:
        raise WireError(f"not the answer to query {ident} (id {got}, flags {flags:#06x})")
    offset = 12
    for _ in range(qdcount):
        _, offset = decode_name(message, offset)
        offset += 4
    addresses: list[tuple[str, str]] = []
    for _ in range(ancount):
        owner, offset = decode_name(message, offset)
        rtype, _, _, length = struct.unpack("!HHIH", message[offset : offset + 10])
        offset += 10
        if rtype == TYPE_A and length == 4:
            addresses.append((owner, socket.inet_ntoa(message[offset : offset + 4])))
        offset += length
    return Answer(flags & 0x000F, addresses)


def query_a(port: int, name: str, *, host: str = "127.0.0.1", timeout: float = 3.0, attempts: int = 3) -> Answer:
    """Ask ``host:port`` over UDP for the A records of ``name`` (retried on a lost datagram)."""
    ident = random.randrange(1 << 16)
    message = encode_query(name, ident=ident)
    last: Exception | None = None
    for _ in range(attempts):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(timeout)
            sock.sendto(message, (host, port))
            try:
                reply, _ = sock.recvfrom(4096)
            except TimeoutError as exc:
                last = exc
                continue
            return decode_answer(reply, ident)
    raise TimeoutError(f"no answer from {host}:{port} for {name} after {attempts} attempts") from last


class StubUpstream:
    """A UDP resolver on 127.0.0.1 answering A with ``UPSTREAM_ADDRESS``; records question names."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port: int = int(self._sock.getsockname()[1])
        self._names: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns-stub-upstream", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def names(self) -> list[str]:
        """Every question name received so far (lower-cased, dot-terminated), in order."""
        with self._lock:
            return list(self._names)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                message, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                reply = self._answer(message)
            except (WireError, struct.error):
                continue
            self._sock.sendto(reply, peer)

    def _answer(self, message: bytes) -> bytes:
        ident, flags, qdcount, _, _, _ = struct.unpack("!HHHHHH", message[:12])
        if qdcount != 1:
            raise WireError("one question expected")
        name, offset = decode_name(message, 12)
        qtype, qclass = struct.unpack("!HH", message[offset : offset + 4])
        with self._lock:
            self._names.append(name)
        question = message[12 : offset + 4]
        answers = b""
        if qtype == TYPE_A and qclass == CLASS_IN:
            # owner: a pointer to the question's name (offset 12)
            answers = struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, 60, 4) + socket.inet_aton(UPSTREAM_ADDRESS)
        reply_flags = 0x8000 | (flags & 0x0100) | 0x0080  # QR, RD copied, RA
        header = struct.pack("!HHHHHH", ident, reply_flags, 1, 1 if answers else 0, 0, 0)
        return header + question + answers
