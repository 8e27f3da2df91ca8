"""Figures measured in rounds: median, confidence interval, spread, and paired ratios with a verdict.

A figure that decides something (a rank, a best config, a recommendation) is a sample of
rounds, never one run. :func:`summarise` describes one figure's rounds: the median (what
tables show), the Student-t confidence interval of the mean and the coefficient of
variation. :func:`paired_ratio` compares two contenders measured in the same rounds
(interleaved, A B A B …): the ratio is taken per round, so slow drift of the machine
cancels, and its interval is the t interval of the mean log ratio, turned back into a
ratio (a geometric mean). A difference is claimed only when that interval excludes 1;
otherwise the two are a tie.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import CONFIDENCE

DEFAULT_CONFIDENCE = CONFIDENCE
"""The confidence level of intervals unless told otherwise (a locustfile report of one run states it)."""
DEFAULT_ROUNDS = 5
"""Rounds compare and tune measure by default."""


def check_confidence(confidence: float) -> None:
    """Refuse a confidence level outside (0, 1).

    Raises:
        ConfigError: the level is not strictly between 0 and 1.
    """
    if not (isinstance(confidence, int | float) and 0.0 < float(confidence) < 1.0):
        raise ConfigError(
            f"--confidence {confidence} is not a level between 0 and 1", "e.g. --confidence 0.95"
        )


def check_rounds(rounds: int) -> None:
    """Refuse a round count below 1.

    Raises:
        ConfigError: fewer than one round.
    """
    if not isinstance(rounds, int) or rounds < 1:
        raise ConfigError(f"--rounds {rounds} must be at least 1", "e.g. --rounds 5 (1 for a quick look)")


def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t critical value for ``confidence`` with ``dof`` degrees of freedom."""
    from scipy import stats  # type: ignore[import-untyped]  # heavy: only when an interval is computed

    return float(stats.t.ppf(0.5 + confidence / 2.0, dof))


@dataclass(frozen=True)
class Summary:
    """One figure over rounds; ``low``/``high`` are ``None`` with fewer than two usable rounds."""

    values: tuple[float, ...]
    median: float
    mean: float
    low: float | None
    high: float | None
    cv: float | None
    """Coefficient of variation (sample standard deviation / mean)."""
    confidence: float = DEFAULT_CONFIDENCE

    @property
    def rounds(self) -> int:
        """How many rounds the figure has."""
        return len(self.values)

    @property
    def half_width(self) -> float | None:
        """Half the interval's width (the ``± x`` of tables)."""
        if self.low is None or self.high is None:
            return None
        return (self.high - self.low) / 2.0

    def to_json(self) -> dict[str, Any]:
        """``{"median", "ci_low", "ci_high", "cv", "mean", "rounds", "confidence", "values"}``."""
        return {
            "median": self.median,
            "ci_low": self.low,
            "ci_high": self.high,
            "cv": self.cv,
            "mean": self.mean,
            "rounds": self.rounds,
            "confidence": self.confidence,
            "values": list(self.values),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Summary:
        """Read what :meth:`to_json` wrote."""
        return cls(
            values=tuple(float(v) for v in data.get("values") or ()),
            median=float(data["median"]),
            mean=float(data.get("mean", data["median"])),
            low=_optional_float(data.get("ci_low")),
            high=_optional_float(data.get("ci_high")),
            cv=_optional_float(data.get("cv")),
            confidence=float(data.get("confidence", DEFAULT_CONFIDENCE)),
        )


def _optional_float(value: Any) -> float | None:
    """``value`` as a float, ``None`` kept (a JSON figure that may be null)."""
    return None if value is None else float(value)


def summarise(values: Sequence[float | None], confidence: float = DEFAULT_CONFIDENCE) -> Summary | None:
    """Median, t interval of the mean and CV of ``values`` (``None`` when there is no value).

    Non-finite values (a round that measured nothing) are left out.
    """
    finite = tuple(float(v) for v in values if v is not None and math.isfinite(float(v)))
    if not finite:
        return None
    n = len(finite)
    ordered = sorted(finite)
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0
    mean, sd, half = _t_interval(finite, confidence)
    if half is None or sd is None:
        return Summary(finite, median, mean, low=None, high=None, cv=None, confidence=confidence)
    cv = sd / abs(mean) if mean else None
    return Summary(finite, median, mean, mean - half, mean + half, cv, confidence)


def _t_interval(values: Sequence[float], confidence: float) -> tuple[float, float | None, float | None]:
    """(mean, sample standard deviation, half the t interval of the mean); no spread for one value."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, sd, t_quantile(confidence, n - 1) * sd / math.sqrt(n)


@dataclass(frozen=True)
class Ratio:
    """A over B from paired rounds: the geometric mean of per-round ratios and its interval."""

    ratios: tuple[float, ...]
    estimate: float
    low: float | None
    high: float | None
    confidence: float = DEFAULT_CONFIDENCE

    @property
    def rounds(self) -> int:
        """How many paired rounds the ratio rests on."""
        return len(self.ratios)

    @property
    def significant(self) -> bool:
        """Whether the interval excludes 1 (a difference may be claimed)."""
        return self.low is not None and self.high is not None and (self.low > 1.0 or self.high < 1.0)

    @property
    def noise(self) -> float | None:
        """The interval's larger distance from the estimate, relative (0.04 = ±4%)."""
        if self.low is None or self.high is None or self.estimate <= 0:
            return None
        return max(self.high / self.estimate - 1.0, 1.0 - self.low / self.estimate)

    def inverse(self) -> Ratio:
        """B over A."""
        return Ratio(
            tuple(1.0 / r for r in self.ratios),
            1.0 / self.estimate,
            None if self.high is None else 1.0 / self.high,
            None if self.low is None else 1.0 / self.low,
            self.confidence,
        )

    def text(self) -> str:
        """``1.9× [1.7, 2.1]``, or ``1.02× (one round, no interval)``."""
        if self.low is None or self.high is None:
            return f"{self.estimate:.2f}× (one round, no interval)"
        return f"{self.estimate:.2f}× [{self.low:.2f}, {self.high:.2f}]"

    def to_json(self) -> dict[str, Any]:
        """``{"estimate", "ci_low", "ci_high", "significant", "rounds", "confidence", "ratios"}``."""
        return {
            "estimate": self.estimate,
            "ci_low": self.low,
            "ci_high": self.high,
            "significant": self.significant,
            "rounds": self.rounds,
            "confidence": self.confidence,
            "ratios": list(self.ratios),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ratio:
        """Read what :meth:`to_json` wrote (``significant`` and ``rounds`` follow from the rest)."""
        return cls(
            ratios=tuple(float(r) for r in data.get("ratios") or ()),
            estimate=float(data["estimate"]),
            low=_optional_float(data.get("ci_low")),
            high=_optional_float(data.get("ci_high")),
            confidence=float(data.get("confidence") or DEFAULT_CONFIDENCE),
        )


def paired_ratio(
    a: Sequence[float | None], b: Sequence[float | None], confidence: float = DEFAULT_CONFIDENCE
) -> Ratio | None:
    """A/B from rounds measured side by side (``a[i]`` and ``b[i]`` in the same round).

    Rounds where either figure is missing or not positive are left out; ``None`` when no
    round is left. With one round there is an estimate but no interval.
    """
    pairs = [
        (float(x), float(y))
        for x, y in zip(a, b, strict=False)
        if x is not None and y is not None and math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0
    ]
    if not pairs:
        return None
    ratios = tuple(x / y for x, y in pairs)
    mean, _, half = _t_interval([math.log(r) for r in ratios], confidence)
    if half is None:
        return Ratio(ratios, math.exp(mean), low=None, high=None, confidence=confidence)
    return Ratio(ratios, math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence)


def format_summary(summary: Summary | None, unit: str = "", digits: int | None = None) -> str:
    """``4,891 ± 210`` (median ± half the interval), ``4,891`` for one round, ``–`` for none.

    ``digits`` fixes the decimals; by default large figures get none and small ones three
    significant digits.
    """
    if summary is None:
        return "–"
    suffix = f" {unit}" if unit else ""

    def fmt(value: float) -> str:
        if digits is not None:
            return f"{value:,.{digits}f}"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:#.3g}"

    half = summary.half_width
    if half is None:
        return fmt(summary.median) + suffix
    shown = fmt(summary.median)
    return f"{shown} ± {half_text(half, shown)}{suffix}"


def half_text(half: float, shown: str) -> str:
    """The ``± x`` part in the decimals of the figure it follows (``shown``), at least one digit."""
    decimals = len(shown.partition(".")[2])
    text = f"{half:,.{decimals}f}"
    if half > 0 and float(text.replace(",", "")) == 0:
        return f"{half:.1g}"
    return text
