"""The load generator frames HTTP responses from the chunks it receives, whatever their sizes.

The locustfile is imported in a subprocess (importing Locust patches the interpreter).
"""

from __future__ import annotations

import json
import subprocess
import sys

from support.paths import ROOT

PROBE = r"""
import json, sys

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload.http_wire import ResponseBuffer, frame_response


def response(status, body):
    return b"HTTP/1.1 %d OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % (
        status, len(body)) + body


def feed(data, size):
    received, statuses, leftovers = ResponseBuffer(), [], []
    for at in range(0, len(data), size):
        received.add(data[at:at + size])
        status = received.next_status()
        while status is not None:
            statuses.append(status)
            leftovers.append(received.size)
            status = received.next_status()
    return statuses, leftovers, received.empty


big = response(200, bytes(range(256)) * 16384)  # 4 MiB body
small = response(503, b"busy")
lower = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc"
out = {
    "big_in_chunks": feed(big, 262144),
    "big_byte_by_byte_head": feed(big[:200] + big[200:], 7),
    "two_in_one_chunk": feed(big + small, len(big) + len(small)),
    "split_head": feed(small + lower, 5),
    "incomplete": feed(big[:-1], 262144),
    "frame": [frame_response(small + b"rest"), frame_response(small[:-1])],
}
out["frame"] = [None if f is None else [f[0], f[1].decode()] for f in out["frame"]]
print(json.dumps(out))
"""


def test_responses_are_framed_from_chunks_of_any_size() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "loadtests")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["big_in_chunks"] == [[200], [0], True]
    assert out["big_byte_by_byte_head"] == [[200], [0], True]
    head = b"HTTP/1.1 503 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 4\r\n\r\n"
    small_size = len(head) + len(b"busy")
    assert out["two_in_one_chunk"] == [[200, 503], [small_size, 0], True]
    statuses, _, empty = out["split_head"]
    assert statuses == [503, 200] and empty
    assert out["incomplete"] == [[], [], False]
    assert out["frame"] == [[503, "rest"], None]
