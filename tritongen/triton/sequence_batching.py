"""Batching knobs of a sequence model: they go to its sequence batcher, not to dynamic batching.

A model with ``sequence_batching`` cannot also have ``dynamic_batching`` (both are the
config's scheduler). Its batcher batches too: the ``oldest`` strategy takes preferred
batch sizes and a queue delay, the ``direct`` strategy a queue delay. The typed config
keeps ``sequence_batching`` as protobuf text (:attr:`ModelConfig.passthrough`); this
module edits that text.
"""

from __future__ import annotations

from typing import Any

from tritongen.errors import ConfigError


def has_sequence_batching(passthrough: str) -> bool:
    """Whether a config's passthrough text holds a ``sequence_batching`` block."""
    return bool(_parse(passthrough).HasField("sequence_batching"))


def tune_sequence_batching(
    passthrough: str, name: str, preferred: tuple[int, ...] | None, delay_us: int | None
) -> str:
    """The passthrough text with the sequence batcher's preferred sizes and queue delay set.

    ``None`` leaves a knob as it is; an empty ``preferred`` clears the sizes.

    Raises:
        ConfigError: preferred sizes for the ``direct`` strategy, which has none.
    """
    from google.protobuf import text_format

    message = _parse(passthrough)
    batcher = message.sequence_batching
    if batcher.HasField("direct"):
        if preferred:
            raise ConfigError(
                f"'{name}' batches sequences with the direct strategy, which has no preferred batch sizes",
                "drop --preferred-batch-sizes, or use the oldest strategy",
            )
        if delay_us is not None:
            batcher.direct.max_queue_delay_microseconds = delay_us
    else:
        oldest = batcher.oldest  # the default strategy when none is set
        if preferred is not None:
            del oldest.preferred_batch_size[:]
            oldest.preferred_batch_size.extend(preferred)
        if delay_us is not None:
            oldest.max_queue_delay_microseconds = delay_us
    return str(text_format.MessageToString(message)).strip()


def _parse(passthrough: str) -> Any:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    message = model_config_pb2.ModelConfig()
    text_format.Parse(passthrough, message)
    return message
