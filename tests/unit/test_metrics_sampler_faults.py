"""The metrics sampler outlives an endpoint that cuts its answers: a lost sample, not a dead thread.

Against a real HTTP server on loopback whose answer promises more bytes than it sends (a
server going away mid-answer), then a whole answer.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tritongen.metrics.prometheus import MetricsSampler

WHOLE = b"nv_cpu_utilization 0.25\nnv_cpu_memory_used_bytes 1000\n"


@contextmanager
def _cutting_then_whole_server() -> Iterator[int]:
    """Answers its first two requests cut short (Content-Length too large), the rest whole."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        answered = 0
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.recv(65536)
                length = len(WHOLE) * (10 if answered < 2 else 1)
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
                connection.sendall(head.encode() + WHOLE)
            answered += 1

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def test_a_cut_answer_costs_a_sample_and_the_sampling_goes_on() -> None:
    with _cutting_then_whole_server() as port:
        sampler = MetricsSampler(f"http://127.0.0.1:{port}/metrics", interval_s=0.05, nvml=False).start()
        deadline = time.monotonic() + 10
        while not sampler.samples and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = sampler._thread is not None and sampler._thread.is_alive()
        sampler.stop()
    assert sampler.failures >= 2 and alive
    assert sampler.samples and sampler.samples[0].values["cpu_util"] == 0.25
