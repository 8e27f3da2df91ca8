"""Make one reduced-precision ONNX model, with its accuracy report.

:class:`ReducedPrecision` belongs to one conversion: it loads the calibration data once,
calibrates once per flavour (ranges cached in the scratch directory), resolves
``--keep-fp32`` to node names, runs the mixed-precision search when asked, and measures
every variant against the FP32 source on representative data: ``--verify-data``, else the
held-out calibration rows, else random inputs (and the report says which).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.convert.accuracy import AccuracyFigures, measure_accuracy
from tritongen.convert.artifact import Runner
from tritongen.convert.calibration import CalibrationSet, Draw, load_calibration
from tritongen.convert.jsonable import json_fields, json_value
from tritongen.convert.mixed_precision import MixedResult, search
from tritongen.convert.precision import PrecisionOptions, Variant
from tritongen.convert.quantize import (
    candidate_nodes,
    convert_fp16,
    preprocess,
    quantize_dynamic_int8,
    quantize_static_int8,
    resolve_nodes,
)
from tritongen.sources.samples import Feed
from tritongen.sources.signature import Signature

Say = Callable[[str], None]
LATENCY_RUNS = 7
SENSITIVITY_ROWS = 16
"""Rows each node's sensitivity is measured on (the steps use every evaluation row)."""


@dataclass
class PrecisionReport:
    """How a reduced-precision variant was made, and how far it drifts from FP32."""

    variant: str
    flavour: str
    """``onnxruntime`` (CPU kernels) or ``tensorrt`` (symmetric INT8)."""
    calibration: dict[str, Any] | None = None
    calibration_method: str | None = None
    kept_fp32: list[str] = field(default_factory=list)
    mixed: MixedResult | None = None
    accuracy: AccuracyFigures | None = None
    accuracy_data: str = ""
    accuracy_of: str = "the artifact"
    """What the accuracy was measured on (a TensorRT plan not built here: its Q/DQ model on ONNX Runtime)."""

    def to_json(self) -> dict[str, Any]:
        """The ``precision`` entry of a model's metadata."""
        return {
            **json_fields(self, "variant", "flavour", "calibration", "calibration_method", "kept_fp32"),
            "auto_mixed_precision": json_value(self.mixed),
            **json_fields(self, "accuracy", "accuracy_data", "accuracy_of"),
        }


@dataclass(frozen=True)
class Evaluation:
    """The rows accuracy is measured on, with where they came from."""

    feeds: list[Feed]
    description: str
    """Where the rows came from, as reports word it (e.g. ``held-out calibration rows``)."""
    representative: bool
    """Whether the rows are like production's (``--verify-data`` or held-out calibration rows), not noise."""


def onnxruntime_runner(path: Path, signature: Signature) -> Runner:
    """A CPU ONNX Runtime session on ``path`` (imported here to keep this module light)."""
    from tritongen.convert.onnx import onnx_runner

    return onnx_runner(path, signature)


class ReducedPrecision:
    """Reduced-precision copies of one FP32 ONNX model, made in ``workdir``."""

    def __init__(
        self,
        onnx_path: Path,
        signature: Signature,
        options: PrecisionOptions,
        workdir: Path,
        verify_feeds: Sequence[Feed] = (),
        random_feeds: Sequence[Feed] = (),
        say: Say | None = None,
        draw: Draw | None = None,
    ) -> None:
        """``verify_feeds``: the user's ``--verify-data``; ``random_feeds``: the fallback for accuracy."""
        self.onnx_path = onnx_path
        self.signature = signature
        self.options = options
        self.workdir = workdir
        self.verify_feeds = list(verify_feeds)
        self.random_feeds = list(random_feeds)
        self.say = say or (lambda _m: None)
        self.draw = draw
        """Random calibration rows at the build's dims (``--calibration-data random``)."""
        self._calibration: CalibrationSet | None = None
        self._reference: Runner | None = None
        self._prepared: Path | None = None
        self._count = 0

    # ------------------------------------------------------------------ inputs

    def calibration(self) -> CalibrationSet:
        """The calibration rows, loaded once (some held back when no --verify-data is given)."""
        if self._calibration is None:
            assert self.options.calibration is not None
            self.say("reading calibration data")
            self._calibration = load_calibration(
                self.options.calibration,
                self.signature,
                hold_out=not self.verify_feeds,
                limit=self.options.calibration_samples,
                draw=self.draw,
            )
        return self._calibration

    def evaluation(self) -> Evaluation:
        """The data accuracy is measured (and a reduced variant verified) on, and where it came from.

        Representative rows first: at 8 bits, a model calibrated on real inputs drifts far
        on random noise, which says nothing about how it serves.
        """
        if self.verify_feeds:
            return Evaluation(self.verify_feeds, "--verify-data", representative=True)
        if self.options.calibration is not None:
            calibration = self.calibration()
            if calibration.held_out:
                return Evaluation(
                    list(calibration.held_out), "held-out calibration rows", representative=True
                )
        return Evaluation(
            self.random_feeds,
            "random inputs (pass --verify-data for a representative figure)",
            representative=False,
        )

    def reference(self) -> Runner:
        """The FP32 model on ONNX Runtime; each evaluation feed is run once and its outputs kept."""
        if self._reference is None:
            run = onnxruntime_runner(self.onnx_path, self.signature)
            outputs: dict[int, tuple[Feed, list[Any]]] = {}

            def cached(feed: Feed) -> list[Any]:
                hit = outputs.get(id(feed))
                if hit is None or hit[0] is not feed:
                    hit = (feed, run(feed))
                    outputs[id(feed)] = hit
                return hit[1]

            self._reference = cached
        return self._reference

    def kept(self) -> tuple[str, ...]:
        """``--keep-fp32`` as node names (unnamed nodes are ``<OpType>_<index>``)."""
        return resolve_nodes(self.prepared(), self.options.keep_fp32)

    # ------------------------------------------------------------------ building

    def prepared(self) -> Path:
        """The source with shapes inferred, what the quantizers read (made once)."""
        if self._prepared is None:
            self._prepared = preprocess(self.onnx_path, self.workdir / "preprocessed.onnx")
        return self._prepared

    def write(self, variant: Variant, output: Path, exclude: Sequence[str], tensorrt: bool = False) -> Path:
        """Write ``variant`` of the model to ``output`` with ``exclude`` left in FP32."""
        if variant.precision == "fp16":
            return convert_fp16(self.prepared(), output, exclude)
        if variant.int8_mode == "dynamic":
            return quantize_dynamic_int8(self.prepared(), output, exclude)
        flavour = "trt" if tensorrt else "ort"
        cache = self.workdir / f"calibration-{flavour}-{self.options.calibration_method}.json"
        return quantize_static_int8(
            self.prepared(),
            output,
            self.calibration(),
            self.options.calibration_method,
            exclude,
            symmetric=tensorrt,
            cache=cache,
        )

    def make(self, variant: Variant, output: Path, tensorrt: bool = False) -> tuple[Path, PrecisionReport]:
        """Write the variant (searching for nodes to keep in FP32 when asked) and report on it.

        Raises:
            ConversionError: quantization fails or the error budget cannot be met.
            ConfigError: a ``--keep-fp32`` pattern matches no node.
        """
        options = self.options
        report = PrecisionReport(variant=variant.key, flavour="tensorrt" if tensorrt else "onnxruntime")
        if variant.calibrated:
            report.calibration = self.calibration().to_json()
            report.calibration["describe"] = self.calibration().describe()
            report.calibration_method = options.calibration_method
        base = self.kept()
        self.say(f"making the {variant.label} model")
        if options.auto_mixed:
            assert options.max_error is not None
            feeds = self.evaluation().feeds

            def build(exclude: tuple[str, ...]) -> Path:
                self._count += 1
                return self.write(variant, self.workdir / f"search-{self._count}.onnx", exclude, tensorrt)

            sample = _first_rows(feeds, SENSITIVITY_ROWS, self.signature.batched)

            def evaluate(path: Path, quick: bool) -> tuple[float, float]:
                runner = onnxruntime_runner(path, self.signature)
                rows = sample if quick else feeds
                figures = measure_accuracy(runner, self.reference(), self.signature, rows)
                latency = _latency_ms(runner, sample[0]) if sample and not quick else 0.0
                path.unlink(missing_ok=True)
                return figures.error(options.error_metric), latency

            mixed = search(
                build,
                evaluate,
                base,
                candidate_nodes(self.prepared(), base),
                options.max_error,
                options.error_metric,
                self.say,
            )
            report.mixed = mixed
            base = mixed.kept
        path = self.write(variant, output, base, tensorrt)
        report.kept_fp32 = list(base)
        return path, report

    def measure(self, runner: Runner, report: PrecisionReport) -> None:
        """Fill the report's accuracy: ``runner`` against FP32 on the evaluation data."""
        evaluation = self.evaluation()
        report.accuracy = measure_accuracy(runner, self.reference(), self.signature, evaluation.feeds)
        report.accuracy_data = f"{evaluation.description} ({report.accuracy.samples} samples)"


def _first_rows(feeds: Sequence[Feed], rows: int, batched: bool) -> list[Feed]:
    """The first ``rows`` rows of ``feeds`` (the first ``rows`` feeds when they carry no batch dim)."""
    if not batched:
        return list(feeds[:rows])
    taken: list[Feed] = []
    left = rows
    for feed in feeds:
        if left <= 0:
            break
        first = next(iter(feed.values()))
        taken.append({name: array[:left] for name, array in feed.items()})
        left -= min(left, first.shape[0])
    return taken


def _latency_ms(runner: Runner, feed: Feed) -> float:
    """Median in-process time of one batch (after one warm-up run)."""
    runner(feed)
    times = []
    for _ in range(LATENCY_RUNS):
        start = time.perf_counter()
        runner(feed)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)
