"""Typed readers of the figures a run keeps in their JSON shape: the server's times and its models.

A :class:`~tritongen.loadtest.result.RunResult` holds some figures as the JSON objects its
document writes (``server_us``, ``server_models``), because the engine fills them and the
document must keep its shape. These records read them once, so that what shows them
(tables, CSV, perf_analyzer's report) works with named, typed fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _float(value: Any) -> float | None:
    """A JSON number as it was written (an int stays an int, so that its text does not change)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    """A JSON count as an int (``None`` for anything that is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) else int(value)


@dataclass(frozen=True)
class ServerTimes:
    """The server's µs per request by phase (a run's ``server_us``); ``None`` where not reported."""

    queue_us: float | None = None
    compute_input_us: float | None = None
    compute_infer_us: float | None = None
    compute_output_us: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ServerTimes:
        """Read a ``server_us`` object (``{"queue", "compute_input", "compute_infer", "compute_output"}``)."""
        data = data or {}
        return cls(
            queue_us=_float(data.get("queue")),
            compute_input_us=_float(data.get("compute_input")),
            compute_infer_us=_float(data.get("compute_infer")),
            compute_output_us=_float(data.get("compute_output")),
        )

    def phase_us(self, phase: str) -> float | None:
        """The figure of ``phase`` (``queue``, ``compute_input``, ``compute_infer``, ``compute_output``)."""
        found: float | None = getattr(self, f"{phase}_us")
        return found


@dataclass(frozen=True)
class ServerModelFigures:
    """One model of a run's ``server_models``: the server's figures of a model the requests touched."""

    queue_us: float | None = None
    compute_input_us: float | None = None
    compute_infer_us: float | None = None
    compute_output_us: float | None = None
    """µs per request by phase (an ensemble's include its steps')."""
    executions: int | None = None
    inferences: int | None = None
    requests: int | None = None
    avg_batch: float | None = None
    request_us: float | None = None
    parent: str | None = None
    """The model it sits under in the tree (``None`` for the top model)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerModelFigures:
        """Read one entry of ``server_models`` (figures it lacks are ``None``)."""
        parent = data.get("parent")
        return cls(
            queue_us=_float(data.get("queue_us")),
            compute_input_us=_float(data.get("compute_input_us")),
            compute_infer_us=_float(data.get("compute_infer_us")),
            compute_output_us=_float(data.get("compute_output_us")),
            executions=_int(data.get("executions")),
            inferences=_int(data.get("inferences")),
            requests=_int(data.get("requests")),
            avg_batch=_float(data.get("avg_batch")),
            request_us=_float(data.get("request_us")),
            parent=parent if isinstance(parent, str) else None,
        )

    def phase_us(self, phase: str) -> float | None:
        """The µs per request of ``phase`` (``queue``, ``compute_infer`` and the other phases)."""
        found: float | None = getattr(self, f"{phase}_us")
        return found


def server_model_figures(models: Mapping[str, Mapping[str, Any]]) -> dict[str, ServerModelFigures]:
    """A run's ``server_models`` read, in its order."""
    return {name: ServerModelFigures.from_json(entry) for name, entry in models.items()}
