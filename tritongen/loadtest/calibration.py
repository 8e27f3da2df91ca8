"""The load that measures the client's floor: the load test's levels, sent with the null kind, briefly."""

from __future__ import annotations

from dataclasses import replace

from tritongen.errors import ConfigError
from tritongen.loadtest.client_floor import CALIBRATION_S
from tritongen.loadtest.spec import LoadSpec

CALIBRATION_WARMUP_S = 1.0


def calibration_spec(spec: LoadSpec) -> LoadSpec:
    """The floor's load: the spec's levels and address, the null kind, short, one round.

    Raises:
        ConfigError: a load the floor cannot stand for: gRPC (the null kind goes over HTTP), a
            language model's prompts, sequences, shared memory, or a distributed load.
    """
    refused = [
        ("--protocol grpc", spec.protocol != "http", "the floor is measured over HTTP"),
        ("--api", spec.llm is not None, "a language model's latency is its tokens', not a request's"),
        ("--sequences", spec.sequences, "a sequence's requests wait for each other"),
        ("--shared-memory system", spec.shared_memory != "none", "the floor sends no tensors"),
        ("--master", spec.distributed is not None, "the floor is this machine's own"),
    ]
    for option, given, why in refused:
        if given:
            raise ConfigError(f"--calibrate does not apply with {option}: {why}", "drop --calibrate")
    return replace(
        spec, kind="null", batch_size=1, input_data="random", shapes={}, input_values={},
        duration_s=CALIBRATION_S, warmup_s=CALIBRATION_WARMUP_S, max_duration_s=CALIBRATION_S, rounds=1,
        window_s=None, count_window_requests=0, stop_at=None,
    )  # fmt: skip
