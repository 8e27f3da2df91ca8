"""``compare`` of an LLM: vLLM's own OpenAI server beside vLLM inside Triton, same prompts, same load.

1. The model is converted to the local vLLM model (the engine settings of ``convert``), and
   vLLM's OpenAI server takes the same settings, from the same vLLM environment.
2. Each server is started alone, timed until it serves the model (its cold start).
3. Interleaved rounds (the order alternating): each contender measured under the same LLM load,
   the same prompts (one seed), ``/v1/completions`` to vLLM's server and the generate
   endpoint to Triton; its whole process tree's resident memory sampled meanwhile.
4. Ranked by goodput: Triton over vLLM's server as a paired ratio with its interval, decided
   as ``compare`` decides (different, equivalent, or not decided); the other figures' ratios
   beside it. TensorRT-LLM is a contender on a GPU host only.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tritongen.client.address import ServerAddress
from tritongen.compare.llm.contenders import LABELS, TRITON, VLLM, Contender, LlmCompareReport
from tritongen.compare.llm.figures import goodput_verdict
from tritongen.convert.llm.environment import check_vllm_env, vllm_env_path
from tritongen.convert.llm.formats import LLM_START_TIMEOUT_S, tensorrtllm_build_reason
from tritongen.convert.llm.settings import EngineOptions, EngineSettings
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.runner import run_load_test
from tritongen.loadtest.spec import LoadSpec
from tritongen.pipeline.llm_build import LlmBuildRequest, build_llm_models
from tritongen.server.local import LocalTritonServer
from tritongen.server.vllm_openai import VllmOpenAiServer, VllmServerSettings
from tritongen.stopping import StopRule

Say = Callable[[str], None]


@dataclass(frozen=True)
class LlmCompareRequest:
    """What ``compare MODEL_DIR`` is asked for."""

    source: Path
    name: str
    work: Path
    """Where the local model's repository is written (``work/model_repository``)."""
    spec: LoadSpec
    """The load of every run: one level, an LLM load (its API, URL and model are set per contender)."""
    rounds: int = 3
    rule: StopRule | None = None
    engine: EngineOptions = field(default_factory=EngineOptions)
    vllm_env: Path | None = None


def vllm_arguments(settings: EngineSettings) -> tuple[str, ...]:
    """The flags of vLLM's server for the engine settings the Triton model has."""
    arguments = [
        "--max-model-len", str(settings.max_model_len),
        "--max-num-seqs", str(settings.max_num_seqs),
        "--max-num-batched-tokens", str(settings.max_num_batched_tokens),
        "--enable-chunked-prefill" if settings.chunked_prefill else "--no-enable-chunked-prefill",
        "--enable-prefix-caching" if settings.prefix_caching else "--no-enable-prefix-caching",
        "--enforce-eager",
    ]  # fmt: skip
    if settings.kv_cache_bytes is not None:
        arguments += ["--kv-cache-memory-bytes", str(settings.kv_cache_bytes)]
    if settings.kv_cache_fraction is not None:
        arguments += ["--gpu-memory-utilization", str(settings.kv_cache_fraction)]
    return tuple(arguments)


class TreeMemory:
    """The peak resident memory of a process and its descendants, sampled from a thread."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        """Not sampling yet."""
        self.pid = pid
        self.interval_s = interval_s
        self.peak_bytes: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Read the tree's resident memory now, keep the peak."""
        try:
            root = psutil.Process(self.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for process in processes:
            try:
                total += int(process.memory_info().rss)
            except psutil.Error:
                continue
        self.peak_bytes = total if self.peak_bytes is None else max(self.peak_bytes, total)

    def __enter__(self) -> TreeMemory:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="tritongen-tree-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)


def run_llm_compare(
    request: LlmCompareRequest, say: Say, stop: threading.Event | None = None
) -> LlmCompareReport:
    """Convert, start both servers (timed), measure them in interleaved rounds (see the module).

    Raises:
        TritongenError: the source, the settings or the vLLM environment is refused, or a server
            does not start.
    """
    started = time.perf_counter()
    env = check_vllm_env(vllm_env_path(request.vllm_env))
    say("converting the model to the local vLLM model")
    repo = request.work / "model_repository"
    built = build_llm_models(
        LlmBuildRequest(request.source, request.name, repo, engine=request.engine, force=True, vllm_env=env),
        progress=say,
    )
    report = LlmCompareReport(settings=built.settings)
    vllm, triton = Contender(VLLM), Contender(TRITON)
    report.contenders = {VLLM: vllm, TRITON: triton}
    reason = tensorrtllm_build_reason()
    report.contenders["triton-tensorrtllm"] = Contender(
        "triton-tensorrtllm", unavailable=f"on a GPU host only ({reason or 'no GPU here'})"
    )
    settings = VllmServerSettings(request.source, request.name, env, vllm_arguments(built.settings))
    say("starting vLLM's OpenAI server (minutes on a CPU)")
    with VllmOpenAiServer(settings) as server:
        vllm.cold_start_s = server.ready_s
        say("starting the embedded Triton server with the vLLM model")
        model = f"{request.name}_vllm"
        begun = time.perf_counter()
        triton_server = LocalTritonServer(
            repo,
            http_port=0,
            grpc_port=0,
            metrics_port=0,
            models=[model],
            load_timeout_s=LLM_START_TIMEOUT_S,
        )
        with triton_server:
            triton.cold_start_s = time.perf_counter() - begun
            specs = {
                VLLM: _spec(request.spec, "openai-completions", server.url, request.name),
                TRITON: _spec(
                    request.spec, "triton-generate", triton_server.http_url, model, triton_server.metrics_url
                ),
            }
            pids = {VLLM: server.pid, TRITON: triton_server.pid}
            report.rounds = _rounds(request, specs, pids, report, say, stop)
    report.wall_s = time.perf_counter() - started
    return report


def _spec(base: LoadSpec, api: str, url: str, model: str, metrics_url: str | None = None) -> LoadSpec:
    """The load of one contender: the same prompts (same seed), its API, address and model."""
    assert base.llm is not None
    llm: LlmLoad = dataclasses.replace(base.llm, api=api)  # type: ignore[arg-type]
    if llm.openai:
        address = ServerAddress.openai(url, metrics_url)
    else:
        address = ServerAddress.parse(url, "http", metrics_url)
    return dataclasses.replace(base, model=model, address=address, llm=llm, rounds=1)


def _rounds(
    request: LlmCompareRequest,
    specs: dict[str, LoadSpec],
    pids: dict[str, int | None],
    report: LlmCompareReport,
    say: Say,
    stop: threading.Event | None,
) -> int:
    """Interleaved rounds until the cap or (``auto``) until goodput is decided; the rounds run."""
    deadline = None
    if request.rule is not None and request.rule.max_minutes:
        deadline = time.monotonic() + request.rule.max_minutes * 60
    memory = {key: TreeMemory(pid) for key, pid in pids.items() if pid is not None}
    done = 0
    while done < request.rounds:
        order = [VLLM, TRITON] if done % 2 == 0 else [TRITON, VLLM]
        for key in order:
            say(f"round {done + 1}: {LABELS[key]}")
            with memory[key]:
                result = run_load_test(specs[key], stop=stop)
            report.contenders[key].runs.extend(result.runs[-1:])
            report.contenders[key].memory_peak_bytes = memory[key].peak_bytes
        done += 1
        verdict = goodput_verdict(report, request.rule, final=done >= request.rounds, last=request.rounds)
        say(f"round {done}: Triton over vLLM's server, goodput {verdict.text()}")
        if request.rule is not None and verdict.decision is not None:
            break
        if (deadline is not None and time.monotonic() > deadline) or (stop is not None and stop.is_set()):
            break
    return done
