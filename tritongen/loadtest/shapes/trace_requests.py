"""A replayed trace's requests, as its entries ask: tensors of their own shapes, data entries, prompts.

A tensor trace's entries that share a batch size and shapes share one prepared request (the
steps are written in the order :meth:`~.trace_replay.TraceReplay.tensor_variants` gives); an
entry naming ``data`` sends that entry of ``--input-data``; an LLM trace's entry is a prompt of
its own input length asking for its own output length, built from its hash blocks so that
entries whose blocks begin alike share that prefix.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tritongen.client.input_data import Step
from tritongen.client.inputs import ModelInterface
from tritongen.errors import ConfigError, WorkloadInputError
from tritongen.loadtest.llm.prompts import WORDS, Prompt
from tritongen.loadtest.llm.tokenizer import count_tokens, load_tokenizer
from tritongen.loadtest.shapes.trace_replay import TraceReplay
from tritongen.loadtest.traces.entries import TraceEntry, trace_error
from tritongen.loadtest.traces.mooncake import BLOCK_TOKENS


def trace_tensor_steps(
    replay: TraceReplay, interface: ModelInterface, build: Callable[[int, dict[str, tuple[int, ...]]], Step]
) -> list[Step]:
    """One request per distinct shapes of the trace, built by ``build(batch_size, shapes)``.

    A whole shape (no ``batch_size`` given: a Triton trace's) has the batch dimension first on a model
    that batches.

    Raises:
        ConfigError: shapes the model does not take, the first line that asks them named.
    """
    steps = []
    for entry in replay.tensor_variants():
        batch, shapes = _batch_and_dims(entry, interface)
        try:
            steps.append(build(batch, shapes))
        except ConfigError as e:
            raise trace_error(replay.trace.path, entry.line, e.message, e.hint) from None
    return steps


def check_data_entries(replay: TraceReplay, count: int) -> None:
    """Every ``data`` entry the trace names is one of the ``count`` of ``--input-data``.

    Raises:
        ConfigError: one past them (its line named).
    """
    for entry in replay.trace.entries:
        if entry.data is not None and entry.data >= count:
            raise trace_error(
                replay.trace.path,
                entry.line,
                f"data {entry.data} is past --input-data's {count} entries",
                "count entries from 0",
            )


def _batch_and_dims(entry: TraceEntry, interface: ModelInterface) -> tuple[int, dict[str, tuple[int, ...]]]:
    shapes = dict(entry.shapes or {})
    if entry.batch_size is not None or not interface.batched:
        return entry.batch_size or 1, shapes
    batches = {dims[0] for dims in shapes.values() if dims}
    if len(batches) != 1:
        raise WorkloadInputError(
            f"--trace line {entry.line}: its inputs' first dims {sorted(batches)} are not one batch size",
            f"'{interface.name}' batches: each input's first dim is the request's batch size",
        )
    return batches.pop(), {name: dims[1:] for name, dims in shapes.items()}


def trace_prompts(replay: TraceReplay, tokenizer: Any, seed: int = 0) -> list[Prompt]:
    """One prompt per entry of an LLM trace: its input length in tokens, its output length asked.

    Each hash block is a text of its own (:data:`BLOCK_TOKENS` tokens, seeded by its id), so two
    prompts whose hash ids begin alike begin with the same text; the prompt is its blocks' text cut
    to its length (entries without hash ids: a text of their own).

    Raises:
        ConfigError: no tokenizer to count the tokens.
    """
    if tokenizer is None:
        raise ConfigError(
            "an LLM trace's prompts are built to its token counts with the model's tokenizer",
            "add --tokenizer DIR (the model's directory or its tokenizer.json)",
        )
    blocks: dict[int, str] = {}
    prompts = []
    for number, entry in enumerate(replay.trace.entries):
        ids = entry.hash_ids or (-(number + 1),)  # no blocks: a text of its own
        words: list[str] = []
        for block in ids:
            if block not in blocks:
                blocks[block] = _block_text(block, seed)
            words.append(blocks[block])
        text = _cut(tokenizer, " ".join(words), entry.input_tokens or 1)
        meta = {"line": entry.line, "session": entry.session} if entry.session else {"line": entry.line}
        prompts.append(
            Prompt(
                text=text,
                input_tokens=count_tokens(tokenizer, text),
                max_tokens=entry.output_tokens,
                meta=meta,
            )
        )
    return prompts


def _block_text(block: int, seed: int) -> str:
    """About :data:`BLOCK_TOKENS` tokens of words, the same for the same block id and seed."""
    rng = random.Random(f"{seed}/{block}")
    return f"block {block}: " + " ".join(rng.choice(WORDS) for _ in range(BLOCK_TOKENS))


def _cut(tokenizer: Any, text: str, tokens: int) -> str:
    """``text``'s first ``tokens`` tokens (more text added where it is shorter)."""
    while count_tokens(tokenizer, text) < tokens:
        text = text + " " + text
    ids = tokenizer.encode(text, add_special_tokens=False).ids[:tokens]
    return str(tokenizer.decode(ids))


def replayed_prompts(shape: object, tokenizer_path: Path | None, seed: int) -> list[Prompt] | None:
    """An LLM load's prompts from its ``--trace`` (None: no trace, or one without token counts).

    Raises:
        ConfigError: a trace of tensors or data entries (they replay against tensor loads), or no
            tokenizer to build the prompts with.
    """
    if not isinstance(shape, TraceReplay):
        return None
    trace = shape.trace
    if any(entry.shapes is not None or entry.data is not None for entry in trace.entries):
        raise ConfigError(
            f"--trace {trace.path} holds tensor requests (shapes, data entries): an LLM load replays prompts",
            "give a trace of token counts (Mooncake's, or ours with input_tokens), or drop --api",
        )
    if not trace.llm:
        return None  # arrival times only: the load's own prompts go in turn
    return trace_prompts(shape, load_tokenizer(tokenizer_path) if tokenizer_path else None, seed)


def refuse_prompts(shape: object) -> None:
    """A tensor load replays no LLM trace.

    Raises:
        ConfigError: ``shape`` is a trace of token counts.
    """
    if isinstance(shape, TraceReplay) and shape.trace.llm:
        raise ConfigError(
            f"--trace {shape.trace.path} holds prompts (token counts): it replays against an LLM load",
            "add --api (e.g. --api openai-chat) and --tokenizer, or give a trace of tensor requests",
        )
