"""Reclaiming leftovers never takes what a live server uses, whatever pid the names hold.

A region's name holds the pid of the process that started its server; that process may be gone
while the server lives (it exited, or handed the server on), or live in another PID namespace
sharing ``/dev/shm``. Each server here has regions naming a pid that is gone, as such a server's
have, and ``reclaim_leftovers`` (what every server start runs) must leave it serving.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient

from tritongen.server.leftovers import SHM_DIR, SHM_PREFIX, mapped_regions, reclaim_leftovers
from tritongen.server.local import LocalTritonServer

GONE = 2**22 + 12345
"""Above the largest pid_max Linux allows: no process has this pid."""

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


@pytest.fixture
def orphan_named_server(tmp_path: Path) -> Iterator[LocalTritonServer]:
    """A live server on an echo model whose regions name a process that is gone."""
    (tmp_path / "echo" / "1").mkdir(parents=True)
    (tmp_path / "echo" / "1" / "model.py").write_text(ECHO_MODEL)
    (tmp_path / "echo" / "config.pbtxt").write_text(CONFIG)
    server = LocalTritonServer(tmp_path, http_port=0, grpc_port=0, metrics_port=0)
    server.shm_prefix = f"{SHM_PREFIX}{GONE}_{uuid.uuid4().hex[:8]}_"
    with server:
        yield server


def _echo(server: LocalTritonServer, value: float) -> float:
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("x", [1], "FP32")
    tensor.set_data_from_numpy(np.array([value], dtype=np.float32))
    return float(client.infer("echo", [tensor]).as_numpy("y")[0])


def _stubs(server: LocalTritonServer) -> list[psutil.Process]:
    assert server.pid is not None
    return psutil.Process(server.pid).children(recursive=True)


def test_a_live_servers_stubs_and_regions_are_kept(orphan_named_server: LocalTritonServer) -> None:
    server = orphan_named_server
    stubs = _stubs(server)
    regions = sorted(path.name for path in SHM_DIR.glob(f"{server.shm_prefix}*"))
    assert stubs and regions

    removed = reclaim_leftovers()

    assert [name for name in removed if name.startswith(server.shm_prefix)] == []
    assert not {f"stub pid {stub.pid}" for stub in stubs} & set(removed)
    assert all(stub.is_running() for stub in stubs)
    assert sorted(path.name for path in SHM_DIR.glob(f"{server.shm_prefix}*")) == regions
    assert _echo(server, 3.0) == 3.0
    server.load_model("echo")  # a new stub and region of the same server
    assert _echo(server, 4.0) == 4.0


def test_a_region_registered_with_a_live_server_is_kept_until_no_one_maps_it(
    orphan_named_server: LocalTritonServer,
) -> None:
    server = orphan_named_server
    name = f"{SHM_PREFIX}{GONE}_{uuid.uuid4().hex[:8]}_in"
    path = SHM_DIR / name
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, 64)
    finally:
        os.close(fd)
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        client.register_system_shared_memory(name, f"/{name}", 64)
        assert name in mapped_regions()
        assert name not in reclaim_leftovers() and path.exists()
        client.unregister_system_shared_memory(name)
        assert name in reclaim_leftovers() and not path.exists()
    finally:
        path.unlink(missing_ok=True)
