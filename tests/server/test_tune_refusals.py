"""``tritongen tune`` refuses a load that cannot fit the model under load, before the baseline.

Each case is the user's mistake, not a server-side failure: one line, exit code 1, no tune
directory, no reload, and no trial measured (so it is quick).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.control import ModelControl
from tritongen.server.local import LocalTritonServer

runner = CliRunner()
FAST = ["--duration", "1s", "--warmup", "0.5s", "--max-trials", "1", "--rounds", "1", "--finalists", "1"]


def _refused(server: LocalTritonServer, repo: Path, out: Path, model: str, *args: str) -> str:
    """Run ``tune`` and return its one error line, checking it wrote nothing and loaded nothing.

    No tune directory means no trial was measured: the baseline writes its trial there.
    """
    before = _served(server, "mlp_onnx")
    result = runner.invoke(
        app, ["tune", model, "--repo", str(repo), "--url", server.http_url, "--out", str(out), *FAST, *args]
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not out.exists()
    assert _served(server, "mlp_onnx") == before
    return lines[0]


def _served(server: LocalTritonServer, model: str) -> dict[str, Any]:
    control = ModelControl(server.http_url, model)
    try:
        return control.served_config()
    finally:
        control.close()


def test_a_decoupled_model_under_load_over_http_is_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    # stream_plan does not batch: the tuned model is one it might call, the load goes to it.
    line = _refused(
        triton_server, served_repository, tmp_path / "t", "stream_plan",
        "--composing", "mlp_onnx", "--protocol", "http",
    )  # fmt: skip
    assert "'stream_plan' is a decoupled (streaming) model" in line
    assert "--protocol grpc" in line


def test_a_sequence_model_without_sequences_is_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    line = _refused(triton_server, served_repository, tmp_path / "t", "accumulate_sequence")
    assert "'accumulate_sequence' is a sequence model" in line and "--sequences N" in line


def test_sequences_on_a_plain_model_are_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    line = _refused(triton_server, served_repository, tmp_path / "t", "mlp_onnx", "--sequences", "2")
    assert "--sequences needs a sequence model" in line


def test_an_unknown_input_value_is_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    line = _refused(triton_server, served_repository, tmp_path / "t", "mlp_onnx", "--input-value", "nope=1")
    assert "has no input 'nope'" in line


def test_input_data_that_does_not_fit_the_model_is_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    data = tmp_path / "wrong.npz"
    np.savez(data, input=np.zeros((1, 5), dtype=np.float32))  # mlp_onnx takes [16]
    line = _refused(triton_server, served_repository, tmp_path / "t", "mlp_onnx", "--input-data", str(data))
    assert "input" in line


def test_request_timeout_reaches_the_load(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    line = _refused(triton_server, served_repository, tmp_path / "t", "mlp_onnx", "--request-timeout", "0s")
    assert "--request-timeout must be positive" in line
