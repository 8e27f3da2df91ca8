"""What a load kind is: one module behind one small interface, found by its name.

A kind says what a load test's requests are and what its runs add: tensors over HTTP or gRPC,
a sequence model's sequences, a decoupled model's streams, prompts to a language model,
tensors through shared memory, the null load that measures the client's own floor. The
engine never asks which kind it drives; it asks the kind (:class:`LoadKind`):

- ``claims``: whether ``--load-kind auto`` picks it, from the options and the model's config
  (``given``: the option that asks for it, by which a kind asked by name is held to its own);
- ``prepare``: check the spec against the model and write the requests the load processes
  read (:class:`Requests`: rows per request, the file, the kind's ``--triton-*`` options);
- ``add_figures``: what each run's result gains from the kind (streams, sequences, tokens);
- ``notes``: the lines the result tables show for a run of the kind;
- ``level_text``, ``health``, ``sampler``: how a level is named, how the server is watched
  during a run and where its metrics come from.

The base class gives the plain behaviour (Triton's endpoints, no figures of its own); a kind
overrides what it changes. The kinds are registered in one place, the load generator's
``tritonload/kinds.py``: a kind's name there finds both its module here
(``tritongen/loadtest/kinds/<name>.py``, which defines ``KIND``) and its Locust side.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import ModelInterface
from tritongen.client.validation_data import ExpectedOutputs
from tritongen.metrics.prometheus import MetricsSampler, parse_metrics

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult
    from tritongen.loadtest.spec import LoadSpec

ModelConfig = Callable[[], dict[str, Any]]
"""The model's config as the server reports it, read when first asked (a kind that loads no
Triton model never asks)."""


class Health(Protocol):
    """How a run watches the server: whether it answers, and still has the model."""

    def is_live(self) -> bool:
        """Whether the server answers."""
        ...

    def is_model_ready(self, model: str) -> bool:
        """Whether the server still has ``model`` ready."""
        ...

    def close(self) -> None:
        """Release what the watch holds."""
        ...


@dataclass(frozen=True)
class Requests:
    """A model's requests, written for the load generator, and what the runs need of them."""

    interface: ModelInterface
    rows: int
    """Rows per request (1 for a model that does not batch)."""
    path: Path | None
    """The file the load processes read (None: the kind sends no data of its own)."""
    options: dict[str, str] = field(default_factory=dict)
    """The kind's ``--triton-*`` options by name (``streaming``, ``sequence-length`` …), every run's."""
    expected: ExpectedOutputs | None = None
    """The data's expected outputs, which every response is checked against (None: not checked)."""
    release: Callable[[], object] | None = None
    """After each run: what the load processes, if killed, could not clean up themselves."""


@dataclass(frozen=True)
class RunView:
    """What a kind may read of a finished run to add its figures."""

    users: int
    """Locust users of the run (the concurrency, or one per process in an open loop)."""
    span: tuple[float, float]
    """The measured time, epoch seconds from and to."""
    sampler: MetricsSampler
    """The metrics endpoint's samples (the server's, for the span)."""


class LoadKind:
    """A kind of load; the plain behaviour, which each kind overrides where it differs."""

    name: ClassVar[str]
    option: ClassVar[str | None] = None
    """The option that asks for the kind (``--sequences N``); None where the model decides."""
    statistics: ClassVar[bool] = True
    """Whether the server has Triton's statistics API (queue and compute time per model)."""

    def given(self, spec: LoadSpec) -> str | None:
        """The option of ``spec`` that asks for this kind, as given (None: none asks for it)."""
        del spec
        return None

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """Whether ``--load-kind auto`` picks this kind (asked in the registry's order)."""
        del spec, config
        return False

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """Check ``spec`` against the model, and write its requests in ``folder``.

        Raises:
            ConfigError: the load does not fit the model.
            SourceError: a data file is unreadable, or its data does not fit the model.
        """
        raise NotImplementedError

    def level_text(self, spec: LoadSpec, level: float) -> str:
        """A level in words: ``concurrency 8``, ``rate 500/s`` or ``sessions 4``."""
        if spec.llm is not None and spec.llm.sessions:
            return f"sessions {int(level)}"
        return f"concurrency {int(level)}" if spec.mode == "concurrency" else f"rate {level:g}/s"

    def add_figures(self, result: RunResult, run: RunView) -> None:
        """Add the kind's own figures to a run's result (none by default)."""
        del result, run

    def notes(self, run: RunResult) -> list[str]:
        """The lines the result tables show for a run of this kind (none by default)."""
        del run
        return []

    def health(self, spec: LoadSpec) -> Health:
        """What watches the server during a run: Triton's liveness and model readiness."""
        return TritonEndpoint.at(spec.address, timeout_s=2)

    def metrics_parser(self) -> Callable[[str], dict[str, float]]:
        """How the metrics endpoint's text is read: Triton's utilisation figures."""
        return parse_metrics

    def sampler(self, spec: LoadSpec, server_pid: int | None) -> MetricsSampler:
        """The metrics endpoint's sampler, reading what :meth:`metrics_parser` reads."""
        return MetricsSampler(
            spec.address.metrics_url,
            server_pid=server_pid,
            interval_s=spec.metrics_interval_s,
            parse=self.metrics_parser(),
        )
