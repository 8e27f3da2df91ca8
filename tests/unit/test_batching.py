"""Batching options applied to typed configs."""

from __future__ import annotations

from typing import Any

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
    # whether the engine can run there is decided where it is known (tritongen.pipeline.gpu_kind)
    assert resolve_kind("gpu", "local") == "KIND_GPU"
    assert resolve_kind("gpu", "container") == "KIND_GPU"


def _sequence_config(strategy: str) -> ModelConfig:
    """A batched sequence model whose ``sequence_batching`` block has ``strategy`` (may be empty)."""
    text = f"sequence_batching {{ max_sequence_idle_microseconds: 5000 {strategy} }}"
    return _config(max_batch=8).model_copy(update={"passthrough": text})


def _sequence_batching(config: ModelConfig) -> Any:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    message = model_config_pb2.ModelConfig()
    text_format.Parse(config.passthrough, message)
    return message.sequence_batching


@pytest.mark.parametrize("strategy", ["", "direct { }"])
def test_a_sequence_batcher_without_oldest_block_is_direct(strategy: str) -> None:
    """Triton's default strategy is direct: a queue delay goes under direct, never into a new oldest block."""
    from tritongen.triton.batching import preferred_sizes_refused
    from tritongen.triton.sequence_batching import sequence_strategy

    base = _sequence_config(strategy)
    assert sequence_strategy(base.passthrough) == "direct"
    tuned = apply_batching(base, BatchingOptions(max_queue_delay_us=500), "local")
    batcher: Any = _sequence_batching(tuned)
    assert not batcher.HasField("oldest") and tuned.dynamic_batching is None
    assert batcher.direct.max_queue_delay_microseconds == 500
    # At utilisation 0 direct never waits: the delay comes with "wait for a full batch".
    assert batcher.direct.minimum_slot_utilization == 1.0
    assert batcher.max_sequence_idle_microseconds == 5000
    zero: Any = _sequence_batching(apply_batching(base, BatchingOptions(max_queue_delay_us=0), "local"))
    assert not zero.HasField("oldest") and zero.direct.minimum_slot_utilization == 0
    # "Let Triton decide" (an empty set) is no preferred size: nothing to refuse.
    auto: Any = _sequence_batching(apply_batching(base, BatchingOptions(preferred_batch_sizes=()), "local"))
    assert not auto.HasField("oldest")
    reason = preferred_sizes_refused(base)
    assert reason is not None and "direct strategy" in reason
    assert ("Triton's default" in reason) == (strategy == "")
    with pytest.raises(ConfigError, match=r"direct strategy.*no preferred batch sizes") as caught:
        apply_batching(base, BatchingOptions(preferred_batch_sizes=(4,)), "local")
    assert "\n" not in str(caught.value)


def test_a_direct_batcher_keeps_its_own_slot_utilization() -> None:
    base = _sequence_config("direct { minimum_slot_utilization: 0.5 }")
    batcher: Any = _sequence_batching(apply_batching(base, BatchingOptions(max_queue_delay_us=100), "local"))
    assert batcher.direct.minimum_slot_utilization == 0.5
    assert batcher.direct.max_queue_delay_microseconds == 100


def test_an_oldest_batcher_takes_preferred_sizes_and_delay() -> None:
    from tritongen.triton.batching import preferred_sizes_refused

    base = _sequence_config("oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] }")
    assert preferred_sizes_refused(base) is None and preferred_sizes_refused(_config()) is None
    tuned = apply_batching(base, BatchingOptions(preferred_batch_sizes=(4,), max_queue_delay_us=300), "local")
    batcher: Any = _sequence_batching(tuned)
    assert not batcher.HasField("direct")
    assert list(batcher.oldest.preferred_batch_size) == [4]
    assert batcher.oldest.max_queue_delay_microseconds == 300 and batcher.oldest.max_candidate_sequences == 4


def test_tune_skips_preferred_sizes_on_a_direct_sequence_batcher() -> None:
    """Like any inapplicable knob: those candidates are skipped with the reason; none left is one line."""
    from tritongen.triton.batching import preferred_sizes_refused
    from tritongen.tune.space import SearchSpace

    reason = preferred_sizes_refused(_sequence_config(""))
    space = SearchSpace((8,), ((4, 8), None), (0, 500), (1,), preferred_refused=reason)
    space.check()
    assert [c.preferred_batch_sizes for c in space.candidates()] == [None, None]
    assert {why for _, why in space.skipped()} == {reason}
    only_sizes = SearchSpace((8,), ((4, 8),), (0,), (1,), preferred_refused=reason)
    with pytest.raises(ConfigError, match=r"no legal combination to tune: .*direct strategy") as caught:
        only_sizes.check()
    assert caught.value.hint == "add none to --preferred-batch-sizes"
    # A model whose scheduler takes preferred sizes keeps them.
    assert SearchSpace((8,), ((4, 8),), (0,), (1,)).size == 1
    # tune's options give the values; the space is made around the model's config.
    from tritongen.cli.options.tune import SearchFlags

    asked = SearchFlags(preferred="4,8;none", delays="0,500", instances="1").space()
    assert {c.preferred_batch_sizes for c in asked.around(_sequence_config("")).candidates()} == {None}
    assert len(asked.around(_sequence_config("oldest { }")).candidates()) == 4
