"""Configs written for this project, valid and invalid, each with the verdict expected of lint.

Every case is a Python-backend model (the embedded server can load it), so the test can ask
the real Triton whether it loads. ``rule`` is the lint error expected (None: no error);
``server_loads`` is what Triton does when it differs from lint's verdict on purpose (lint is
stricter where Triton loads a model whose every request then fails).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.copy())]))
        return responses
"""

IO = """
input [{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }]
"""
CPU = "instance_group [{ kind: KIND_CPU count: 1 }]\n"
BASE = 'backend: "python"\nmax_batch_size: 8\n' + IO + CPU


@dataclass(frozen=True)
class Case:
    """One model directory of the corpus."""

    name: str
    config: str
    """The config after ``name: "<name>"`` (which is prepended unless ``named`` is False)."""
    rule: str | None = None
    files: dict[str, str] = field(default_factory=lambda: {"1/model.py": MODEL_PY})
    named: bool = True
    server_loads: bool | None = None
    """Set where Triton's verdict differs from lint's on purpose."""
    why: str = ""
    server_judges: bool = True
    """False where the embedded Triton cannot give a verdict (``why`` says why)."""

    @property
    def valid(self) -> bool:
        """Whether lint should find no error."""
        return self.rule is None

    def expected_server_load(self) -> bool:
        """Whether the embedded Triton should load it."""
        return self.valid if self.server_loads is None else self.server_loads

    def write(self, repository: Path) -> Path:
        """Write the model directory into ``repository``."""
        directory = repository / self.name
        directory.mkdir(parents=True)
        text = (f'name: "{self.name}"\n' if self.named else "") + self.config
        (directory / "config.pbtxt").write_text(text)
        for relative, content in self.files.items():
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        return directory


def _with(extra: str, base: str = BASE) -> str:
    return base + extra


NO_BATCH = 'backend: "python"\nmax_batch_size: 0\n' + IO + CPU
ECHO_STEP = 'backend: "python"\nmax_batch_size: 8\n' + IO + CPU
ENSEMBLE_IO = """platform: "ensemble"
max_batch_size: 8
input [{ name: "in" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "out" data_type: TYPE_FP32 dims: [ 4 ] }]
"""
ENSEMBLE_FILES: dict[str, str] = {"1/.keep": ""}


def _ensemble(steps: str, io: str = ENSEMBLE_IO) -> str:
    return io + "ensemble_scheduling {\n" + steps + "}\n"


STEP_OK = (
    'step [{ model_name: "step_echo" model_version: -1 input_map { key: "x" value: "in" } '
    'output_map { key: "y" value: "out" } }]\n'
)

VALID: list[Case] = [
    Case("valid_base", BASE),
    Case("valid_preferred", _with("dynamic_batching { preferred_batch_size: [ 2, 4 ] }\n")),
    Case(
        "valid_priorities",
        _with("""dynamic_batching {
  max_queue_delay_microseconds: 100
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 1000 max_queue_size: 16 }
  priority_queue_policy { key: 2 value { timeout_action: DELAY default_timeout_microseconds: 500 } }
}
"""),
    ),
    Case("valid_ordering", _with("dynamic_batching { preserve_ordering: true }\n")),
    Case("valid_no_batching", NO_BATCH),
    Case(
        "valid_reshape",
        'backend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 4 ] } }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }]\n' + CPU,
    ),
    Case(
        "valid_variable_dims",
        'backend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [ -1 ] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [ -1 ] }]\n' + CPU,
    ),
    Case(
        "valid_version_all",
        _with("version_policy { all {} }\n"),
        files={"1/model.py": MODEL_PY, "2/model.py": MODEL_PY},
    ),
    Case(
        "valid_version_specific",
        _with("version_policy { specific { versions: [ 2 ] } }\n"),
        files={"1/model.py": MODEL_PY, "2/model.py": MODEL_PY},
    ),
    Case(
        "valid_warmup",
        _with("""model_warmup [{
  name: "zeros" batch_size: 2
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
}]
"""),
    ),
    Case(
        "valid_warmup_file",
        _with("""model_warmup [{
  name: "from_file" batch_size: 1
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "x.bin" } }
}]
"""),
        files={"1/model.py": MODEL_PY, "warmup/x.bin": "0123456789abcdef"},
    ),
    Case(
        "valid_sequence",
        _with("""sequence_batching {
  max_sequence_idle_microseconds: 5000000
  control_input [
    { name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }] },
    { name: "READY" control [{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }] },
    { name: "CORRID" control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] }
  ]
  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 4 ] }
}
"""),
    ),
    Case(
        "valid_batch_input",
        _with("""batch_input [{
  kind: BATCH_ELEMENT_COUNT target_name: "count" data_type: TYPE_INT32 source_input: "x"
}]
"""),
    ),
    Case(
        "valid_parameters", _with('parameters { key: "intra_op_thread_count" value { string_value: "1" } }\n')
    ),
    Case(
        "valid_platform_ignored",
        _with('platform: "onnxruntime_onnx"\n'),
        why="the Python backend ignores the platform: Triton checks the pair only for its own four backends",
    ),
    Case(
        "valid_dynamic_no_batching",
        NO_BATCH + "dynamic_batching {}\n",
        why="Triton accepts it; lint only warns that it cannot form batches",
    ),
    Case(
        "valid_count_zero",
        'backend: "python"\nmax_batch_size: 8\n' + IO + "instance_group [{ kind: KIND_CPU count: 0 }]\n",
        why="Triton replaces count 0 with its default",
    ),
    Case("valid_unnamed", BASE, named=False, why="Triton names the model after its directory"),
    Case(
        "valid_detected_backend",
        "max_batch_size: 8\n" + IO + CPU,
        why="no backend: Triton finds model.py in the version directory",
    ),
    Case("valid_ensemble", _ensemble(STEP_OK), files=ENSEMBLE_FILES),
]

INVALID: list[Case] = [
    Case("bad_name", 'name: "other"\n' + BASE, named=False, rule="name.matches-directory"),
    Case(
        "bad_max_batch",
        BASE.replace("max_batch_size: 8", "max_batch_size: -1"),
        rule="max-batch-size.negative",
    ),
    Case("bad_input_name", BASE.replace('name: "x" ', ""), rule="io.name-missing"),
    Case(
        "bad_input_type",
        BASE.replace('name: "x" data_type: TYPE_FP32', 'name: "x"'),
        rule="io.data-type-missing",
    ),
    Case(
        "bad_input_dims",
        BASE.replace(
            'name: "x" data_type: TYPE_FP32 dims: [ 4 ]', 'name: "x" data_type: TYPE_FP32 dims: [ ]'
        ),
        rule="io.dims-missing",
    ),
    Case(
        "bad_dim_zero",
        BASE.replace(
            '[{ name: "x" data_type: TYPE_FP32 dims: [ 4 ]', '[{ name: "x" data_type: TYPE_FP32 dims: [ 0 ]'
        ),
        rule="io.dims-value",
    ),
    Case(
        "bad_dim_minus_two",
        BASE.replace('"x" data_type: TYPE_FP32 dims: [ 4 ]', '"x" data_type: TYPE_FP32 dims: [ -2 ]'),
        rule="io.dims-value",
    ),
    Case(
        "bad_output_dim",
        BASE.replace('"y" data_type: TYPE_FP32 dims: [ 4 ]', '"y" data_type: TYPE_FP32 dims: [ 4, 0 ]'),
        rule="io.dims-value",
    ),
    Case(
        "bad_reshape_scalar",
        'backend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] reshape { shape: [ ] } }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] }]\n' + CPU,
        rule="io.reshape-scalar",
    ),
    Case(
        "bad_reshape_size",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ 4 ] reshape { shape: [ 3 ] } }]\noutput"),
        rule="io.reshape-size",
    ),
    Case(
        "bad_reshape_variable",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ -1, 4 ] reshape { shape: [ 4 ] } }]\noutput"),
        rule="io.reshape-size",
    ),
    Case(
        "bad_reshape_blocks",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ 2, -1 ] reshape { shape: [ 3, -1 ] } }]\noutput"),
        rule="io.reshape-size",
    ),
    Case(
        "bad_reshape_value",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ 4 ] reshape { shape: [ 4, 0 ] } }]\noutput"),
        rule="io.reshape-value",
    ),
    Case(
        "bad_format_dims",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ 4 ] format: FORMAT_NHWC }]\noutput"),
        rule="io.format-dims",
    ),
    Case(
        "bad_shape_tensor",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ 4 ] is_shape_tensor: true }]\noutput"),
        rule="io.shape-tensor",
    ),
    Case(
        "bad_non_linear",
        BASE.replace("dims: [ 4 ] }]\noutput", "dims: [ 4 ] is_non_linear_format_io: true }]\noutput"),
        rule="io.non-linear",
    ),
    Case(
        "bad_duplicate_input",
        BASE.replace("}]\noutput", '}, { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }]\noutput'),
        rule="io.duplicate-name",
        server_loads=True,
        why="Triton loads it, and then every request fails the input-count check",
    ),
    Case(
        "bad_batch_input_sources",
        _with('batch_input [{ kind: BATCH_ELEMENT_COUNT target_name: "n" data_type: TYPE_INT32 }]\n'),
        rule="batch-input.sources",
    ),
    Case(
        "bad_batch_input_type",
        _with(
            'batch_input [{ kind: BATCH_ELEMENT_COUNT target_name: "n" '
            'data_type: TYPE_INT64 source_input: "x" }]\n'
        ),
        rule="batch-input.data-type",
    ),
    Case(
        "bad_batch_input_source",
        _with(
            'batch_input [{ kind: BATCH_ELEMENT_COUNT target_name: "n" '
            'data_type: TYPE_INT32 source_input: "nope" }]\n'
        ),
        rule="batch-input.source",
    ),
    Case(
        "bad_batch_output_sources",
        _with('batch_output [{ target_name: "y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE }]\n'),
        rule="batch-output.sources",
    ),
    Case(
        "bad_batch_output_target",
        _with('batch_output [{ target_name: "z" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "x" }]\n'),
        rule="batch-output.target",
    ),
    Case(
        "bad_batch_output_twice",
        _with(
            'batch_output [{ target_name: [ "y", "y" ] kind: '
            'BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "x" }]\n'
        ),
        rule="batch-output.target-repeated",
    ),
    Case(
        "bad_batch_output_source",
        _with(
            'batch_output [{ target_name: "y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "nope" }]\n'
        ),
        rule="batch-output.source",
    ),
    Case(
        "bad_preferred_zero",
        _with("dynamic_batching { preferred_batch_size: [ 0 ] }\n"),
        rule="dynamic-batching.preferred-positive",
    ),
    Case(
        "bad_preferred_max",
        _with("dynamic_batching { preferred_batch_size: [ 4, 16 ] }\n"),
        rule="dynamic-batching.preferred-le-max",
    ),
    Case(
        "bad_preferred_no_batch",
        NO_BATCH + "dynamic_batching { preferred_batch_size: [ 2 ] }\n",
        rule="dynamic-batching.preferred-le-max",
    ),
    Case(
        "bad_default_priority",
        _with("dynamic_batching { priority_levels: 2 }\n"),
        rule="dynamic-batching.default-priority",
    ),
    Case(
        "bad_default_priority_high",
        _with("dynamic_batching { priority_levels: 2 default_priority_level: 3 }\n"),
        rule="dynamic-batching.default-priority",
    ),
    Case(
        "bad_priority_policy",
        _with(
            "dynamic_batching { priority_levels: 2 default_priority_level: 1 "
            "priority_queue_policy { key: 3 value { } } }\n"
        ),
        rule="dynamic-batching.priority-policy",
    ),
    Case(
        "bad_ordering_priority",
        _with("dynamic_batching { preserve_ordering: true priority_levels: 2 default_priority_level: 1 }\n"),
        rule="dynamic-batching.ordering-priority",
    ),
    Case(
        "bad_ordering_delay",
        _with(
            "dynamic_batching { preserve_ordering: true default_queue_policy { "
            "timeout_action: DELAY default_timeout_microseconds: 100 } }\n"
        ),
        rule="dynamic-batching.ordering-delay",
    ),
    Case(
        "bad_control_name",
        _with(
            "sequence_batching { control_input [{ control [{ kind: CONTROL_SEQUENCE_START "
            "int32_false_true: [ 0, 1 ] }] }] }\n"
        ),
        rule="sequence.control-name",
    ),
    Case(
        "bad_control_values",
        _with(
            'sequence_batching { control_input [{ name: "S" control [{ kind: CONTROL_SEQUENCE_START }] }] }\n'
        ),
        rule="sequence.control-values",
    ),
    Case(
        "bad_control_two_values",
        _with(
            'sequence_batching { control_input [{ name: "S" control [{ kind: '
            "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] }] }] }\n"
        ),
        rule="sequence.control-values",
    ),
    Case(
        "bad_control_pair",
        _with(
            'sequence_batching { control_input [{ name: "S" control [{ kind: '
            "CONTROL_SEQUENCE_END int32_false_true: [ 1 ] }] }] }\n"
        ),
        rule="sequence.control-pair",
    ),
    Case(
        "bad_corrid_values",
        _with(
            'sequence_batching { control_input [{ name: "C" control [{ kind: '
            "CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ] }] }] }\n"
        ),
        rule="sequence.corrid-values",
    ),
    Case(
        "bad_corrid_type",
        _with(
            'sequence_batching { control_input [{ name: "C" control [{ kind: '
            "CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 }] }] }\n"
        ),
        rule="sequence.corrid-type",
    ),
    Case(
        "bad_control_repeated",
        _with(
            'sequence_batching { control_input [ { name: "A" control [{ kind: '
            'CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }] }, { name: "B" control [{ kind: '
            "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }] } ] }\n"
        ),
        rule="sequence.control-repeated",
    ),
    Case(
        "bad_control_tensor_twice",
        _with(
            'sequence_batching { control_input [ { name: "A" control [{ kind: '
            'CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }] }, { name: "A" control [{ kind: '
            "CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] }] } ] }\n"
        ),
        rule="sequence.control-tensor-repeated",
    ),
    Case(
        "bad_oldest_preferred",
        _with("sequence_batching { oldest { preferred_batch_size: [ 16 ] } }\n"),
        rule="sequence.preferred-le-max",
    ),
    Case(
        "bad_slot_utilization",
        _with("sequence_batching { direct { minimum_slot_utilization: 1.5 } }\n"),
        rule="sequence.slot-utilization",
    ),
    Case(
        "bad_cache_decoupled",
        _with("model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n"),
        rule="response-cache.decoupled",
    ),
    Case(
        "bad_cache_sequence",
        _with("sequence_batching { }\nresponse_cache { enable: true }\n"),
        rule="response-cache.sequence",
    ),
    Case(
        "bad_ensemble_scheduling",
        _with(STEP_OK.join(["ensemble_scheduling {\n", "}\n"])),
        rule="ensemble.platform",
    ),
    Case(
        "bad_cpu_gpus",
        BASE.replace("kind: KIND_CPU count: 1", "kind: KIND_CPU count: 1 gpus: [ 0 ]"),
        rule="instance-group.gpus-on-cpu",
    ),
    Case(
        "bad_profile",
        BASE.replace("kind: KIND_CPU count: 1", 'kind: KIND_CPU count: 1 profile: [ "0" ]'),
        rule="instance-group.profile",
    ),
    Case(
        "bad_warmup_missing_input",
        _with('model_warmup [{ name: "w" batch_size: 1 }]\n'),
        rule="warmup.input-missing",
    ),
    Case(
        "bad_warmup_no_data",
        _with(
            'model_warmup [{ name: "w" batch_size: 1 inputs { key: "x" value { '
            "data_type: TYPE_FP32 dims: [ 4 ] } } }]\n"
        ),
        rule="warmup.data-source",
    ),
    Case(
        "bad_warmup_type",
        _with(
            'model_warmup [{ name: "w" batch_size: 1 inputs { key: "x" value { '
            "data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } }]\n"
        ),
        rule="warmup.data-type",
    ),
    Case(
        "bad_warmup_dims",
        _with(
            'model_warmup [{ name: "w" batch_size: 1 inputs { key: "x" value { '
            "data_type: TYPE_FP32 dims: [ 5 ] zero_data: true } } }]\n"
        ),
        rule="warmup.dims",
    ),
    Case(
        "bad_warmup_file",
        _with(
            'model_warmup [{ name: "w" batch_size: 1 inputs { key: "x" value { '
            'data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "missing.bin" } } }]\n'
        ),
        rule="warmup.data-file",
    ),
    Case(
        "bad_latest_zero",
        _with("version_policy { latest { num_versions: 0 } }\n"),
        rule="versions.latest-zero",
    ),
    Case(
        "bad_specific_missing",
        _with("version_policy { specific { versions: [ 3 ] } }\n"),
        rule="versions.none",
    ),
    Case("bad_no_version", BASE, rule="versions.none", files={"model.py": MODEL_PY}),
    Case(
        "bad_no_model_file",
        BASE,
        rule="files.model-file",
        files={"1/README": "no model here"},
        server_judges=False,
        why="Triton 2.51's Python backend never finishes this load: its stub exits "
        "('Python model file not found') and the server waits on it forever, so only lint reports it",
    ),
    Case(
        "bad_platform_python",
        BASE.replace('backend: "python"', 'platform: "python"'),
        rule="backend.unknown-platform",
    ),
    Case(
        "bad_ensemble_unknown_step",
        _ensemble(STEP_OK.replace("step_echo", "no_such_model")),
        rule="ensemble.step-unknown-model",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_version",
        _ensemble(STEP_OK.replace(" model_version: -1", "")),
        rule="ensemble.step-version",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_map_input",
        _ensemble(STEP_OK.replace('key: "x"', 'key: "nope"')),
        rule="ensemble.map-input",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_input_unused",
        _ensemble(
            STEP_OK,
            ENSEMBLE_IO.replace(
                'input [{ name: "in" data_type: TYPE_FP32 dims: [ 4 ] }]',
                'input [{ name: "in" data_type: TYPE_FP32 dims: [ 4 ] }, '
                '{ name: "extra" data_type: TYPE_FP32 dims: [ 4 ] }]',
            ),
        ),
        rule="ensemble.input-unused",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_output_unwritten",
        _ensemble(STEP_OK.replace('value: "out"', 'value: "other"')),
        rule="ensemble.output-unwritten",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_type",
        _ensemble(STEP_OK, ENSEMBLE_IO.replace('"in" data_type: TYPE_FP32', '"in" data_type: TYPE_INT32')),
        rule="ensemble.data-type",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_batch",
        _ensemble(STEP_OK, ENSEMBLE_IO.replace("max_batch_size: 8", "max_batch_size: 16")),
        rule="ensemble.step-batch",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_instances",
        _ensemble(STEP_OK) + CPU,
        rule="ensemble.instance-group",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_cycle_a",
        _ensemble(
            STEP_OK.replace("step_echo", "bad_ensemble_cycle_b")
            .replace('key: "x"', 'key: "in"')
            .replace('key: "y"', 'key: "out"')
        ),
        rule="ensemble.cycle",
        files=ENSEMBLE_FILES,
    ),
    Case(
        "bad_ensemble_cycle_b",
        _ensemble(
            STEP_OK.replace("step_echo", "bad_ensemble_cycle_a")
            .replace('key: "x"', 'key: "in"')
            .replace('key: "y"', 'key: "out"')
        ),
        rule="ensemble.cycle",
        files=ENSEMBLE_FILES,
    ),
]

STEP_MODEL = Case("step_echo", ECHO_STEP)
"""The model the ensembles' steps call."""

SYNTAX: list[tuple[str, str, int, int]] = [
    # (text, words of the message, line, column)
    ('name: "m"\nmax_batch_size: 8\nmax_batch_size: 4\n', 'field "max_batch_size" is given twice', 3, 17),
    ('name: "m"\ndynamic_batching { }\nsequence_batching { }\n', "another member of oneof", 3, 1),
    (
        'name: "m"\ninput [{ name: "x" data_type: TYPE_FLOAT dims: [ 4 ] }]\n',
        "no value named TYPE_FLOAT",
        2,
        31,
    ),
    ('name: "m"\nmax_batch_size: eight\n', "Couldn't parse integer: eight", 2, 17),
    ('name: "m"\nunknown_field: 1\n', 'no field named "unknown_field"', 2, 1),
    ('name: "m"\ninput [{ name: "x" \n', 'Expected "}"', 2, 16),
]
