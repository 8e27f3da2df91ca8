"""The MLP on a KIND_GPU instance of the embedded server, where a GPU is."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.triton.proto import read_config

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


runner = CliRunner()


MLP_SPECS = ("--input-spec", "input:FP32:-1,16", "--output-names", "logits")


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.gpu
def test_mlp_on_a_gpu_instance_of_the_embedded_server(tmp_path: Path) -> None:
    from tritongen.client.endpoint import TritonEndpoint
    from tritongen.examples.torch_models import mlp
    from tritongen.server.local import LocalTritonServer

    repo = tmp_path / "repo"
    code, out, err = _run(
        "convert", "tritongen.examples.torch_models:mlp", "--name", "mlp", "--repo", repo,
        "--formats", "torchscript", "--kind", "gpu", *MLP_SPECS,
    )  # fmt: skip
    assert code == 0, err + out
    config = read_config(repo / "mlp_torchscript" / "config.pbtxt")
    assert [g.kind for g in config.instance_group] == ["KIND_GPU"]
    verification = json.loads((repo / "mlp_torchscript" / "tritongen.json").read_text())["verification"]
    assert verification["passed"] and verification["device"] == "cuda:0"
    batch = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    with torch.inference_mode():
        want = mlp()(torch.from_numpy(batch)).numpy()
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        endpoint = TritonEndpoint(server.http_url)
        got = endpoint.infer("mlp_torchscript", {"input": batch}, ("logits",)).outputs["logits"]
        endpoint.close()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-3)
