"""A model whose load hangs: the start fails within --load-timeout, naming it; the server log is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritongen.errors import LoadTimeoutError
from tritongen.server.local import LocalTritonServer, ServerSettings

from support.processes import servers_started_by, shm_regions, start_cli

pytestmark = pytest.mark.slow

HANGING_MODEL = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(600)  # a load that never ends in time

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""

ECHO_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]) for x in inputs]
"""

CONFIG = """
backend: "python"
input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]
instance_group [{ kind: KIND_CPU }]
"""

LOAD_TIMEOUT_S = 20
"""Long enough for the server and a trivial model to start on a busy machine, far short of the hang."""


@pytest.fixture
def hanging_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for name, code in (("hangs", HANGING_MODEL), ("echo", ECHO_MODEL)):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(code)
        (repo / name / "config.pbtxt").write_text(CONFIG)
    return repo


def test_serve_with_a_hanging_load_fails_in_one_line_naming_it_and_keeps_the_log(
    hanging_repository: Path, tmp_path: Path
) -> None:
    cli = start_cli(
        tmp_path / "cli", "serve", hanging_repository, "--http-port", "0", "--grpc-port", "0",
        "--metrics-port", "0", "--load-timeout", str(LOAD_TIMEOUT_S),
    )  # fmt: skip
    try:
        code = cli.wait(LOAD_TIMEOUT_S + 60)
    finally:
        cli.kill()
    assert code == 1, cli.stderr()
    (line,) = cli.error_lines()
    assert f"not ready within {LOAD_TIMEOUT_S} s, still loading: " in line, line
    assert "hangs" in line.split("still loading: ")[1].split(".")[0]
    assert "raise --load-timeout" in line
    log = Path(line.split("the server's log is kept at ")[1].rstrip("."))
    assert log.is_file() and '"loading: hangs:1"' in log.read_text()
    assert servers_started_by(cli.pid) == [] and shm_regions(cli.pid) == []


@pytest.mark.parametrize("command", ["loadtest", "infer"])
def test_commands_that_serve_bound_the_load_too(
    hanging_repository: Path, tmp_path: Path, command: str
) -> None:
    cli = start_cli(
        tmp_path / "cli",
        command,
        "hangs",
        "--serve",
        hanging_repository,
        "--load-timeout",
        str(LOAD_TIMEOUT_S),
    )
    try:
        code = cli.wait(LOAD_TIMEOUT_S + 60)
    finally:
        cli.kill()
    assert code == 1, cli.stderr()
    (line,) = cli.error_lines()
    assert f"not ready within {LOAD_TIMEOUT_S} s, still loading: hangs" in line, line
    assert servers_started_by(cli.pid) == []


def test_a_live_load_that_hangs_is_bounded_too(hanging_repository: Path) -> None:
    settings = ServerSettings(http_port=0, grpc_port=0, metrics_port=0, models=["echo"])
    # stop_timeout_s: stopping does not wait long on the hung load
    with LocalTritonServer(
        hanging_repository, settings, load_timeout_s=LOAD_TIMEOUT_S, stop_timeout_s=2
    ) as server:
        with pytest.raises(LoadTimeoutError) as caught:
            server.load_model("hangs")
        assert caught.value.models == ["hangs"]
        assert f"model hangs not ready within {LOAD_TIMEOUT_S} s" in caught.value.message
        assert server.ready_models() == ["echo"]
