"""What the measurements ran on: this host's CPU, memory and GPUs, and the server's GPUs."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def memory_bytes() -> int | None:
    """Physical memory of this host."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except (ImportError, OSError):
        return None


def local_gpus() -> list[dict[str, Any]]:
    """NVIDIA GPUs on this host (name, memory), from ``nvidia-smi``, else NVML; empty where there is none."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return _nvml_gpus()
    try:
        out = subprocess.run(
            [binary, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.splitlines():
        name, _, memory = line.rpartition(",")
        if name.strip():
            gpus.append({"name": name.strip(), "memory_bytes": _mib(memory)})
    return gpus


def _nvml_gpus() -> list[dict[str, Any]]:
    """The GPUs NVML sees (name, memory, uuid); empty where NVML is unavailable."""
    from tritongen.metrics.nvml import open_nvml

    reader = open_nvml()
    if isinstance(reader, str):
        return []
    try:
        return reader.gpus()
    finally:
        reader.close()


def _mib(text: str) -> int | None:
    try:
        return int(float(text.strip()) * 1024 * 1024)
    except ValueError:
        return None


def server_gpus(metrics_text: str) -> list[dict[str, Any]]:
    """The GPUs a Triton server reports on its metrics endpoint (uuid, total memory)."""
    from prometheus_client.parser import text_string_to_metric_families

    gpus: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "nv_gpu_memory_total_bytes":
            continue
        for sample in family.samples:
            uuid = sample.labels.get("gpu_uuid", str(len(gpus)))
            gpus[uuid] = {"uuid": uuid, "memory_bytes": int(sample.value)}
    return list(gpus.values())


def nvml_server_gpus(server_pid: int | None, server_url: str) -> list[dict[str, Any]]:
    """The GPUs a server on this machine uses, as NVML sees them (each with ``"source": "nvml"``).

    Empty where NVML is unavailable or the server is on another host.
    """
    from tritongen.metrics.nvml import open_nvml

    reader = open_nvml(server_pid, server_url)
    if isinstance(reader, str):
        return []
    try:
        return reader.server_gpus()
    finally:
        reader.close()


def describe_host() -> dict[str, Any]:
    """This host, for the record of a measurement."""
    return {
        "cpu": cpu_model(),
        "cpus": usable_cpus(),
        "memory_bytes": memory_bytes(),
        "gpus": local_gpus(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
