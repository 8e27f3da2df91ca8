"""Calibration data for reduced precision: real inputs from ``.npz`` files, or noise when asked.

Static INT8 fixes one scale per tensor from the values the model sees during
calibration, so those values must look like production traffic. The data comes from
``--calibration-data FILE.npz|DIR`` (one array per input, batch dim first; a folder of
such files is read in name order). Random inputs are used only on an explicit
``--calibration-data random``, and everything that reports on the result says so.

The same :class:`CalibrationSet` feeds ONNX Runtime's static quantizer and the TensorRT
INT8 build, and its held-out rows are what the accuracy report is measured on when no
``--verify-data`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.convert.jsonable import json_fields
from tritongen.convert.verify import read_feed
from tritongen.errors import ConfigError, ConversionError, SourceError
from tritongen.sources.samples import Feed, random_feed
from tritongen.sources.signature import Signature

RANDOM = "random"
"""The ``--calibration-data`` value that asks for noise knowingly."""
RANDOM_SAMPLES = 64
"""Rows of noise drawn for ``--calibration-data random``."""
RANDOM_DIM = 16
"""Value of every dynamic non-batch dim in random calibration rows."""
CALIBRATION_BATCH = 8
"""Rows handed to the calibrator at a time."""
HELD_OUT_FRACTION = 0.2
"""Share of the calibration rows kept back to measure accuracy when no --verify-data is given."""

CalibrationSource = Path | str
Draw = Callable[[int, np.random.Generator], Feed]
"""Draws one random batch of some rows (``--calibration-data random``) at the dims the build settled on."""
"""A path to ``.npz`` data, or :data:`RANDOM`."""


def parse_calibration_source(text: str | Path | None) -> CalibrationSource | None:
    """``--calibration-data``: a path, or the word ``random``."""
    if text is None:
        return None
    if str(text).strip().lower() == RANDOM:
        return RANDOM
    return Path(text)


def is_random(source: CalibrationSource | None) -> bool:
    """Whether the calibration data is noise (``--calibration-data random``)."""
    return isinstance(source, str) and source == RANDOM


@dataclass(frozen=True)
class CalibrationSet:
    """Calibration rows, split into the part calibrated on and the part held out."""

    source: str
    """Where the rows came from: a path, or ``random``."""
    calibrate: tuple[Feed, ...]
    held_out: tuple[Feed, ...]
    random: bool = False

    @property
    def samples(self) -> int:
        """Rows used for calibration."""
        return _rows(self.calibrate)

    @property
    def held_out_samples(self) -> int:
        """Rows kept back for the accuracy report."""
        return _rows(self.held_out)

    def batches(self) -> Iterator[dict[str, Any]]:
        """The calibration rows, :data:`CALIBRATION_BATCH` at a time."""
        yield from self.calibrate

    def describe(self) -> str:
        """One line for reports, e.g. ``calib/ (96 samples, 24 held out)``."""
        if self.random:
            return f"random noise ({self.samples} samples): not representative of real inputs"
        held = f", {self.held_out_samples} held out" if self.held_out else ""
        return f"{self.source} ({self.samples} samples{held})"

    def to_json(self) -> dict[str, Any]:
        """The JSON facts of the calibration."""
        return json_fields(self, "source", "random", "samples", "held_out_samples")


def _rows(feeds: tuple[Feed, ...]) -> int:
    return sum(next(iter(feed.values())).shape[0] for feed in feeds if feed)


def load_calibration(
    source: CalibrationSource,
    signature: Signature,
    hold_out: bool = False,
    limit: int | None = None,
    seed: int = 0,
    draw: Draw | None = None,
) -> CalibrationSet:
    """Read the calibration rows (or draw noise), optionally keeping some back.

    ``hold_out`` keeps :data:`HELD_OUT_FRACTION` of the rows (at least one, and only
    when there are two or more) out of calibration, for the accuracy report. ``limit``
    caps the rows calibrated on. ``draw`` makes the random rows (default: dynamic dims at 16).

    Raises:
        ConversionError: the path is missing, holds no ``.npz`` file, or an array does
            not fit the model's inputs.
        ConfigError: the model takes no batch dim, so rows cannot be told apart.
    """
    if is_random(source):
        rng = np.random.default_rng(seed)
        rows = RANDOM_SAMPLES if limit is None else min(limit, RANDOM_SAMPLES)
        batch = CALIBRATION_BATCH if signature.batched else 1
        make = draw or (lambda size, generator: random_feed(signature, size, RANDOM_DIM, generator))
        feeds = [make(batch, rng) for _ in range(max(1, rows // max(1, batch)))]
        return CalibrationSet(source=RANDOM, calibrate=tuple(feeds), held_out=(), random=True)
    path = Path(source)
    arrays = _read_arrays(path, signature)
    if not signature.batched:
        return CalibrationSet(source=str(path), calibrate=tuple(arrays), held_out=())
    feed = (
        {name: np.concatenate([a[name] for a in arrays]) for name in arrays[0]}
        if len(arrays) > 1
        else arrays[0]
    )
    total = next(iter(feed.values())).shape[0]
    if total == 0:
        raise ConversionError(f"calibration data {path} has no rows", "save at least one input row")
    held = max(1, round(total * HELD_OUT_FRACTION)) if hold_out and total >= 2 else 0
    used = total - held
    if limit is not None:
        used = min(used, limit)
    calibrate = _split(feed, 0, used)
    held_out = _split(feed, total - held, total) if held else ()
    return CalibrationSet(source=str(path), calibrate=calibrate, held_out=held_out)


def _split(feed: Feed, start: int, stop: int) -> tuple[Feed, ...]:
    return tuple(
        {name: array[i : min(i + CALIBRATION_BATCH, stop)] for name, array in feed.items()}
        for i in range(start, stop, CALIBRATION_BATCH)
    )


def _read_arrays(path: Path, signature: Signature) -> list[Feed]:
    """One feed per ``.npz`` file, arrays cast to the inputs' dtypes.

    Raises:
        ConversionError: the path is missing or a file is unusable.
    """
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
    elif path.is_file():
        files = [path]
    else:
        raise ConversionError(
            f"calibration data {path} does not exist",
            "pass an .npz file or a folder of them (or --calibration-data random, knowingly)",
        )
    if not files:
        raise ConversionError(f"{path} holds no .npz calibration files", "save batches with numpy.savez")
    feeds: list[Feed] = []
    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        try:
            feed, _ = read_feed(file, signature, f"calibration file {file}")
        except SourceError as e:  # the calibration of this format fails; the others may go on
            raise ConversionError(e.message, e.hint) from e
        for name, array in feed.items():
            inner = array.shape[1:] if signature.batched else array.shape
            if len(files) > 1 and shapes.setdefault(name, inner) != inner:
                raise ConversionError(
                    f"calibration files disagree on the shape of {name!r}: "
                    f"{list(shapes[name])} and {list(inner)} ({file})",
                    "pad every file to the same shape (e.g. the same sequence length)",
                )
        feeds.append(feed)
    return feeds


def check_calibration_request(needs_data: bool, source: CalibrationSource | None) -> None:
    """Refuse static INT8 without data, and data where nothing is calibrated.

    Raises:
        ConfigError: static INT8 without ``--calibration-data``, or data given but
            no variant calibrates.
    """
    if needs_data and source is None:
        raise ConfigError(
            "static INT8 needs representative calibration data: a model calibrated on noise "
            "drifts silently on real inputs",
            "pass --calibration-data FILE.npz|DIR of real inputs, --int8-mode dynamic (no calibration), "
            "or --calibration-data random to calibrate on noise knowingly",
        )
    if not needs_data and source is not None:
        raise ConfigError(
            "--calibration-data applies to static INT8 only, and no static INT8 variant is asked for",
            "add --precision int8 (static), or drop --calibration-data",
        )
