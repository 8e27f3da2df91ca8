"""Batching knobs of a sequence model: they go to its sequence batcher, not to dynamic batching.

A model with ``sequence_batching`` cannot also have ``dynamic_batching`` (both are the
config's scheduler). Its batcher batches too, with one of two strategies. Triton uses
``oldest`` only when the config has an ``oldest`` block: it takes preferred batch sizes and
a queue delay. Otherwise (a ``direct`` block, or no strategy at all: Triton's default) it
uses ``direct``, which has no preferred batch sizes; its queue delay holds a batch back
only while fewer than ``minimum_slot_utilization`` of the batch's slots have a request,
and at that field's default 0 it holds nothing back. So a queue delay set here on
``direct`` comes with a utilisation of 1 (wait up to the delay for a full batch) unless
the config sets its own. An ``oldest`` block is never added: it would change the strategy.
The typed config keeps ``sequence_batching`` as protobuf text
(:attr:`ModelConfig.passthrough`); this module edits that text.
"""

from __future__ import annotations

from typing import Literal

from tritongen.errors import ConfigError
from tritongen.triton.proto import parse_model_config

Strategy = Literal["direct", "oldest"]

FULL_BATCH_UTILIZATION = 1.0
"""The ``direct`` strategy's slot utilisation that makes a queue delay wait for a full batch."""


def has_sequence_batching(passthrough: str) -> bool:
    """Whether a config's passthrough text holds a ``sequence_batching`` block."""
    return bool(parse_model_config(passthrough).HasField("sequence_batching"))


def sequence_strategy(passthrough: str) -> Strategy:
    """The strategy Triton's sequence batcher uses: ``oldest`` only with an ``oldest`` block."""
    return "oldest" if parse_model_config(passthrough).sequence_batching.HasField("oldest") else "direct"


def preferred_sizes_refusal(passthrough: str, name: str) -> str | None:
    """Why the sequence batcher of model ``name`` takes no preferred batch sizes; ``None`` when it does.

    ``None`` too for a config without ``sequence_batching`` (dynamic batching decides).
    """
    message = parse_model_config(passthrough)
    if not message.HasField("sequence_batching") or message.sequence_batching.HasField("oldest"):
        return None
    how = "" if message.sequence_batching.HasField("direct") else " (Triton's default: no oldest block)"
    return f"'{name}' batches sequences with the direct strategy{how}, which has no preferred batch sizes"


def tune_sequence_batching(
    passthrough: str, name: str, preferred: tuple[int, ...] | None, delay_us: int | None
) -> str:
    """The passthrough text with the sequence batcher's preferred sizes and queue delay set.

    ``None`` leaves a knob as it is; an empty ``preferred`` clears the sizes (with
    ``direct``, there are none to clear). The strategy stays the one the config has.

    Raises:
        ConfigError: preferred sizes for the ``direct`` strategy (also the default one).
    """
    from google.protobuf import text_format

    message = parse_model_config(passthrough)
    batcher = message.sequence_batching
    if batcher.HasField("oldest"):
        if preferred is not None:
            del batcher.oldest.preferred_batch_size[:]
            batcher.oldest.preferred_batch_size.extend(preferred)
        if delay_us is not None:
            batcher.oldest.max_queue_delay_microseconds = delay_us
        return str(text_format.MessageToString(message)).strip()
    if preferred:
        raise ConfigError(
            str(preferred_sizes_refusal(passthrough, name)),
            "drop the preferred batch sizes, or add an oldest block to its sequence_batching",
        )
    if delay_us is not None:
        direct = batcher.direct  # the strategy in use, now spelled out
        direct.max_queue_delay_microseconds = delay_us
        if delay_us > 0 and direct.minimum_slot_utilization == 0:
            direct.minimum_slot_utilization = FULL_BATCH_UTILIZATION
    return str(text_format.MessageToString(message)).strip()
