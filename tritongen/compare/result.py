"""What a comparison found: one row per engine, the recommendations, and the JSON form."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from tritongen import __version__
from tritongen.convert.accuracy import task_figure
from tritongen.errors import ConfigError
from tritongen.intervals import DEFAULT_CONFIDENCE, Summary, summarise
from tritongen.io.files import write_output
from tritongen.loadtest.result import known_fields

SCHEMA = "tritongen.compare/1"

EngineStatus = Literal["ok", "unavailable", "failed", "pending"]
"""``pending``: not measured yet (a partial report written while the comparison runs)."""

ENGINE_LABELS = {
    "onnx": "ONNX Runtime",
    "torchscript": "TorchScript",
    "tvm": "TVM",
    "tensorrt": "TensorRT",
}


def engine_label(fmt: str, precision: str | None = None) -> str:
    """How tables name an engine, e.g. ``ONNX Runtime``, ``TensorRT fp16``, ``ONNX Runtime int8 dynamic``."""
    label = ENGINE_LABELS.get(fmt, fmt)
    return f"{label} {precision.replace('-', ' ')}" if precision and precision != "fp32" else label


def build_note(fmt: str, facts: dict[str, Any] | None) -> str | None:
    """What an engine was built as, where tables should say it: TVM's shape buckets and tuning.

    ``buckets 1,8,32 × 128, tuned 24.8 min / 1,234 trials``, ``symbolic only``, or ``None``
    for formats with nothing to say; ``facts`` is the artifact's engine metadata.
    """
    if fmt != "tvm" or not isinstance(facts, dict):
        return None
    buckets = facts.get("buckets") if isinstance(facts.get("buckets"), dict) else None
    tuning = facts.get("tuning") if isinstance(facts.get("tuning"), dict) else None
    if buckets:
        dims: dict[str, list[int]] = buckets.get("dims") or {}
        first = buckets.get("batch_dim") or "batch"
        order = sorted(dims, key=lambda d: (d != first, d))  # batch first, then the dims by name
        text = "buckets " + " × ".join(",".join(str(v) for v in dims[d]) for d in order)
        if buckets.get("strict"):
            text += " (strict)"
    else:
        text = "symbolic only"
        shapes = (tuning or {}).get("shapes")  # metadata version 1: one tuned shape
        if isinstance(shapes, dict) and shapes:
            shape = " × ".join(str(d) for d in next(iter(shapes.values())))
            text = f"symbolic + {shape}"
    if not tuning:
        return text if text == "symbolic only" else f"{text}, untuned"
    cached = ", cached records" if tuning.get("cache_hit") else ""
    minutes = float(tuning.get("tune_s") or 0) / 60
    return f"{text}, tuned {minutes:.1f} min / {int(tuning.get('trials') or 0):,} trials{cached}"


@dataclass
class EngineResult:
    """One engine's measurements (``None`` where not measured)."""

    format: str
    model: str
    status: EngineStatus = "pending"
    reason: str | None = None
    precision: str | None = None
    build: str | None = None
    """What it was built as, where that matters (TVM: shape buckets and tuning; see :func:`build_note`)."""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: dict[str, float | None] | None = None
    p99_ms_b1: float | None = None
    p50_ms_b1: float | None = None
    infer_per_s_b1: float | None = None
    infer_per_s_b32: float | None = None
    p99_ms_b32: float | None = None
    batch_size_throughput: int | None = None
    """The batch of the throughput figure: 32, or the model's max batch when smaller."""
    concurrency_b32: int | None = None
    """The concurrency that gave the most throughput."""
    peak_mem_bytes: int | None = None
    """The memory figure the engine is judged on: GPU memory where it used the GPU, else resident memory."""
    memory_kind: str | None = None
    """``cpu_rss`` (the backend processes' resident memory) or ``gpu`` (metrics endpoint or NVML)."""
    peak_rss_bytes: int | None = None
    """Peak resident memory of the model's backend processes (server on this machine only)."""
    peak_gpu_mem_bytes: int | None = None
    """Peak GPU memory above what the server used before the model was loaded."""
    gpu_memory_source: str | None = None
    """Where the GPU memory figure came from: ``triton`` (the metrics endpoint, DCGM) or ``nvml``."""
    gpu_memory_scope: str | None = None
    """What it counts: ``device`` (everything on the server's GPUs) or ``server-processes``."""
    first_infer_s: float | None = None
    load_s: float | None = None
    errors: int = 0
    convert_s: float | None = None
    drift: float | None = None
    """Relative RMS error of the worst output against FP32 on representative data (reduced precision)."""
    drift_headline: str | None = None
    """The task-level drift in words, e.g. ``cosine 0.9911 (min 0.9736)``."""
    accuracy: dict[str, Any] | None = None
    """The precision report: calibration, FP32 nodes, per-output accuracy (reduced precision)."""
    latency_runs: list[dict[str, Any]] = field(default_factory=list)
    """The load-test runs behind the figures (``tritongen.loadtest/1`` run objects, with their round)."""
    rounds: int = 0
    """Interleaved rounds measured (every engine once per round)."""
    round_figures: dict[str, list[float | None]] = field(default_factory=dict)
    """Per deciding figure (``p99_ms_b1``, ``infer_per_s_b32``, ``p50_ms_b1``), its value in each
    round, ``None`` where that round measured nothing: what paired ratios are taken over."""
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per deciding figure, its median, interval and CV over the rounds (``Summary.to_json``)."""

    @property
    def label(self) -> str:
        """The engine's name in tables."""
        return engine_label(self.format, self.precision)

    @property
    def ok(self) -> bool:
        """Measured without failure."""
        return self.status == "ok"

    def summary(self, metric: str) -> Summary | None:
        """``metric``'s figure over rounds, or ``None`` when it was not measured in rounds."""
        data = self.summaries.get(metric)
        return Summary.from_json(data) if data else None

    def summarise(self, confidence: float) -> None:
        """Set each deciding figure to its median over the rounds, and keep its summary."""
        for metric, values in self.round_figures.items():
            found = summarise([v for v in values if v is not None], confidence)
            if found is None:
                continue
            self.summaries[metric] = found.to_json()
            setattr(self, metric, found.median)

    @property
    def reduced(self) -> bool:
        """Reduced precision (FP16 or INT8)."""
        return self.precision not in (None, "fp32")

    def apply_precision(self, report: dict[str, Any]) -> None:
        """Take the drift figures from a precision report (a model's ``precision`` metadata)."""
        self.accuracy = report
        outputs = (report.get("accuracy") or {}).get("outputs") or []
        if outputs:
            self.drift = max(float(o["rel_rms_err"]) for o in outputs)
            named = len(outputs) > 1
            figures = [f"{o['name']} {f}" if named else f for o in outputs if (f := task_figure(o)) != "–"]
            self.drift_headline = "; ".join(figures) or f"rel RMS {self.drift:.2e}"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EngineResult:
        """Read one engine entry (unknown keys ignored)."""
        return cls(**known_fields(cls, data))


@dataclass
class Recommendation:
    """The engine to choose in one situation, and why, in numbers."""

    situation: str
    title: str
    format: str | None
    metric: str
    value: float | None
    runner_up: str | None
    runner_up_value: float | None
    ratio: float | None
    reason: str
    model: str | None = None
    """The winner's model (``bert_onnx_int8``): the format alone is ambiguous between precisions."""
    significant: bool = False
    """Whether the winner beats the runner-up beyond the noise (the ratio's interval excludes 1)."""
    ratio_low: float | None = None
    ratio_high: float | None = None
    """The interval of ``ratio`` (paired over rounds); ``None`` without rounds to pair."""
    decided_by: str | None = None
    """The figure ``ratio`` is about: ``metric``, or the tie-breaker's when ``metric`` was a tie."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recommendation:
        """Read one recommendation (unknown keys ignored)."""
        return cls(**known_fields(cls, data))


@dataclass
class CompareReport:
    """Every engine of one source, measured on one server, and what to choose."""

    source: str
    name: str
    hardware: dict[str, Any]
    settings: dict[str, Any]
    engines: list[EngineResult] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)
    status: str = "ok"
    """``ok``, ``interrupted`` (Ctrl-C) or ``aborted`` (the server went away)."""

    def verdict_confidence(self) -> float:
        """The level verdicts use: ``--confidence``, or with ``--rounds auto`` the stopping rule's."""
        stopping = self.settings.get("stopping")
        confidence = self.settings.get("confidence", DEFAULT_CONFIDENCE)
        if isinstance(stopping, dict) and stopping.get("confidence") is not None:
            confidence = stopping["confidence"]
        return float(confidence)

    def engine(self, model: str) -> EngineResult:
        """The entry of the model ``model`` (e.g. ``bert_onnx_int8``)."""
        for engine in self.engines:
            if engine.model == model:
                return engine
        raise KeyError(model)

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.compare/1`` document."""
        return {
            "schema": SCHEMA,
            "tritongen_version": __version__,
            "source": self.source,
            "name": self.name,
            "status": self.status,
            "hardware": self.hardware,
            "settings": self.settings,
            "engines": [asdict(e) for e in self.engines],
            "recommendations": [asdict(r) for r in self.recommendations],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompareReport:
        """Read a ``tritongen.compare/1`` document.

        Raises:
            ConfigError: it is another kind of document.
        """
        if data.get("schema") != SCHEMA:
            raise ConfigError(f"not a {SCHEMA} document (schema {data.get('schema')!r})", "")
        return cls(
            source=str(data.get("source", "")),
            name=str(data.get("name", "")),
            hardware=dict(data.get("hardware") or {}),
            settings=dict(data.get("settings") or {}),
            engines=[EngineResult.from_json(e) for e in data.get("engines", [])],
            recommendations=[Recommendation.from_json(r) for r in data.get("recommendations", [])],
            status=str(data.get("status", "ok")),
        )

    def write_json(self, path: Path) -> None:
        """Write the document atomically."""
        write_output(path, json.dumps(self.to_json(), indent=2) + "\n")
