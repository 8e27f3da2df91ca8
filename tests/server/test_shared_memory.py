"""System shared memory on the real server: inputs and outputs through regions, load tests, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tritongen.client.address import ServerAddress
from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.result import LoadTestReport
from tritongen.loadtest.runner import run_load_test
from tritongen.loadtest.shared_memory import (
    PROBE_SUFFIX,
    prepare_shared_memory,
    probe_shared_memory,
    region_owner,
)
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.leftovers import SHM_DIR
from tritongen.server.local import LocalTritonServer

from support.paths import ROOT
from support.shm_model import SHM_MODEL

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
    return LoadSpec(model=model, address=ServerAddress.parse(url, protocol, server.metrics_url), **settings)  # type: ignore[arg-type]


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


def test_output_of_unknown_size_is_refused(triton_server: LocalTritonServer) -> None:
    with pytest.raises(ConfigError, match=r"output 'z' .*--output-shared-memory-size"):
        run_load_test(_spec(triton_server, "http", SHM_MODEL))


def test_streaming_model_is_refused(triton_server: LocalTritonServer) -> None:
    from support.streaming_model import STREAMING_MODEL

    with pytest.raises(ConfigError, match="--shared-memory system covers one-response models"):
        run_load_test(_spec(triton_server, "grpc", STREAMING_MODEL))


def test_a_sequence_model_is_refused(triton_server: LocalTritonServer) -> None:
    from support.sequence_model import SEQUENCE_MODEL

    with pytest.raises(ConfigError, match="--shared-memory system covers one-response models"):
        run_load_test(_spec(triton_server, "http", SEQUENCE_MODEL, sequences=True))


def _ours(server: LocalTritonServer) -> tuple[list[str], list[str]]:
    """This process's regions: those registered with ``server``, and those in /dev/shm."""
    mine = f"tritongen_{os.getpid()}_"
    files = sorted(path.name for path in SHM_DIR.glob(f"{mine}*"))
    return [name for name in _registered(server) if name.startswith(mine)], files


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_check_before_a_run_has_the_server_map_a_region(
    triton_server: LocalTritonServer, protocol: str, tmp_path: Path
) -> None:
    """The server maps a probe region; afterwards nothing is registered and /dev/shm holds no leftover."""
    url = triton_server.http_url if protocol == "http" else triton_server.grpc_url
    endpoint = TritonEndpoint(url, protocol, timeout_s=10)  # type: ignore[arg-type]
    try:
        before = _ours(triton_server)
        config = endpoint.model_config("mlp_onnx")
        prefix = prepare_shared_memory(endpoint, endpoint.interface("mlp_onnx"), config, 1, None)
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
