"""One tuning trial: reload the model with a candidate config, check it, load-test it, record it.

Every trial owns a directory, ``trials/<key>/``, holding the rendered ``config.pbtxt`` and
either ``result.json`` (the load test and its verdict) or ``failed.json`` (why it could
not be measured). A directory with either file is a finished trial; ``--resume`` skips it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.client.control import ModelControl
from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError, ModelLoadError, SourceError, TritongenError
from tritongen.io.files import atomic_write_text
from tritongen.loadtest.prepared import prepare_requests
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import ProgressCallback, run_load_test
from tritongen.loadtest.spec import LoadSpec
from tritongen.triton.batching import apply_batching
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.render import render_config
from tritongen.tune.objective import Measurement, feasible
from tritongen.tune.space import Candidate, Current

RESULT_FILE = "result.json"
FAILED_FILE = "failed.json"


@dataclass(frozen=True)
class TrialRecord:
    """A finished trial: what was tried and what it measured."""

    key: str
    candidate: Candidate | Current
    measurement: Measurement
    feasible: bool
    result: dict[str, Any] | None
    reason: str | None = None
    seconds: float = 0.0

    def config_json(self) -> dict[str, Any]:
        """The ``config`` object of the tune JSON."""
        return self.candidate.to_json()

    def to_json(self) -> dict[str, Any]:
        """One entry of the tune JSON's ``trials``."""
        return {
            "key": self.key,
            "config": self.config_json(),
            "status": "failed" if self.measurement.failed else "ok",
            "reason": self.reason,
            "infer_per_s": self.measurement.infer_per_s,
            "p99_us": self.measurement.p99_us,
            "level": self.measurement.level,
            "judged_by": self.measurement.judged_by,
            "feasible": self.feasible,
            "seconds": round(self.seconds, 3),
            "result": self.result,
        }


def candidate_config(base: ModelConfig, candidate: Candidate | Current, target: str | None) -> ModelConfig:
    """The model's config with ``candidate`` applied (the current config: ``base`` itself).

    Raises:
        ConfigError: the candidate is illegal for this model.
    """
    if isinstance(candidate, Current):
        return base
    return apply_batching(base, candidate.to_options(), target)


def _failure(report: LoadTestReport) -> str:
    """Why no load level of a trial counts: its responses were wrong, or its runs failed."""
    if any(_wrong(run) for run in report.runs):
        return "responses differed from the expected outputs of --input-data (validation_data)"
    return (report.runs[-1].reason if report.runs else None) or "no load level finished without errors"


def _wrong(run: RunResult) -> bool:
    """Whether some response of ``run`` differed from its expected outputs (warm-up included)."""
    return bool(run.validation and run.validation["mismatched"])


def judged_by_latency(spec: LoadSpec) -> bool:
    """Whether trials under ``spec`` are judged by the lower P99: its load sets the throughput.

    A replayed trace or stages, or an open loop at one rate (not searched): every config that
    keeps up serves what is sent, so throughput cannot tell them apart and P99 does.
    """
    one_rate = spec.mode == "rate" and len(spec.levels) == 1 and spec.search is None
    return spec.shape is not None or one_rate


def summarise(report: LoadTestReport, slo_p99_ms: float | None, by_latency: bool = False) -> Measurement:
    """One figure per trial: the best throughput among load levels that meet the SLO.

    Without a feasible level, the level with the lowest P99 stands for the trial. Memory is
    the peak GPU memory the server reports (none on a CPU-only server). ``by_latency``: the
    load set its own rate (a trace, stages), and the figure is judged by its P99.
    """
    runs = [r for r in report.runs if r.latency_us and r.status == "ok" and r.errors == 0 and not _wrong(r)]
    if not runs:
        return Measurement(infer_per_s=0.0, p99_us=None, failed=True)
    points = [
        Measurement(
            infer_per_s=r.infer_per_s,
            p99_us=(r.latency_us or {}).get("p99"),
            memory_bytes=_gpu_memory(r.gpu),
            level=float((r.concurrency if r.mode == "concurrency" else r.target_rate) or 0.0),
            by_latency=by_latency,
        )
        for r in runs
    ]
    good = [m for m in points if feasible(m, slo_p99_ms)]
    if good:
        return max(good, key=lambda m: m.score)
    return min(points, key=lambda m: m.p99_us if m.p99_us is not None else float("inf"))


def _why(error: TritongenError) -> str:
    """One line: the server's own reason for a refused config, else the error."""
    if isinstance(error, ModelLoadError):
        return "the server refused the config: " + "; ".join(error.reasons.values())
    return error.one_line()


def _gpu_memory(gpu: dict[str, float | int | None] | None) -> int | None:
    """Peak GPU memory of a run, where the server reports a GPU (what ``--max-memory-mb`` caps)."""
    value = (gpu or {}).get("mem_max_bytes")
    return int(value) if value is not None else None


def read_finished(trial_dir: Path) -> dict[str, Any] | None:
    """The saved outcome of a finished trial, or ``None``."""
    for name in (RESULT_FILE, FAILED_FILE):
        path = trial_dir / name
        if path.is_file():
            try:
                data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                return None
            return data
    return None


def check_load(spec: LoadSpec) -> None:
    """Build the requests of ``spec`` once, as its load test would, to refuse the user's mistakes up front.

    Checks the model under load (``spec.model``) as the server runs it now: the batch size,
    sequences on a sequence model only, a decoupled model over gRPC only, and the inputs
    (``--input-data``, ``--shape``, ``--input-value``). Nothing is reloaded and nothing is
    kept. What the server cannot answer (it is down, or does not serve the model yet) is
    left to the trials, which record it as they do any server-side failure.

    Raises:
        ConfigError: the load does not fit the model under load, or its settings are illegal.
        SourceError: the data file is unreadable, or its data does not fit the model.
    """
    endpoint = TritonEndpoint.at(spec.address, timeout_s=10)
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-check-"))
    try:
        prepare_requests(spec, endpoint, workdir)
    except (ConfigError, SourceError):
        raise
    except TritongenError:
        return
    finally:
        endpoint.close()
        shutil.rmtree(workdir, ignore_errors=True)


def run_trial(
    control: ModelControl,
    base: ModelConfig,
    target: str | None,
    candidate: Candidate | Current,
    spec: LoadSpec,
    slo_p99_ms: float | None,
    trials_dir: Path,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
) -> TrialRecord:
    """Reload the model with ``candidate``, check the server runs it, load-test ``spec.model``, save it.

    ``spec.model`` is the model itself, or the ensemble or BLS model that calls it.

    A candidate the server refuses, or a load test that fails, is a failed trial, not an
    error: the sweep goes on (a load that cannot fit the model at all is refused before the
    first trial: :func:`check_load`). Ctrl-C (KeyboardInterrupt) propagates.
    """
    key = candidate.key
    trial_dir = trials_dir / key
    trial_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    config = candidate_config(base, candidate, target)
    atomic_write_text(trial_dir / "config.pbtxt", render_config(config))
    try:
        control.load(config)
        control.check_serving(config)
        report = run_load_test(spec, progress=progress, stop=stop)
    except TritongenError as e:
        record = TrialRecord(
            key=key,
            candidate=candidate,
            measurement=Measurement(infer_per_s=0.0, p99_us=None, failed=True),
            feasible=False,
            result=None,
            reason=_why(e),
            seconds=time.perf_counter() - started,
        )
        atomic_write_text(trial_dir / FAILED_FILE, json.dumps(record.to_json(), indent=2) + "\n")
        return record
    if report.status == "interrupted":
        raise KeyboardInterrupt
    measurement = summarise(report, slo_p99_ms, by_latency=judged_by_latency(spec))
    reason: str | None = None
    if measurement.failed:
        reason = _failure(report)
    record = TrialRecord(
        key=key,
        candidate=candidate,
        measurement=measurement,
        feasible=feasible(measurement, slo_p99_ms),
        result=report.to_json(),
        reason=reason,
        seconds=time.perf_counter() - started,
    )
    name = FAILED_FILE if measurement.failed else RESULT_FILE
    atomic_write_text(trial_dir / name, json.dumps(record.to_json(), indent=2) + "\n")
    return record


def record_from_saved(
    data: dict[str, Any], candidate: Candidate | Current, slo_p99_ms: float | None
) -> TrialRecord:
    """Rebuild a finished trial from its saved JSON (for ``--resume``)."""
    failed = data.get("status") == "failed"
    measurement = Measurement(
        infer_per_s=float(data.get("infer_per_s") or 0.0),
        p99_us=data.get("p99_us"),
        failed=failed,
        level=None if data.get("level") is None else float(data["level"]),
        by_latency=data.get("judged_by") == "p99",
    )
    return TrialRecord(
        key=str(data.get("key")),
        candidate=candidate,
        measurement=measurement,
        feasible=feasible(measurement, slo_p99_ms),
        result=data.get("result"),
        reason=data.get("reason"),
        seconds=float(data.get("seconds") or 0.0),
    )
