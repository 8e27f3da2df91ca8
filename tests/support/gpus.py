"""Whether this machine has a usable NVIDIA GPU, and the skipping of ``gpu``-marked tests where not."""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable

import pytest

ListGpus = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _list_gpus(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def gpu_skip_reason(
    which: Callable[[str], str | None] = shutil.which, run: ListGpus = _list_gpus
) -> str | None:
    """Why ``gpu`` tests cannot run here, or None where ``nvidia-smi -L`` lists at least one GPU.

    ``nvidia-smi`` ships with the NVIDIA driver and answers ``-L`` with one ``GPU <n>: ...``
    line per usable device; without a driver, or without a device, it lists none or fails.
    """
    binary = which("nvidia-smi")
    if binary is None:
        return "no NVIDIA GPU: nvidia-smi is not on PATH"
    try:
        result = run([binary, "-L"])
    except (OSError, subprocess.SubprocessError) as e:
        return f"no NVIDIA GPU: nvidia-smi -L could not run ({e})"
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()
        return f"no NVIDIA GPU: nvidia-smi -L exited {result.returncode}" + (f" ({said[0]})" if said else "")
    if not any(line.startswith("GPU ") for line in result.stdout.splitlines()):
        return "no NVIDIA GPU: nvidia-smi -L lists none"
    return None


@functools.cache
def host_gpu_skip_reason() -> str | None:
    """``gpu_skip_reason()`` for this machine, asked once per session."""
    return gpu_skip_reason()


def skip_gpu_items(items: list[pytest.Item], reason: Callable[[], str | None]) -> None:
    """Mark the ``gpu`` items skipped when ``reason()`` (asked only if there are some) gives one."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items or (why := reason()) is None:
        return
    for item in gpu_items:
        # A skipif placed first is evaluated before the test's own skipifs (a missing tool),
        # so a host without a GPU reports that, the more basic reason.
        item.add_marker(pytest.mark.skipif(True, reason=why), append=False)
