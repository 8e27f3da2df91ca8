"""The ``--triton-*`` options: one table, each option also read from a ``TRITONGEN_*`` variable.

It imports only the load kinds' names (:mod:`.kinds`), which import only the standard library.

:data:`OPTIONS` declares them (name, default, help, choices); :func:`add_options` adds them
to Locust's parser and :class:`TritonOptions` reads them back, one field per option.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .kinds import AUTO_KIND, KINDS


@dataclass(frozen=True)
class _Option:
    """One ``--triton-*`` option; its environment variable is ``TRITONGEN_`` plus its name."""

    name: str
    default: str | int | float
    help: str | None = None
    choices: tuple[str, ...] | None = None

    def add_to(self, group: Any) -> None:
        """Add the option to an argument group of Locust's parser."""
        extra: dict[str, Any] = {"help": self.help} if self.help else {}
        if self.choices:
            extra["choices"] = list(self.choices)
        if not isinstance(self.default, str):
            extra["type"] = type(self.default)
        env_var = "TRITONGEN_" + self.name.upper().replace("-", "_")
        group.add_argument(f"--triton-{self.name}", env_var=env_var, default=self.default, **extra)


OPTIONS = (
    _Option("model", "", "Model to load."),
    _Option("model-version", "", "The model version requests go to (empty: the server's choice)."),
    _Option(
        "kind",
        AUTO_KIND,
        "The load kind (tritonload/kinds.py); auto: from --triton-llm-api, --triton-sequences, "
        "--triton-streaming and --triton-shared-memory.",
        choices=(AUTO_KIND, *KINDS),
    ),
    _Option("protocol", "http", choices=("http", "grpc")),
    _Option("inputs", "", ".npz with one array per input (full shape), or request steps sent round-robin."),
    _Option("batch-size", 1),
    _Option("dynamic-dim", 8, "Value of -1 dims."),
    _Option("string-length", 16, "Bytes per element of random BYTES inputs."),
    _Option("user-rate", 0.0, "Open loop: requests/s each user schedules (0 = closed loop)."),
    _Option("arrival", "constant", choices=("constant", "poisson", "gamma")),
    _Option(
        "arrival-cv", 1.0, "gamma: the coefficient of variation of the gaps between sends (above 1: bursts)."
    ),
    _Option(
        "schedule",
        "",
        "Open loop: a schedule to replay (.npz: each send's time from the measured span's start and "
        "its request step), instead of --triton-arrival's.",
    ),
    _Option(
        "max-inflight",
        1024,
        "Open loop: requests in flight per user; further sends are held back until one finishes.",
    ),
    _Option("window", 1.0, "Window in s."),
    _Option("t0", 0.0, "Epoch of window 0."),
    _Option("results", "", "JSON-lines output."),
    _Option("json", "", "Master: write the run's report as a tritongen.loadtest/1 document here."),
    _Option(
        "metrics-url",
        "",
        "Master: Triton's metrics endpoint, sampled each second (default the host's port 8002; none: off).",
    ),
    _Option(
        "report",
        1,
        "Master: 0 writes no report at the test's end, only its end line in --triton-results "
        "(tritongen reads the windows itself).",
    ),
    _Option("timeout", 30.0),
    _Option("streaming", 0, "1: a decoupled model, over gRPC streams (in flight until its final response)."),
    _Option("seed", 0),
    _Option(
        "trace-tag",
        "",
        "6 letters or digits: each tensor request carries an id TAG+pid+count for the server's trace, "
        "and each process writes its requests' ids and times beside --triton-results.",
    ),
    _Option(
        "shared-memory",
        "none",
        "system: tensors pass through system shared memory (a server on this host).",
        choices=("none", "system"),
    ),
    _Option("shm-prefix", "", "Name prefix of the shared-memory regions (default tritongen_<pid>_<hex>_)."),
    _Option("output-shm-size", 0, "Shared-memory bytes of an output whose size the metadata leaves open."),
    _Option("sequences", 0, "1: each user runs sequences (correlation ID, start/end flags), one at a time."),
    _Option("sequence-length", 0, "Requests per sequence (0: one per data step)."),
    _Option("sequence-ids", "", "Correlation IDs START:END (END excluded; default: from the process id)."),
    _Option(
        "llm-api",
        "",
        "An LLM load: openai-chat, openai-completions, triton-generate or triton-grpc (empty: tensors).",
        choices=("", "openai-chat", "openai-completions", "triton-generate", "triton-grpc"),
    ),
    _Option("llm-requests", "", "An LLM load: JSON lines of prepared requests (payload, input_tokens)."),
    _Option("llm-stream", 1, "An LLM load: 1 streams each answer token by token, 0 asks for it whole."),
    _Option("llm-key-env", "", "An LLM load: the environment variable holding the API key (a bearer token)."),
    _Option(
        "llm-slo", "", "An LLM load: TTFT,ITL,E2E limits in ms (0: none) of a request counted in goodput."
    ),
    _Option(
        "llm-turns",
        "",
        "The conversation kind: turns per session, MEAN[:SD]; each turn sends the history so far.",
    ),
    _Option("llm-max-turns", 0, "The conversation kind: the most turns a session takes (0: no cap)."),
    _Option(
        "llm-think-ms", 0.0, "The conversation kind: ms a session waits between an answer and its next turn."
    ),
    _Option(
        "llm-tokenizer",
        "",
        "An LLM load: a tokenizer.json that counts an answer's tokens where no usage comes.",
    ),
)


@dataclass(frozen=True)
class TritonOptions:
    """The ``--triton-*`` options, one field per option (dashes become underscores)."""

    model: str
    model_version: str
    kind: str
    protocol: str
    inputs: str
    batch_size: int
    dynamic_dim: int
    string_length: int
    user_rate: float
    arrival: str
    arrival_cv: float
    schedule: str
    max_inflight: int
    window: float
    t0: float
    results: str
    json: str
    metrics_url: str
    report: int
    timeout: float
    streaming: int
    seed: int
    trace_tag: str
    shared_memory: str
    shm_prefix: str
    output_shm_size: int
    sequences: int
    sequence_length: int
    sequence_ids: str
    llm_api: str
    llm_requests: str
    llm_stream: int
    llm_key_env: str
    llm_slo: str
    llm_turns: str
    llm_max_turns: int
    llm_think_ms: float
    llm_tokenizer: str

    @property
    def model_path(self) -> str:
        """The model in an inference URL's path: ``NAME``, or ``NAME/versions/V`` with a version."""
        return f"{self.model}/versions/{self.model_version}" if self.model_version else self.model

    @classmethod
    def from_parsed(cls, parsed: Any) -> TritonOptions:
        """Read them from Locust's parsed options."""
        return cls(**{f.name: getattr(parsed, f"triton_{f.name}") for f in fields(cls)})


def add_options(parser: Any) -> None:
    """Add every option to Locust's parser, in a group of their own."""
    group = parser.add_argument_group("tritongen", "Triton load options")
    for option in OPTIONS:
        option.add_to(group)
