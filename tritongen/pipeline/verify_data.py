"""``--verify-data``: the user's verification inputs, from an ``.npz`` or perf_analyzer's input-data JSON."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritongen.client.input_data import json_steps
from tritongen.client.inputs import InputSpec, ModelInterface
from tritongen.convert.verify import load_verify_data
from tritongen.sources.samples import Feed
from tritongen.sources.signature import Signature


def verify_data_feeds(path: Path, signature: Signature, max_rows: int) -> list[Feed]:
    """The batches of ``--verify-data``: an ``.npz`` split into ``max_rows``, or a JSON file's entries.

    A JSON file's entries (one row each) are stacked, consecutive entries of one shape
    together, up to ``max_rows`` a batch.

    Raises:
        SourceError: unreadable file, a missing input, or data that does not fit the inputs.
    """
    if path.suffix.lower() != ".json":
        return load_verify_data(path, signature, max_rows)
    interface = ModelInterface(
        name=path.name,
        max_batch_size=max_rows if signature.batched else 0,
        inputs=tuple(InputSpec(t.name, _wire_type(t.data_type), t.dims) for t in signature.inputs),
        outputs=tuple(t.name for t in signature.outputs),
    )
    steps = json_steps(path, interface)
    if not signature.batched:
        return [dict(step) for step in steps]
    feeds: list[Feed] = []
    for step in steps:
        last = feeds[-1] if feeds else None
        if (
            last is not None
            and all(last[k].shape[1:] == v.shape[1:] for k, v in step.items())
            and next(iter(last.values())).shape[0] < max_rows
        ):
            feeds[-1] = {k: np.concatenate([last[k], v]) for k, v in step.items()}
        else:
            feeds.append(dict(step))
    return feeds


def _wire_type(data_type: str) -> str:
    """A config data type (``TYPE_FP32``, ``TYPE_STRING``) as the wire names it (``FP32``, ``BYTES``)."""
    return "BYTES" if data_type == "TYPE_STRING" else data_type.removeprefix("TYPE_")
