"""A capture of one server port's loopback traffic: tcpdump started before a load test, stopped after.

tcpdump (Debian's package: ``make wire``) writes whole packets with nanosecond stamps, each as
it comes (``-U``, ``--immediate-mode``: none held back in a buffer when it stops), to a pcap
file; capturing needs root or CAP_NET_RAW. The capture is ready once tcpdump says it is
listening; stopped with SIGINT, it says how many packets the kernel dropped (a capture that
dropped packets lacks some requests' bytes). It runs in a session of its own, so a terminal's
Ctrl-C reaches the test, which stops it.
"""

from __future__ import annotations

import contextlib
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tritongen.errors import ConfigError, MissingDependencyError, ServerError

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
INSTALL_HINT = "install tcpdump (make wire, or apt-get install tcpdump)"
BUFFER_KIB = 65536
"""The kernel's buffer for the capture (64 MiB): a run's packets fit in it even while tcpdump waits for
a core on a busy machine (with the default 2 MiB, tens of packets were dropped under the test suite)."""


@dataclass
class CaptureOutcome:
    """What tcpdump said as it stopped."""

    packets: int | None = None
    dropped: int | None = None
    """Packets the kernel dropped (the capture lacks them); None: tcpdump did not say."""
    died: str | None = None
    """Why the capture ended before the test did (its requests after that are not on it)."""


def _summary(stderr: str) -> CaptureOutcome:
    captured = re.search(r"(\d+) packets? captured", stderr)
    dropped = re.search(r"(\d+) packets? dropped by kernel", stderr)
    return CaptureOutcome(
        int(captured.group(1)) if captured else None, int(dropped.group(1)) if dropped else None
    )


def tcpdump_command(path: Path, port: int, interface: str = "lo") -> list[str]:
    """The capture's tcpdump command line (raises MissingDependencyError where tcpdump is not installed)."""
    binary = shutil.which("tcpdump") or next(
        (p for p in ("/usr/sbin/tcpdump", "/usr/bin/tcpdump") if Path(p).exists()), None
    )
    if binary is None:
        raise MissingDependencyError("capturing the wire needs tcpdump, which is not installed", INSTALL_HINT)
    return [
        binary, "-i", interface, "-w", str(path), "-s", "0", "-U", "-n", "--immediate-mode",
        "-B", str(BUFFER_KIB), "--time-stamp-precision", "nano", "-Z", "root", f"tcp port {port}",
    ]  # fmt: skip


def _wait_listening(process: subprocess.Popen[str], timeout_s: float) -> None:
    """Wait until tcpdump says it listens (raises ConfigError with its reason where it exits)."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout_s
    seen = ""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([process.stderr], [], [], left)[0]:
            break  # silent until the deadline
        line = process.stderr.readline()
        seen += line
        if "listening on" in line:
            return
        if not line and process.poll() is not None:
            break
    process.kill()
    process.wait()
    reason = seen.strip().splitlines()[-1] if seen.strip() else "it did not start listening"
    hint = (
        "run as root or give tcpdump CAP_NET_RAW (setcap cap_net_raw,cap_net_admin=eip $(which tcpdump))"
        if "ermission" in seen or "not permitted" in seen
        else INSTALL_HINT
    )
    raise ConfigError(f"tcpdump could not capture the wire: {reason}", hint)


@contextlib.contextmanager
def captured(path: Path, port: int, interface: str = "lo") -> Iterator[CaptureOutcome]:
    """Capture ``port``'s traffic into ``path`` while the block runs; the outcome is filled as it stops.

    Raises:
        MissingDependencyError: tcpdump is not installed.
        ConfigError: tcpdump may not capture here.
        ServerError: tcpdump did not stop.
    """
    command = tcpdump_command(path, port, interface)
    # a session of its own: a terminal's Ctrl-C stops the test, which then stops the capture
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    outcome = CaptureOutcome()
    try:
        _wait_listening(process, START_TIMEOUT_S)
        yield outcome
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        else:
            outcome.died = f"tcpdump exited during the test ({process.returncode})"
        try:
            _, rest = process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise ServerError(f"tcpdump (pid {process.pid}) did not stop; it was killed") from None
        found = _summary(rest or "")
        outcome.packets, outcome.dropped = found.packets, found.dropped
