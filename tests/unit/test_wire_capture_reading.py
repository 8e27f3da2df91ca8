"""``loadtest --wire``'s reading of a loopback capture: TCP segments per connection (retransmissions and
pure ACKs left out), HTTP/1.1 keep-alive and HTTP/2 (gRPC) requests with their first byte out, their
response's last byte back and their events, request ids found in their first bytes, and each run's
latency checked against the wire's.

The captures are written here with dpkt, as tcpdump writes them on the loopback: nanosecond stamps,
whole packets, Ethernet frames.
"""

from __future__ import annotations

import socket
from decimal import Decimal
from pathlib import Path
from typing import Any

import dpkt
import numpy as np
import pytest

from tritongen.loadtest.result import RunResult
from tritongen.loadtest.wire.check import QUANTILES, agreement, wire_figures, wire_requests
from tritongen.loadtest.wire.grpc_streams import grpc_stream_requests
from tritongen.loadtest.wire.http1 import http1_requests
from tritongen.loadtest.wire.http2 import PREFACE, http2_requests
from tritongen.loadtest.wire.packets import CaptureFileError, Connection, Segment, read_connections
from tritongen.loadtest.wire.requests import WireRequest, id_pattern, name_requests

Packet = tuple[int, bool, int, bytes]
"""One TCP packet of a connection: its time (ns since the epoch), whether it goes to the server, its
sequence number, its data (empty: a pure ACK)."""

BASE_NS = 1_700_000_000_123_456_789
"""The capture's start: its stamps keep every nanosecond."""
SERVER_PORT = 8000
CLIENT_PORT = 40000
LOOPBACK = "127.0.0.1"
TAG = "a1b2c3"
CLIENT_SEQ, SERVER_SEQ = 1_000, 500_000


def _at(us: float) -> int:
    """The time ``us`` µs after the capture's start, in ns."""
    return BASE_NS + round(us * 1000)


def _request_id(count: int, tag: str = TAG) -> str:
    """A load test's request id: its tag, a process's 7 digits, the count's 9 digits."""
    return f"{tag}{1234567:07d}{count:09d}"


def _frame(
    packet: Packet, client_port: int = CLIENT_PORT, server_port: int = SERVER_PORT, flags: int | None = None
) -> bytes:
    """One Ethernet frame of a loopback TCP packet, lengths and checksums filled in."""
    _, to_server, seq, payload = packet
    sport, dport = (client_port, server_port) if to_server else (server_port, client_port)
    if flags is None:
        flags = dpkt.tcp.TH_ACK | (dpkt.tcp.TH_PUSH if payload else 0)
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=1, flags=flags, data=payload)
    address = socket.inet_aton(LOOPBACK)
    ip = dpkt.ip.IP(src=address, dst=address, p=dpkt.ip.IP_PROTO_TCP, ttl=64, data=tcp)
    ethernet = dpkt.ethernet.Ethernet(
        src=b"\x00" * 6, dst=b"\x00" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip
    )
    return bytes(ethernet)


def _write_pcap(path: Path, frames: list[tuple[int, bytes]], nano: bool = True) -> Path:
    """A pcap of ``(time_ns, frame)`` in order of time, as tcpdump writes it on the loopback."""
    with path.open("wb") as file:
        writer = dpkt.pcap.Writer(file, nano=nano, linktype=dpkt.pcap.DLT_EN10MB)
        for time_ns, frame in sorted(frames, key=lambda item: item[0]):
            writer.writepkt(frame, ts=Decimal(time_ns) / Decimal(1_000_000_000))
    return path


def _connection_frames(packets: list[Packet], client_port: int = CLIENT_PORT) -> list[tuple[int, bytes]]:
    return [(packet[0], _frame(packet, client_port)) for packet in packets]


def write_connection(path: Path, packets: list[Packet]) -> Path:
    """A capture of one client's connection to :data:`SERVER_PORT`: ``(time_ns, to_server, seq, payload)``."""
    return _write_pcap(path, _connection_frames(packets))


def _sequenced(pieces: list[tuple[int, bool, bytes]]) -> list[Packet]:
    """Each side's data given consecutive sequence numbers, as TCP sends them (no retransmission)."""
    next_seq = {True: CLIENT_SEQ, False: SERVER_SEQ}
    packets: list[Packet] = []
    for time_ns, to_server, payload in pieces:
        packets.append((time_ns, to_server, next_seq[to_server], payload))
        next_seq[to_server] += len(payload)
    return packets


def _infer_request(request_id: str | None, model: str = "m") -> bytes:
    """A KServe v2 binary-data request: its JSON header carries the id (the tensor bytes follow)."""
    id_field = f'"id":"{request_id}",' if request_id else ""
    header = (
        "{" + id_field + '"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,4],'
        '"parameters":{"binary_data_size":16}}]}'
    ).encode()
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: localhost:{SERVER_PORT}\r\n"
        f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
        f"Content-Length: {len(header) + 16}\r\n\r\n"
    ).encode()
    return head + header + b"\x00" * 16


RESPONSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
RESPONSE_BODY = b'{"model_name":"m","outputs":[]}' + b" " * 9


# --- TCP segments -------------------------------------------------------------------------------------


def test_capture_keeps_each_data_segment_with_its_nanosecond_time(tmp_path: Path) -> None:
    packets = _sequenced([(_at(0), True, b"GET / HTTP/1.1\r\n\r\n"), (_at(7.5), False, b"HTTP/1.1 200 OK")])
    connections = read_connections(write_connection(tmp_path / "c.pcap", packets), SERVER_PORT)
    assert len(connections) == 1
    assert connections[0].client == (LOOPBACK, CLIENT_PORT)
    assert connections[0].segments == [
        Segment(BASE_NS, True, b"GET / HTTP/1.1\r\n\r\n"),
        Segment(BASE_NS + 7500, False, b"HTTP/1.1 200 OK"),
    ]


def test_microsecond_capture_reads_its_stamps_in_nanoseconds(tmp_path: Path) -> None:
    start_ns = 1_700_000_000_123_456_000
    frames = _connection_frames(_sequenced([(start_ns, True, b"a"), (start_ns + 42_000, False, b"b")]))
    path = _write_pcap(tmp_path / "us.pcap", frames, nano=False)
    (connection,) = read_connections(path, SERVER_PORT)
    assert [segment.time_ns for segment in connection.segments] == [start_ns, start_ns + 42_000]


def test_pure_acks_and_other_ports_are_ignored(tmp_path: Path) -> None:
    request, response = b"GET /v2/health/ready HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n"
    ours = [
        (_at(0), _frame((0, True, CLIENT_SEQ - 1, b""), flags=dpkt.tcp.TH_SYN)),
        (_at(1), _frame((0, False, SERVER_SEQ - 1, b""), flags=dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)),
        (_at(2), _frame((0, True, CLIENT_SEQ, b""))),
        (_at(10), _frame((0, True, CLIENT_SEQ, request))),
        (_at(11), _frame((0, False, SERVER_SEQ, b""))),  # the server's ACK of the request
        (_at(20), _frame((0, False, SERVER_SEQ, response))),
        (_at(21), _frame((0, True, CLIENT_SEQ + len(request), b""))),
        (_at(30), _frame((0, True, CLIENT_SEQ + len(request), b""), flags=dpkt.tcp.TH_FIN | dpkt.tcp.TH_ACK)),
    ]
    # Another service's connection on the loopback, in both directions, in between.
    elsewhere = [
        (_at(12), _frame((0, True, 7, b"SELECT 1"), client_port=40001, server_port=5432)),
        (_at(13), _frame((0, False, 9, b"1 row"), client_port=40001, server_port=5432)),
    ]
    path = _write_pcap(tmp_path / "mixed.pcap", ours + elsewhere)
    connections = read_connections(path, SERVER_PORT)
    assert [connection.client for connection in connections] == [(LOOPBACK, CLIENT_PORT)]
    assert connections[0].segments == [Segment(_at(10), True, request), Segment(_at(20), False, response)]


def test_not_a_pcap_raises_capture_file_error(tmp_path: Path) -> None:
    for name, content in [("text.pcap", b"this is not a capture, just some text\n" * 4), ("empty.pcap", b"")]:
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(CaptureFileError, match="not a pcap capture"):
            read_connections(path, SERVER_PORT)


# --- retransmissions ----------------------------------------------------------------------------------


def test_retransmitted_earlier_segment_is_counted_once(tmp_path: Path) -> None:
    first, second = RESPONSE_HEAD, RESPONSE_BODY
    request = _infer_request(_request_id(1))
    packets: list[Packet] = [
        (_at(0), True, CLIENT_SEQ, request),
        (_at(50), False, SERVER_SEQ, first),
        (_at(60), False, SERVER_SEQ + len(first), second),
        (_at(400), False, SERVER_SEQ, first),  # the first response segment again, later
    ]
    (connection,) = read_connections(write_connection(tmp_path / "r.pcap", packets), SERVER_PORT)
    assert [segment.time_ns for segment in connection.segments] == [_at(0), _at(50), _at(60)]
    (wire,) = http1_requests(connection)
    assert (wire.first_ns, wire.last_ns) == (_at(0), _at(60))


def test_retransmission_is_recognised_across_sequence_wraparound() -> None:
    connection = Connection((LOOPBACK, CLIENT_PORT))
    near_end = 2**32 - 10
    connection.add(Segment(1, True, b"x" * 10), near_end)  # ends at sequence number 0
    connection.add(Segment(2, True, b"y" * 10), 0)
    connection.add(Segment(3, True, b"x" * 10), near_end)  # all seen: left out
    assert [segment.time_ns for segment in connection.segments] == [1, 2]
    assert connection.next_seq[True] == 10


def test_retransmitted_latest_segment_is_counted_once_and_does_not_move_last_ns(tmp_path: Path) -> None:
    request = _infer_request(_request_id(1))
    packets: list[Packet] = [
        (_at(0), True, CLIENT_SEQ, request),
        (_at(50), False, SERVER_SEQ, RESPONSE_HEAD),
        (_at(60), False, SERVER_SEQ + len(RESPONSE_HEAD), RESPONSE_BODY),
        (_at(260), False, SERVER_SEQ + len(RESPONSE_HEAD), RESPONSE_BODY),  # the last one again, later
    ]
    (connection,) = read_connections(write_connection(tmp_path / "r.pcap", packets), SERVER_PORT)
    assert [segment.time_ns for segment in connection.segments] == [_at(0), _at(50), _at(60)]
    (wire,) = http1_requests(connection)
    assert (wire.first_ns, wire.last_ns) == (_at(0), _at(60))


# --- HTTP/1.1 -----------------------------------------------------------------------------------------


def test_http1_keep_alive_requests_run_from_first_byte_out_to_last_byte_back(tmp_path: Path) -> None:
    one, two = _infer_request(_request_id(1)), _infer_request(_request_id(2))
    packets = _sequenced(
        [
            (_at(0), True, one[:60]),
            (_at(3), True, one[60:]),
            (_at(250), False, RESPONSE_HEAD),
            (_at(262.5), False, RESPONSE_BODY),
            (_at(1000), True, two),
            (_at(1700), False, RESPONSE_HEAD),
            (_at(1705), False, RESPONSE_BODY),
        ]
    )
    (connection,) = read_connections(write_connection(tmp_path / "keepalive.pcap", packets), SERVER_PORT)
    requests = http1_requests(connection)
    assert [(r.first_ns, r.last_ns) for r in requests] == [(_at(0), _at(262.5)), (_at(1000), _at(1705))]
    assert [r.latency_us for r in requests] == [pytest.approx(262.5), pytest.approx(705.0)]
    assert all(r.complete and r.events_ns == [] for r in requests)
    assert requests[0].head == one and requests[1].head == two


def test_http1_request_without_response_is_left_out(tmp_path: Path) -> None:
    packets = _sequenced(
        [
            (_at(0), True, b"GET /a HTTP/1.1\r\n\r\n"),
            (_at(5), False, b"HTTP/1.1 200 OK\r\n\r\n"),
            (_at(10), True, b"GET /b HTTP/1.1\r\n\r\n"),  # the capture stopped before its answer
        ]
    )
    (connection,) = read_connections(write_connection(tmp_path / "cut.pcap", packets), SERVER_PORT)
    assert [(r.first_ns, r.last_ns) for r in http1_requests(connection)] == [(_at(0), _at(5))]


def test_http1_server_sent_events_each_data_line_at_its_segment_time(tmp_path: Path) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    event = b'data: {"model_name":"llm","text_output":"tok"}\n\n'
    packets = _sequenced(
        [
            (_at(0), True, b'POST /v2/models/llm/generate_stream HTTP/1.1\r\n\r\n{"text_input":"hi"}'),
            (_at(100), False, head),
            (_at(150), False, b"30\r\n" + event + b"\r\n"),
            (_at(180), False, event + event),
            (_at(240), False, event + b"0\r\n\r\n"),
        ]
    )
    (connection,) = read_connections(write_connection(tmp_path / "sse.pcap", packets), SERVER_PORT)
    (stream,) = http1_requests(connection)
    assert stream.events_ns == [_at(150), _at(180), _at(180), _at(240)]
    assert (stream.first_ns, stream.last_ns) == (_at(0), _at(240))


def test_an_openai_stream_s_events_with_text_only_and_a_cut_stream_left_out(tmp_path: Path) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    role = b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    token = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
    usage = b'data: {"choices":[],"usage":{"completion_tokens":2}}\n\n'
    request = b"POST /v1/chat/completions HTTP/1.1\r\n\r\n{}"
    packets = _sequenced(
        [
            (_at(0), True, request),
            (_at(100), False, head + b"40\r\n" + role + b"\r\n"),
            (_at(200), False, b"30\r\n" + token[:20]),  # an event split across segments: whole at 260
            (_at(260), False, token[20:] + b"\r\n"),
            (_at(300), False, token + usage + b"data: [DONE]\n\n" + b"0\r\n\r\n"),
            (_at(1000), True, request),  # the next stream, cut before its end
            (_at(1100), False, head + b"30\r\n" + token + b"\r\n"),
        ]
    )
    (connection,) = read_connections(write_connection(tmp_path / "openai.pcap", packets), SERVER_PORT)
    (stream,) = http1_requests(connection)
    assert stream.events_ns == [_at(260), _at(300)]  # the role, the usage and [DONE] carry no text
    assert stream.last_ns == _at(300)


# --- request ids --------------------------------------------------------------------------------------


def test_id_pattern_is_the_tag_then_sixteen_digits() -> None:
    pattern = id_pattern(TAG)
    assert pattern.fullmatch(b"a1b2c30000123000000042")
    found = pattern.search(b'{"id":"a1b2c30000123000000042","inputs":[]}')
    assert found is not None and found.group() == b"a1b2c30000123000000042"
    assert pattern.search(b'{"id":"a1b2c3000012300000004"}') is None  # 15 digits
    assert pattern.search(b'{"id":"ffffff0000123000000042"}') is None  # another tag


def test_name_requests_finds_the_id_in_the_json_header() -> None:
    body = (
        b"POST /v2/models/m/infer HTTP/1.1\r\nHost: localhost\r\nContent-Length: 70\r\n\r\n"
        b'{"id":"a1b2c30000123000000042","inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[7]}]}'
    )
    found, other, none = WireRequest(first_ns=1), WireRequest(first_ns=2), WireRequest(first_ns=3)
    found.take_head(body)
    other.take_head(body.replace(b"a1b2c3", b"0f0f0f"))
    none.take_head(body.replace(b'"id":"a1b2c30000123000000042",', b""))
    name_requests([found, other, none], TAG)
    assert [found.request_id, other.request_id, none.request_id] == ["a1b2c30000123000000042", None, None]
    assert found.head == b""  # the bytes are not kept once read


def test_wire_requests_keys_requests_by_id_and_leaves_out_others(tmp_path: Path) -> None:
    ours, theirs = _infer_request(_request_id(1)), _infer_request(_request_id(2, tag="0f0f0f"))
    nameless, split = _infer_request(None), _infer_request(_request_id(4))
    cut = split.index(b'"id"') + 12  # the id's bytes in two segments
    packets = _sequenced(
        [
            (_at(0), True, ours),
            (_at(100), False, RESPONSE_HEAD + RESPONSE_BODY),
            (_at(200), True, theirs),
            (_at(300), False, RESPONSE_HEAD + RESPONSE_BODY),
            (_at(400), True, nameless),
            (_at(500), False, RESPONSE_HEAD + RESPONSE_BODY),
            (_at(600), True, split[:cut]),
            (_at(601), True, split[cut:]),
            (_at(700), False, RESPONSE_HEAD),
            (_at(750), False, RESPONSE_BODY),
        ]
    )
    connections = read_connections(write_connection(tmp_path / "ids.pcap", packets), SERVER_PORT)
    wire = wire_requests(connections, TAG)
    assert sorted(wire) == [_request_id(1), _request_id(4)]
    assert (wire[_request_id(1)].first_ns, wire[_request_id(1)].last_ns) == (_at(0), _at(100))
    assert (wire[_request_id(4)].first_ns, wire[_request_id(4)].last_ns) == (_at(600), _at(750))
    assert wire[_request_id(4)].latency_us == pytest.approx(150.0)


# --- HTTP/2 (gRPC) ------------------------------------------------------------------------------------

DATA, HEADERS, SETTINGS = 0x0, 0x1, 0x4
END_STREAM, END_HEADERS = 0x1, 0x4


def _h2(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    """One HTTP/2 frame: 3-byte length, type, flags, 4-byte stream id, payload."""
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _grpc_message(request_id: str) -> bytes:
    """A gRPC ModelInferRequest message: 5-byte prefix, then fields (``id`` is field 3)."""
    fields = b"\x0a\x01m" + b"\x1a" + bytes([len(request_id)]) + request_id.encode() + b"\x2a" + b"\x00" * 30
    return b"\x00" + len(fields).to_bytes(4, "big") + fields


def _grpc_packets() -> list[tuple[int, bool, bytes]]:
    """A gRPC connection: streams 1 and 3 answered, stream 5 not (the capture ended first).

    Stream 1's DATA frame is cut across two client segments; stream 3's HEADERS begins at the end of
    one segment and goes on in the next; stream 1's trailers end in a later server segment.
    """
    client_settings = _h2(SETTINGS, 0, 0, b"\x00\x03\x00\x00\x00\x64")
    headers = [_h2(HEADERS, END_HEADERS, stream, b"\x83\x86\x44\x10/inference.GRPC") for stream in (1, 3, 5)]
    data = {
        stream: _h2(DATA, END_STREAM, stream, _grpc_message(_request_id(count)))
        for stream, count in [(1, 11), (3, 13), (5, 15)]
    }
    trailers = {
        stream: _h2(HEADERS, END_STREAM | END_HEADERS, stream, b"\x40\x0bgrpc-status\x010")
        for stream in (1, 3)
    }
    reply = {stream: _h2(HEADERS, END_HEADERS, stream, b"\x88") for stream in (1, 3, 5)}
    message = {stream: _h2(DATA, 0, stream, b"\x00\x00\x00\x00\x04\x0a\x02ok") for stream in (1, 3, 5)}
    cut = 20  # inside stream 1's id
    return [
        (_at(0), True, PREFACE + client_settings),
        (_at(10), True, headers[0] + data[1][:cut]),
        (_at(20), True, data[1][cut:] + headers[1][:4]),
        (_at(25), False, _h2(SETTINGS, 0, 0, b"") + _h2(SETTINGS, 0x1, 0, b"")),
        (_at(30), True, headers[1][4:] + data[3] + headers[2] + data[5]),
        (_at(300), False, reply[1] + message[1] + trailers[1][:-3]),
        (_at(310), False, trailers[1][-3:] + reply[3] + message[3][:7]),
        (_at(320), False, message[3][7:] + message[3] + trailers[3]),
        (_at(400), False, reply[5] + message[5]),
    ]


def test_http2_streams_run_from_first_frame_out_to_end_stream_back(tmp_path: Path) -> None:
    packets = _sequenced(_grpc_packets())
    (connection,) = read_connections(write_connection(tmp_path / "grpc.pcap", packets), SERVER_PORT)
    requests = http2_requests(connection)
    assert [(r.first_ns, r.last_ns) for r in requests] == [(_at(10), _at(310)), (_at(20), _at(320))]
    assert [r.latency_us for r in requests] == [pytest.approx(300.0), pytest.approx(300.0)]
    assert all(r.complete for r in requests)
    # One event per server DATA frame, when its last byte crossed (stream 3 had two messages).
    assert [r.events_ns for r in requests] == [[_at(300)], [_at(320), _at(320)]]


def test_wire_requests_reads_http2_by_its_preface_beside_http1(tmp_path: Path) -> None:
    grpc = _connection_frames(_sequenced(_grpc_packets()), client_port=40002)
    http = _connection_frames(
        _sequenced([(_at(5), True, _infer_request(_request_id(21))), (_at(90), False, RESPONSE_HEAD)]),
        client_port=40004,
    )
    connections = read_connections(_write_pcap(tmp_path / "both.pcap", grpc + http), SERVER_PORT)
    assert sorted(connection.client[1] for connection in connections) == [40002, 40004]
    wire = wire_requests(connections, TAG)
    assert sorted(wire) == [_request_id(11), _request_id(13), _request_id(21)]  # stream 5 never ended
    assert (wire[_request_id(11)].first_ns, wire[_request_id(11)].last_ns) == (_at(10), _at(310))
    assert (wire[_request_id(13)].first_ns, wire[_request_id(13)].last_ns) == (_at(20), _at(320))
    assert (wire[_request_id(21)].first_ns, wire[_request_id(21)].last_ns) == (_at(5), _at(90))


# --- the check against the run's own latency -----------------------------------------------------------


def _run(latency_us: dict[str, float] | None, overhead_us: dict[str, float] | None) -> RunResult:
    return RunResult(
        mode="concurrency", concurrency=1, target_rate=None, batch_size=1, duration_s=2.0, requests=4,
        errors=0, errors_by_kind={}, qps=2.0, infer_per_s=2.0, latency_us=latency_us, server_us=None,
        avg_batch=None, stable=True, gpu=None, cpu=None, client_overhead_us=overhead_us,
    )  # fmt: skip


def test_agreement_within_when_reported_is_wire_plus_overhead() -> None:
    wire_us = {"p50": 800.0, "p90": 1200.0, "p99": 5000.0, "p999": 9000.0}
    overhead = {"p50": 40.0, "p90": 45.0, "p99": 60.0, "p999": 80.0}
    reported = {key: wire_us[key] + overhead[key] for key in QUANTILES} | {"mean": 1.0, "max": 1.0}
    rows = agreement(_run(reported, overhead), wire_us)
    assert rows is not None and set(rows) == set(QUANTILES)
    for key, row in rows.items():
        assert row["within"] is True and row["gap"] == 0.0
        assert row["expected"] == reported[key]


def test_agreement_bound_is_the_larger_of_two_percent_and_100_us() -> None:
    overhead = dict.fromkeys(QUANTILES, 50.0)
    reported = {"p50": 1000.0, "p90": 1000.0, "p99": 20000.0, "p999": 20000.0}
    # Gaps: 99 and 101 µs under the 100 µs floor; 399 and 401 µs under 2% of 20 ms (400 µs).
    wire_us = {"p50": 851.0, "p90": 849.0, "p99": 19551.0, "p999": 19549.0}
    rows = agreement(_run(reported, overhead), wire_us)
    assert rows is not None
    assert {key: row["within"] for key, row in rows.items()} == {
        "p50": True, "p90": False, "p99": True, "p999": False,
    }  # fmt: skip
    assert [rows[key]["bound"] for key in QUANTILES] == [100.0, 100.0, 400.0, 400.0]
    # A reported latency below the wire's plus overhead is off just the same.
    below = agreement(_run(reported, overhead), {key: value + 250.0 for key, value in wire_us.items()})
    assert below is not None and below["p50"]["within"] is False and below["p50"]["gap"] < 0


def test_agreement_is_none_without_the_client_overhead() -> None:
    assert agreement(_run(dict.fromkeys(QUANTILES, 1.0), None), dict.fromkeys(QUANTILES, 1.0)) is None


def test_wire_figures_counts_recorded_and_matched_requests() -> None:
    wire_latency_us = [1000.0, 2000.0, 3000.0, 4000.0]
    wire: dict[str, WireRequest] = {}
    times: dict[str, tuple[float, float]] = {}
    for count, latency in enumerate(wire_latency_us, start=1):
        request_id = _request_id(count)
        wire[request_id] = WireRequest(first_ns=BASE_NS, last_ns=BASE_NS + round(latency * 1000))
        start = 1000.0 + count
        times[request_id] = (start, start + (latency + 50.0) / 1e6)  # the client saw 50 µs more
    times[_request_id(99)] = (2000.0, 2000.001)  # measured, not on the wire
    wire[_request_id(98)] = WireRequest(first_ns=BASE_NS, last_ns=BASE_NS + 1)  # on the wire, not measured
    wire_us = {key: float(np.percentile(wire_latency_us, q)) for key, q in QUANTILES.items()}
    overhead = dict.fromkeys(QUANTILES, 50.0)
    run = _run({key: value + 50.0 for key, value in wire_us.items()}, overhead)

    figures = wire_figures(run, times, wire)
    assert (figures["recorded"], figures["matched"]) == (5, 4)
    assert figures["wire_us"] == pytest.approx(wire_us)
    assert figures["client_us"] == pytest.approx({key: value + 50.0 for key, value in wire_us.items()})
    assert figures["client_minus_wire_us"] == pytest.approx(dict.fromkeys([*QUANTILES, "mean"], 50.0))
    assert all(row["within"] for row in figures["agreement"].values())


def test_wire_figures_without_matches_has_only_the_counts() -> None:
    run = _run(dict.fromkeys(QUANTILES, 100.0), dict.fromkeys(QUANTILES, 10.0))
    figures = wire_figures(run, {_request_id(1): (1.0, 1.001)}, {_request_id(2): WireRequest(first_ns=1)})
    assert figures == {"recorded": 1, "matched": 0}


# --- Triton's gRPC streams ---------------------------------------------------------------------


def _grpc(message: Any) -> bytes:
    """A protobuf message as a gRPC message: no compression, its length, its bytes."""
    body = message.SerializeToString()
    return b"\x00" + len(body).to_bytes(4, "big") + body


def _stream_request(request_id: str) -> bytes:
    from tritonclient.grpc import service_pb2

    return _grpc(service_pb2.ModelInferRequest(model_name="text", id=request_id))


def _stream_response(request_id: str, text: bytes | None, final: bool = False, error: str = "") -> bytes:
    """A ``ModelStreamInferResponse``: its output's text, or the final flag alone, or an error."""
    from tritonclient.grpc import service_pb2

    message = service_pb2.ModelStreamInferResponse(error_message=error)
    message.infer_response.id = request_id
    if text is not None:
        message.infer_response.raw_output_contents.append(len(text).to_bytes(4, "little") + text)
    if final:
        message.infer_response.parameters["triton_final_response"].bool_param = True
    return _grpc(message)


def test_a_grpc_stream_s_requests_get_their_own_responses_by_id(tmp_path: Path) -> None:
    token_a, final_a = _stream_response("a", b"tok"), _stream_response("a", None, final=True)
    split = len(token_a) // 2
    packets = _sequenced(
        [
            (_at(0), True, PREFACE + _h2(HEADERS, 0x4, 1, b"h") + _h2(DATA, 0, 1, _stream_request("a"))),
            (_at(50), True, _h2(DATA, 0, 1, _stream_request("b"))),  # in flight together (an open loop)
            (_at(100), False, _h2(HEADERS, 0x4, 1, b"h") + _h2(DATA, 0, 1, token_a[:split])),
            (_at(130), False, _h2(DATA, 0, 1, token_a[split:])),  # a's first token whole at 130
            (_at(150), False, _h2(DATA, 0, 1, _stream_response("b", b"tok"))),
            (_at(200), False, _h2(DATA, 0, 1, token_a + final_a)),
            (_at(260), False, _h2(DATA, 0, 1, _stream_response("b", None, final=True))),
            (_at(500), True, _h2(DATA, 0, 1, _stream_request("c"))),  # failed: dropped
            (_at(600), False, _h2(DATA, 0, 1, _stream_response("c", None, error="boom"))),
            (_at(700), False, _h2(DATA, 0, 1, _stream_response("c", b"late", final=True))),
            (_at(900), True, _h2(DATA, 0, 1, _stream_request("d"))),  # never finished
            (_at(950), False, _h2(DATA, 0, 1, _stream_response("d", b"tok"))),
        ]
    )
    (connection,) = read_connections(write_connection(tmp_path / "streams.pcap", packets), SERVER_PORT)
    a, b = grpc_stream_requests(connection)
    assert (a.first_ns, a.events_ns, a.last_ns) == (_at(0), [_at(130), _at(200)], _at(200))
    assert (b.first_ns, b.events_ns, b.last_ns) == (_at(50), [_at(150)], _at(260))


def test_a_retransmission_that_overlaps_new_data_adds_only_the_new_bytes() -> None:
    connection = Connection(("127.0.0.1", CLIENT_PORT))
    connection.add(Segment(_at(0), True, b"abcd"), seq=100)
    connection.add(Segment(_at(10), True, b"cdef"), seq=102)  # "cd" again, then "ef"
    assert [segment.data for segment in connection.segments] == [b"abcd", b"ef"]


def test_a_client_port_used_again_opens_a_connection_of_its_own(tmp_path: Path) -> None:
    syn = dpkt.tcp.TH_SYN
    first = _sequenced(
        [(_at(0), True, b"GET /a HTTP/1.1\r\n\r\n"), (_at(50), False, b"HTTP/1.1 200 OK\r\n\r\n")]
    )
    frames = [(_at(0) - 1, _frame((_at(0) - 1, True, CLIENT_SEQ - 1, b""), flags=syn))]
    frames += _connection_frames(first)
    # the same port again, its new sequence numbers behind the old connection's
    frames.append((_at(100), _frame((_at(100), True, 10, b""), flags=syn)))
    again = [
        (_at(101), True, 11, b"GET /b HTTP/1.1\r\n\r\n"),
        (_at(150), False, 900, b"HTTP/1.1 200 OK\r\n\r\n"),
    ]
    frames += _connection_frames(again)
    older, newer = read_connections(_write_pcap(tmp_path / "reused.pcap", frames), SERVER_PORT)
    assert [http1_requests(c)[0].first_ns for c in (older, newer)] == [_at(0), _at(101)]
