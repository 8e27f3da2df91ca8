"""Load generators side by side against one embedded Triton server: wrk, plain Locust, tritongen.

Each generator drives the same trivial identity model with the same request, one after
another, at the same concurrency, for the same time. Reported per generator: requests/s
(its own measurement), requests the server counted (statistics API), and the
generator's CPU-seconds per 1000 requests (its process tree, from rusage).

Usage: ``.venv/bin/python bench/loadgen.py [--concurrency 16] [--seconds 20] [--rounds 2]
[--json bench/results/loadgen.json]``. Needs ``wrk`` (Debian package ``wrk``; installed
with apt-get when missing and running as root).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from provenance import RESULTS, write_result

from tritongen.client.endpoint import TritonEndpoint
from tritongen.metrics.statistics import StatsSnapshot
from tritongen.server.local import LocalTritonServer
from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
MODEL = "identity"

IDENTITY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]))
        return responses
"""

WRK_LUA = """
wrk.method = "POST"
local f = io.open("{body}", "rb")
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = "{header_length}"
"""


def write_identity_repository(root: Path, instances: int) -> Path:
    """A repository with one Python-backend identity model (FP32 [1, 16], no batching)."""
    model = root / MODEL
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(IDENTITY_PY)
    config = ModelConfig(
        name=MODEL,
        backend="python",
        max_batch_size=0,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[1, 16])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[1, 16])],
        instance_group=[InstanceGroup(count=instances, kind="KIND_CPU")],
    )
    (model / "config.pbtxt").write_text(render_config(config))
    return root


def ensure_wrk() -> str:
    """Path of wrk, installing Debian's package when missing (as root)."""
    found = shutil.which("wrk")
    if found:
        return found
    print("wrk not found; installing Debian's wrk package")
    subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True, capture_output=True)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("wrk is required: apt-get install wrk")
    return found


def binary_request(workdir: Path) -> tuple[Path, int]:
    """The request body in Triton's binary tensor extension, written to a file for wrk."""
    raw = np.ones((1, 16), dtype=np.float32).tobytes()
    header = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [1, 16], "datatype": "FP32", "parameters": {"binary_data_size": 64}}
            ],
            "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
        },
        separators=(",", ":"),
    ).encode()
    path = workdir / "body.bin"
    path.write_bytes(header + raw)
    return path, len(header)


def timed(argv: list[str], cwd: Path) -> tuple[str, float]:
    """Run ``argv`` to completion; return its output and the CPU-seconds of its whole process tree.

    Forked workers may be reaped by init rather than by their parent, so rusage of
    children would miss them: the tree is sampled every 50 ms instead, and each
    process's last reading is summed.
    """
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True)
        root = psutil.Process(process.pid)
        cpu_by_pid: dict[int, float] = {}
        while process.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                tree = []
            for proc in tree:
                try:
                    times = proc.cpu_times()
                    cpu_by_pid[proc.pid] = times.user + times.system
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.05)
        out.seek(0)
        output = out.read()
    if process.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({process.returncode}): {output[-2000:]}")
    return output, sum(cpu_by_pid.values())


def run_wrk(server: LocalTritonServer, workdir: Path, concurrency: int, seconds: int) -> float:
    """Wrk with one thread (the 2-core machine also runs the server); returns its requests/s."""
    body, header_length = binary_request(workdir)
    script = workdir / "post.lua"
    script.write_text(WRK_LUA.format(body=body, header_length=header_length))
    url = f"http://{server.http_url}/v2/models/{MODEL}/infer"
    output, cpu = timed(
        [ensure_wrk(), "-t1", f"-c{concurrency}", f"-d{seconds}s", "-s", str(script), url], workdir
    )
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    if not match or "Non-2xx" in output:
        raise SystemExit(f"wrk output not understood or errors:\n{output}")
    RUN_CPU["wrk"] = cpu
    return float(match.group(1))


def run_plain_locust(server: LocalTritonServer, workdir: Path, concurrency: int, seconds: int) -> float:
    """One plain Locust process with tritonclient.http users; returns its requests/s."""
    prefix = workdir / "plain"
    argv = [
        str(BIN / "locust"), "-f", str(HERE / "plain_locustfile.py"), "--headless", "--only-summary",
        "-u", str(concurrency), "-r", str(concurrency), "-t", f"{seconds}s",
        "--host", f"http://{server.http_url}", "--csv", str(prefix), "--loglevel", "WARNING",
    ]  # fmt: skip
    _, cpu = timed(argv, workdir)
    RUN_CPU["plain_locust"] = cpu
    with open(f"{prefix}_stats.csv") as stats:
        row = next(r for r in csv.DictReader(stats) if r["Name"] == "Aggregated")
    if int(row["Failure Count"]):
        raise SystemExit(f"plain Locust saw {row['Failure Count']} failures")
    return float(row["Requests/s"])


def run_tritongen(
    server: LocalTritonServer, workdir: Path, concurrency: int, seconds: int, processes: int
) -> float:
    """``tritongen loadtest`` as a user runs it; returns its measured requests/s."""
    out = workdir / f"tritongen-{processes}.json"
    argv = [
        str(BIN / "tritongen"), "loadtest", MODEL, "--url", server.http_url,
        "--metrics-url", server.metrics_url, "--concurrency", str(concurrency),
        "--processes", str(processes), "--warmup", "2s", "--duration", f"{seconds - 2}s",
        "--max-duration", f"{seconds - 2}s", "--window", "2s", "--json", str(out),
    ]  # fmt: skip
    _, cpu = timed(argv, workdir)
    RUN_CPU[f"tritongen_p{processes}"] = cpu
    run = json.loads(out.read_text())["runs"][0]
    if run["errors"]:
        raise SystemExit(f"tritongen saw errors: {run['errors_by_kind']}")
    return float(run["qps"])


RUN_CPU: dict[str, float] = {}


def main() -> None:
    """Run every generator ``--rounds`` times, interleaved, and report medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--instances", type=int, default=1, help="Identity model instances on the server.")
    parser.add_argument("--json", type=Path, default=RESULTS / "loadgen.json")
    args = parser.parse_args()

    ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-bench-"))
    repo = write_identity_repository(workdir / "repo", args.instances)
    samples: dict[str, list[dict[str, float]]] = {}
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        endpoint = TritonEndpoint(server.http_url)
        generators: dict[str, Any] = {
            "wrk": lambda: run_wrk(server, workdir, args.concurrency, args.seconds),
            "plain_locust": lambda: run_plain_locust(server, workdir, args.concurrency, args.seconds),
            "tritongen_p1": lambda: run_tritongen(server, workdir, args.concurrency, args.seconds, 1),
            "tritongen_p2": lambda: run_tritongen(server, workdir, args.concurrency, args.seconds, 2),
        }
        for round_index in range(args.rounds):
            for name, run in generators.items():
                before = StatsSnapshot.from_json(endpoint.statistics(MODEL)).success
                rps = run()
                served = StatsSnapshot.from_json(endpoint.statistics(MODEL)).success - before
                cpu_per_1000 = RUN_CPU[name] / served * 1000
                samples.setdefault(name, []).append(
                    {
                        "requests_per_s": rps,
                        "server_requests": served,
                        "cpu_s_per_1000_requests": cpu_per_1000,
                    }
                )
                print(
                    f"round {round_index + 1} {name:14s} {rps:9.0f} req/s  {cpu_per_1000:6.3f} CPU-s/1000 req"
                )
        endpoint.close()
    shutil.rmtree(workdir, ignore_errors=True)

    rps = {name: statistics.median(r["requests_per_s"] for r in runs) for name, runs in samples.items()}
    cpu = {
        name: statistics.median(r["cpu_s_per_1000_requests"] for r in runs) for name, runs in samples.items()
    }
    best = max(("tritongen_p1", "tritongen_p2"), key=lambda name: rps[name])
    ratios = {name: rps[name] / rps["wrk"] for name in rps}
    print()
    print(f"{'generator':14s} {'req/s':>9s} {'x wrk':>7s} {'CPU-s/1000 req':>15s}")
    for name in rps:
        print(f"{name:14s} {rps[name]:9.0f} {ratios[name]:7.2f} {cpu[name]:15.3f}")
    verdict = {
        "tritongen_best": best,
        "tritongen_vs_wrk": ratios[best],
        "target_vs_wrk": 0.8,
        "meets_throughput_target": ratios[best] >= 0.8,
        "cpu_below_plain_locust": cpu[best] < cpu["plain_locust"],
    }
    print(f"\ntritongen ({best}) drives {ratios[best]:.2f}x wrk's requests/s (target >= 0.8)")
    generators = {
        name: {
            "requests_per_s": rps[name],
            "vs_wrk": ratios[name],
            "vs_wrk_per_round": [
                run["requests_per_s"] / wrk["requests_per_s"]
                for run, wrk in zip(samples[name], samples["wrk"], strict=True)
            ],
            "cpu_s_per_1000_requests": cpu[name],
            "rounds": samples[name],
        }
        for name in rps
    }
    document = {
        "schema": "tritongen.bench.loadgen/1",
        "concurrency": args.concurrency,
        "instances": args.instances,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "generators": generators,
        "verdict": verdict,
    }
    print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
