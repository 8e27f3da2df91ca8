"""Batching options applied to typed configs."""

from __future__ import annotations

import pytest

from tritongen.errors import ConfigError
from tritongen.triton.batching import BatchingOptions, apply_batching, resolve_kind
from tritongen.triton.model_config import DynamicBatching, InstanceGroup, ModelConfig, ModelInput, ModelOutput


def _config(max_batch: int = 32, batching: DynamicBatching | None = None) -> ModelConfig:
    return ModelConfig(
        name="m",
        backend="python",
        max_batch_size=max_batch,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=batching,
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )


def test_sets_preferred_sizes_and_delay() -> None:
    out = apply_batching(
        _config(), BatchingOptions(preferred_batch_sizes=(4, 8), max_queue_delay_us=100), "local"
    )
    assert out.dynamic_batching == DynamicBatching(
        preferred_batch_size=[4, 8], max_queue_delay_microseconds=100
    )


def test_keeps_unrelated_batching_fields() -> None:
    base = _config(batching=DynamicBatching(preserve_ordering=True, max_queue_delay_microseconds=7))
    out = apply_batching(base, BatchingOptions(preferred_batch_sizes=(2,)), "local")
    assert out.dynamic_batching is not None
    assert out.dynamic_batching.preserve_ordering
    assert out.dynamic_batching.max_queue_delay_microseconds == 7


def test_preferred_above_max_is_refused() -> None:
    with pytest.raises(ConfigError, match="exceed max_batch_size 32"):
        apply_batching(_config(), BatchingOptions(preferred_batch_sizes=(4, 64)), "local")


def test_preferred_above_new_max_is_refused_before_anything() -> None:
    with pytest.raises(ConfigError, match="exceed --max-batch-size 8"):
        BatchingOptions(max_batch_size=8, preferred_batch_sizes=(16,)).check()


def test_lowering_max_below_existing_preferred_is_refused() -> None:
    base = _config(batching=DynamicBatching(preferred_batch_size=[16]))
    with pytest.raises(ConfigError, match="exceed max_batch_size 8"):
        apply_batching(base, BatchingOptions(max_batch_size=8), "local")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (BatchingOptions(max_batch_size=-1), "negative"),
        (BatchingOptions(max_queue_delay_us=-5), "negative"),
        (BatchingOptions(instances=0), "at least 1"),
        (BatchingOptions(preferred_batch_sizes=(0, 4)), "below 1"),
        (BatchingOptions(dynamic_batching=False, preferred_batch_sizes=(4,)), "conflicts"),
    ],
)
def test_illegal_options(options: BatchingOptions, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_batching(_config(), options, "local")


def test_no_batching_model_refuses_dynamic_batching() -> None:
    with pytest.raises(ConfigError, match="max_batch_size is 0"):
        apply_batching(_config(max_batch=0), BatchingOptions(max_queue_delay_us=100), "local")


def test_switching_batching_on_or_off_is_refused() -> None:
    with pytest.raises(ConfigError, match="meaning of its dims"):
        apply_batching(_config(max_batch=0), BatchingOptions(max_batch_size=8), "local")
    with pytest.raises(ConfigError, match="meaning of its dims"):
        apply_batching(_config(), BatchingOptions(max_batch_size=0), "local")


def test_turning_dynamic_batching_off() -> None:
    base = _config(batching=DynamicBatching(preferred_batch_size=[4]))
    assert apply_batching(base, BatchingOptions(dynamic_batching=False), "local").dynamic_batching is None


def test_instances_and_kind() -> None:
    out = apply_batching(_config(), BatchingOptions(instances=3, kind="cpu"), "container")
    assert out.instance_group == [InstanceGroup(count=3, kind="KIND_CPU")]


def test_kind_resolution() -> None:
    assert resolve_kind("auto", "local") == "KIND_CPU"
    assert resolve_kind("auto", "container") == "KIND_GPU"
    assert resolve_kind("auto", None) == "KIND_AUTO"
    with pytest.raises(ConfigError, match="CPU"):
        resolve_kind("gpu", "local")
