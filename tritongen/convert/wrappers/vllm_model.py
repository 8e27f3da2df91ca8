"""Triton Python-backend model running vLLM's engine (written by tritongen).

A decoupled model: each request's ``text_input`` is answered token by token, one response
per token as the engine makes it (``stream`` true, the default), or in one response
(``stream`` false); then the final flag. The sampling settings come from the optional inputs
(``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``seed``, ``min_tokens``,
``ignore_eos``, ``stop``), from the request's parameters (the generate endpoint's keys that
name no input) and from ``sampling_parameters`` (a JSON object of vLLM's ``SamplingParams``).
The response holding the last token also holds the usage, named as OpenAI's:
``prompt_tokens``, ``completion_tokens`` and ``finish_reason``. A request whose client went away is aborted in
the engine. The engine's running and waiting requests, its KV cache use, its preemptions and
prefix-cache lookups are Triton custom metrics (``vllm:num_requests_running`` …, labelled
with the model and version).

The engine's settings are the config's parameters (``max_model_len``, ``max_num_seqs``,
``max_num_batched_tokens``, ``enable_chunked_prefill``, ``enable_prefix_caching``,
``kv_cache_memory_bytes`` or ``gpu_memory_utilization``, ``enforce_eager``, ``dtype``,
``tensor_parallel_size``); the weights and tokenizer are the folder ``hf`` beside this file.
It runs in the vLLM environment the ``EXECUTION_ENV_PATH`` parameter names, and needs
nothing of tritongen. A start that fails says the engine's own last error line.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import locale
import os
import re
import threading
import time
from collections import deque
from typing import Any

import numpy as np

try:  # Present only inside Triton's Python backend.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - imported by tests outside Triton
    pb_utils = None

WEIGHTS_DIR = "hf"
ENGINE_SETTINGS: dict[str, type] = {
    "max_model_len": int,
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "enable_chunked_prefill": bool,
    "enable_prefix_caching": bool,
    "kv_cache_memory_bytes": int,
    "gpu_memory_utilization": float,
    "enforce_eager": bool,
    "dtype": str,
    "tensor_parallel_size": int,
}
"""The config parameters that are engine arguments, with their types."""
SAMPLING_INPUTS = ("max_tokens", "temperature", "top_p", "top_k", "seed", "min_tokens", "ignore_eos", "stop")
"""The optional inputs that are sampling settings."""
SAMPLING_KEYS = frozenset(
    (
        *SAMPLING_INPUTS,
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "min_p",
        "stop_token_ids",
        "n",
    )
)
"""The sampling settings a request may give (as inputs, parameters or in ``sampling_parameters``)."""
OTHER_KEYS = frozenset(("stream", "sampling_parameters", "text_input"))
ERROR_LINE = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception)): (\S.*)$")
GENERIC_ERRORS = ("See root cause above", "initialization failed", "EngineDeadError")
"""What the engine's front end says about a failed start: the cause is in the engine core's lines."""
STATS_INTERVAL_S = 0.25
"""The custom metrics are updated at most this often (each update is a call to the server)."""
WATCH_INTERVAL_S = 0.1
"""How often requests that have produced nothing yet (queued, in prefill) are checked for clients that
went away; a request that streams is checked at each of its outputs."""


class StderrTail:
    """This process's standard error (fd 2) kept flowing to where it went, its last lines held.

    The engine core runs in a child process that inherits fd 2: its traceback, the reason an
    engine did not start, reaches the log and :meth:`last_error`.
    """

    def __init__(self, lines: int = 400) -> None:
        """Put a pipe in front of fd 2 and copy it through from a thread."""
        self.lines: deque[str] = deque(maxlen=lines)
        self.original = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.reader = read
        threading.Thread(target=self._copy, daemon=True).start()

    def _copy(self) -> None:
        pending = b""
        while chunk := os.read(self.reader, 65536):
            os.write(self.original, chunk)
            pending += chunk
            *complete, pending = pending.split(b"\n")
            self.lines.extend(line.decode("utf-8", "replace") for line in complete)

    def last_error(self) -> str | None:
        """The last line that names a Python exception (``ValueError: …``), not a generic one."""
        time.sleep(0.2)  # what the failing child wrote last is still in the pipe
        for line in reversed(self.lines):
            found = ERROR_LINE.search(line)
            if found and not any(generic in line for generic in GENERIC_ERRORS):
                return f"{found.group(1)}: {found.group(2).strip()}"
        return None


def flag(text: str) -> bool:
    """A config parameter's truth value."""
    return text.strip().lower() in ("1", "true", "yes", "on")


def engine_arguments(parameters: dict[str, str], weights: str) -> dict[str, Any]:
    """The engine's arguments: the weights, and every engine setting the config gives."""
    arguments: dict[str, Any] = {"model": weights, "tokenizer": weights, "disable_log_stats": True}
    for name, kind in ENGINE_SETTINGS.items():
        text = parameters.get(name, "").strip()
        if text:
            arguments[name] = flag(text) if kind is bool else kind(text)
    return arguments


def scalar(tensor: Any) -> Any:
    """The one value of an input tensor, a Python value (bytes decoded)."""
    values = tensor.as_numpy().reshape(-1)
    if values.size == 0:
        return None
    value = values[0] if values.size == 1 else values.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [v.decode("utf-8") if isinstance(v, bytes) else v for v in value]
    return value.item() if hasattr(value, "item") else value


def request_settings(request: Any) -> tuple[str, dict[str, Any], bool]:
    """A request's prompt, sampling settings and whether it streams.

    Raises:
        ValueError: no prompt, a setting vLLM does not take, or ``sampling_parameters`` not a
            JSON object.
    """
    settings: dict[str, Any] = {}
    parameters = json.loads(request.parameters() or "{}")
    for key, value in parameters.items():
        if not key.startswith("triton_"):
            settings[key] = value
    given = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
    if given is not None:
        extra = json.loads(scalar(given) or "{}")
        if not isinstance(extra, dict):
            raise ValueError("sampling_parameters must be a JSON object")
        settings.update(extra)
    for name in (*SAMPLING_INPUTS, "stream"):
        tensor = pb_utils.get_input_tensor_by_name(request, name)
        if tensor is not None:
            settings[name] = scalar(tensor)
    prompt = pb_utils.get_input_tensor_by_name(request, "text_input")
    if prompt is None:
        raise ValueError("the request has no text_input")
    stream = settings.pop("stream", True)
    unknown = sorted(set(settings) - SAMPLING_KEYS)
    if unknown:
        raise ValueError(
            f"unknown setting {unknown[0]!r}: the model takes {', '.join(sorted(SAMPLING_KEYS))}"
        )
    if isinstance(settings.get("stop"), str):
        settings["stop"] = [settings["stop"]]
    return str(scalar(prompt)), settings, bool(flag(str(stream)) if isinstance(stream, str) else stream)


def text_tensor(name: str, text: str) -> Any:
    """A one-element BYTES tensor."""
    return pb_utils.Tensor(name, np.array([text.encode("utf-8")], dtype=np.object_))


def usage_tensors(prompt_tokens: int, output_tokens: int, finish_reason: str | None) -> list[Any]:
    """The usage outputs of an answer's last response."""
    return [
        pb_utils.Tensor("prompt_tokens", np.array([prompt_tokens], dtype=np.int32)),
        pb_utils.Tensor("completion_tokens", np.array([output_tokens], dtype=np.int32)),
        text_tensor("finish_reason", finish_reason or ""),
    ]


class EngineMetrics:
    """The engine's figures as Triton custom metrics, named as vLLM names its own."""

    GAUGES = (
        ("vllm:num_requests_running", "requests in the engine's running batch"),
        ("vllm:num_requests_waiting", "requests waiting for the engine"),
        ("vllm:kv_cache_usage_perc", "the KV cache's used fraction (0-1)"),
    )
    COUNTERS = (
        ("vllm:num_preemptions_total", "requests preempted (their KV cache given up)"),
        ("vllm:prefix_cache_queries_total", "prompt tokens looked up in the prefix cache"),
        ("vllm:prefix_cache_hits_total", "prompt tokens found in the prefix cache"),
        ("vllm:prompt_tokens_total", "prompt tokens prefilled"),
        ("vllm:generation_tokens_total", "tokens generated"),
    )

    def __init__(self, labels: dict[str, str]) -> None:
        """One metric per figure, labelled with the model and version."""
        self.families: list[Any] = []  # a family must outlive its metrics
        self.metrics: dict[str, Any] = {}
        for kind, table in (
            (pb_utils.MetricFamily.GAUGE, self.GAUGES),
            (pb_utils.MetricFamily.COUNTER, self.COUNTERS),
        ):
            for name, description in table:
                family = pb_utils.MetricFamily(name=name, description=description, kind=kind)
                self.families.append(family)
                self.metrics[name] = family.Metric(labels=labels)
        self.gauges: dict[str, float] = {}
        self.increments: dict[str, float] = dict.fromkeys((name for name, _ in self.COUNTERS), 0.0)
        self.flushed = 0.0
        self.lock = threading.Lock()

    def record(self, scheduler: Any, iteration: Any) -> None:
        """Take one engine step's figures; flush them at most every ``STATS_INTERVAL_S``."""
        with self.lock:
            if scheduler is not None:
                self.gauges["vllm:num_requests_running"] = scheduler.num_running_reqs
                self.gauges["vllm:num_requests_waiting"] = scheduler.num_waiting_reqs
                self.gauges["vllm:kv_cache_usage_perc"] = scheduler.kv_cache_usage
                prefix = scheduler.prefix_cache_stats
                self.increments["vllm:prefix_cache_queries_total"] += prefix.queries
                self.increments["vllm:prefix_cache_hits_total"] += prefix.hits
            if iteration is not None:
                self.increments["vllm:num_preemptions_total"] += iteration.num_preempted_reqs
                self.increments["vllm:prompt_tokens_total"] += iteration.num_prompt_tokens
                self.increments["vllm:generation_tokens_total"] += iteration.num_generation_tokens
        if time.monotonic() - self.flushed >= STATS_INTERVAL_S:
            self.flush()

    def idle(self) -> None:
        """No request left: the running and waiting gauges read 0."""
        with self.lock:
            self.gauges["vllm:num_requests_running"] = 0
            self.gauges["vllm:num_requests_waiting"] = 0
        self.flush()

    def flush(self) -> None:
        """Write the figures gathered since the last flush to the server."""
        with self.lock:
            gauges, self.gauges = self.gauges, {}
            increments = {name: value for name, value in self.increments.items() if value}
            self.increments = dict.fromkeys(self.increments, 0.0)
            self.flushed = time.monotonic()
        try:
            for name, value in gauges.items():
                self.metrics[name].set(float(value))
            for name, value in increments.items():
                self.metrics[name].increment(float(value))
        except Exception as e:  # a figure lost must never stop the engine's output loop
            pb_utils.Logger.log_warn(f"vLLM's figures not published: {e}")


def stat_logger_factory(metrics: EngineMetrics) -> Any:
    """A vLLM stat-logger factory feeding ``metrics`` (vLLM imported here, in its environment)."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class TritonStatLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(self, scheduler_stats: Any, iteration_stats: Any, *args: Any, **kwargs: Any) -> None:
            metrics.record(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            pass

    return TritonStatLogger


class TritonPythonModel:
    """vLLM's engine behind Triton's Python backend, decoupled (see the module)."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Start the engine on an event loop of its own; a start that fails says the engine's last error."""
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")  # the stub's locale is ASCII; vLLM reads UTF-8
        self.config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(self.config):
            raise pb_utils.TritonModelException("the vLLM model must be decoupled (model_transaction_policy)")
        parameters = {k: v.get("string_value", "") for k, v in self.config.get("parameters", {}).items()}
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        for name, value in (
            ("HF_HUB_OFFLINE", "1"),
            ("TRANSFORMERS_OFFLINE", "1"),
            ("VLLM_NO_USAGE_STATS", "1"),
        ):
            os.environ.setdefault(name, value)
        if parameters.get("kv_cache_memory_bytes", "").strip():
            os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override the config's size
        self.stderr = StderrTail()
        self.metrics = EngineMetrics({"model": args["model_name"], "version": args["model_version"]})
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True, name="vllm-loop").start()
        arguments = engine_arguments(parameters, os.path.join(version_dir, WEIGHTS_DIR))
        started = time.perf_counter()
        try:
            self.engine = asyncio.run_coroutine_threadsafe(self._start(arguments), self.loop).result()
        except Exception as e:
            self.loop.call_soon_threadsafe(self.loop.stop)
            line = self.stderr.last_error() or f"{type(e).__name__}: {e}".splitlines()[0]
            raise pb_utils.TritonModelException(f"vLLM's engine did not start: {line}") from None
        pb_utils.Logger.log_info(f"vLLM's engine started in {time.perf_counter() - started:.1f} s")
        self.ids = itertools.count()
        self.live: dict[str, tuple[Any, asyncio.Task[None]]] = {}
        self.watcher = asyncio.run_coroutine_threadsafe(self._watch(), self.loop)

    async def _start(self, arguments: dict[str, Any]) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        engine_args = AsyncEngineArgs(**arguments)
        return AsyncLLM.from_engine_args(engine_args, stat_loggers=[stat_logger_factory(self.metrics)])

    def execute(self, requests: list[Any]) -> None:
        """Start answering each request on the engine's loop; the answers go through their senders."""
        for request in requests:
            asyncio.run_coroutine_threadsafe(self._begin(request), self.loop)

    async def _begin(self, request: Any) -> None:
        """Answer ``request`` in a task of its own, watched for its client going away."""
        request_id = str(next(self.ids))
        sender = request.get_response_sender()
        task = asyncio.get_running_loop().create_task(self._answer(request, sender, request_id))
        self.live[request_id] = (sender, task)
        task.add_done_callback(lambda _: self._done(request_id))

    def _done(self, request_id: str) -> None:
        self.live.pop(request_id, None)
        if not self.live:
            self.metrics.idle()

    async def _watch(self) -> None:
        """Cancel the task of each request whose client went away (the engine aborts it)."""
        while True:
            await asyncio.sleep(WATCH_INTERVAL_S)
            for sender, task in list(self.live.values()):
                if not task.done() and sender.is_cancelled():
                    task.cancel()

    async def _answer(self, request: Any, sender: Any, request_id: str) -> None:
        """Stream the engine's output for one request; errors go to the client as the request's error."""
        try:
            prompt, settings, stream = request_settings(request)
            from vllm import SamplingParams
            from vllm.sampling_params import RequestOutputKind

            kind = RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY
            params = SamplingParams(**settings, output_kind=kind)
            await self._generate(sender, prompt, params, request_id)
        except asyncio.CancelledError:
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        except Exception as e:  # a bad setting or an engine error fails this request only
            message = f"{type(e).__name__}: {e}".splitlines()[0]
            error = pb_utils.TritonError(message)
            sender.send(
                pb_utils.InferenceResponse(output_tensors=[], error=error),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    async def _generate(self, sender: Any, prompt: str, params: Any, request_id: str) -> None:
        """Send each output of the engine as it comes; the last, with the usage, carries the final flag."""
        produced = 0
        async for output in self.engine.generate({"prompt": prompt}, params, request_id):
            if sender.is_cancelled():  # the client left: stop at once, not at the watcher's next look
                await self.engine.abort(request_id)
                raise asyncio.CancelledError
            completion = output.outputs[0]
            produced += len(completion.token_ids)
            tensors = [text_tensor("text_output", completion.text)]
            if not output.finished:
                sender.send(pb_utils.InferenceResponse(output_tensors=tensors))
                continue
            prompt_tokens = len(output.prompt_token_ids or ())
            tensors += usage_tensors(prompt_tokens, produced, completion.finish_reason)
            sender.send(
                pb_utils.InferenceResponse(output_tensors=tensors),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    def finalize(self) -> None:
        """Stop the engine and its loop."""
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.shutdown()
        if getattr(self, "loop", None) is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
