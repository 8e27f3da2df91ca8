"""The client's floor (``loadtest --calibrate``): read from the null kind's runs, kept, read against a run."""

from __future__ import annotations

from dataclasses import dataclass, field

from tritongen.loadtest.client_floor import NEAR_FLOOR, ClientFloor, FloorLevel, client_floor, floor_lines
from tritongen.loadtest.result import LoadTestReport


@dataclass
class _Run:
    concurrency: int
    p50: float
    mode: str = "concurrency"
    target_rate: float | None = None
    qps: float = 1000.0
    latency_us: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.latency_us = {"p50": self.p50, "p99": self.p50 * 4}


def _label(run: _Run) -> str:
    return f"c={run.concurrency}"


def test_the_floor_is_read_per_level_and_survives_the_report_document() -> None:
    floor = client_floor([_Run(1, 100.0), _Run(8, 400.0)])
    assert floor.levels == (FloorLevel(1.0, 100.0, 400.0, 1000.0), FloorLevel(8.0, 400.0, 1600.0, 1000.0))
    report = LoadTestReport(model="m", protocol="http", url="http://127.0.0.1:8000", client_floor=floor)
    again = LoadTestReport.from_json(report.to_json())
    assert again.client_floor == floor
    assert LoadTestReport.from_json({**report.to_json(), "client_floor": None}).client_floor is None


def test_a_run_near_its_floor_says_its_latency_is_mostly_the_clients() -> None:
    floor = ClientFloor(
        "concurrency", (FloorLevel(1.0, 100.0, 300.0, 5000.0), FloorLevel(8.0, 400.0, 900.0, 9000.0))
    )
    runs = [_Run(1, 150.0), _Run(1, 250.0), _Run(8, 400.0 * (NEAR_FLOOR + 1))]  # c=1 over two rounds
    lines = floor_lines(floor, runs, _label)
    assert lines[0].startswith("c=1 client floor (the null kind, 3 s): P50 100 µs, P99 300 µs")
    assert "P50 is 2.0× it: most of its latency is the load generator's" in lines[0]  # median of 150, 250
    assert lines[1].endswith("the run's P50 is 4.0× it")
    assert floor_lines(floor, [_Run(2, 100.0)], _label) == []  # a level the floor did not measure
