"""Shared fixtures: example ONNX models, the test repository, and the one embedded Triton server.

Tests marked ``gpu`` are skipped, with the reason, where ``nvidia-smi -L`` lists no NVIDIA GPU.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tritongen.examples.models import EXAMPLES, write_example
from tritongen.server.local import LocalTritonServer

# Property tests draw the same examples on every run and machine: a failure is reproducible,
# and a run cannot pass by the luck of its draw.
settings.register_profile("repeatable", derandomize=True)
settings.load_profile("repeatable")

ROOT = Path(__file__).resolve().parents[1]

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every ``gpu``-marked test where this machine has no usable NVIDIA GPU."""
    skip_gpu_items(items, host_gpu_skip_reason)


@pytest.fixture(scope="session")
def example_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in example models written to a session directory."""
    root = tmp_path_factory.mktemp("examples")
    return {name: write_example(name, root / f"{name}.onnx") for name in EXAMPLES}


@pytest.fixture(scope="session")
def served_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the committed example repository, plus a TorchScript model where torch is installed."""
    repo = tmp_path_factory.mktemp("served") / "model_repository"
    shutil.copytree(ROOT / "model_repository", repo, ignore=shutil.ignore_patterns("__pycache__"))
    from sleep_model import PAUSE_MODEL, SLEEP_MODELS, write_pause_model, write_sleep_model

    for name, durations in SLEEP_MODELS.items():
        write_sleep_model(repo / name, durations)
    write_pause_model(repo / PAUSE_MODEL)
    from autocomplete_models import AUTO_MODEL, write_auto_model

    write_auto_model(repo / AUTO_MODEL)  # no config.pbtxt: Triton completes it
    from string_model import STRING_MODEL, write_string_model

    write_string_model(repo / STRING_MODEL)
    from mix_models import write_hold_models

    write_hold_models(repo)  # mix_hold_a, mix_hold_b
    from composing_models import write_composing_models

    write_composing_models(repo)  # pre_scale, ens_pre, bls_call
    from streaming_model import STREAMING_MODEL, write_streaming_model

    write_streaming_model(repo / STREAMING_MODEL)
    from sequence_model import SEQUENCE_MODEL, write_sequence_model

    write_sequence_model(repo / SEQUENCE_MODEL)
    from shm_model import SHM_MODEL, write_shm_model

    write_shm_model(repo / SHM_MODEL)
    try:
        import torch  # noqa: F401
    except ImportError:
        return repo
    from torchscript_fixture import write_torchscript_mlp

    write_torchscript_mlp(repo / "mlp_torchscript")
    return repo


@pytest.fixture(scope="session")
def triton_server(served_repository: Path) -> Iterator[LocalTritonServer]:
    """The real embedded Triton server on ``served_repository``, one per test session, auto ports.

    It starts once (about 8 s for its models) and is shared by every module: a test that
    changes what the server serves (a model's config, loaded or not) puts it back.
    """
    with LocalTritonServer(served_repository, http_port=0, grpc_port=0, metrics_port=0) as server:
        yield server
