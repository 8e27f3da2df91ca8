"""A load test on a GPU host gets its GPU figures from NVML where Triton's metrics have none."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.metrics.hardware import local_gpus, nvml_server_gpus
from tritongen.server.local import LocalTritonServer

runner = CliRunner()


SHORT = ["--duration", "3s", "--warmup", "1s", "--window", "1s", "--max-duration", "6s"]


@pytest.mark.gpu
@pytest.mark.triton
def test_a_loadtest_on_a_gpu_host_gets_gpu_figures_from_nvml_without_dcgm(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    with urllib.request.urlopen(triton_server.metrics_url, timeout=5) as response:
        has_dcgm = "nv_gpu_utilization" in response.read().decode()
    assert local_gpus(), "NVML or nvidia-smi lists this host's GPUs"
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", "mlp_onnx", "--concurrency", "1", *SHORT, "--json", str(out),
         "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    gpu = run["gpu"]
    assert (
        gpu is not None
        and 0 <= gpu["util_mean"] <= gpu["util_max"] + 1e-9 <= 1 + 1e-9
        and gpu["mem_max_bytes"] > 0
    )
    assert "GPU util mean" in result.stdout
    if not has_dcgm:
        assert gpu["source"] == "nvml" and gpu["devices"] and all(gpu["devices"])
        assert gpu["memory_scope"] in ("device", "server-processes")
        assert "from NVML" in result.stdout
        servers = nvml_server_gpus(triton_server.pid, triton_server.http_url)
        assert servers and all(g["source"] == "nvml" and g["name"] for g in servers)
