"""A decoupled Python-backend text model: the ``text_input``/``text_output`` convention of LLM backends.

Each request's ``text_input`` (a string) is answered token by token: ``max_tokens`` tokens
(its optional INT32 input, else ``DEFAULT_TOKENS``), each one response whose ``text_output``
is one word, the first ``first_ms`` after the request arrived and then one every ``gap_ms``
(the model's parameters; each due at a fixed time from the arrival, so a late wake-up does
not shift the ones after it), then the final flag. Requests stream from threads of their
own, so requests in flight overlap as on a real server. Served through Triton's
``generate``/``generate_stream`` endpoints and gRPC streams alike; the truth its figures are
checked against is known: time to first token ``first_ms``, every gap ``gap_ms``. Its
``whole`` copy answers in one response, when the last token is due.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tritongen.server.local import LocalTritonServer
from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

TEXT_MODEL = "text_tokens"
WHOLE_TEXT_MODEL = "text_whole"
"""The text model answering each request in one response (:func:`whole_text_model`)."""
STAMPED_TEXT_MODEL = "text_stamped"
"""The text model whose every token says when it was sent: ``word@SECONDS`` (:func:`stamped_text_model`)."""
RECORDING_TEXT_MODEL = "text_recording"
"""The text model that records each request's text (:func:`recording_text_model`)."""
DEFAULT_TOKENS = 8
FIRST_MS, GAP_MS = 40, 15

MODEL_PY = """
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

DEFAULT_TOKENS = {default_tokens!r}


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.first_s = float(parameters["first_ms"]["string_value"]) / 1000
        self.gap_s = float(parameters["gap_ms"]["string_value"]) / 1000
        self.whole = parameters["whole"]["string_value"] == "1"
        self.stamp = parameters["stamp"]["string_value"] == "1"
        record = parameters.get("record_path", {{}}).get("string_value")
        self.record = open(record, "a", buffering=1) if record else None

    def execute(self, requests):
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            if self.record is not None:
                said = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
                self.record.write(json.dumps({{"text": said}}) + "\\n")
            limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            count = int(limit.as_numpy().reshape(-1)[0]) if limit is not None else DEFAULT_TOKENS
            args = (request.get_response_sender(), text, count, time.perf_counter())
            threading.Thread(target=self._stream, args=args, daemon=True).start()
        return None

    def _stream(self, sender, text, count, start):
        words = (text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)).split() or ["x"]
        if self.whole:
            self._answer_whole(sender, words, count, start)
            return
        for index in range(max(count, 0)):
            wait = start + self.first_s + index * self.gap_s - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            if sender.is_cancelled():
                break
            word = words[index % len(words)]
            # the send's time on the steady clock every process on this machine reads
            word = (f"{{word}}@{{time.perf_counter():.7f}} " if self.stamp else f"{{word}} ").encode()
            output = pb_utils.Tensor("text_output", np.array([word], dtype=np.object_))
            sender.send(pb_utils.InferenceResponse([output]))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _answer_whole(self, sender, words, count, start):
        wait = start + self.first_s + (max(count, 1) - 1) * self.gap_s - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        text = "".join(f"{{words[index % len(words)]}} " for index in range(max(count, 0)))
        output = pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))
        sender.send(pb_utils.InferenceResponse([output]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


def write_text_model(
    model_dir: Path,
    first_ms: int = FIRST_MS,
    gap_ms: int = GAP_MS,
    whole: bool = False,
    stamp: bool = False,
    record: Path | None = None,
) -> Path:
    """The text model: decoupled, no batching, one instance (requests overlap in threads).

    ``whole``: each answer is one response holding every token, sent when the last is due
    (what Triton's ``generate`` endpoint, which returns one response, takes); ``record``: each
    request's ``text_input`` appended to this file (a JSON line ``{"text": ...}``).
    """
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY.format(default_tokens=DEFAULT_TOKENS))
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=0,
        input=[
            ModelInput(name="text_input", data_type="TYPE_STRING", dims=[1]),
            ModelInput(name="max_tokens", data_type="TYPE_INT32", dims=[1], optional=True),
        ],
        output=[ModelOutput(name="text_output", data_type="TYPE_STRING", dims=[1])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={
            "first_ms": str(first_ms),
            "gap_ms": str(gap_ms),
            "whole": "1" if whole else "0",
            "stamp": "1" if stamp else "0",
            **({"record_path": str(record.resolve())} if record is not None else {}),
        },
        passthrough="model_transaction_policy {\n  decoupled: true\n}",
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


@contextmanager
def whole_text_model(server: LocalTritonServer, repository: Path) -> Iterator[str]:
    """The ``whole`` text model served by ``server`` for the block, then unloaded and removed.

    Loaded only where a test needs it: the shared server keeps one Python stub fewer.
    """
    with _served(server, write_text_model(repository / WHOLE_TEXT_MODEL, whole=True)) as name:
        yield name


@contextmanager
def stamped_text_model(server: LocalTritonServer, repository: Path) -> Iterator[str]:
    """The text model whose tokens carry their send time, served for the block, then removed."""
    with _served(server, write_text_model(repository / STAMPED_TEXT_MODEL, stamp=True)) as name:
        yield name


@contextmanager
def recording_text_model(server: LocalTritonServer, repository: Path, record: Path) -> Iterator[str]:
    """The text model recording every request's ``text_input`` in ``record``, served for the block."""
    with _served(server, write_text_model(repository / RECORDING_TEXT_MODEL, record=record)) as name:
        yield name


@contextmanager
def _served(server: LocalTritonServer, model_dir: Path) -> Iterator[str]:
    try:
        server.load_model(model_dir.name)
        yield model_dir.name
    finally:
        try:
            server.unload_model(model_dir.name)
        finally:
            shutil.rmtree(model_dir)
