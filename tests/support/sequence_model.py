"""A stateful Python-backend model for sequence tests: a running sum per correlation ID.

Triton's sequence batcher (``oldest`` strategy) hands the model three control inputs with
every request: ``START`` (1 on a sequence's first request), ``END`` (1 on its last) and
``CORRID`` (its correlation ID). The model keeps a sum and a count per correlation ID,
answers each request with the running sum, and when a sequence ends appends
``corrid,sum,count,weighted`` to the record file named in its config (parameter
``record_path``), where ``weighted`` sums each value times its position in the sequence
(1, 2, ...): it tells the order the values came in. A request of an unknown sequence (no
start seen) is recorded as ``corrid,orphan,0,0``: requests of different sequences were
mixed, or a start flag was lost.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.proto import parse_config_text
from tritongen.triton.render import render_config

SEQUENCE_MODEL = "accumulate_sequence"
RECORD_FILE = "sequences.log"
MAX_CANDIDATE_SEQUENCES = 32
"""Sequences the batcher serves at once; more wait in its backlog."""

MODEL_PY = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.record = open(config["parameters"]["record_path"]["string_value"], "a", buffering=1)
        self.state = {}  # correlation ID -> [sum, count, weighted]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float64)
            start = int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0])
            end = int(pb_utils.get_input_tensor_by_name(request, "END").as_numpy().reshape(-1)[0])
            corrid = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0])
            if start:
                self.state[corrid] = [0.0, 0, 0.0]
            entry = self.state.get(corrid)
            if entry is None:
                self.record.write(f"{corrid},orphan,0,0\\n")
                entry = self.state[corrid] = [0.0, 0, 0.0]
            entry[0] += float(x.sum())
            entry[1] += 1
            entry[2] += entry[1] * float(x.sum())
            total = np.full(x.shape, entry[0], dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("sum", total)]))
            if end:
                self.record.write(f"{corrid},{entry[0]!r},{entry[1]},{entry[2]!r}\\n")
                del self.state[corrid]
        return responses

    def finalize(self):
        self.record.close()
"""

SEQUENCE_BATCHING = """sequence_batching {
  max_sequence_idle_microseconds: 5000000
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  oldest { max_candidate_sequences: %d max_queue_delay_microseconds: 0 }
}
"""


def write_sequence_model(model_dir: Path) -> Path:
    """The accumulator: batched (max 8), one CPU instance, input ``x`` and output ``sum`` of 1 FP32."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY)
    plain = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=8,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[1])],
        output=[ModelOutput(name="sum", data_type="TYPE_FP32", dims=[1])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={"record_path": str((model_dir / RECORD_FILE).resolve())},
    )
    # The typed config does not model sequence batching: it travels as protobuf text.
    text = render_config(plain) + SEQUENCE_BATCHING % MAX_CANDIDATE_SEQUENCES
    parse_config_text(text, f"{model_dir.name}/config.pbtxt")  # proves the text is a legal config
    (model_dir / "config.pbtxt").write_text(text)
    return model_dir


def read_records(model_dir: Path) -> list[tuple[int, str, int, str]]:
    """The record file's lines as (correlation ID, sum, count, weighted sum); none when nothing ended."""
    path = model_dir / RECORD_FILE
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        corrid, total, count, weighted = line.split(",")
        records.append((int(corrid), total, int(count), weighted))
    return records
