"""The lint corpus written out as one repository: every case, plus a config the renderer emits."""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import (
    DynamicBatching,
    GraphOptimization,
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
    ModelWarmup,
    Optimization,
    PinnedMemory,
    QueuePolicy,
    Reshape,
    ResponseCache,
    VersionLatest,
    VersionPolicy,
    WarmupInput,
)
from tritongen.triton.render import render_config

from support.lint_corpus import INVALID, STEP_MODEL, VALID

CASES = [STEP_MODEL, *VALID, *INVALID]
"""Every case of the corpus, the ensembles' step model first."""


def renderer_config() -> ModelConfig:
    """A Python-backend config using every field the renderer emits that the Python backend accepts."""
    return ModelConfig(
        name="valid_rendered",
        backend="python",
        default_model_filename="model.py",
        version_policy=VersionPolicy(latest=VersionLatest(num_versions=1)),
        max_batch_size=16,
        input=[
            ModelInput(
                name="x",
                data_type="TYPE_FP32",
                dims=[2, 2],
                reshape=Reshape(shape=[4]),
                allow_ragged_batch=False,
                optional=False,
            )
        ],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=DynamicBatching(
            preferred_batch_size=[4, 8],
            max_queue_delay_microseconds=200,
            priority_levels=2,
            default_priority_level=1,
            default_queue_policy=QueuePolicy(
                timeout_action="REJECT",
                default_timeout_microseconds=10_000,
                allow_timeout_override=True,
                max_queue_size=64,
            ),
            priority_queue_policy={2: QueuePolicy(max_queue_size=8)},
        ),
        instance_group=[InstanceGroup(name="cpu_group", kind="KIND_CPU", count=2)],
        parameters={"intra_op_thread_count": "1"},
        optimization=Optimization(
            graph=GraphOptimization(level=1),
            priority="PRIORITY_MAX",
            input_pinned_memory=PinnedMemory(enable=True),
            output_pinned_memory=PinnedMemory(enable=False),
        ),
        response_cache=ResponseCache(enable=True),
        model_warmup=[
            ModelWarmup(
                name="zeros",
                batch_size=2,
                count=1,
                inputs={"x": WarmupInput(data_type="TYPE_FP32", dims=[2, 2], zero_data=True)},
            )
        ],
    )


def write_corpus(repository: Path) -> Path:
    """Write every case into ``repository``, and ``valid_rendered``: the renderer's config of every field."""
    for case in CASES:
        case.write(repository)
    rendered = repository / "valid_rendered"
    (rendered / "1").mkdir(parents=True)
    (rendered / "1" / "model.py").write_text(STEP_MODEL.files["1/model.py"])
    (rendered / "config.pbtxt").write_text(render_config(renderer_config()))
    return repository
