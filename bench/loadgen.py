"""Load generators side by side against one embedded Triton server: wrk, plain Locust, tritongen.

Each generator drives the same trivial identity model with the same request, one after
another, at the same concurrency, for the same time. Reported per generator: requests/s
(its own measurement), requests the server counted (statistics API), and the
generator's CPU-seconds per 1000 requests the server counted (the CPU time of its load
processes: wrk, or the ``locust`` processes of the tree, sampled with psutil).

``--locustfile PATH`` measures another version of the locustfile (e.g. the one before a
change) side by side with the current one, in the same interleaved rounds: both run as the
``locust`` command line ``tritongen loadtest`` builds (``locustfile_given_pN`` and
``locustfile_current_pN``), their requests/s from the windows after a 2 s warm-up.

Usage: ``.venv/bin/python bench/loadgen.py [--concurrency 16] [--seconds 20] [--rounds 2]
[--locustfile PATH] [--json bench/results/loadgen.json]``. Needs ``wrk`` (``make wrk``
installs Debian's package).
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
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from provenance import RESULTS, require_committed_tree, write_result

from tritongen.client.address import ServerAddress
from tritongen.client.endpoint import TritonEndpoint
from tritongen.loadtest.load_processes import active_processes, load_processes
from tritongen.loadtest.locust_process import LocustArgs, locust_binary, locustfile_path
from tritongen.loadtest.runner import run_load_test
from tritongen.loadtest.spec import LoadSpec
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


def _is_locust(proc: psutil.Process) -> bool:
    try:
        return any("locust" in part for part in proc.cmdline()[:2])
    except psutil.Error:
        return False


def timed(argv: list[str], cwd: Path, only_locust: bool = False) -> tuple[str, float]:
    """Run ``argv`` to completion; return its output and the CPU-seconds of its process tree.

    Forked workers may be reaped by init rather than by their parent, so rusage of
    children would miss them: the tree is sampled every 50 ms instead, and each
    process's last reading is summed. ``only_locust``: count only the ``locust`` processes
    (the load generator, not the ``tritongen`` command that runs it).
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
                if only_locust and proc.pid not in cpu_by_pid and not _is_locust(proc):
                    continue
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
    _, cpu = timed(argv, workdir, only_locust=True)
    RUN_CPU[f"tritongen_p{processes}"] = cpu
    run = json.loads(out.read_text())["runs"][0]
    if run["errors"]:
        raise SystemExit(f"tritongen saw errors: {run['errors_by_kind']}")
    return float(run["qps"])


def tree_cpu(pids: list[int]) -> float:
    """CPU-seconds so far of the processes ``pids`` and their children."""
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for proc in [root, *root.children(recursive=True)]:
                times = proc.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def kept_spec(server: LocalTritonServer, concurrency: int, seconds: float, processes: int) -> LoadSpec:
    """The load test of ``run_kept``: ``seconds`` in all, 2 s of them warm-up, in 2 s windows."""
    return LoadSpec(
        model=MODEL, address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
        levels=(float(concurrency),),
        processes=processes, warmup_s=WARMUP_S, duration_s=seconds - WARMUP_S,
        max_duration_s=seconds - WARMUP_S, window_s=2.0,
    )  # fmt: skip


def run_kept(server: LocalTritonServer, concurrency: int, seconds: int, processes: int) -> float:
    """A run in a Locust process kept up across runs (as a compare's or a tune's runs after the first).

    CPU: the process tree's CPU time during the run alone; its start-up was paid before the
    rounds, by a run not counted.
    """
    pool = active_processes()
    assert pool is not None, "run_kept runs inside load_processes()"
    spec = kept_spec(server, concurrency, seconds, processes)
    before = tree_cpu(pool.service_pids())
    report = run_load_test(spec)
    RUN_CPU[f"tritongen_kept_p{processes}"] = tree_cpu(pool.service_pids()) - before
    (run,) = report.runs
    if report.status != "ok" or run.errors:
        raise SystemExit(f"tritongen (kept) saw errors: {run.errors_by_kind} {run.reason}")
    return float(run.qps)


WARMUP_S = 2.0


def known_options(options: list[str], locustfile: Path) -> list[str]:
    """``options`` less the ``--triton-*`` options (with their values) an older ``locustfile`` lacks.

    The options are declared in the locustfile, or (since it has a package beside it) in
    ``tritonload/options.py`` next to it.
    """
    declaring = [locustfile, locustfile.parent / "tritonload" / "options.py"]
    text = "".join(path.read_text(encoding="utf-8") for path in declaring if path.is_file())
    kept: list[str] = []
    skip = False
    for option in options:
        if skip:
            skip = False
            continue
        declared = re.search(rf'_Option\(\s*"{re.escape(option.removeprefix("--triton-"))}"', text)
        if option.startswith("--triton-") and declared is None:
            skip = True
            continue
        kept.append(option)
    return kept


def run_locustfile(
    server: LocalTritonServer, workdir: Path, concurrency: int, seconds: int, processes: int, locustfile: Path
) -> tuple[float, float]:
    """One ``locustfile`` run with the command line ``tritongen loadtest`` builds; requests/s and CPU-s.

    Requests/s: the windows (1 s) after the warm-up, up to the last full one.
    """
    results, inputs = workdir / "windows.jsonl", workdir / "inputs.npz"
    np.savez(inputs, x=np.ones((1, 16), dtype=np.float32))
    args = LocustArgs(
        host=server.http_url, model=MODEL, protocol="http", users=concurrency, processes=processes,
        run_time_s=seconds, window_s=1.0, t0=float(int(time.time()) + 1), results=results, inputs=inputs,
    )  # fmt: skip
    argv = [str(locust_binary()), "-f", str(locustfile), *known_options(args.options(), locustfile)]
    _, cpu = timed(argv, workdir)
    by_index: dict[int, int] = {}
    for line in results.read_text().splitlines():
        window = json.loads(line)
        if "ok" in window:  # a window (not another line of the master's)
            count = window["ok"] + sum(window["errors"].values())
            by_index[window["index"]] = by_index.get(window["index"], 0) + count
    measured = [i for i in by_index if WARMUP_S <= i < seconds - 1]
    if not measured:
        raise SystemExit(f"{locustfile}: no measured windows")
    return sum(by_index[i] for i in measured) / len(measured), cpu


def locustfile_runs(
    server: LocalTritonServer, workdir: Path, args: argparse.Namespace
) -> dict[str, Callable[[], float]]:
    """The side-by-side runs of ``--locustfile`` and the current locustfile (none without it)."""
    if args.locustfile is None:
        return {}
    runs: dict[str, Callable[[], float]] = {}
    for label, path in (("given", args.locustfile), ("current", locustfile_path())):
        for processes in (1, 2):
            name = f"locustfile_{label}_p{processes}"

            def run(name: str = name, path: Path = path, processes: int = processes) -> float:
                rps, RUN_CPU[name] = run_locustfile(
                    server, workdir, args.concurrency, args.seconds, processes, path
                )
                return rps

            runs[name] = run
    return runs


def side_by_side(rps: dict[str, float], cpu: dict[str, float]) -> dict[str, dict[str, float]]:
    """The current locustfile against ``--locustfile``: ratios of requests/s and of CPU per request."""
    compared = {}
    for processes in (1, 2):
        current, given = f"locustfile_current_p{processes}", f"locustfile_given_p{processes}"
        compared[f"p{processes}"] = {
            "requests_per_s_ratio": rps[current] / rps[given],
            "cpu_s_per_1000_requests_ratio": cpu[current] / cpu[given],
        }
        print(
            f"current locustfile vs given, {processes} process(es): "
            f"{rps[current] / rps[given]:.3f}x req/s, {cpu[current] / cpu[given]:.3f}x CPU per request"
        )
    return compared


RUN_CPU: dict[str, float] = {}


def main() -> None:
    """Run every generator ``--rounds`` times, interleaved, and report medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--instances", type=int, default=1, help="Identity model instances on the server.")
    parser.add_argument(
        "--locustfile", type=Path, help="Another locustfile (e.g. before a change) to measure side by side."
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "loadgen.json")
    args = parser.parse_args()
    require_committed_tree(args.json)

    ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-bench-"))
    repo = write_identity_repository(workdir / "repo", args.instances)
    samples: dict[str, list[dict[str, float]]] = {}
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server, load_processes():
        endpoint = TritonEndpoint(server.http_url)
        generators: dict[str, Any] = {
            "wrk": lambda: run_wrk(server, workdir, args.concurrency, args.seconds),
            "plain_locust": lambda: run_plain_locust(server, workdir, args.concurrency, args.seconds),
            "tritongen_p1": lambda: run_tritongen(server, workdir, args.concurrency, args.seconds, 1),
            "tritongen_p2": lambda: run_tritongen(server, workdir, args.concurrency, args.seconds, 2),
            "tritongen_kept_p1": lambda: run_kept(server, args.concurrency, args.seconds, 1),
            "tritongen_kept_p2": lambda: run_kept(server, args.concurrency, args.seconds, 2),
            **locustfile_runs(server, workdir, args),
        }
        for processes in (1, 2):  # the kept processes' start, paid before the rounds
            run_load_test(replace(kept_spec(server, args.concurrency, 3, processes), warmup_s=0.5))
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
                    f"round {round_index + 1} {name:22s} {rps:9.0f} req/s  {cpu_per_1000:6.3f} CPU-s/1000 req"
                )
        endpoint.close()
    shutil.rmtree(workdir, ignore_errors=True)

    rps = {name: statistics.median(r["requests_per_s"] for r in runs) for name, runs in samples.items()}
    cpu = {
        name: statistics.median(r["cpu_s_per_1000_requests"] for r in runs) for name, runs in samples.items()
    }
    best = max(("tritongen_p1", "tritongen_p2"), key=lambda name: rps[name])
    kept = max(("tritongen_kept_p1", "tritongen_kept_p2"), key=lambda name: rps[name])
    ratios = {name: rps[name] / rps["wrk"] for name in rps}
    print()
    print(f"{'generator':22s} {'req/s':>9s} {'x wrk':>7s} {'CPU-s/1000 req':>15s}")
    for name in rps:
        print(f"{name:22s} {rps[name]:9.0f} {ratios[name]:7.2f} {cpu[name]:15.3f}")
    verdict = {
        "tritongen_best": best,
        "tritongen_vs_wrk": ratios[best],
        "target_vs_wrk": 0.8,
        "meets_throughput_target": ratios[best] >= 0.8,
        "cpu_below_plain_locust": cpu[best] < cpu["plain_locust"],
        "kept_best": kept,
        "kept_vs_wrk": ratios[kept],
        "kept_cpu_vs_wrk": cpu[kept] / cpu["wrk"],
        "target_cpu_vs_wrk": 1.5,
        "meets_cpu_target": cpu[kept] / cpu["wrk"] <= 1.5,
    }
    print(f"\ntritongen ({best}) drives {ratios[best]:.2f}x wrk's requests/s (target >= 0.8)")
    print(
        f"in a kept process ({kept}): {ratios[kept]:.2f}x wrk's requests/s, "
        f"{cpu[kept] / cpu['wrk']:.2f}x its CPU per request (target <= 1.5)"
    )
    if args.locustfile is not None:
        verdict["locustfile_given"] = str(args.locustfile)
        verdict["current_vs_given"] = side_by_side(rps, cpu)
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
