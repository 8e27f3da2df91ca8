"""The embedded Triton server, for real: serving, inference, failures, clean shutdown."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import psutil
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import build_inputs
from tritongen.errors import ModelLoadError, ServerError
from tritongen.server.leftovers import SHM_DIR
from tritongen.server.local import LocalTritonServer

from support.loads import QUICK_RUNS
from support.paths import ROOT

TOLERANCE = 1e-5


def _ort(repo: Path, model: str, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(repo / model / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def _endpoint(server: LocalTritonServer, protocol: str) -> TritonEndpoint:
    url = server.http_url if protocol == "http" else server.grpc_url
    return TritonEndpoint(url, protocol)  # type: ignore[arg-type]


def _shm_regions(prefix: str) -> list[str]:
    return [p.name for p in SHM_DIR.glob(f"{prefix}*")]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("batch_size", [1, 7])
def test_mlp_matches_onnxruntime(
    triton_server: LocalTritonServer, served_repository: Path, protocol: str, batch_size: int
) -> None:
    endpoint = _endpoint(triton_server, protocol)
    interface = endpoint.interface("mlp_onnx")
    inputs = build_inputs(interface, batch_size=batch_size, seed=batch_size)
    result = endpoint.infer("mlp_onnx", inputs, interface.outputs)
    (expected,) = _ort(served_repository, "mlp_onnx", inputs)
    assert result.outputs["logits"].shape == (batch_size, 4)
    assert np.abs(result.outputs["logits"] - expected).max() <= TOLERANCE
    assert result.latency_us > 0
    endpoint.close()


@pytest.mark.parametrize("seq", [5, 11])
def test_text_model_with_dynamic_sequence(
    triton_server: LocalTritonServer, served_repository: Path, seq: int
) -> None:
    endpoint = _endpoint(triton_server, "grpc")
    interface = endpoint.interface("text_onnx")
    inputs = build_inputs(interface, batch_size=3, shapes={"input_ids": (seq,), "attention_mask": (seq,)})
    result = endpoint.infer("text_onnx", inputs, interface.outputs)
    (expected,) = _ort(served_repository, "text_onnx", inputs)
    assert np.abs(result.outputs["embedding"] - expected).max() <= TOLERANCE


def test_model_without_batching(triton_server: LocalTritonServer, served_repository: Path) -> None:
    endpoint = _endpoint(triton_server, "http")
    interface = endpoint.interface("fixed_onnx")
    assert not interface.batched
    inputs = build_inputs(interface)
    result = endpoint.infer("fixed_onnx", inputs, interface.outputs)
    (expected,) = _ort(served_repository, "fixed_onnx", inputs)
    assert result.outputs["y"].shape == (3, 8)
    assert np.abs(result.outputs["y"] - expected).max() <= TOLERANCE


def _model_stats(server: LocalTritonServer, model: str) -> dict[str, int]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url)
    stats = client.get_inference_statistics(model)["model_stats"][0]
    client.close()
    return {"inferences": int(stats["inference_count"]), "executions": int(stats["execution_count"])}


def _send_all(server: LocalTritonServer, model: str, requests: list[dict[str, np.ndarray]]) -> list[Any]:
    """Send every request at once over gRPC (async), wait for all, return results in order."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: list[Any] = [None] * len(requests)

    def done(index: int) -> Any:
        return lambda result, error: results.__setitem__(index, error or result)

    for index, request in enumerate(requests):
        tensors = []
        for name, array in request.items():
            tensor = grpcclient.InferInput(
                name, list(array.shape), "FP32" if array.dtype == np.float32 else "INT64"
            )
            tensor.set_data_from_numpy(array)
            tensors.append(tensor)
        client.async_infer(model, tensors, callback=done(index))
    deadline = time.monotonic() + 60
    while any(r is None for r in results) and time.monotonic() < deadline:
        time.sleep(0.01)
    client.close()
    assert all(r is not None for r in results), "requests never answered"
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, errors[0]
    return results


def test_concurrent_requests_are_batched_and_split_back(
    triton_server: LocalTritonServer, served_repository: Path
) -> None:
    before = _model_stats(triton_server, "mlp_onnx")
    rng = np.random.default_rng(42)
    batches = [rng.standard_normal((int(rng.integers(1, 4)), 16)).astype(np.float32) for _ in range(48)]
    results = _send_all(triton_server, "mlp_onnx", [{"input": batch} for batch in batches])
    (expected,) = _ort(served_repository, "mlp_onnx", {"input": np.concatenate(batches)})
    got = np.concatenate([r.as_numpy("logits") for r in results])
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= TOLERANCE  # every request got its own rows back, in order
    after = _model_stats(triton_server, "mlp_onnx")
    inferences = after["inferences"] - before["inferences"]
    executions = after["executions"] - before["executions"]
    assert inferences == sum(b.shape[0] for b in batches)
    assert executions < len(batches), "the dynamic batcher never combined requests"


def test_mixed_sequence_lengths_in_one_batch(
    triton_server: LocalTritonServer, served_repository: Path
) -> None:
    rng = np.random.default_rng(7)
    requests = [
        {
            "input_ids": rng.integers(0, 1000, size=(2, seq)).astype(np.int64),
            "attention_mask": np.ones((2, seq), dtype=np.int64),
        }
        for seq in (4, 9, 4, 9, 6, 4, 9, 4)
    ]
    results = _send_all(triton_server, "text_onnx", requests)
    for request, result in zip(requests, results, strict=True):
        (expected,) = _ort(served_repository, "text_onnx", request)
        assert np.abs(result.as_numpy("embedding") - expected).max() <= TOLERANCE


def test_torchscript_wrapper_matches_torch(triton_server: LocalTritonServer, served_repository: Path) -> None:
    torch = pytest.importorskip("torch")
    endpoint = _endpoint(triton_server, "http")
    interface = endpoint.interface("mlp_torchscript")
    for batch_size in (1, 7):
        inputs = build_inputs(interface, batch_size=batch_size, seed=batch_size)
        result = endpoint.infer("mlp_torchscript", inputs, interface.outputs)
        module = torch.jit.load(str(served_repository / "mlp_torchscript" / "1" / "model.pt"))
        expected = module(torch.from_numpy(inputs["input"])).detach().numpy()
        assert np.abs(result.outputs["logits"] - expected).max() <= TOLERANCE


def test_every_committed_example_model_loads_and_answers(triton_server: LocalTritonServer) -> None:
    committed = sorted(
        p.name for p in (ROOT / "model_repository").iterdir() if (p / "config.pbtxt").is_file()
    )
    assert committed
    states = {m.name: m.state for m in triton_server.repository_index()}
    assert {name: states.get(name) for name in committed} == {name: "READY" for name in committed}
    endpoint = _endpoint(triton_server, "http")
    for name in committed:
        interface = endpoint.interface(name)
        result = endpoint.infer(name, build_inputs(interface), interface.outputs)
        assert all(np.isfinite(v).all() for v in result.outputs.values())


def test_live_reload_swaps_config_and_refuses_bad_one(triton_server: LocalTritonServer) -> None:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(triton_server.http_url)
    original = client.get_model_config("mlp_onnx")
    candidate = json.loads(json.dumps(original))
    candidate["dynamic_batching"] = {"preferred_batch_size": [2, 4], "max_queue_delay_microseconds": 1234}
    try:
        triton_server.load_model("mlp_onnx", config=candidate)
        live = client.get_model_config("mlp_onnx")
        assert live["dynamic_batching"]["max_queue_delay_microseconds"] == 1234
        assert live["dynamic_batching"]["preferred_batch_size"] == [2, 4]
        bad = json.loads(json.dumps(original))
        bad["dynamic_batching"] = {"preferred_batch_size": [64]}
        with pytest.raises(ModelLoadError):
            triton_server.load_model("mlp_onnx", config=bad)
        assert client.is_model_ready("mlp_onnx")
        assert client.get_model_config("mlp_onnx")["dynamic_batching"]["max_queue_delay_microseconds"] == 1234
    finally:
        triton_server.load_model("mlp_onnx", config=original)
        client.close()


runner = CliRunner()


def test_infer_cli_over_both_protocols(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    result = runner.invoke(app, ["infer", "mlp_onnx", "--url", triton_server.http_url, "--batch-size", "7"])
    assert result.exit_code == 0, result.stderr
    assert "logits" in result.stdout and "[7, 4]" in result.stdout and " ms " in result.stdout
    result = runner.invoke(app, ["infer", "text_onnx", "--url", triton_server.grpc_url, "--protocol", "grpc",
                                 "--shape", "input_ids=12", "--shape", "attention_mask=12"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "[1, 12]" in result.stdout and "[1, 32]" in result.stdout


def test_infer_cli_with_input_files(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    good = tmp_path / "good.npy"
    np.save(good, np.ones((2, 16), dtype=np.float32))
    result = runner.invoke(
        app, ["infer", "mlp_onnx", "--url", triton_server.http_url, "--input", f"input={good}"]
    )
    assert result.exit_code == 0, result.stderr
    assert "[2, 4]" in result.stdout
    wrong_dtype = tmp_path / "wrong.npy"
    np.save(wrong_dtype, np.ones((2, 16), dtype=np.float64))
    result = runner.invoke(
        app, ["infer", "mlp_onnx", "--url", triton_server.http_url, "--input", f"input={wrong_dtype}"]
    )
    assert result.exit_code == 1
    assert "holds float64" in result.stderr
    wrong_shape = tmp_path / "shape.npy"
    np.save(wrong_shape, np.ones((2, 15), dtype=np.float32))
    result = runner.invoke(
        app, ["infer", "mlp_onnx", "--url", triton_server.http_url, "--input", f"input={wrong_shape}"]
    )
    assert result.exit_code == 1
    assert "has shape [2, 15]" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["infer", "nope"], "model 'nope'"),
        (["infer", "mlp_onnx", "--batch-size", "99"], "exceeds the model's max_batch_size 32"),
        (["infer", "mlp_onnx", "--shape", "bogus=3"], "has no input 'bogus'"),
        (["infer", "text_onnx", "--shape", "input_ids=3x4"], "has 2 dims"),
    ],
)
def test_infer_cli_errors(triton_server: LocalTritonServer, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--url", triton_server.http_url])
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_infer_cli_server_down() -> None:
    with socket.socket() as sock:  # bound, never listening: refused, and no one else can take the port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        result = runner.invoke(app, ["infer", "mlp_onnx", "--url", f"127.0.0.1:{port}"])
    assert result.exit_code == 1
    assert "cannot reach Triton" in result.stderr


@pytest.fixture
def broken_repository(tmp_path: Path) -> Path:
    repo = tmp_path / "broken"
    shutil.copytree(
        ROOT / "model_repository" / "mlp_onnx",
        repo / "mlp_onnx",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(repo / "mlp_onnx", repo / "corrupt_onnx")
    config = repo / "corrupt_onnx" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "mlp_onnx"', 'name: "corrupt_onnx"'))
    (repo / "corrupt_onnx" / "1" / "model.onnx").write_bytes(b"definitely not onnx")
    return repo


@pytest.mark.slow
def test_failed_model_reports_the_servers_reason(broken_repository: Path) -> None:
    server = LocalTritonServer(broken_repository, http_port=0, grpc_port=0, metrics_port=0)
    with pytest.raises(ModelLoadError) as info:
        server.start()
    assert list(info.value.reasons) == ["corrupt_onnx"]
    assert "Protobuf parsing failed" in info.value.reasons["corrupt_onnx"]
    assert not server.is_running()
    assert _shm_regions(server.shm_prefix) == []

    # Loading only the good model works.
    with LocalTritonServer(
        broken_repository, http_port=0, grpc_port=0, metrics_port=0, models=["mlp_onnx"]
    ) as ok:
        assert ok.ready_models() == ["mlp_onnx"]


@pytest.mark.slow
def test_serve_cli_prints_one_line_per_failed_model(broken_repository: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tritongen", "serve", str(broken_repository),
         "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip() and "starting" not in line]
    assert any(line.startswith("model corrupt_onnx:") and "Protobuf parsing failed" in line for line in lines)
    assert lines[-1].startswith("error: 1 model(s) failed to load: corrupt_onnx")


@pytest.mark.slow
def test_serve_skip_failed_serves_the_others_and_names_each_left_out(broken_repository: Path) -> None:
    """One model Triton cannot load, one lint refuses before the server starts; the good one is served."""
    shutil.copytree(broken_repository / "mlp_onnx", broken_repository / "misfit")
    config = broken_repository / "misfit" / "config.pbtxt"
    text = config.read_text().replace('name: "mlp_onnx"', 'name: "misfit"')
    config.write_text(re.sub(r"preferred_batch_size: \[[^\]]*\]", "preferred_batch_size: [ 4096 ]", text))
    process = _serve(broken_repository, "--skip-failed")
    try:
        lines = _wait_for_line(process, "Ctrl-C to stop")
        assert any("models ready: mlp_onnx\n" in line for line in lines), lines
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    stderr = process.stderr.read() if process.stderr else ""
    left_out = [line for line in stderr.splitlines() if line.startswith("left out ")]
    assert len(left_out) == 2, stderr
    assert left_out[0].startswith("left out corrupt_onnx: ") and "Protobuf parsing failed" in left_out[0]
    assert left_out[1].startswith("left out misfit: ") and "(lint: dynamic-batching." in left_out[1]


def test_unknown_model_subset_is_named(served_repository: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        LocalTritonServer(
            served_repository, http_port=0, grpc_port=0, metrics_port=0, models=["ghost"]
        ).start()
    assert info.value.reasons == {"ghost": "not in the model repository"}


@pytest.mark.slow
def test_two_servers_on_auto_ports(served_repository: Path) -> None:
    with (
        LocalTritonServer(
            served_repository, http_port=0, grpc_port=0, metrics_port=0, models=["mlp_onnx"]
        ) as a,
        LocalTritonServer(
            served_repository, http_port=0, grpc_port=0, metrics_port=0, models=["mlp_onnx"]
        ) as b,
    ):
        ports_a = {a.http_port, a.grpc_port, a.metrics_port}
        ports_b = {b.http_port, b.grpc_port, b.metrics_port}
        assert len(ports_a) == 3 and not ports_a & ports_b
        assert a.shm_prefix != b.shm_prefix
        for server in (a, b):
            endpoint = _endpoint(server, "http")
            interface = endpoint.interface("mlp_onnx")
            assert endpoint.infer("mlp_onnx", build_inputs(interface, batch_size=2), interface.outputs)
            endpoint.close()
    assert _shm_regions(a.shm_prefix) == [] and _shm_regions(b.shm_prefix) == []


def test_port_in_use_is_named(served_repository: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = LocalTritonServer(served_repository, http_port=0, grpc_port=port, metrics_port=0)
        with pytest.raises(ServerError) as info:
            server.start()
    assert f"port {port} (grpc)" in info.value.message
    assert "--grpc-port" in (info.value.hint or "")
    assert server.pid is None


def test_missing_repository() -> None:
    with pytest.raises(Exception, match="does not exist"):
        LocalTritonServer(Path("/nonexistent/repo"), http_port=0, grpc_port=0, metrics_port=0).start()


def _serve(repo: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tritongen", "serve", str(repo),
         "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _wait_for_line(process: subprocess.Popen[str], needle: str, timeout_s: float = 120) -> list[str]:
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(
        f"{needle!r} never printed; got {seen!r}; stderr {process.stderr.read() if process.stderr else ''}"
    )


@pytest.fixture
def serve_process(served_repository: Path) -> Iterator[subprocess.Popen[str]]:
    process = _serve(served_repository, "--models", "mlp_onnx")
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_sigint_to_serve_stops_everything(serve_process: subprocess.Popen[str]) -> None:
    lines = _wait_for_line(serve_process, "Ctrl-C to stop")
    assert any("models ready: mlp_onnx" in line for line in lines)
    assert any("HTTP" in line and "http://127.0.0.1:" in line for line in lines)
    children = psutil.Process(serve_process.pid).children(recursive=True)
    assert any(child.name() == "tritonserver" for child in children)
    prefix = f"tritongen_{serve_process.pid}_"
    assert _shm_regions(prefix), "the Python backend should hold shared memory while serving"
    serve_process.send_signal(signal.SIGINT)
    assert serve_process.wait(timeout=60) == 0
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
    assert _shm_regions(prefix) == []


@pytest.mark.slow
def test_server_dies_with_its_parent(served_repository: Path, tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tritongen.server.local import LocalTritonServer\n"
        f"s = LocalTritonServer(Path({str(served_repository)!r}), http_port=0, grpc_port=0, metrics_port=0,"
        " models=['mlp_onnx'])\n"
        "s.start()\n"
        "print(s.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    server = psutil.Process(server_pid)
    family = [server, *server.children(recursive=True)]
    parent.kill()
    parent.wait()
    _, alive = psutil.wait_procs(family, timeout=15)
    assert alive == [], f"left behind: {alive}"
    # The server got SIGTERM, so it stopped its stubs and freed their shared memory itself.
    assert _shm_regions(f"tritongen_{parent.pid}_") == []


def test_an_admin_key_restricts_the_repository_api_but_not_inference(
    served_repository: Path, tmp_path: Path
) -> None:
    """What `serve` does on a non-loopback address: repository, shm, logging and trace APIs need the key."""
    import urllib.error
    import urllib.request

    from tritongen.client.repository import ADMIN_HEADER, RepositoryControl
    from tritongen.server.settings import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("127.0.1.1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("::")
    key = "k-" + os.urandom(8).hex()
    with LocalTritonServer(
        served_repository, http_port=0, grpc_port=0, metrics_port=0, models=["mlp_onnx"], admin_key=key
    ) as server:
        assert server.ready_models() == ["mlp_onnx"]  # the supervisor itself sends the key

        def status(path: str, headers: dict[str, str]) -> int:
            request = urllib.request.Request(
                f"http://{server.http_url}{path}", data=b"{}", method="POST", headers=headers
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return int(response.status)
            except urllib.error.HTTPError as e:
                return int(e.code)

        assert status("/v2/repository/index", {}) == 403
        assert status("/v2/repository/index", {ADMIN_HEADER: "wrong"}) == 403
        assert status("/v2/repository/index", {ADMIN_HEADER: key}) == 200
        assert status("/v2/repository/models/mlp_onnx/unload", {}) == 403
        # tritongen's own clients: without the key, one line saying to pass it; with it, the API works.
        control = RepositoryControl(server.http_url)
        with pytest.raises(ServerError) as info:
            control.unload("mlp_onnx")
        assert "--admin-key" in (info.value.hint or "")
        control.close()
        control = RepositoryControl(server.http_url, admin_key=key)
        assert control.index()["mlp_onnx"] == "READY"
        control.close()
        tune = ["tune", "mlp_onnx", "--repo", str(served_repository), "--url", server.http_url,
                "--max-batch-size", "16", "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0",
                "--instances", "1", *QUICK_RUNS, "--concurrency", "2", "--rounds", "1",
                "--finalists", "1"]  # fmt: skip
        refused = runner.invoke(app, [*tune, "--out", str(tmp_path / "r")], env={"TRITONGEN_ADMIN_KEY": ""})
        assert refused.exit_code == 1 and "--admin-key" in refused.stderr
        tuned = runner.invoke(app, [*tune, "--out", str(tmp_path / "t")], env={"TRITONGEN_ADMIN_KEY": key})
        assert tuned.exit_code == 0, tuned.stderr
        endpoint = TritonEndpoint(server.http_url)
        try:
            interface = endpoint.interface("mlp_onnx")
            result = endpoint.infer("mlp_onnx", build_inputs(interface, 2), interface.outputs)
            assert result.outputs[interface.outputs[0]].shape[0] == 2
        finally:
            endpoint.close()


def test_grpc_fork_support_is_off_unless_asked() -> None:
    """Children forked while gRPC calls are in flight must not restart gRPC's poller before exec."""
    import os
    import subprocess
    import sys

    probe = "import tritongen, os; print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])"
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "false"
    env["GRPC_ENABLE_FORK_SUPPORT"] = "true"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "true"
