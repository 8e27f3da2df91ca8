"""Load tests without NVML, or with NVML failing: no GPU figures, and CPU figures from Triton."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.metrics.nvml import open_nvml
from tritongen.metrics.prometheus import MetricsSampler
from tritongen.server.local import LocalTritonServer

runner = CliRunner()


SHORT = ["--duration", "3s", "--warmup", "1s", "--window", "1s", "--max-duration", "6s"]


def _nvml_works() -> bool:
    reader = open_nvml()
    if isinstance(reader, str):
        return False
    reader.close()
    return True


needs_no_nvml = pytest.mark.skipif(
    _nvml_works(), reason="NVML works with a GPU on this machine: these tests are of its absence and failure"
)


@needs_no_nvml
def test_without_nvidia_ml_py_gpu_figures_are_absent_and_cpu_figures_say_triton(
    triton_server: LocalTritonServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    reason = open_nvml(triton_server.pid, triton_server.http_url)
    assert isinstance(reason, str) and "nvidia-ml-py" in reason
    sampler = MetricsSampler(triton_server.metrics_url, interval_s=0.2, server_pid=triton_server.pid).start()
    started = time.time()
    time.sleep(1.0)
    sampler.stop()
    assert sampler.nvml_reason == reason and sampler.samples
    assert sampler.summary("gpu", started - 1, time.time()) is None
    cpu = sampler.summary("cpu", started - 1, time.time())
    assert cpu is not None and cpu.as_dict()["source"] == "triton"


@needs_no_nvml
def test_failing_nvml_gives_its_error_and_a_loadtest_still_runs_without_gpu_figures(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        error = str(e)
    else:  # NVML works but sees no GPU
        pynvml.nvmlShutdown()
        pytest.skip("NVML initialises on this machine (no GPU): nothing fails")
    reason = open_nvml(triton_server.pid, triton_server.http_url)
    assert reason == f"NVML failed to initialise: {error}"
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", "mlp_onnx", "--concurrency", "1", *SHORT, "--json", str(out),
         "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["gpu"] is None
    assert run["cpu"]["source"] == "triton" and run["cpu"]["util_mean"] is not None
