"""What a comparison found: one row per engine, the recommendations, and the JSON form."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tritongen import __version__
from tritongen.convert.accuracy import task_figure
from tritongen.convert.reduced import PrecisionReport
from tritongen.convert.result_json import read_precision_report
from tritongen.errors import ConfigError
from tritongen.intervals import DEFAULT_CONFIDENCE, Summary, summarise
from tritongen.io.files import write_output
from tritongen.loadtest.result import RunResult, known_fields
from tritongen.stopping import StoppingRecord, read_stopping

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


@dataclass(frozen=True)
class LatencyRun:
    """A load-test run behind an engine's figures, and what it was measured for."""

    figure: str
    """``ramp`` (the concurrency ramp), or the figure of a round: ``p99_ms_b1``, ``infer_per_s_b32``."""
    run: RunResult

    def to_json(self) -> dict[str, Any]:
        """The run's ``tritongen.loadtest/1`` object with its ``figure``."""
        return {**self.run.to_json(), "figure": self.figure}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LatencyRun:
        """Read what :meth:`to_json` wrote (a run without ``figure`` is one of the ramp)."""
        return cls(figure=str(data.get("figure", "ramp")), run=RunResult.from_json(data))


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
    p99_ms_trace: float | None = None
    """``--trace``: the P99 of the recorded requests replayed at their times (median over rounds)."""
    p50_ms_trace: float | None = None
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
    accuracy: PrecisionReport | None = None
    """The precision report: calibration, FP32 nodes, per-output accuracy (reduced precision)."""
    latency_runs: list[LatencyRun] = field(default_factory=list)
    """The load-test runs behind the figures (``tritongen.loadtest/1`` run objects, with their round)."""
    rounds: int = 0
    """Interleaved rounds measured (every engine once per round)."""
    round_figures: dict[str, list[float | None]] = field(default_factory=dict)
    """Per deciding figure (``p99_ms_b1``, ``infer_per_s_b32``, ``p50_ms_b1``), its value in each
    round, ``None`` where that round measured nothing: what paired ratios are taken over."""
    summaries: dict[str, Summary] = field(default_factory=dict)
    """Per deciding figure, its median, interval and CV over the rounds."""

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
        return self.summaries.get(metric)

    def summarise(self, confidence: float) -> None:
        """Set each deciding figure to its median over the rounds, and keep its summary."""
        for metric, values in self.round_figures.items():
            found = summarise([v for v in values if v is not None], confidence)
            if found is None:
                continue
            self.summaries[metric] = found
            setattr(self, metric, found.median)

    @property
    def reduced(self) -> bool:
        """Reduced precision (FP16 or INT8)."""
        return self.precision not in (None, "fp32")

    def apply_precision(self, report: PrecisionReport) -> None:
        """Take the drift figures from a precision report (a model's ``precision`` metadata)."""
        self.accuracy = report
        outputs = report.accuracy.outputs if report.accuracy is not None else ()
        if outputs:
            self.drift = max(o.rel_rms_err for o in outputs)
            named = len(outputs) > 1
            figures = [f"{o.name} {f}" if named else f for o in outputs if (f := task_figure(o)) != "–"]
            self.drift_headline = "; ".join(figures) or f"rel RMS {self.drift:.2e}"

    def to_json(self) -> dict[str, Any]:
        """One engine entry of the ``tritongen.compare/1`` document."""
        data = asdict(replace(self, accuracy=None, latency_runs=[], summaries={}))
        data["accuracy"] = None if self.accuracy is None else self.accuracy.to_json()
        data["latency_runs"] = [r.to_json() for r in self.latency_runs]
        data["summaries"] = {metric: s.to_json() for metric, s in self.summaries.items()}
        for name in ("p99_ms_trace", "p50_ms_trace"):  # --trace: written where a trace was replayed
            if data[name] is None:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EngineResult:
        """Read one engine entry (unknown keys ignored)."""
        known = known_fields(cls, data)
        accuracy = known.get("accuracy")
        known["accuracy"] = read_precision_report(accuracy) if isinstance(accuracy, dict) else None
        known["latency_runs"] = [LatencyRun.from_json(r) for r in known.get("latency_runs") or ()]
        known["summaries"] = {m: Summary.from_json(s) for m, s in (known.get("summaries") or {}).items() if s}
        return cls(**known)


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


@dataclass(frozen=True)
class CompareSettings:
    """What a comparison's ``settings`` say of how it measured (the document keeps every setting as given)."""

    batch_size_throughput: int = 32
    duration_s: float | None = None
    warmup_s: float | None = None
    concurrency_levels: list[int] | None = None
    rounds: int = 1
    """Interleaved rounds asked for (with ``--rounds auto``, at most)."""
    confidence: float = DEFAULT_CONFIDENCE
    rank_by: str = "throughput"
    stopping: StoppingRecord | None = None
    """``--rounds auto``: what the rounds decided (``None`` without the rule, or before any round)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompareSettings:
        """Read a ``settings`` object (figures as written: a duration given as 10 stays 10)."""
        levels = data.get("concurrency_levels")
        return cls(
            batch_size_throughput=int(data.get("batch_size_throughput", 32)),
            duration_s=data.get("duration_s"),
            warmup_s=data.get("warmup_s"),
            concurrency_levels=None if levels is None else [int(c) for c in levels],
            rounds=int(data.get("rounds", 1)),
            confidence=float(data.get("confidence", DEFAULT_CONFIDENCE)),
            rank_by=str(data.get("rank_by", "throughput")),
            stopping=read_stopping(data.get("stopping")),
        )


@dataclass(frozen=True)
class HardwareFacts:
    """Where a comparison ran: the host's CPU and GPUs, the server's Triton and address (None: not known)."""

    cpu: str | None = None
    cpus: int | None = None
    gpus: list[Any] = field(default_factory=list)
    """The server's GPUs where it reported them, else the host's."""
    triton_version: str | None = None
    server_url: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HardwareFacts:
        """Read a ``hardware`` object (``host``, and ``server`` once the engines were served)."""
        host = data.get("host") or {}
        server = data.get("server") or {}
        return cls(
            cpu=host.get("cpu"),
            cpus=host.get("cpus"),
            gpus=list(server.get("gpus") or host.get("gpus") or ()),
            triton_version=server.get("triton_version"),
            server_url=server.get("url"),
        )


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

    def compare_settings(self) -> CompareSettings:
        """``settings`` read: how the engines were measured, and what ``--rounds auto`` decided."""
        return CompareSettings.from_json(self.settings)

    def hardware_facts(self) -> HardwareFacts:
        """``hardware`` read: the host's CPU and GPUs, the server's version and address."""
        return HardwareFacts.from_json(self.hardware)

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
            "engines": [e.to_json() for e in self.engines],
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
