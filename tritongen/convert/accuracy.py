"""How far a reduced-precision artifact drifts from its FP32 source, per output and per task.

Per output: the largest absolute and relative difference, the relative RMS error
(``‖a − b‖ / ‖b‖``), and where the output type allows it a task-level figure: cosine
similarity of each row against the FP32 row (embeddings) and top-1 agreement of the
arg-max over the last axis (classifier logits). Both are computed for every float output
with a last axis of 2 or more; the output's *task* says which one the report leads with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from tritongen.convert.artifact import Array, Runner
from tritongen.convert.jsonable import json_fields
from tritongen.sources.samples import Feed
from tritongen.sources.signature import Signature

Task = Literal["embedding", "classifier", "other"]
ERROR_METRICS = ("max-abs", "rel-rms", "cosine", "cosine-min")
"""What ``--max-error`` bounds, on the worst output: max abs error, relative RMS error,
1 − mean row cosine, or 1 − the lowest row cosine."""

_CLASSIFIER_WORDS = ("logit", "class", "prob", "score", "label", "pred")
_EMBEDDING_WORDS = ("emb", "pool", "sentence", "vector", "feature", "hidden", "encod")


def guess_task(name: str, reference: Array) -> Task:
    """The kind of an output, from its name, else from its values.

    Rows of unit length are embeddings; otherwise a last axis of 2 or more reads as
    classifier logits.
    """
    lowered = name.lower()
    if reference.dtype.kind != "f" or reference.ndim < 1 or reference.shape[-1] < 2:
        return "other"
    if any(word in lowered for word in _CLASSIFIER_WORDS):
        return "classifier"
    if any(word in lowered for word in _EMBEDDING_WORDS):
        return "embedding"
    norms = np.linalg.norm(reference.reshape(-1, reference.shape[-1]).astype(np.float64), axis=1)
    if norms.size and np.allclose(norms, 1.0, atol=1e-2):
        return "embedding"
    return "classifier"


@dataclass
class OutputAccuracy:
    """The drift of one output over every evaluated batch."""

    name: str
    task: Task = "other"
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rel_rms_err: float = 0.0
    cosine_min: float | None = None
    cosine_mean: float | None = None
    top1_agreement: float | None = None
    _sq_diff: float = field(default=0.0, repr=False)
    _sq_ref: float = field(default=0.0, repr=False)
    _cos_sum: float = field(default=0.0, repr=False)
    _rows: int = field(default=0, repr=False)
    _agree: int = field(default=0, repr=False)

    def add(self, got: Array, want: Array) -> None:
        """Fold one batch in."""
        a = np.asarray(got, dtype=np.float64)
        b = np.asarray(want, dtype=np.float64)
        diff = np.abs(a - b)
        diff = np.where(np.isnan(diff), np.inf, diff)
        if diff.size:
            self.max_abs_err = max(self.max_abs_err, float(diff.max()))
            floor = max(1e-6, 1e-3 * float(np.abs(b).max()))
            judged = np.abs(b) >= floor
            if judged.any():
                self.max_rel_err = max(self.max_rel_err, float((diff[judged] / np.abs(b[judged])).max()))
        self._sq_diff += float(np.sum(np.minimum(diff, 1e150) ** 2))
        self._sq_ref += float(np.sum(b**2))
        self.rel_rms_err = float(np.sqrt(self._sq_diff / self._sq_ref)) if self._sq_ref > 0 else 0.0
        if b.ndim >= 1 and b.size and b.shape[-1] >= 2 and np.asarray(want).dtype.kind == "f":
            rows_a = a.reshape(-1, a.shape[-1])
            rows_b = b.reshape(-1, b.shape[-1])
            norms = np.linalg.norm(rows_a, axis=1) * np.linalg.norm(rows_b, axis=1)
            cos = np.where(norms > 0, np.sum(rows_a * rows_b, axis=1) / np.where(norms > 0, norms, 1), 1.0)
            cos = np.nan_to_num(cos, nan=-1.0)
            self.cosine_min = (
                float(cos.min()) if self.cosine_min is None else min(self.cosine_min, float(cos.min()))
            )
            self._cos_sum += float(cos.sum())
            self._agree += int(np.sum(np.argmax(rows_a, axis=1) == np.argmax(rows_b, axis=1)))
            self._rows += rows_b.shape[0]
            self.cosine_mean = self._cos_sum / self._rows
            self.top1_agreement = self._agree / self._rows

    def error(self, metric: str) -> float:
        """The figure ``--max-error`` bounds (see :data:`ERROR_METRICS`)."""
        if metric == "rel-rms":
            return self.rel_rms_err
        if metric == "cosine":
            return 1.0 - self.cosine_mean if self.cosine_mean is not None else self.rel_rms_err
        if metric == "cosine-min":
            return 1.0 - self.cosine_min if self.cosine_min is not None else self.rel_rms_err
        return self.max_abs_err

    def task_figure(self) -> str:
        """The task-level figure in words, e.g. ``cosine 0.9991 (min 0.9978)``."""
        if self.task == "embedding" and self.cosine_mean is not None:
            return f"cosine {self.cosine_mean:.4f} (min {self.cosine_min:.4f})"
        if self.task == "classifier" and self.top1_agreement is not None:
            return f"top-1 agreement {self.top1_agreement:.1%}"
        return ""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return json_fields(self)


@dataclass(frozen=True)
class AccuracyFigures:
    """Every output's drift on one evaluation set."""

    outputs: tuple[OutputAccuracy, ...]
    samples: int

    def error(self, metric: str) -> float:
        """The worst output's figure."""
        return max((o.error(metric) for o in self.outputs), default=0.0)

    def headline(self) -> str:
        """The task figures of every output, or the max abs error when none applies."""
        parts = [
            f"{o.name}: {fig}" if len(self.outputs) > 1 else fig
            for o in self.outputs
            if (fig := o.task_figure())
        ]
        return "; ".join(parts) or f"max abs error {self.error('max-abs'):.2e}"

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"samples": self.samples, "outputs": [o.to_json() for o in self.outputs]}


def measure_accuracy(
    runner: Runner, reference: Runner, signature: Signature, feeds: Sequence[Feed]
) -> AccuracyFigures:
    """Run both on every feed and fold the differences in.

    Raises:
        Exception: whatever the artifact's engine raises (callers report it).
    """
    outputs: list[OutputAccuracy] | None = None
    samples = 0
    for feed in feeds:
        want = reference(feed)
        got = runner(feed)
        if outputs is None:
            outputs = [
                OutputAccuracy(name=t.name, task=guess_task(t.name, np.asarray(w)))
                for t, w in zip(signature.outputs, want, strict=True)
            ]
        for output, g, w in zip(outputs, got, want, strict=True):
            output.add(g, w)
        samples += next(iter(feed.values())).shape[0] if signature.batched else 1
    return AccuracyFigures(outputs=tuple(outputs or ()), samples=samples)


def task_figure(output: OutputAccuracy) -> str:
    """An output's task figure for tables: cosine (embeddings), top-1 agreement (classifiers), else ``–``."""
    if output.task == "embedding" and output.cosine_mean is not None:
        return f"cosine {output.cosine_mean:.4f} (min {output.cosine_min:.4f})"
    if output.task == "classifier" and output.top1_agreement is not None:
        return f"top-1 {output.top1_agreement:.1%}"
    return "–"
