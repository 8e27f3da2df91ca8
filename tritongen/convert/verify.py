"""Numerical parity of an artifact with its source: same inputs, outputs compared per tensor.

An FP32 or FP16 artifact passes when every element of every output satisfies
``|artifact - reference| <= atol + rtol * |reference|`` (NaN only where the reference
is NaN too). ``max_abs`` is the largest absolute difference; ``max_rel`` the largest
difference relative to the reference, over elements whose reference magnitude is at
least ``atol`` (smaller ones are judged by the absolute term alone).

An INT8 artifact is judged on the relative RMS error of each output over every verified
batch, ``‖artifact − reference‖ / ‖reference‖``: at 8 bits a few elements always land
a quantization step or two away, so an element-wise bound either fails every model or
allows anything. ``--atol``/``--rtol`` bring back the element-wise test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.convert.artifact import Array, Runner
from tritongen.errors import first_line
from tritongen.io.arrays import ExpectedArray, feed_arrays, read_npz
from tritongen.sources.samples import Feed, random_array, random_feed
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference: absolute plus relative to the reference."""

    atol: float
    rtol: float
    rms: float | None = None
    """When set, the test is ``relative RMS error <= rms`` instead of the element-wise one."""

    def describe(self) -> str:
        """How reports show it: ``0.0001 + 0.001·|ref|`` or ``rel RMS ≤ 0.1``."""
        if self.rms is not None:
            return f"rel RMS ≤ {self.rms:g}"
        return f"{self.atol:g} + {self.rtol:g}·|ref|"

    def to_json(self) -> dict[str, float | None]:
        """The JSON form."""
        return {"atol": self.atol, "rtol": self.rtol, "rms": self.rms}


TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(atol=1e-4, rtol=1e-3),
    "fp16": Tolerance(atol=1e-2, rtol=1e-2),
    "int8": Tolerance(atol=1e-1, rtol=1e-1, rms=0.2),
}
"""Default tolerance per precision."""

RANDOM_BATCHES: tuple[tuple[int, int], ...] = ((1, 8), (3, 16), (8, 5))
"""Random batches verified: (batch size, value of every other dynamic dim); capped at max batch."""


@dataclass(frozen=True)
class OutputCheck:
    """How one output compared over every verified batch."""

    name: str
    max_abs: float
    max_rel: float
    passed: bool
    rel_rms: float = 0.0


@dataclass(frozen=True)
class Verification:
    """The verdict on one artifact."""

    format: str
    reference: str
    batches: int
    samples: int
    tolerance: Tolerance
    outputs: tuple[OutputCheck, ...]
    error: str | None = None
    """Set when the artifact could not run at all."""
    device: str = "cpu"
    """Where the artifact ran: ``cpu`` or ``cuda:N`` (the device of its instance group)."""
    reference_failed: bool = False
    """The source itself failed on a verification batch: the artifact was never judged."""

    @property
    def passed(self) -> bool:
        """Whether the artifact ran and every output is within tolerance."""
        return self.error is None and all(o.passed for o in self.outputs)

    def failure(self) -> str:
        """One line naming what failed, e.g. ``output 'logits': max abs error 0.3 > 1e-4``."""
        if self.error is not None:
            return self.error
        bad = [o for o in self.outputs if not o.passed]
        return "; ".join(
            f"output '{o.name}': max abs error {o.max_abs:.3g}, max rel {o.max_rel:.3g}, "
            f"rel RMS {o.rel_rms:.3g} (allowed {self.tolerance.describe()})"
            for o in bad
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (stored in the model's metadata)."""
        return {
            "passed": self.passed,
            "reference": self.reference,
            "batches": self.batches,
            "samples": self.samples,
            "atol": self.tolerance.atol,
            "rtol": self.tolerance.rtol,
            "rms": self.tolerance.rms,
            "outputs": [
                {
                    "name": o.name,
                    "max_abs_err": o.max_abs,
                    "max_rel_err": o.max_rel,
                    "rel_rms_err": o.rel_rms,
                    "passed": o.passed,
                }
                for o in self.outputs
            ],
            "error": self.error,
            "device": self.device,
        }


def verification_batches(
    signature: Signature, max_batch_size: int, data: Path | None = None, seed: int = 0
) -> list[Feed]:
    """Random batches at several sizes and dynamic-dim values, plus the user's data file.

    Raises:
        SourceError: the data file cannot be read or does not fit the signature.
    """
    rng = np.random.default_rng(seed)
    cap = max(1, max_batch_size) if signature.batched else 1
    seen: set[tuple[int, int]] = set()
    batches: list[Feed] = []
    for batch, dim_value in RANDOM_BATCHES:
        key = (min(batch, cap), dim_value)
        if key not in seen:
            seen.add(key)
            batches.append(random_feed(signature, key[0], key[1], rng))
    if data is not None:
        batches.extend(load_verify_data(data, signature, cap))
    return batches


def shaped_batches(signature: Signature, shapes: dict[str, tuple[int, ...]], seed: int = 1) -> list[Feed]:
    """One random batch at exactly ``shapes`` (full shapes by input name); none when empty."""
    if not shapes or any(t.name not in shapes for t in signature.inputs):
        return []
    rng = np.random.default_rng(seed)
    return [{t.name: random_array(t.data_type, shapes[t.name], rng) for t in signature.inputs}]


def load_verify_data(path: Path, signature: Signature, max_rows: int) -> list[Feed]:
    """Read ``--verify-data FILE.npz``: one array per input; split into batches of ``max_rows``.

    Raises:
        SourceError: unreadable file, a missing input, or a dtype/shape that does not fit.
    """
    feed, rows = read_feed(path, signature, f"--verify-data {path}", "--verify-data")
    if rows is None:
        return [feed]
    return [{k: v[start : start + max_rows] for k, v in feed.items()} for start in range(0, rows, max_rows)]


def read_feed(
    path: Path, signature: Signature, label: str, option: str | None = None
) -> tuple[Feed, int | None]:
    """Read an ``.npz`` of one array per input, checked against ``signature`` and cast to its dtypes.

    ``label`` names the file in messages (``--verify-data d.npz``, ``calibration file c.npz``);
    ``option``, when given, is the command-line option the hint names.

    Returns:
        The feed, and its number of rows (``None`` when the signature has no batch dim).

    Raises:
        SourceError: unreadable file, a missing input, or a dtype/shape that does not fit.
    """
    arrays = read_npz(path, label, option)
    expected = [
        ExpectedArray(name=t.name, dtype=np.dtype(TRITON_TO_NUMPY[t.data_type]), dims=t.dims)
        for t in signature.inputs
    ]
    return feed_arrays(arrays, expected, label, signature.batched)


def compare_outputs(
    names: Sequence[str], got: Sequence[Array], want: Sequence[Array], tolerance: Tolerance
) -> list[tuple[float, float, bool, float, float]]:
    """Per output for one batch: max abs, max rel, element-wise pass, sums for the relative RMS.

    The last two are the sums of squared differences and of squared reference values.

    Raises:
        ValueError: the artifact returned a different number of outputs or shapes.
    """
    if len(got) != len(want):
        raise ValueError(f"the artifact returned {len(got)} outputs, the source {len(want)}")
    results = []
    for name, a, b in zip(names, got, want, strict=True):
        a = np.asarray(a)
        b = np.asarray(b)
        if a.shape != b.shape:
            raise ValueError(f"output '{name}' has shape {list(a.shape)}, the source's is {list(b.shape)}")
        if a.dtype.kind not in "fciub" or b.dtype.kind not in "fciub":
            same = bool(np.array_equal(a, b))
            error = 0.0 if same else float("inf")
            results.append((error, error, same, error, 1.0))
            continue
        a64 = a.astype(np.float64)
        b64 = b.astype(np.float64)
        both_nan = np.isnan(a64) & np.isnan(b64)
        diff = np.where(both_nan, 0.0, np.abs(a64 - b64))
        diff = np.where(np.isnan(diff), np.inf, diff)
        magnitude = np.abs(np.where(both_nan, 0.0, b64))
        max_abs = float(diff.max()) if diff.size else 0.0
        judged = magnitude >= max(tolerance.atol, 1e-12)
        max_rel = float((diff[judged] / magnitude[judged]).max()) if np.any(judged) else 0.0
        ok = bool(np.all(diff <= tolerance.atol + tolerance.rtol * magnitude))
        sq_diff = float(np.sum(np.minimum(diff, 1e150) ** 2)) if np.isfinite(diff).all() else float("inf")
        results.append((max_abs, max_rel, ok, sq_diff, float(np.sum(magnitude**2))))
    return results


def verify_artifact(
    fmt: str,
    runner: Runner,
    reference: Runner,
    reference_name: str,
    signature: Signature,
    batches: Sequence[Feed],
    tolerance: Tolerance,
) -> Verification:
    """Run the artifact and the reference on every batch and compare their outputs."""
    names = [t.name for t in signature.outputs]
    worst_abs = [0.0] * len(names)
    worst_rel = [0.0] * len(names)
    sq_diff = [0.0] * len(names)
    sq_ref = [0.0] * len(names)
    passed = [True] * len(names)
    samples = 0
    for feed in batches:
        try:
            want = reference(feed)
        except Exception as e:
            shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in feed.items())
            broken = broken_verification(
                fmt, reference_name, tolerance, f"the source model failed on {shapes}: {first_line(e)}"
            )
            return replace(broken, reference_failed=True)
        try:
            got = runner(feed)
            checks = compare_outputs(names, got, want, tolerance)
        except Exception as e:  # the artifact's engine may raise anything
            shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in feed.items())
            return broken_verification(
                fmt, reference_name, tolerance, f"{fmt} artifact failed on {shapes}: {first_line(e)}"
            )
        samples += next(iter(feed.values())).shape[0] if signature.batched else 1
        for i, (max_abs, max_rel, ok, diff2, ref2) in enumerate(checks):
            worst_abs[i] = max(worst_abs[i], max_abs)
            worst_rel[i] = max(worst_rel[i], max_rel)
            sq_diff[i] += diff2
            sq_ref[i] += ref2
            passed[i] = passed[i] and ok
    rel_rms = [
        (d / r) ** 0.5 if r > 0 else (0.0 if d == 0 else float("inf"))
        for d, r in zip(sq_diff, sq_ref, strict=True)
    ]
    if tolerance.rms is not None:
        passed = [m <= tolerance.rms for m in rel_rms]
    outputs = tuple(
        OutputCheck(name=n, max_abs=a, max_rel=r, passed=p, rel_rms=m)
        for n, a, r, p, m in zip(names, worst_abs, worst_rel, passed, rel_rms, strict=True)
    )
    return Verification(
        format=fmt,
        reference=reference_name,
        batches=len(batches),
        samples=samples,
        tolerance=tolerance,
        outputs=outputs,
    )


def broken_verification(fmt: str, reference: str, tolerance: Tolerance, error: str) -> Verification:
    """The verdict on an artifact that could not run at all."""
    return Verification(
        format=fmt, reference=reference, batches=0, samples=0, tolerance=tolerance, outputs=(), error=error
    )
