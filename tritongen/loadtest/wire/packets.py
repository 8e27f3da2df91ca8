"""A loopback capture read into TCP connections: each side's data segments, in order, with their times.

The capture is a pcap file (tcpdump ``-w``, nanosecond stamps, whole packets) of one server port. A segment
is a TCP packet that carries data; retransmitted bytes (a segment whose data was all seen) are
left out, so each byte counts once, at the time it first crossed the wire.
"""

from __future__ import annotations

import bisect
import itertools
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Generic, TypeVar

from tritongen.errors import MissingDependencyError, TritongenError

Piece = TypeVar("Piece")
SYN, ACK = 0x02, 0x10
"""TCP flags: a client's SYN without ACK opens a connection."""


class CaptureFileError(TritongenError):
    """A capture file that is not a pcap of TCP over IPv4 or IPv6."""


class CaptureCutShort(Exception):
    """The capture ends inside a packet's record (tcpdump stopped while writing, or the disk was full)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One TCP segment with data."""

    time_ns: int
    """When it crossed the wire (the capture's stamp, ns since the epoch)."""
    to_server: bool
    data: bytes
    """Its data (the capture keeps whole packets)."""


@dataclass
class Connection:
    """One client's TCP connection to the server: its data segments in the order they crossed the wire."""

    client: tuple[str, int]
    segments: list[Segment] = field(default_factory=list)
    next_seq: dict[bool, int] = field(default_factory=dict)
    """Each side's next sequence number not yet seen (to leave retransmissions out)."""

    def add(self, segment: Segment, seq: int) -> None:
        """Add a segment's data not seen already (a retransmission's repeated bytes are left out)."""
        seen = self.next_seq.get(segment.to_server)
        end = (seq + len(segment.data)) % 2**32
        if seen is not None:
            if end == seen or (end - seen) % 2**32 >= 2**31:  # ends at or before what was seen
                return
            repeated = (seen - seq) % 2**32
            if 0 < repeated < len(segment.data):  # begins before it: only the new bytes count
                segment = Segment(segment.time_ns, segment.to_server, segment.data[repeated:])
        self.next_seq[segment.to_server] = end
        self.segments.append(segment)


class Joined(Generic[Piece]):
    """Pieces' bytes joined in order (segments, frames' payloads), and which piece holds a byte."""

    def __init__(self, pieces: Sequence[Piece], data_of: Callable[[Piece], bytes]) -> None:
        self.pieces = list(pieces)
        self.data = b"".join(data_of(piece) for piece in self.pieces)
        self.ends = list(itertools.accumulate(len(data_of(piece)) for piece in self.pieces))

    def holding(self, offset: int) -> Piece:
        """The piece that holds the byte at ``offset`` of :attr:`data`."""
        return self.pieces[bisect.bisect_right(self.ends, offset)]


def dpkt_module() -> Any:
    """Dpkt (raises MissingDependencyError where it is not installed)."""
    try:
        import dpkt
    except ImportError as e:
        raise MissingDependencyError(
            "reading a capture needs dpkt, which is not installed",
            "pip install 'tritongen[wire]' (or make install)",
        ) from e
    return dpkt


def _tcp_packets(path: Path) -> Iterator[tuple[int, Any, Any]]:
    """Each TCP packet of the capture: its time (ns), its IP layer and its TCP layer."""
    dpkt = dpkt_module()
    with path.open("rb") as file:
        try:
            reader = dpkt.pcap.Reader(file)
        except (ValueError, dpkt.dpkt.Error) as e:
            raise CaptureFileError(f"{path} is not a pcap capture: {e}") from e
        link = reader.datalink()
        try:
            for stamp, frame in reader:
                packet = _ip_layer(dpkt, link, frame)
                if packet is not None and isinstance(packet.data, dpkt.tcp.TCP):
                    yield _nanoseconds(stamp), packet, packet.data
        except (ValueError, dpkt.dpkt.Error) as e:  # a capture cut short (a full disk): what was read counts
            raise CaptureCutShort(str(e) or type(e).__name__) from e


def _nanoseconds(stamp: Decimal | float) -> int:
    """A pcap stamp in ns: dpkt gives a nanosecond capture's as a Decimal, a microsecond one's as a float."""
    if isinstance(stamp, Decimal):
        return int(stamp * 1_000_000_000)
    return round(stamp * 1e6) * 1000


def _ip_layer(dpkt: Any, link: int, frame: bytes) -> Any:
    """The IP packet of one captured frame (Ethernet, Linux cooked, raw IP), or None."""
    try:
        if link == dpkt.pcap.DLT_EN10MB:
            layer = dpkt.ethernet.Ethernet(frame).data
        elif link == dpkt.pcap.DLT_LINUX_SLL:
            layer = dpkt.sll.SLL(frame).data
        elif link in (dpkt.pcap.DLT_RAW, 101):
            layer = dpkt.ip.IP(frame) if frame[:1] and frame[0] >> 4 == 4 else dpkt.ip6.IP6(frame)
        else:
            return None
    except (dpkt.dpkt.Error, IndexError):
        return None
    return layer if isinstance(layer, dpkt.ip.IP | dpkt.ip6.IP6) else None


def _address(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def read_connections(path: Path, server_port: int, notes: list[str] | None = None) -> list[Connection]:
    """The connections to ``server_port`` in the capture at ``path``, in the order they opened.

    A capture that ends inside a packet (tcpdump stopped while writing, a full disk) gives what was
    read, and says so in ``notes``.

    Raises:
        CaptureFileError: the file is not a pcap capture.
        MissingDependencyError: dpkt is not installed.
    """
    open_now: dict[tuple[str, int], Connection] = {}
    found: list[Connection] = []
    packets = _tcp_packets(path)
    try:
        for time_ns, packet, tcp in packets:
            to_server = tcp.dport == server_port
            if not to_server and tcp.sport != server_port:
                continue
            client = (
                _address(packet.src if to_server else packet.dst),
                tcp.sport if to_server else tcp.dport,
            )
            opening = to_server and tcp.flags & SYN and not tcp.flags & ACK
            if opening or client not in open_now:  # a port used again is a connection of its own
                open_now[client] = Connection(client)
                found.append(open_now[client])
            if tcp.data:
                open_now[client].add(Segment(time_ns, to_server, bytes(tcp.data)), tcp.seq)
    except CaptureCutShort as e:  # the requests whose packets were read are checked
        if notes is not None:
            notes.append(f"the capture ends inside a packet ({e}): the requests after it are not on it")
    return [connection for connection in found if connection.segments]
