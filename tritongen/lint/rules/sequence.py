"""Sequence-batching rules: control tensors and the settings of the scheduling strategy."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tritongen.lint.rules.context import ModelContext, check_preferred_sizes, enum_name

CORRID_TYPES = {"TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING"}
VALUE_PAIRS = ("int32_false_true", "fp32_false_true", "bool_false_true")
"""The fields that give a control's false and true values."""


def check_sequence_batching(ctx: ModelContext) -> None:
    """Control tensors (kinds, counts, value pairs, data types) and the strategy's settings."""
    config = ctx.config
    if not config.HasField("sequence_batching"):
        return
    seq, path = config.sequence_batching, "sequence_batching"
    _check_control_inputs(ctx, path, seq)
    _check_strategy(ctx, path, seq, config.max_batch_size)
    if config.HasField("response_cache") and config.response_cache.enable:
        ctx.error(
            "response-cache.sequence",
            "response_cache",
            "the response cache does not work with sequence batching",
            "set response_cache { enable: false }",
        )


def _check_control_inputs(ctx: ModelContext, path: str, seq: Any) -> None:
    """Every control tensor named and every control valid; each kind and each tensor used once."""
    kinds: Counter[str] = Counter()
    names: Counter[str] = Counter()
    for index, control_input in enumerate(seq.control_input):
        where = f"{path}.control_input[{index}]"
        if not control_input.name:
            ctx.error("sequence.control-name", f"{where}.name", "control tensor has no name", "set name")
        names[control_input.name] += 1
        for control in control_input.control:
            kind = enum_name(control, "kind")
            kinds[kind] += 1
            _check_control(ctx, where, kind, control)
    for kind, count in kinds.items():
        if count > 1:
            ctx.error(
                "sequence.control-repeated",
                f"{path}.control_input",
                f"{count} {kind} controls",
                "declare each control kind once",
            )
    for name, count in names.items():
        if name and count > 1:
            ctx.error(
                "sequence.control-tensor-repeated",
                f"{path}.control_input",
                f"control tensor '{name}' is used for several controls",
                "give each control its own tensor",
            )


def _check_control(ctx: ModelContext, where: str, kind: str, control: Any) -> None:
    """One control: a correlation id takes a data type; the others take one false/true pair."""
    pairs = [f for f in VALUE_PAIRS if getattr(control, f)]
    if kind == "CONTROL_SEQUENCE_CORRID":
        _check_corrid(ctx, where, control, pairs)
    elif not pairs:
        ctx.error(
            "sequence.control-values",
            where,
            f"{kind} needs int32_false_true, fp32_false_true or bool_false_true",
            "add e.g. int32_false_true: [0, 1]",
        )
    elif len(pairs) > 1:
        ctx.error(
            "sequence.control-values",
            where,
            f"{kind} sets more than one of {', '.join(pairs)}",
            "keep one",
        )
    elif len(getattr(control, pairs[0])) != 2:
        ctx.error(
            "sequence.control-pair",
            where,
            f"{kind} {pairs[0]} needs exactly 2 entries (false, true)",
            f"write e.g. {pairs[0]}: [0, 1]",
        )


def _check_corrid(ctx: ModelContext, where: str, control: Any, pairs: list[str]) -> None:
    """A correlation-id control: no false/true values, and a data type an id can have."""
    if pairs:
        ctx.error(
            "sequence.corrid-values",
            where,
            "CONTROL_SEQUENCE_CORRID takes no false/true values",
            f"drop {pairs[0]}; set data_type",
        )
    if enum_name(control, "data_type") not in CORRID_TYPES:
        ctx.error(
            "sequence.corrid-type",
            where,
            "CONTROL_SEQUENCE_CORRID data type must be one of " + ", ".join(sorted(CORRID_TYPES)),
            "set data_type, e.g. TYPE_UINT64",
        )


def _check_strategy(ctx: ModelContext, path: str, seq: Any, max_batch: int) -> None:
    """The oldest strategy's preferred sizes, and the direct strategy's slot utilisation."""
    if seq.HasField("oldest"):
        sizes = list(seq.oldest.preferred_batch_size)
        fix = "use sizes up to max_batch_size"
        check_preferred_sizes(ctx, "sequence", f"{path}.oldest.preferred_batch_size", sizes, max_batch, fix)
    if seq.HasField("direct") and not 0.0 <= seq.direct.minimum_slot_utilization <= 1.0:
        ctx.error(
            "sequence.slot-utilization",
            f"{path}.direct.minimum_slot_utilization",
            "minimum slot utilization must be within [0, 1]",
            "use a value between 0 and 1",
        )
