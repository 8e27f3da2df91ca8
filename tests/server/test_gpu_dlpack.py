"""Numeric tensors cross the Python backend through DLPack, on the real embedded server."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


runner = CliRunner()


MLP_SPECS = ("--input-spec", "input:FP32:-1,16", "--output-names", "logits")


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def local_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example MLP (PyTorch factory) built for the local target as ONNX and TorchScript, on CPU."""
    repo = tmp_path_factory.mktemp("gpu_kind") / "repo"
    code, out, err = _run(
        "convert", "tritongen.examples.torch_models:mlp", "--name", "mlp", "--repo", repo,
        "--formats", "onnx,torchscript", *MLP_SPECS,
    )  # fmt: skip
    assert code == 0, err + out
    return repo


def test_tensors_cross_the_backend_through_dlpack_where_numpy_2_needs_it(
    local_models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DLPack path (taken with numpy 2, forced here) serves what the default path serves."""
    from tritongen.client.endpoint import TritonEndpoint
    from tritongen.examples.torch_models import mlp
    from tritongen.server.local import LocalTritonServer

    batch = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    with torch.inference_mode():
        want = mlp()(torch.from_numpy(batch)).numpy()
    monkeypatch.setenv("TRITONGEN_DLPACK", "1")
    with LocalTritonServer(local_models, http_port=0, grpc_port=0, metrics_port=0) as server:
        endpoint = TritonEndpoint(server.http_url)
        try:
            for model in ("mlp_onnx", "mlp_torchscript"):
                got = endpoint.infer(model, {"input": batch}, ("logits",)).outputs["logits"]
                np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-3, err_msg=model)
        finally:
            endpoint.close()
