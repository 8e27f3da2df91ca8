"""Values options take (``4,8,16``, ``a,b``, ``25%``, ``--sequences`` levels), parsed for the groups."""

from __future__ import annotations

import typer

from tritongen.errors import ConfigError


def parse_int_list(value: str | None, option: str) -> tuple[int, ...] | None:
    """Parse ``"4,8,16"`` into ``(4, 8, 16)``; ``None``/empty stays ``None``.

    Raises:
        typer.BadParameter: an entry is not an integer.
    """
    if value is None or not value.strip():
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    try:
        return tuple(int(item) for item in items)
    except ValueError as e:
        raise typer.BadParameter(
            f"expected integers separated by commas, e.g. 4,8,16; got {value!r}", param_hint=option
        ) from e


def parse_name_list(value: str | None) -> tuple[str, ...]:
    """Parse ``"a,b"`` into ``("a", "b")``."""
    if value is None:
        return ()
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parse_other_cpu_limit(text: str) -> float:
    """``--other-cpu-limit 25%`` (or ``25``): a share of one core, as cores (0.25).

    Raises:
        ConfigError: not a percentage above 0 and below 100.
    """
    try:
        percent = float(text.strip().removesuffix("%"))
    except ValueError:
        percent = float("nan")
    if not 0 < percent < 100:
        raise ConfigError(
            f"--other-cpu-limit {text!r} is not a share of one core above 0% and below 100%",
            "e.g. --other-cpu-limit 25%",
        )
    return percent / 100


def sequence_levels(sequences: str, concurrency: str | None, rate: str | None) -> tuple[float, ...]:
    """``--sequences`` as levels: sequences in flight, the closed loop of a sequence model.

    Raises:
        ConfigError: ``--concurrency`` or ``--rate`` given as well, or a malformed list.
    """
    for given, option in ((concurrency, "--concurrency"), (rate, "--rate")):
        if given:
            raise ConfigError(
                f"--sequences and {option} exclude each other: --sequences N is the load of a sequence "
                "model (N sequences in flight, each request waiting for the previous one)",
                f"drop {option}",
            )
    return tuple(float(v) for v in parse_int_list(sequences, "--sequences") or ())
