"""Triton Python-backend model: token ids from a TensorRT-LLM engine back to text (written by tritongen).

``tokens_batch`` (batch, beams, tokens) and ``sequence_length`` (batch, beams) come from the
engine; each row's first beam, up to its length, is decoded into ``text_output``. Streamed,
each response of the engine holds the new tokens only, so each is decoded on its own. The
tokenizer is the folder ``tokenizer`` beside this file (the ``tokenizer_dir`` parameter names
another). Runs in Triton's TensorRT-LLM image; needs nothing of tritongen.
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


class TritonPythonModel:
    """Token ids in, text out (see the module)."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Load the tokenizer."""
        from transformers import AutoTokenizer

        config = json.loads(args["model_config"])
        parameters = {k: v.get("string_value", "") for k, v in config.get("parameters", {}).items()}
        folder = parameters.get("tokenizer_dir", "").strip() or os.path.join(
            args["model_repository"], args["model_version"], "tokenizer"
        )
        self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)

    def execute(self, requests: list[Any]) -> list[Any]:
        """Decode every request's tokens."""
        return [self._one(request) for request in requests]

    def _one(self, request: Any) -> Any:
        try:
            tokens = pb_utils.get_input_tensor_by_name(request, "tokens_batch").as_numpy()
            lengths = pb_utils.get_input_tensor_by_name(request, "sequence_length").as_numpy()
            texts = []
            for row, length in zip(tokens, lengths, strict=True):
                ids = row.reshape(row.shape[0], -1)[0][: int(np.asarray(length).reshape(-1)[0])]
                text = str(self.tokenizer.decode(ids.tolist(), skip_special_tokens=True))
                texts.append(text.encode("utf-8"))
            output = np.array(texts, dtype=np.object_).reshape(len(texts), 1)
            return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("text_output", output)])
        except Exception as e:  # this request fails, the others go on
            return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(e)))
