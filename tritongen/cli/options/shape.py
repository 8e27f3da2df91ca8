"""The options that lay out an open loop's sends in time: a ramp, ``--stages``, ``--trace`` replayed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.options.given import changed_flags
from tritongen.cli.options.load import LoadFlags
from tritongen.errors import ConfigError
from tritongen.loadtest.shapes.base import LoadShape
from tritongen.loadtest.shapes.rate_profile import parse_ramp, parse_stages
from tritongen.loadtest.shapes.trace_replay import TraceReplay
from tritongen.loadtest.spec import parse_duration
from tritongen.loadtest.traces.reading import FORMATS, read_trace


@dataclass(frozen=True)
class ShapeFlags:
    """A load that changes along the run: stages of rates, or a trace's recorded requests."""

    stages: Annotated[
        str | None,
        typer.Option(
            "--stages",
            help="Open loop in stages, RATE:DURATION each (a rate may ramp: FROM..TO), e.g. "
            "100:30s,500:60s,100:30s, or a file of one stage per line; figures per stage too.",
            show_default=False,
        ),
    ] = None
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Replay recorded requests at their times, each with its own shapes or token counts: "
            "tritongen's JSON lines, a Mooncake trace, or a trace file Triton wrote (docs/workloads.md).",
            show_default=False,
        ),
    ] = None
    trace_speed: Annotated[
        float | None,
        typer.Option(
            "--trace-speed",
            help="With --trace: replay this many times faster (default 1).",
            show_default=False,
        ),
    ] = None
    trace_format: Annotated[
        str | None,
        typer.Option(
            "--trace-format",
            help=f"With --trace: {', '.join(FORMATS[1:])} (default: told from the file).",
            show_default=False,
        ),
    ] = None

    def load_shape(self, load: LoadFlags, model: str, arrival: tuple[str, float | None]) -> LoadShape | None:
        """The shape asked (a ramp in ``--rate FROM..TO/DURATION``, ``--stages``, ``--trace``), or None.

        Raises:
            ConfigError: two shapes, a malformed one, options that do not apply to it.
        """
        ramp = load.rate is not None and ".." in load.rate
        asked = [
            name
            for name, given in (("a ramp", ramp), ("--stages", self.stages), ("--trace", self.trace))
            if given
        ]
        if len(asked) > 1:
            raise ConfigError(f"{' and '.join(asked)} exclude each other", "give one shape of load")
        if self.trace is None:
            given = [
                flag
                for flag, value in (
                    ("--trace-speed", self.trace_speed),
                    ("--trace-format", self.trace_format),
                )
                if value is not None
            ]
            if given:
                raise ConfigError(f"{given[0]} applies with --trace", f"add --trace FILE, or drop {given[0]}")
        if not asked:
            return None
        loops = [
            flag
            for flag, value in (("--concurrency", load.concurrency), ("--rate", load.rate and not ramp))
            if value
        ]
        if loops:
            raise ConfigError(f"{asked[0]} sets its own rate: {loops[0]} does not apply", f"drop {loops[0]}")
        if self.trace is not None:
            return self._replay(load, model, arrival[0])
        if changed_flags(load, ("duration",)):
            raise ConfigError(
                f"{asked[0]} sets the measured time (its stages' lengths): --duration does not apply",
                "drop --duration",
            )
        profile = parse_ramp(load.rate or "") if ramp else parse_stages(self.stages or "")
        return profile.with_arrival(*arrival)

    def _replay(self, load: LoadFlags, model: str, arrival: str) -> TraceReplay:
        if arrival != "constant":
            raise ConfigError(
                f"--trace sends at the recorded times: --arrival {arrival} does not apply", "drop --arrival"
            )
        trace = read_trace(self.trace or Path(), model, self.trace_format or "auto")
        duration = parse_duration(load.duration, "--duration") if changed_flags(load, ("duration",)) else None
        return TraceReplay(trace, 1.0 if self.trace_speed is None else self.trace_speed, duration)
