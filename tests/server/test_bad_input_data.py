"""Bad input data for a served model: wrong dtype, shape or name, one line from loadtest and infer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line

runner = CliRunner()


def test_input_data_of_the_wrong_dtype_or_shape(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    url = ["--url", triton_server.http_url]
    arrays = {
        "dtype": (np.zeros((4, 16), np.int64), "holds int64, input 'input' takes float32"),
        "shape": (np.zeros((4, 7), np.float32), "has shape [4, 7], input 'input' takes [batch, 16]"),
        "name": (np.zeros((4, 16), np.float32), "no array for input(s) input"),
    }
    for what, (array, message) in arrays.items():
        npz, npy = tmp_path / f"{what}.npz", tmp_path / f"{what}.npy"
        np.savez(npz, **{"nope" if what == "name" else "input": array})
        np.save(npy, array)
        result_json = tmp_path / f"{what}.json"
        result = runner.invoke(
            app,
            [
                "loadtest",
                "mlp_onnx",
                *url,
                "--input-data",
                str(npz),
                "--duration",
                "1s",
                "--json",
                str(result_json),
            ],
        )
        assert result.exit_code == 1 and message in error_line(result.stderr)
        assert not result_json.exists()
        if what != "name":
            result = runner.invoke(app, ["infer", "mlp_onnx", *url, "--input", f"input={npy}"])
            assert result.exit_code == 1 and message in error_line(result.stderr)
    pickled = tmp_path / "object.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    result = runner.invoke(app, ["infer", "mlp_onnx", *url, "--input", f"input={pickled}"])
    assert result.exit_code == 1 and "allow_pickle=False" in error_line(result.stderr)
