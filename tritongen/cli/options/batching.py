"""The batching and instance options of ``convert``, ``render`` and ``compare``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import typer

from tritongen.cli.options.parsing import parse_int_list
from tritongen.cli.options.settings import settings
from tritongen.triton.batching import BatchingOptions


class KindChoice(str, Enum):
    """Where instances run."""

    auto = "auto"
    cpu = "cpu"
    gpu = "gpu"


MaxBatchSize = Annotated[
    int | None,
    typer.Option("--max-batch-size", help="Largest batch the model accepts (0 = no batching)."),
]
PreferredBatchSizes = Annotated[
    str | None,
    typer.Option(
        "--preferred-batch-sizes",
        help="Batch sizes the dynamic batcher aims for, e.g. 4,8,16.",
    ),
]
MaxQueueDelay = Annotated[
    int | None,
    typer.Option(
        "--max-queue-delay-us",
        help="How long a request may wait for a batch to fill, in µs.",
    ),
]
DynamicBatchingFlag = Annotated[
    bool | None,
    typer.Option(
        "--dynamic-batching/--no-dynamic-batching",
        help="Turn the dynamic batcher on or off (on by default for batching models).",
    ),
]
Instances = Annotated[int | None, typer.Option("--instances", help="Model instances (copies) to run.")]
Kind = Annotated[
    KindChoice | None,
    typer.Option(
        "--kind",
        help="Instance kind: auto (CPU for local, GPU for container), cpu, gpu "
        "(local: TorchScript with CUDA torch, TVM built with --tvm-target cuda).",
    ),
]


@dataclass(frozen=True)
class BatchingFlags:
    """Max batch, the dynamic batcher and instances of a model's config."""

    max_batch_size: MaxBatchSize = None
    preferred_batch_sizes: PreferredBatchSizes = None
    max_queue_delay_us: MaxQueueDelay = None
    dynamic_batching: DynamicBatchingFlag = None
    instances: Instances = None
    kind: Kind = None

    def options(self) -> BatchingOptions:
        """The batching options (``--preferred-batch-sizes none`` = let Triton decide)."""
        sizes: tuple[int, ...] | None
        if self.preferred_batch_sizes is not None and self.preferred_batch_sizes.strip().lower() == "none":
            sizes = ()
        else:
            sizes = parse_int_list(self.preferred_batch_sizes, "--preferred-batch-sizes")
        return settings(BatchingOptions, self, preferred_batch_sizes=sizes)
