"""The knobs users turn (batch sizes, queue delay, instances) applied to a typed config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from tritongen.errors import ConfigError
from tritongen.triton.model_config import DynamicBatching, InstanceGroup, InstanceKind, ModelConfig
from tritongen.triton.sequence_batching import (
    has_sequence_batching,
    preferred_sizes_refusal,
    tune_sequence_batching,
)

Kind = Literal["auto", "cpu", "gpu"]

DEFAULT_MAX_BATCH_SIZE = 32


@dataclass(frozen=True)
class BatchingOptions:
    """Changes to apply; ``None`` leaves a setting as it is (or at its default)."""

    max_batch_size: int | None = None
    dynamic_batching: bool | None = None
    preferred_batch_sizes: tuple[int, ...] | None = None
    max_queue_delay_us: int | None = None
    instances: int | None = None
    kind: Kind | None = None

    def check(self) -> None:
        """Reject values that are illegal whatever the model.

        Raises:
            ConfigError: a negative size or delay, a zero instance count, or
                preferred batch sizes above ``max_batch_size``.
        """
        if self.max_batch_size is not None and self.max_batch_size < 0:
            raise ConfigError(
                f"--max-batch-size {self.max_batch_size} is negative", "use 0 (no batching) or more"
            )
        if self.max_queue_delay_us is not None and self.max_queue_delay_us < 0:
            raise ConfigError(f"--max-queue-delay-us {self.max_queue_delay_us} is negative", "use 0 or more")
        if self.instances is not None and self.instances < 1:
            raise ConfigError(f"--instances {self.instances} must be at least 1", "use 1 or more")
        sizes = self.preferred_batch_sizes or ()
        if any(size <= 0 for size in sizes):
            raise ConfigError(
                f"--preferred-batch-sizes {_csv(sizes)} has a size below 1", "use positive sizes"
            )
        if self.max_batch_size is not None and sizes:
            too_big = [s for s in sizes if s > self.max_batch_size]
            if too_big:
                raise ConfigError(
                    f"preferred batch sizes {_csv(too_big)} exceed --max-batch-size {self.max_batch_size}",
                    f"use sizes up to {self.max_batch_size} or raise --max-batch-size",
                )
        if self.dynamic_batching is False and (sizes or self.max_queue_delay_us):
            raise ConfigError(
                "--no-dynamic-batching conflicts with --preferred-batch-sizes/--max-queue-delay-us",
                "drop one of them",
            )


def resolve_kind(kind: Kind, target: str | None) -> InstanceKind:
    """Map the CLI's ``auto|cpu|gpu`` to Triton's instance kind for a target.

    ``gpu`` is ``KIND_GPU`` on every target; whether the model's engine can run there is
    decided where the engine is known (``tritongen.pipeline.gpu_kind``).
    """
    if kind == "cpu":
        return "KIND_CPU"
    if kind == "gpu":
        return "KIND_GPU"
    return {"local": "KIND_CPU", "container": "KIND_GPU"}.get(target or "", "KIND_AUTO")  # type: ignore[return-value]


def apply_batching(config: ModelConfig, options: BatchingOptions, target: str | None) -> ModelConfig:
    """Return ``config`` with ``options`` applied and every model rule re-checked.

    Raises:
        ConfigError: the options are illegal for this model (e.g. batching on a model
            whose dims include the batch dim, or preferred sizes above max batch).
    """
    options.check()
    data = config.model_dump()
    max_batch = _max_batch_size(config, options)
    data["max_batch_size"] = max_batch
    if _wants_batching(options) and config.platform == "ensemble":
        raise ConfigError(
            f"'{config.name}' is an ensemble: it has no batcher of its own (its steps have theirs)",
            "set the batching options on the step models",
        )
    if options.dynamic_batching is False:
        data["dynamic_batching"] = None
    elif _wants_batching(options) and has_sequence_batching(config.passthrough):  # its own batcher
        data["passthrough"] = tune_sequence_batching(
            config.passthrough, config.name, options.preferred_batch_sizes, options.max_queue_delay_us
        )
    elif _wants_batching(options):
        data["dynamic_batching"] = _dynamic_batching(config, options, max_batch)
    if data["dynamic_batching"] is not None:
        too_big = [s for s in data["dynamic_batching"]["preferred_batch_size"] if s > max_batch]
        if too_big:
            raise ConfigError(
                f"preferred batch sizes {_csv(too_big)} exceed max_batch_size {max_batch}",
                f"use sizes up to {max_batch} or raise --max-batch-size",
            )
    if options.instances is not None or options.kind is not None:
        data["instance_group"] = [_instance_group(config, options, target)]
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as e:
        from tritongen.triton.proto import describe_validation_error

        raise ConfigError(f"'{config.name}': {describe_validation_error(e)}", "fix the options") from e


def preferred_sizes_refused(config: ModelConfig) -> str | None:
    """Why ``config``'s scheduler takes no preferred batch sizes (a direct sequence batcher), or ``None``."""
    return preferred_sizes_refusal(config.passthrough, config.name) if config.passthrough else None


def _max_batch_size(config: ModelConfig, options: BatchingOptions) -> int:
    """The config's max batch size once ``--max-batch-size`` is applied.

    Raises:
        ConfigError: the change would turn batching on or off (the dims would change meaning).
    """
    max_batch = config.max_batch_size
    if options.max_batch_size is None or options.max_batch_size == max_batch:
        return max_batch
    if max_batch == 0 or options.max_batch_size == 0:
        raise ConfigError(
            f"'{config.name}' has max_batch_size {max_batch}; changing it to "
            f"{options.max_batch_size} would change the meaning of its dims",
            "convert the model again with the --max-batch-size you want",
        )
    return options.max_batch_size


def _wants_batching(options: BatchingOptions) -> bool:
    """Whether the options turn dynamic batching on or change it."""
    return (
        options.dynamic_batching is True
        or options.preferred_batch_sizes is not None
        or (options.max_queue_delay_us is not None)
    )


def _dynamic_batching(config: ModelConfig, options: BatchingOptions, max_batch: int) -> dict[str, Any]:
    """The config's dynamic batching (a default one if it has none) with the options applied.

    Raises:
        ConfigError: the model cannot batch (max batch size 0).
    """
    if max_batch == 0:
        raise ConfigError(
            f"'{config.name}' cannot use dynamic batching: max_batch_size is 0 "
            "(its inputs have no dynamic leading batch dim)",
            "re-export the model with a dynamic batch dim, or drop the batching options",
        )
    current = config.dynamic_batching or DynamicBatching()
    batching = current.model_dump()
    if options.preferred_batch_sizes is not None:
        batching["preferred_batch_size"] = list(options.preferred_batch_sizes)
    if options.max_queue_delay_us is not None:
        batching["max_queue_delay_microseconds"] = options.max_queue_delay_us
    return batching


def _instance_group(config: ModelConfig, options: BatchingOptions, target: str | None) -> dict[str, Any]:
    """The config's one instance group with ``--instances`` and ``--kind`` applied.

    Raises:
        ConfigError: the config has several instance groups.
    """
    groups = config.instance_group
    if len(groups) > 1:
        raise ConfigError(
            f"'{config.name}' has {len(groups)} instance groups; tritongen sets one",
            "edit instance_group by hand for multi-group layouts",
        )
    group = groups[0] if groups else InstanceGroup(kind=resolve_kind("auto", target))
    count = options.instances if options.instances is not None else group.count
    kind = resolve_kind(options.kind, target) if options.kind is not None else group.kind
    return group.model_copy(update={"count": count, "kind": kind}).model_dump()


def _csv(values: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(v) for v in values)
