"""GPU utilisation and memory read through NVML on this machine, for servers without DCGM metrics.

Triton's ``nv_gpu_*`` metrics come from DCGM, which the embedded server lacks and which is
often broken on MIG or shared hosts. NVML (nvidia-ml-py's ``pynvml``) reads the same figures
from the driver. Which GPUs count is decided by :func:`attribute`: the GPUs where a process of
the server runs; else those its ``CUDA_VISIBLE_DEVICES`` names; else every GPU. Memory is the
server processes' own where NVML reports it (``server-processes``), else the devices'
(``device``). NVML on this machine says nothing about a server on another host.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError

MEMORY_SCOPES = ("device", "server-processes")
FAILURES_TO_STOP = 3
"""Consecutive failed reads after which a reader stops reading for the rest of the run."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment: utilisation (0..1), device memory, and its processes' memory."""

    index: int
    uuid: str
    name: str
    util: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    processes: dict[int, int | None] = field(default_factory=dict)
    """pid -> GPU memory it uses (``None`` where NVML does not say)."""


@dataclass(frozen=True)
class GpuFigures:
    """The server's GPU figures: utilisation averaged, memory summed over the GPUs it uses."""

    util: float | None
    mem_bytes: int | None
    memory_scope: str
    """``server-processes`` (the server's own processes) or ``device`` (everything on the GPUs)."""
    devices: tuple[str, ...]
    """Names of the GPUs counted."""
    indices: tuple[int, ...]


def visible_devices(readings: Sequence[GpuReading], cuda_visible: str | None) -> list[GpuReading] | None:
    """The GPUs a ``CUDA_VISIBLE_DEVICES`` value names (by index or UUID, in its order).

    ``None`` when the value is unset or names no GPU NVML knows (e.g. MIG instances); an empty
    list when it hides every GPU (``""`` or ``-1``).
    """
    if cuda_visible is None:
        return None
    entries = [e.strip() for e in cuda_visible.split(",")]
    if entries in ([""], ["-1"]):
        return []
    chosen: list[GpuReading] = []
    for entry in entries:
        match = next(
            (
                r
                for r in readings
                if (entry.isdigit() and r.index == int(entry)) or _uuid_match(entry, r.uuid)
            ),
            None,
        )
        if match is None:
            break  # CUDA stops at the first entry it cannot resolve
        if match not in chosen:
            chosen.append(match)
    return chosen or None


def _uuid_match(entry: str, uuid: str) -> bool:
    """``GPU-8f…`` and a unique prefix of it (with or without ``GPU-``) name the same GPU."""
    if not entry or entry.isdigit():
        return False
    bare = uuid.removeprefix("GPU-")
    return uuid.startswith(entry) or bare.startswith(entry.removeprefix("GPU-"))


def attribute(
    readings: Sequence[GpuReading],
    server_pids: Collection[int] | None,
    cuda_visible: str | None = None,
) -> GpuFigures | None:
    """The server's GPU figures from per-GPU readings; ``None`` when it uses no GPU.

    ``server_pids`` is the server's process tree (``None``: unknown, every GPU counts).
    Used GPUs: those where a server process runs; else those ``cuda_visible`` names; else all.
    Memory: the server processes' own where NVML reports any, else the used GPUs' device memory.
    """
    used: list[GpuReading] = list(readings)
    process_mem: int | None = None
    if server_pids is not None:
        pids = set(server_pids)
        running = [r for r in readings if pids & r.processes.keys()]
        if running:
            used = running
            known = [m for r in running for pid, m in r.processes.items() if pid in pids and m is not None]
            process_mem = sum(known) if known else None
        else:
            visible = visible_devices(readings, cuda_visible)
            used = visible if visible is not None else used
    if not used:
        return None
    utils = [r.util for r in used if r.util is not None]
    device_mem = [r.mem_used_bytes for r in used if r.mem_used_bytes is not None]
    mem: int | None = process_mem
    scope = "server-processes"
    if mem is None:
        mem, scope = (sum(device_mem) if device_mem else None), "device"
    return GpuFigures(
        util=sum(utils) / len(utils) if utils else None,
        mem_bytes=mem,
        memory_scope=scope,
        devices=tuple(r.name for r in used),
        indices=tuple(r.index for r in used),
    )


def is_local_url(url: str) -> bool:
    """Whether a server URL (``host:port`` or ``http://host:port/...``) is on this machine (loopback)."""
    try:
        return ServerAddress.parse(url).on_this_machine
    except ConfigError:
        return False


def _import_pynvml() -> Any:
    """nvidia-ml-py's module (it ships no type information)."""
    return importlib.import_module("pynvml")


def open_nvml(server_pid: int | None = None, server_url: str | None = None) -> NvmlReader | str:
    """A working NVML reader for the server, or the one-line reason there is none.

    A server with a known pid is on this machine; without one, the URL decides: a server on
    another host is out of this machine's NVML's sight.
    """
    if server_pid is None and server_url is not None and not is_local_url(server_url):
        return "the server is on another host: NVML on this machine cannot see its GPUs"
    try:
        nvml = _import_pynvml()
    except ImportError:
        return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        return f"NVML failed to initialise: {e}"
    try:
        count = int(nvml.nvmlDeviceGetCount())
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        devices = [
            (i, _text(nvml.nvmlDeviceGetUUID(h)), _text(nvml.nvmlDeviceGetName(h)))
            for i, h in enumerate(handles)
        ]
    except nvml.NVMLError as e:
        nvml.nvmlShutdown()
        return f"NVML cannot list the GPUs: {e}"
    if not handles:
        nvml.nvmlShutdown()
        return "no GPU: NVML sees none on this machine"
    return NvmlReader(nvml, handles, devices, server_pid)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


class NvmlReader:
    """Reads the server's GPU figures through an open NVML; stops reading when NVML keeps failing.

    The server's process tree is looked up again every ``refresh_s`` seconds (instances that
    start later count too), not on every read, to keep the sampling thread cheap.
    """

    def __init__(
        self,
        nvml: Any,
        handles: list[Any],
        devices: list[tuple[int, str, str]],
        server_pid: int | None,
        refresh_s: float = 5.0,
    ) -> None:
        self._nvml = nvml
        self._handles = handles
        self._devices = devices
        self.server_pid = server_pid
        self.refresh_s = refresh_s
        self.failures = 0
        self.stopped = False
        self._failed_in_a_row = 0
        self._pids: set[int] | None = None
        self._seen: set[int] = set()
        """Every pid NVML has listed so far (a new one triggers a look at the server's tree)."""
        self._cuda_visible: str | None = None
        self._looked_up = -float("inf")
        self._open = True

    def gpus(self) -> list[dict[str, Any]]:
        """Every GPU NVML sees (name, total memory, uuid); empty when NVML fails."""
        try:
            readings = self.readings()
        except self._nvml.NVMLError:
            return []
        return [{"name": r.name, "memory_bytes": r.mem_total_bytes, "uuid": r.uuid} for r in readings]

    def readings(self) -> list[GpuReading]:
        """Every GPU now.

        Raises:
            NVMLError: NVML failed (pynvml's exception).
        """
        nvml = self._nvml
        found = []
        for handle, (index, uuid, name) in zip(self._handles, self._devices, strict=True):
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            found.append(
                GpuReading(
                    index=index,
                    uuid=uuid,
                    name=name,
                    util=self._utilisation(handle),
                    mem_used_bytes=int(memory.used),
                    mem_total_bytes=int(memory.total),
                    processes=self._processes(handle),
                )
            )
        return found

    def _utilisation(self, handle: Any) -> float | None:
        """The GPU's utilisation (0..1); ``None`` where NVML has none (e.g. a GPU split into MIG)."""
        nvml = self._nvml
        try:
            return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu) / 100
        except nvml.NVMLError:
            return None

    def _processes(self, handle: Any) -> dict[int, int | None]:
        """The processes on one GPU (pid -> memory).

        Empty where NVML cannot list them (permissions, an NVML older than the bindings):
        utilisation and device memory still count.
        """
        found: dict[int, int | None] = {}
        nvml = self._nvml
        failures = (nvml.NVMLError, getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError))
        for query in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
            try:
                processes = query(handle)
            except failures:
                continue
            for p in processes:
                used = p.usedGpuMemory
                mem = int(used) if used is not None and 0 <= used < 2**63 else None
                previous = found.get(int(p.pid))  # one process in both lists: the same memory
                found[int(p.pid)] = mem if previous is None else max(previous, mem or 0)
        return found

    def server_gpus(self) -> list[dict[str, Any]]:
        """The GPUs the server uses (see :func:`attribute`), each with ``"source": "nvml"``."""
        try:
            readings = self.readings()
        except self._nvml.NVMLError:
            return []
        figures = self._attribute(readings)
        chosen = set(figures.indices) if figures is not None else set()
        return [
            {"uuid": r.uuid, "name": r.name, "memory_bytes": r.mem_total_bytes, "source": "nvml"}
            for r in readings
            if r.index in chosen
        ]

    def read(self) -> GpuFigures | None:
        """The server's GPU figures now; ``None`` when it uses no GPU or NVML has failed."""
        if self.stopped or not self._open:
            return None
        try:
            readings = self.readings()
        except self._nvml.NVMLError:
            self.failures += 1
            self._failed_in_a_row += 1
            self.stopped = self._failed_in_a_row >= FAILURES_TO_STOP
            return None
        self._failed_in_a_row = 0
        return self._attribute(readings)

    def _attribute(self, readings: list[GpuReading]) -> GpuFigures | None:
        self._refresh_processes({pid for r in readings for pid in r.processes})
        return attribute(readings, self._pids, self._cuda_visible)

    def _refresh_processes(self, listed: set[int]) -> None:
        """Look the server's process tree up again every ``refresh_s``, and when NVML lists a new pid.

        A model instance that just started may be the server's.
        """
        if self.server_pid is None:
            return
        unseen = listed - self._seen
        if time.monotonic() - self._looked_up < self.refresh_s and not unseen:
            return
        self._seen |= listed
        self._looked_up = time.monotonic()
        try:
            server = psutil.Process(self.server_pid)
            self._pids = {self.server_pid, *(c.pid for c in server.children(recursive=True))}
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            self._pids = {self.server_pid}
            return
        try:
            self._cuda_visible = server.environ().get("CUDA_VISIBLE_DEVICES")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            self._cuda_visible = None

    def close(self) -> None:
        """Release NVML (once)."""
        if self._open:
            self._open = False
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
