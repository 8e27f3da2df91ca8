"""Triton Python-backend model: a TensorRT-LLM engine's tokenizer in front of it (written by tritongen).

Each request's ``text_input`` (a string per batch row) becomes ``input_ids`` (the prompt's
token ids, padded with ``pad_id`` to the batch's longest) and ``input_lengths``;
``max_tokens`` becomes ``request_output_len``; the tokenizer's end and padding ids go along
as ``end_id`` and ``pad_id``. The tokenizer is the folder ``tokenizer`` beside this file (the
``tokenizer_dir`` parameter names another). Runs in Triton's TensorRT-LLM image, which has
transformers; needs nothing of tritongen.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

try:  # Present only inside Triton's Python backend.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - imported by tests outside Triton
    pb_utils = None

DEFAULT_MAX_TOKENS = 16


def tokenizer_dir(args: dict[str, Any], parameters: dict[str, str]) -> str:
    """The tokenizer's folder: the ``tokenizer_dir`` parameter, else ``tokenizer`` beside this file."""
    given = parameters.get("tokenizer_dir", "").strip()
    if given:
        return given
    return os.path.join(args["model_repository"], args["model_version"], "tokenizer")


def rows(tensor: Any) -> list[Any]:
    """One value per batch row."""
    return [row.reshape(-1)[0] for row in tensor.as_numpy()]


class TritonPythonModel:
    """Text in, token ids out (see the module)."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Load the tokenizer."""
        from transformers import AutoTokenizer

        config = json.loads(args["model_config"])
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir(args, parameters), local_files_only=True)
        self.end_id = self.tokenizer.eos_token_id
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end_id

    def execute(self, requests: list[Any]) -> list[Any]:
        """Tokenize every request's prompts."""
        return [self._one(request) for request in requests]

    def _one(self, request: Any) -> Any:
        try:
            texts = [
                t.decode("utf-8") if isinstance(t, bytes) else str(t)
                for t in rows(pb_utils.get_input_tensor_by_name(request, "text_input"))
            ]
            limit = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            lengths = (
                [int(v) for v in rows(limit)] if limit is not None else [DEFAULT_MAX_TOKENS] * len(texts)
            )
            ids = [self.tokenizer.encode(text) for text in texts]
            longest = max(len(row) for row in ids)
            padded = np.full((len(ids), longest), self.pad_id, dtype=np.int32)
            for index, row in enumerate(ids):
                padded[index, : len(row)] = row
            count = len(ids)
            outputs = [
                pb_utils.Tensor("input_ids", padded),
                pb_utils.Tensor("input_lengths", np.array([[len(row)] for row in ids], dtype=np.int32)),
                pb_utils.Tensor("request_output_len", np.array(lengths, dtype=np.int32).reshape(count, 1)),
                pb_utils.Tensor("end_id", np.full((count, 1), self.end_id, dtype=np.int32)),
                pb_utils.Tensor("pad_id", np.full((count, 1), self.pad_id, dtype=np.int32)),
            ]
            return pb_utils.InferenceResponse(output_tensors=outputs)
        except Exception as e:  # this request fails, the others go on
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(e)))
