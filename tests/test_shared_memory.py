"""``--shared-memory system``: tensors through regions registered with the real server, and cleaned up.

The locustfile's shared-memory helpers are driven in a subprocess (importing Locust patches
the interpreter) against the served ``shm_echo`` model, whose outputs tell what the server
read (``y = x + 1``) and show what it wrote into the output region. Load tests check that the
regions are registered while the load runs and neither registered nor in ``/dev/shm`` after.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.locust_process import LocustArgs
from tritongen.loadtest.result import LoadTestReport
from tritongen.loadtest.runner import run_load_test
from tritongen.loadtest.shared_memory import (
    PROBE_SUFFIX,
    check_shared_memory,
    output_sizes,
    prepare_shared_memory,
    probe_shared_memory,
    region_owner,
    url_host,
)
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import SHM_DIR, LocalTritonServer

from support.shm_model import SHM_MODEL

ROOT = Path(__file__).resolve().parents[1]
LOADTESTS = ROOT / "loadtests"
"""The locustfile's folder: its package ``tritonload`` imports from there."""

PROBE = r"""
import json, os, sys, urllib.request

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload import shared_memory as shm
from tritonload.http_wire import RawHttpConnection
from tritonload.server_api import host_port, interface_http
import numpy as np
from grpc.experimental import gevent as grpc_gevent

grpc_gevent.init_gevent()
http, grpc_target, prefix, model = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
host, port = host_port(http, 8000)


def registered():
    with urllib.request.urlopen(f"http://{http}/v2/systemsharedmemory/status", timeout=10) as response:
        return sorted(r["name"] for r in json.loads(response.read()))


meta, max_batch = interface_http(host, port, model)
try:
    shm.output_byte_sizes(meta, max_batch, 2, 0)
    refused = None
except ValueError as e:
    refused = str(e)
sizes = shm.output_byte_sizes(meta, max_batch, 2, 64)
rng = np.random.default_rng(7)
x = rng.standard_normal((2, 16)).astype(np.float32)
n = np.arange(10, dtype=np.int32).reshape(2, 5)
steps = [{"x": x, "n": n}, {"x": x * 2, "n": n + 100}]


def http_session():
    def build(inputs, outputs):
        return shm.shm_http_request(model, host, port, inputs, outputs)

    return shm.ShmSession(shm.HttpShmControl(host, port, 10.0), prefix + "h", steps, sizes, build)


def grpc_session():
    from tritonclient.grpc import service_pb2_grpc
    import grpc

    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(grpc_target))

    def build(inputs, outputs):
        return shm.shm_grpc_request(model, inputs, outputs)

    session = shm.ShmSession(shm.GrpcShmControl(stub, 10.0), prefix + "g", steps, sizes, build)
    return session, stub


def outputs_of(session, slot):
    region = slot.region.map
    at_y, at_z = session.output_offsets["y"], session.output_offsets["z"]
    y = np.frombuffer(region[at_y : at_y + x.nbytes], dtype=np.float32).reshape(x.shape)
    z = np.frombuffer(region[at_z : at_z + n.nbytes], dtype=np.int32).reshape(n.shape)
    return y, z


report = {"refused": refused, "sizes": sizes}
for protocol in ("http", "grpc"):
    if protocol == "http":
        session = http_session()
        connection = RawHttpConnection(host, port, 10.0)
        send = lambda request: connection.roundtrip(request)
    else:
        session, stub = grpc_session()
        send = lambda request: (stub.ModelInfer(request, timeout=10.0), 200)[1]
    session.reserve()
    slot = session.take(create=False)
    checks = {"none_free": session.take(create=False) is None, "steps": []}
    for i, step in enumerate(steps):
        status = send(slot.requests[i])
        y, z = outputs_of(session, slot)
        checks["steps"].append({
            "status": status,
            "y_is_x_plus_1": bool(np.array_equal(y, step["x"] + 1)),
            "z_is_n": bool(np.array_equal(z, step["n"])),
        })
    checks["registered_during"] = registered()
    checks["files_during"] = sorted(f for f in os.listdir("/dev/shm") if f.startswith(prefix))
    session.close()
    checks["registered_after"] = registered()
    checks["files_after"] = sorted(f for f in os.listdir("/dev/shm") if f.startswith(prefix))
    report[protocol] = checks
print(json.dumps(report))
"""


@pytest.mark.triton
def test_outputs_come_back_through_the_output_region(triton_server: LocalTritonServer) -> None:
    prefix = f"tritongen_{os.getpid()}_probe{os.urandom(2).hex()}_"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(LOADTESTS),
            triton_server.http_url,
            triton_server.grpc_url,
            prefix,
            SHM_MODEL,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "'z'" in report["refused"] and "--triton-output-shm-size" in report["refused"]
    assert report["sizes"] == {"y": 2 * 16 * 4, "z": 64}  # y from the metadata, z the fallback
    for protocol, tag in (("http", "h"), ("grpc", "g")):
        checks = report[protocol]
        assert checks["none_free"], "the one slot was taken: none is free"
        # Two steps, each read by the server from the input region and written to the output region.
        assert checks["steps"] == [{"status": 200, "y_is_x_plus_1": True, "z_is_n": True}] * 2
        base = f"{prefix}{tag}"
        ours = [name for name in checks["registered_during"] if name.startswith(base)]
        assert len(ours) == 2 and ours[0].endswith("_in") and ours[1].endswith("_out0"), ours
        assert checks["files_during"] == ours
        assert not [name for name in checks["registered_after"] if name.startswith(base)]
        assert checks["files_after"] == []


class RegionWatch:
    """The server's registered regions, polled in a thread while a load test runs."""

    def __init__(self, server: LocalTritonServer) -> None:
        self.server = server
        self.seen: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(0.2):
            self.seen.update(_registered(self.server))

    def __enter__(self) -> RegionWatch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()


def _registered(server: LocalTritonServer) -> list[str]:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/systemsharedmemory/status", timeout=10) as r:
        return sorted(region["name"] for region in json.loads(r.read()))


def _register_leftover(server: LocalTritonServer) -> str:
    """A region left registered (and in /dev/shm) by a tritongen process that is gone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    name = f"tritongen_{gone.pid}_deadbeef_{gone.pid}_in"
    (SHM_DIR / name).write_bytes(b"\0" * 64)
    body = json.dumps({"key": f"/{name}", "offset": 0, "byte_size": 64}).encode()
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/systemsharedmemory/region/{name}/register", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
    return name


def _spec(server: LocalTritonServer, protocol: str, model: str, **extra: object) -> LoadSpec:
    settings: dict[str, object] = {
        "levels": (2,),
        "duration_s": 2.0,
        "warmup_s": 1.0,
        "window_s": 1.0,
        "max_duration_s": 2.0,
        "shared_memory": "system",
        **extra,
    }
    url = server.http_url if protocol == "http" else server.grpc_url
    return LoadSpec(model=model, url=url, protocol=protocol, metrics_url=server.metrics_url, **settings)  # type: ignore[arg-type]


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize(
    ("protocol", "model", "extra"),
    [
        ("http", "mlp_onnx", {}),  # closed loop: the HTTP engine, one output region per connection
        ("grpc", SHM_MODEL, {"output_shared_memory_size": 4096, "batch_size": 2}),
        ("http", "mlp_onnx", {"mode": "rate", "levels": (100.0,)}),  # open loop: a region per connection
    ],
)
def test_load_test_through_shared_memory(
    triton_server: LocalTritonServer, protocol: str, model: str, extra: dict[str, object]
) -> None:
    leftover = _register_leftover(triton_server)
    with RegionWatch(triton_server) as watch:
        report = run_load_test(_spec(triton_server, protocol, model, **extra))
    run = report.runs[0]
    assert run.status == "ok" and run.errors == 0, (run.reason, run.errors_by_kind)
    assert run.requests > 20
    assert report.to_json()["shared_memory"] == "system"
    assert LoadTestReport.from_json(report.to_json()).shared_memory == "system"
    # While it ran, each Locust process had its input region and output regions registered.
    ours = {name for name in watch.seen if region_owner(name) == os.getpid()}
    assert any(name.endswith("_in") for name in ours), watch.seen
    assert any(name.endswith("_out0") for name in ours), watch.seen
    # Afterwards: none registered, none in /dev/shm, and the dead process's leftover is gone too.
    after = _registered(triton_server)
    assert not ours & set(after)
    assert leftover not in after
    assert not [name for name in ours | {leftover} if (SHM_DIR / name).exists()]


@pytest.mark.triton
def test_output_of_unknown_size_is_refused(triton_server: LocalTritonServer) -> None:
    with pytest.raises(ConfigError, match=r"output 'z' .*--output-shared-memory-size"):
        run_load_test(_spec(triton_server, "http", SHM_MODEL))


@pytest.mark.triton
def test_streaming_model_is_refused(triton_server: LocalTritonServer) -> None:
    from support.streaming_model import STREAMING_MODEL

    with pytest.raises(ConfigError, match="--shared-memory system covers one-response models"):
        run_load_test(_spec(triton_server, "grpc", STREAMING_MODEL))


@pytest.mark.triton
def test_a_sequence_model_is_refused(triton_server: LocalTritonServer) -> None:
    from support.sequence_model import SEQUENCE_MODEL

    with pytest.raises(ConfigError, match="--shared-memory system covers one-response models"):
        run_load_test(_spec(triton_server, "http", SEQUENCE_MODEL, sequences=True))


def _ours(server: LocalTritonServer) -> tuple[list[str], list[str]]:
    """This process's regions: those registered with ``server``, and those in /dev/shm."""
    mine = f"tritongen_{os.getpid()}_"
    files = sorted(path.name for path in SHM_DIR.glob(f"{mine}*"))
    return [name for name in _registered(server) if name.startswith(mine)], files


@pytest.mark.triton
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_check_before_a_run_has_the_server_map_a_region(
    triton_server: LocalTritonServer, protocol: str, tmp_path: Path
) -> None:
    """The server maps a probe region; afterwards nothing is registered and /dev/shm holds no leftover."""
    url = triton_server.http_url if protocol == "http" else triton_server.grpc_url
    endpoint = TritonEndpoint(url, protocol, timeout_s=10)  # type: ignore[arg-type]
    try:
        before = _ours(triton_server)
        prefix = prepare_shared_memory(endpoint, endpoint.interface("mlp_onnx"), 1, "system", None)
        assert prefix.startswith(f"tritongen_{os.getpid()}_")
        assert _ours(triton_server) == before
        # A region the server cannot open (here: created where its /dev/shm is not, as for a
        # server in a container without shared IPC) fails the check in one line.
        name = f"{prefix}{PROBE_SUFFIX}"
        with pytest.raises(ConfigError) as caught:
            probe_shared_memory(endpoint, name, shm_dir=tmp_path)
        assert "\n" not in caught.value.one_line()
        assert "the server cannot map this host's shared memory" in caught.value.message
        assert "--ipc=host" in str(caught.value.hint) and "--shared-memory none" in str(caught.value.hint)
        assert list(tmp_path.iterdir()) == [] and _ours(triton_server) == before
    finally:
        endpoint.close()


def test_a_server_on_another_host_is_refused_in_one_line() -> None:
    result = CliRunner().invoke(
        app,
        ["loadtest", "mlp_onnx", "--url", "10.20.30.40:8000", "--shared-memory", "system"],
    )
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "--shared-memory system needs a server on this host, not 10.20.30.40" in lines[0]


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("localhost:8001", "localhost"),
        ("http://127.0.0.1:8000/", "127.0.0.1"),
        ("[::1]:8000", "::1"),
        ("grpc://example.org:8001", "example.org"),
        ("localhost", "localhost"),
    ],
)
def test_url_host(url: str, host: str) -> None:
    assert url_host(url) == host


def test_shared_memory_option_checks() -> None:
    check_shared_memory("system", "localhost:8000", None)
    check_shared_memory("system", "127.0.0.2:8000", 4096)
    check_shared_memory("none", "example.org:8000", None)  # nothing to check without shared memory
    with pytest.raises(ConfigError, match=r"needs a server on this host, not example\.org"):
        check_shared_memory("system", "example.org:8000", None)
    with pytest.raises(ConfigError, match="--shared-memory 'cuda' is unknown"):
        check_shared_memory("cuda", "localhost:8000", None)
    with pytest.raises(ConfigError, match="must be positive"):
        check_shared_memory("system", "localhost:8000", 0)


def test_output_sizes() -> None:
    outputs = [
        {"name": "y", "datatype": "FP16", "shape": [-1, 3, 5]},
        {"name": "s", "datatype": "BYTES", "shape": [-1, 2]},
    ]
    assert output_sizes(outputs[:1], batched=True, rows=4, fallback=None) == {"y": 4 * 3 * 5 * 2}
    assert output_sizes(outputs, batched=True, rows=4, fallback=100) == {"y": 120, "s": 100}
    with pytest.raises(ConfigError, match=r"output 's' \(BYTES 4x2\)"):
        output_sizes(outputs, batched=True, rows=4, fallback=None)
    with pytest.raises(ConfigError, match="output 'y'"):  # unbatched: -1 is a dynamic dim
        output_sizes(outputs[:1], batched=False, rows=4, fallback=None)


def test_locust_arguments() -> None:
    args = LocustArgs(
        host="localhost:8000",
        model="m",
        protocol="http",
        users=1,
        processes=1,
        run_time_s=5,
        window_s=1.0,
        t0=time.time(),
        results=Path("w.jsonl"),
        inputs=Path("i.npz"),
        shared_memory="system",
        shm_prefix="tritongen_1_ab_",
        output_shm_size=4096,
    )
    argv = args.argv()
    at = argv.index("--triton-shared-memory")
    assert argv[at : at + 4] == ["--triton-shared-memory", "system", "--triton-shm-prefix", "tritongen_1_ab_"]
    assert argv[argv.index("--triton-output-shm-size") + 1] == "4096"
    plain = LocustArgs(**{**args.__dict__, "shared_memory": "none"}).argv()
    assert "--triton-shared-memory" not in plain and "--triton-output-shm-size" not in plain


def _bench_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tables_shm", ROOT / "bench" / "tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_bench_block_renders_each_contender_and_the_paired_ratios() -> None:
    tables = _bench_tables()

    def summary(median: float) -> dict[str, float]:
        return {"median": median, "ci_low": median * 0.9, "ci_high": median * 1.1}

    contenders = {
        f"{protocol}_{kind}": {
            "summary": {
                "infer_per_s": summary(400.0 if kind == "system" else 40.0),
                "p99_us": summary(12_000.0),
                "generator_cpu_ms_per_request": summary(0.08 if kind == "system" else 7.0),
                "server_cpu_ms_per_request": summary(1.2 if kind == "system" else 8.9),
            }
        }
        for protocol in ("http", "grpc")
        for kind in ("none", "system")
    }
    ratio = {"estimate": 10.0, "ci_low": 5.0, "ci_high": 20.0, "significant": True}
    doc = {
        "tensor_mib": 4.0,
        "settings": {"concurrency": 2, "duration_s": 6.0, "rounds": 3},
        "rounds_completed": 3,
        "contenders": contenders,
        "paired": {"http": {"infer_per_s": ratio}, "grpc": {}},
        "status": "aborted",
        "reason": "the server went away",
    }
    lines = tables.render_shared_memory(doc)
    text = "\n".join(lines)
    assert "4 MiB each way per request" in lines[0] and "3 interleaved rounds of 6 s" in lines[0]
    assert (
        "| HTTP | system shared memory | 400 [360, 440] | 12.0 [10.8, 13.2] | 0.080 [0.072, 0.088] |" in text
    )
    assert "| gRPC | in the request | 40 [36, 44] |" in text
    assert "HTTP, shared memory / in the request, paired by round: throughput 10.00× [5.00, 20.00]" in text
    assert "gRPC, shared memory / in the request, paired by round: throughput –" in text
    assert lines[-1] == "The rounds stopped early (aborted): the server went away."
    assert any(block.name == "shared_memory" for block in tables.BLOCKS)
