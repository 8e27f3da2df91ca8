"""Shared fixtures: example ONNX models, the test repository, and the one embedded Triton server.

Tests marked ``gpu`` are skipped, with the reason, where ``nvidia-smi -L`` lists no NVIDIA GPU;
tests marked ``vllm`` where there is no ``.venv-vllm`` (``make vllm-env``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from tritongen.examples.models import EXAMPLES, write_example

from support.gpus import host_gpu_skip_reason, skip_gpu_items
from support.paths import ROOT
from support.vllm_server import vllm_missing_reason

# The shared embedded server (``triton_server``) and the watch that fails a test during which it dies.
pytest_plugins = ["support.shared_server"]

# Property tests draw the same examples on every run and machine: a failure is reproducible,
# and a run cannot pass by the luck of its draw.
settings.register_profile("repeatable", derandomize=True)
settings.load_profile("repeatable")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every ``gpu``-marked test where this machine has no usable NVIDIA GPU, every ``vllm``-marked
    one where there is no vLLM environment."""
    skip_gpu_items(items, host_gpu_skip_reason)
    why = vllm_missing_reason()
    wanted = any(item.get_closest_marker("vllm") is not None for item in items)
    if why is not None and wanted and os.environ.get("TRITONGEN_REQUIRE_VLLM") == "1":  # CI: no silent skip
        raise pytest.UsageError(f"TRITONGEN_REQUIRE_VLLM=1 but {why}")
    if why is not None:
        for item in items:
            if item.get_closest_marker("vllm") is not None:
                item.add_marker(pytest.mark.skip(reason=why))


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
    from support.sleep_model import PAUSE_MODEL, SLEEP_MODELS, write_pause_model, write_sleep_model

    for name, durations in SLEEP_MODELS.items():
        write_sleep_model(repo / name, durations)
    write_pause_model(repo / PAUSE_MODEL)
    from support.autocomplete_models import AUTO_MODEL, write_auto_model

    write_auto_model(repo / AUTO_MODEL)  # no config.pbtxt: Triton completes it
    from support.string_model import STRING_MODEL, write_string_model

    write_string_model(repo / STRING_MODEL)
    from support.mix_models import write_hold_models

    write_hold_models(repo)  # mix_hold_a, mix_hold_b
    from support.composing_models import write_composing_models

    write_composing_models(repo)  # pre_scale, ens_pre, bls_call
    from support.streaming_model import STREAMING_MODEL, write_streaming_model

    write_streaming_model(repo / STREAMING_MODEL)
    from support.sequence_model import SEQUENCE_MODEL, write_sequence_model

    write_sequence_model(repo / SEQUENCE_MODEL)
    from support.shm_model import SHM_MODEL, write_shm_model

    write_shm_model(repo / SHM_MODEL)
    from support.text_model import TEXT_MODEL, write_text_model

    write_text_model(repo / TEXT_MODEL)
    from support.versioned_model import VERSIONED_MODEL, write_versioned_model

    write_versioned_model(repo / VERSIONED_MODEL)  # versions 1 and 2, both served
    try:
        import torch  # noqa: F401
    except ImportError:
        return repo
    from support.torchscript_fixture import write_torchscript_mlp

    write_torchscript_mlp(repo / "mlp_torchscript")
    return repo
