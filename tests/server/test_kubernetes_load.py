"""The in-cluster load test as written: its master prints the merged result and keeps running;
its workers draw different open-loop schedules from one seed.

The master and worker run here with the arguments ``tritongen kubernetes`` writes into their
pods, from the files its ConfigMap carries (written out as the pods' volume mounts them: the
locustfile and its package), with the server's address and the ports made local.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.loadtest.locust_process import locust_binary
from tritongen.server.local import LocalTritonServer

from support.network import free_port
from support.paths import ROOT

runner = CliRunner()
MODEL = "sleep_const"
"""12 ms per request: few requests are in flight when the users stop."""
SUMMARY = re.compile(
    r"^tritongen: (\d+) requests in [\d.]+ s \([\d.]+ req/s\), errors (\d+); p50 \d+ µs, .*p99\.9 \d+ µs; "
    r"max \d+ µs; per worker: (.+)$"
)


def _success_count(server: LocalTritonServer, model: str) -> int:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{model}/stats", timeout=10) as response:
        stats = json.load(response)
    return int(stats["model_stats"][0]["inference_stats"]["success"]["count"])


def _mount_locustfile(out: Path, pod: dict[str, Any], folder: Path) -> tuple[str, Path]:
    """The locustfile ConfigMap written into ``folder`` as ``pod`` mounts it; (its mount path, ``folder``)."""
    (config_map,) = yaml.safe_load_all((out / "loadtest" / "locustfile.yaml").read_text())
    spec = pod["spec"]["template"]["spec"]
    name = config_map["metadata"]["name"]
    (volume,) = [v for v in spec["volumes"] if v.get("configMap", {}).get("name") == name]
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    for item in volume["configMap"]["items"]:
        path = folder / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config_map["data"][item["key"]])
    return mount["mountPath"], folder


def _local_args(
    pod: dict[str, Any], mounted: tuple[str, Path], values: dict[str, str], extra: list[str]
) -> list[str]:
    """A written pod's arguments made local: the locustfile ``mounted`` wrote, ``values``, ``extra``."""
    args = list(pod["spec"]["template"]["spec"]["containers"][0]["args"])
    mount_path, folder = mounted
    locustfile = PurePosixPath(args[args.index("-f") + 1])
    args[args.index("-f") + 1] = str(folder / locustfile.relative_to(mount_path))
    for option, value in values.items():
        args[args.index(option) + 1] = value
    return [*args, *extra]


@pytest.mark.slow
def test_the_in_cluster_master_prints_the_merged_result_and_keeps_running(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    concurrency = 4
    out = tmp_path / "deploy"
    written = runner.invoke(
        app,
        ["kubernetes", str(served_repository), "-o", str(out), "--load-model", MODEL, "--load-workers", "2",
         "--concurrency", str(concurrency), "--duration", "3s", "--warmup", "1s", "--no-validate"],
    )  # fmt: skip
    assert written.exit_code == 0, written.stderr
    master_doc = next(yaml.safe_load_all((out / "loadtest" / "master.yaml").read_text()))
    (worker_doc,) = yaml.safe_load_all((out / "loadtest" / "worker.yaml").read_text())
    port, web = free_port(), free_port()
    master_args = _local_args(
        master_doc,
        _mount_locustfile(out, master_doc, tmp_path / "master-mount"),
        {"--host": triton_server.http_url},
        ["--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--web-host", "127.0.0.1",
         "--web-port", str(web)],
    )  # fmt: skip
    worker_args = _local_args(
        worker_doc,
        _mount_locustfile(out, worker_doc, tmp_path / "worker-mount"),
        {"--host": triton_server.http_url, "--master-host": "127.0.0.1"},
        ["--master-port", str(port)],
    )
    locust = str(locust_binary())
    before = _success_count(triton_server, MODEL)
    logs = [tmp_path / name for name in ("master.log", "worker0.log", "worker1.log")]
    processes = []
    try:
        for log, args in zip(logs, [master_args, worker_args, worker_args], strict=True):
            with log.open("wb") as sink:
                processes.append(subprocess.Popen([locust, *args], stdout=sink, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while not (lines := [ln for ln in logs[0].read_text().splitlines() if SUMMARY.match(ln)]):
            assert processes[0].poll() is None, logs[0].read_text()[-3000:]
            assert time.monotonic() < deadline, logs[0].read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(1.0)
        # The run's figures are in the master's log while the master (and its web UI) stays up.
        assert processes[0].poll() is None
        assert len(lines) == 1
        match = SUMMARY.match(lines[0])
        assert match is not None
        requests, errors, per_worker = match.groups()
        counts = [int(part.rsplit(" ", 1)[1]) for part in per_worker.split(", ")]
        assert len(counts) == 2 and all(n > 0 for n in counts) and sum(counts) == int(requests)
        assert int(errors) == 0
        # The server counted the same requests, but for those in flight when the users stopped
        # (at most one per user; twice that as a margin).
        served = _success_count(triton_server, MODEL) - before
        assert 0 <= served - int(requests) <= 2 * concurrency, (served, requests)
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=10)


PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from locust.runners import WorkerRunner
from tritonload.loops import schedule_seed, worker_key


class Environment:
    def __init__(self, index):
        self.runner = WorkerRunner.__new__(WorkerRunner)
        self.runner.worker_index = index


keys = [worker_key(Environment(i)) for i in (0, 1)]
print(json.dumps({
    "keys": keys,
    "seeds": [schedule_seed(7, key, 0) for key in keys],
    "again": schedule_seed(7, keys[0], 0),
    "users": [schedule_seed(7, keys[0], user) for user in (0, 1)],
    "seed": [schedule_seed(seed, keys[0], 0) for seed in (7, 8)],
}))
"""


def test_two_workers_draw_different_open_loop_schedules_from_one_seed() -> None:
    """In every worker pod Locust is process 1: the schedules' seeds come from the worker's index."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "loadtests")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["keys"] == ["worker-0", "worker-1"]
    assert found["seeds"][0] != found["seeds"][1]  # two workers, one --triton-seed
    assert found["again"] == found["seeds"][0]  # deterministic for a seed and a worker
    assert found["users"][0] != found["users"][1] and found["seed"][0] != found["seed"][1]
