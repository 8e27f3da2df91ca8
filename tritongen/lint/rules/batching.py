"""Batching rules: max_batch_size, batch_input and batch_output, and dynamic batching."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tritongen.lint.rules.context import ModelContext, check_preferred_sizes, enum_name

BATCH_INPUT_KINDS = {
    "BATCH_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO",
    "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
    "BATCH_ITEM_SHAPE",
    "BATCH_ITEM_SHAPE_FLATTEN",
}
BATCH_OUTPUT_KIND = "BATCH_SCATTER_WITH_INPUT_SHAPE"


def check_batching_size(ctx: ModelContext) -> None:
    """max_batch_size is non-negative."""
    if ctx.config.max_batch_size < 0:
        ctx.error(
            "max-batch-size.negative",
            "max_batch_size",
            f"max_batch_size {ctx.config.max_batch_size} is negative",
            "use 0 (no batching) or the largest batch the model takes",
        )


# -- batch_input and batch_output ---------------------------------------------------------


def check_batch_io(ctx: ModelContext) -> None:
    """batch_input and batch_output: kinds, source counts, known sources and targets."""
    config = ctx.config
    inputs = {t.name for t in config.input}
    outputs = {t.name for t in config.output}
    for index, item in enumerate(config.batch_input):
        _check_batch_input(ctx, f"batch_input[{index}]", item, inputs)
    for index, item in enumerate(config.batch_output):
        _check_batch_output(ctx, f"batch_output[{index}]", item, inputs, outputs)


def _check_batch_input(ctx: ModelContext, path: str, item: Any, inputs: set[str]) -> None:
    """One batch_input: kind and sources, data type, and a target that is not a model input."""
    hint = "use one of " + ", ".join(sorted(BATCH_INPUT_KINDS))
    _check_kind(ctx, "batch input", path, item, BATCH_INPUT_KINDS, hint)
    if enum_name(item, "data_type") not in ("TYPE_INT32", "TYPE_FP32"):
        ctx.error(
            "batch-input.data-type",
            f"{path}.data_type",
            "batch input data type must be TYPE_INT32 or TYPE_FP32",
            "set data_type: TYPE_INT32 or TYPE_FP32",
        )
    _check_sources(ctx, "batch input", path, item, inputs)
    for target in item.target_name:
        if target in inputs:
            ctx.warning(
                "batch-input.target",
                f"{path}.target_name",
                f"target '{target}' is also a model input",
                "give the batch input its own name",
            )


def _check_batch_output(ctx: ModelContext, path: str, item: Any, inputs: set[str], outputs: set[str]) -> None:
    """One batch_output: kind and sources, and targets that are model outputs, each named once."""
    _check_kind(ctx, "batch output", path, item, {BATCH_OUTPUT_KIND}, f"use {BATCH_OUTPUT_KIND}")
    _check_sources(ctx, "batch output", path, item, inputs)
    for target, count in Counter(item.target_name).items():
        if target not in outputs:
            ctx.error(
                "batch-output.target",
                f"{path}.target_name",
                f"target '{target}' is not an output of the model",
                "name one of the model's outputs",
            )
        elif count > 1:
            ctx.error(
                "batch-output.target-repeated",
                f"{path}.target_name",
                f"target '{target}' is named {count} times",
                "name each target once",
            )


def _check_kind(ctx: ModelContext, what: str, path: str, item: Any, kinds: set[str], hint: str) -> None:
    """A batch input's or output's kind is known and takes exactly one source input.

    Args:
        ctx: The model being judged.
        what: ``batch input`` or ``batch output`` (its rules are named after it).
        path: The item's field path.
        item: The ``BatchInput`` or ``BatchOutput`` message.
        kinds: The kinds Triton knows for it.
        hint: The fix for an unknown kind.
    """
    family, kind = what.replace(" ", "-"), enum_name(item, "kind")
    if kind not in kinds:
        ctx.error(f"{family}.kind", f"{path}.kind", f"unknown {what} kind '{kind}'", hint)
    elif len(item.source_input) != 1:
        ctx.error(
            f"{family}.sources",
            f"{path}.source_input",
            f"{what} kind '{kind}' takes 1 source input, got {len(item.source_input)}",
            "name exactly one source input",
        )


def _check_sources(ctx: ModelContext, what: str, path: str, item: Any, inputs: set[str]) -> None:
    """Every source input of a batch input or output is an input of the model."""
    for source in item.source_input:
        if source not in inputs:
            ctx.error(
                f"{what.replace(' ', '-')}.source",
                f"{path}.source_input",
                f"source input '{source}' is not an input of the model",
                "name one of the model's inputs",
            )


# -- dynamic batching ---------------------------------------------------------------------


def check_dynamic_batching(ctx: ModelContext) -> None:
    """Preferred sizes, priority levels, queue policies and preserve_ordering."""
    config = ctx.config
    if not config.HasField("dynamic_batching"):
        return
    batching, max_batch = config.dynamic_batching, config.max_batch_size
    path = "dynamic_batching"
    if max_batch == 0:
        ctx.warning(
            "dynamic-batching.no-batching",
            path,
            "dynamic batching on a model with max_batch_size 0 cannot form batches",
            "set max_batch_size > 0, or drop dynamic_batching",
        )
    _check_preferred_order(ctx, path, list(batching.preferred_batch_size), max_batch)
    _check_priority_levels(ctx, path, batching)
    if batching.preserve_ordering:
        _check_preserve_ordering(ctx, path, batching)
    _check_delay_vs_slo(ctx, path, batching)


def _check_preferred_order(ctx: ModelContext, path: str, sizes: list[int], max_batch: int) -> None:
    """Preferred sizes are valid and, when they are, listed once each, smallest first."""
    fix = f"use sizes up to {max_batch}, or raise max_batch_size"
    if check_preferred_sizes(ctx, "dynamic-batching", f"{path}.preferred_batch_size", sizes, max_batch, fix):
        return
    if sizes != sorted(set(sizes)):
        ctx.warning(
            "dynamic-batching.preferred-order",
            f"{path}.preferred_batch_size",
            f"preferred batch sizes {sizes} are not increasing and distinct",
            "list each size once, smallest first",
        )


def _check_priority_levels(ctx: ModelContext, path: str, batching: Any) -> None:
    """The default priority level and the per-priority queue policies lie within the levels."""
    levels = batching.priority_levels
    if not levels:
        return
    if not 1 <= batching.default_priority_level <= levels:
        ctx.error(
            "dynamic-batching.default-priority",
            f"{path}.default_priority_level",
            f"default priority level {batching.default_priority_level} is outside [1, {levels}]",
            f"set default_priority_level between 1 and {levels}",
        )
    for key in batching.priority_queue_policy:
        if not 1 <= key <= levels:
            ctx.error(
                "dynamic-batching.priority-policy",
                f"{path}.priority_queue_policy",
                f"queue policy for priority {key} is outside [1, {levels}]",
                f"use priority levels 1 to {levels}",
            )


def _check_preserve_ordering(ctx: ModelContext, path: str, batching: Any) -> None:
    """preserve_ordering goes with one priority level and no DELAY timeout action."""
    levels = batching.priority_levels
    if levels > 1:
        ctx.error(
            "dynamic-batching.ordering-priority",
            f"{path}.preserve_ordering",
            f"preserve_ordering allows one priority level, not {levels}",
            "drop preserve_ordering or the priority levels",
        )
    policies = [batching.default_queue_policy] if batching.HasField("default_queue_policy") else []
    policies += list(batching.priority_queue_policy.values())
    if any(p.default_timeout_microseconds and enum_name(p, "timeout_action") == "DELAY" for p in policies):
        ctx.error(
            "dynamic-batching.ordering-delay",
            f"{path}.default_queue_policy",
            "a DELAY timeout action cannot go with preserve_ordering",
            "use timeout_action: REJECT, or drop ordering",
        )


def _check_delay_vs_slo(ctx: ModelContext, path: str, batching: Any) -> None:
    """The queue delay leaves at least half of the P99 budget, when one is given."""
    slo = ctx.slo_p99_ms
    delay_ms = batching.max_queue_delay_microseconds / 1000
    if slo is not None and delay_ms > slo / 2:
        ctx.warning(
            "dynamic-batching.delay-vs-slo",
            f"{path}.max_queue_delay_microseconds",
            f"queue delay {delay_ms:g} ms is more than half the P99 budget of {slo:g} ms",
            "lower max_queue_delay_microseconds (tritongen tune finds a good value)",
        )
