"""Triton's load-time rules for one model's config, written from its documentation and core.

Each check reads the parsed ``inference.ModelConfig`` message (and, where Triton does, the
model directory) and reports a :class:`Finding` per broken rule: errors for what makes
Triton refuse the model (or fail every request), warnings for legal but suspicious
settings. Nothing here raises on odd input: a rule that cannot apply is skipped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.lint.findings import Finding, Severity

# platform -> backend, and each backend's default model file (Triton's constants).
PLATFORM_BACKENDS = {
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
}
DEFAULT_FILES = {
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "python": "model.py",
    "openvino": "model.xml",
}
CHECKED_BACKENDS = {"tensorflow", "tensorrt", "onnxruntime", "pytorch"}
"""Backends whose platform Triton checks against the backend."""
SPECIAL_DIRS = {"warmup", "initial_state", "configs"}
BATCH_INPUT_KINDS = {
    "BATCH_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO",
    "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
    "BATCH_ITEM_SHAPE",
    "BATCH_ITEM_SHAPE_FLATTEN",
}
CORRID_TYPES = {"TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32", "TYPE_STRING"}
PROTOCOL_TYPES = {
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_UINT16": "UINT16",
    "TYPE_UINT32": "UINT32",
    "TYPE_UINT64": "UINT64",
    "TYPE_INT8": "INT8",
    "TYPE_INT16": "INT16",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_FP16": "FP16",
    "TYPE_FP32": "FP32",
    "TYPE_FP64": "FP64",
    "TYPE_STRING": "BYTES",
    "TYPE_BF16": "BF16",
}


@dataclass
class ModelContext:
    """One model as lint sees it: its parsed config and, when known, its directory."""

    name: str
    """The directory name (or the config's name for a lone file)."""
    config: Any
    """The parsed ``inference.ModelConfig`` message."""
    file: str
    directory: Path | None = None
    slo_p99_ms: float | None = None
    check_files: bool = True
    """Whether the version directories and model files are judged (not for a config about to be written)."""
    text: str = ""
    """The config's text (to place findings on their line)."""
    findings: list[Finding] = field(default_factory=list)

    def report(self, severity: Severity, rule: str, path: str, message: str, fix: str) -> None:
        """Record one finding."""
        self.findings.append(Finding(severity, self.name, self.file, rule, path, message, fix))

    def error(self, rule: str, path: str, message: str, fix: str) -> None:
        """Record an error: Triton refuses this model (or every request to it fails)."""
        self.report("error", rule, path, message, fix)

    def warning(self, rule: str, path: str, message: str, fix: str) -> None:
        """Record a warning: legal, but probably not what was meant."""
        self.report("warning", rule, path, message, fix)

    @property
    def platform(self) -> str:
        """The platform as written."""
        return str(self.config.platform)

    @property
    def backend(self) -> str:
        """The backend as written, else as Triton would fill it in from the platform or the files."""
        if self.config.backend:
            return str(self.config.backend)
        if self.platform in PLATFORM_BACKENDS:
            return PLATFORM_BACKENDS[self.platform]
        return detect_backend(self.directory) or ""

    @property
    def is_ensemble(self) -> bool:
        """Whether the config declares an ensemble."""
        return self.platform == "ensemble"


def enum_name(message: Any, field_name: str) -> str:
    """The name of an enum field's value (its number when unknown)."""
    value = getattr(message, field_name)
    enum = message.DESCRIPTOR.fields_by_name[field_name].enum_type
    found = enum.values_by_number.get(value)
    return str(found.name) if found is not None else str(value)


def version_dirs(directory: Path | None) -> list[Path]:
    """The model directory's subdirectories in the order Triton sorts them."""
    if directory is None or not directory.is_dir():
        return []
    try:
        return sorted((p for p in directory.iterdir() if p.is_dir()), key=lambda p: p.name.encode())
    except OSError:
        return []


def detect_backend(directory: Path | None) -> str | None:
    """The backend Triton infers from the files of the first subdirectory (sorted by name)."""
    dirs = version_dirs(directory)
    if not dirs:
        return None
    first = dirs[0]
    for backend, filename in (
        ("tensorrt", "model.plan"),
        ("onnxruntime", "model.onnx"),
        ("openvino", "model.xml"),
        ("pytorch", "model.pt"),
        ("python", "model.py"),
    ):
        if (first / filename).exists():
            return backend
    if (first / "model.savedmodel").is_dir() or (first / "model.graphdef").is_file():
        return "tensorflow"
    return None


def numeric_versions(directory: Path | None) -> tuple[list[int], list[str]]:
    """Version numbers Triton accepts, and the directory names it ignores (with a warning)."""
    versions: list[int] = []
    ignored: list[str] = []
    for path in version_dirs(directory):
        name = path.name
        if name in SPECIAL_DIRS:
            continue
        if (len(name) > 1 and name.startswith("0")) or not name.isdigit():
            ignored.append(name)
        else:
            versions.append(int(name))
    return versions, ignored


def element_count(dims: list[int]) -> int:
    """Triton's element count: -1 when any dim is variable, 0 for no dims."""
    if not dims:
        return 0
    if any(d == -1 for d in dims):
        return -1
    return math.prod(dims)


def _blocks(dims: list[int]) -> list[int]:
    """Products of the fixed runs between variable dims."""
    blocks, product = [], 1
    for d in dims:
        if d == -1:
            blocks.append(product)
            product = 1
        else:
            product *= d
    blocks.append(product)
    return blocks


# -- model-level rules --------------------------------------------------------------------


NAME_CHARACTERS = re.compile(r"^[A-Za-z0-9_.\-]+$")


def check_name(ctx: ModelContext) -> None:
    """The config's name must equal its directory's (an empty name is filled in from it)."""
    name = str(ctx.config.name)
    shown = name or (ctx.directory.name if ctx.directory else "")
    if shown and not NAME_CHARACTERS.match(shown):
        ctx.warning(
            "name.characters",
            "name",
            f"model name '{shown}' has characters that need escaping in URLs and shells",
            "use letters, digits, '_', '-' and '.' only",
        )
    if ctx.directory is not None and name and name != ctx.directory.name:
        ctx.error(
            "name.matches-directory",
            "name",
            f"name '{name}' differs from the directory name '{ctx.directory.name}'",
            f'set name: "{ctx.directory.name}", or rename the directory to {name}',
        )


def check_backend(ctx: ModelContext) -> None:
    """Platform and backend known, consistent, and the model file present."""
    config, platform = ctx.config, ctx.platform
    if ctx.is_ensemble:
        if config.backend:
            ctx.error(
                "backend.ensemble",
                "backend",
                "an ensemble must not name a backend",
                'remove backend: platform "ensemble" is all an ensemble needs',
            )
        return
    backend = ctx.backend
    if not backend:
        if platform:
            ctx.error(
                "backend.unknown-platform",
                "platform",
                f"platform '{platform}' is not one Triton knows, and no backend is given",
                'set backend (e.g. "python") or a known platform',
            )
        else:
            ctx.error(
                "backend.missing",
                "backend",
                "no backend or platform, and no model file Triton recognises in the first version directory",
                'set backend, e.g. backend: "python"',
            )
        return
    if backend in CHECKED_BACKENDS and platform and PLATFORM_BACKENDS.get(platform) != backend:
        ctx.error(
            "backend.platform-pair",
            "platform",
            f"platform '{platform}' does not go with backend '{backend}'",
            "drop the platform, or use the backend's platform (e.g. onnxruntime_onnx)",
        )
    if platform and platform not in PLATFORM_BACKENDS and not config.backend:
        ctx.error(
            "backend.unknown-platform",
            "platform",
            f"platform '{platform}' is not one Triton knows",
            'set backend instead, e.g. backend: "python"',
        )
    if ctx.directory is None or not ctx.check_files:
        return
    filename = str(config.default_model_filename) or DEFAULT_FILES.get(platform) or DEFAULT_FILES.get(backend)
    if not filename or (backend not in DEFAULT_FILES and platform not in DEFAULT_FILES):
        return
    versions, _ = numeric_versions(ctx.directory)
    for version in versions:
        if not (ctx.directory / str(version) / filename).exists():
            ctx.error(
                "files.model-file",
                "default_model_filename",
                f"version {version} has no {filename}",
                f"put the model file at {ctx.directory.name}/{version}/{filename}",
            )


def check_versions(ctx: ModelContext) -> None:
    """At least one version directory that the version policy selects."""
    if ctx.directory is None or not ctx.check_files:
        return
    versions, ignored = numeric_versions(ctx.directory)
    for name in ignored:
        ctx.warning(
            "versions.ignored-dir",
            "",
            f"directory '{name}' is not a version number: Triton ignores it",
            "name version directories 1, 2, … (no leading zeros)",
        )
    policy = ctx.config.version_policy
    chosen = policy.WhichOneof("policy_choice") if ctx.config.HasField("version_policy") else "latest"
    selected: list[int]
    if chosen == "latest":
        count = policy.latest.num_versions if ctx.config.HasField("version_policy") else 1
        if ctx.config.HasField("version_policy") and count == 0:
            ctx.error(
                "versions.latest-zero",
                "version_policy.latest.num_versions",
                "latest policy with num_versions 0 selects no version",
                "set num_versions: 1 or more",
            )
            return
        selected = sorted(versions)[-count:] if count else []
    elif chosen == "specific":
        wanted = list(policy.specific.versions)
        if not wanted:
            ctx.error(
                "versions.specific-empty",
                "version_policy.specific.versions",
                "specific policy lists no version",
                "list the versions to serve, e.g. versions: [1]",
            )
            return
        for version in wanted:
            if version not in versions:
                ctx.warning(
                    "versions.specific-missing",
                    "version_policy.specific.versions",
                    f"version {version} is listed but has no directory",
                    f"create {ctx.directory.name}/{version}/ or drop it from the list",
                )
        selected = [v for v in wanted if v in versions]
    else:
        selected = versions
    if not selected:
        ctx.error(
            "versions.none",
            "version_policy",
            "no version directory is available under the version policy",
            f"add a version directory, e.g. {ctx.directory.name}/1/ holding the model file",
        )


def check_batching_size(ctx: ModelContext) -> None:
    """max_batch_size is non-negative."""
    if ctx.config.max_batch_size < 0:
        ctx.error(
            "max-batch-size.negative",
            "max_batch_size",
            f"max_batch_size {ctx.config.max_batch_size} is negative",
            "use 0 (no batching) or the largest batch the model takes",
        )


def check_io(ctx: ModelContext) -> None:
    """Inputs and outputs: names, data types, dims, reshape, formats, shape tensors, uniqueness."""
    config = ctx.config
    batching = config.max_batch_size > 0
    for kind, tensors in (("input", config.input), ("output", config.output)):
        names = Counter(t.name for t in tensors if t.name)
        for name, count in names.items():
            if count > 1:
                ctx.error(
                    "io.duplicate-name",
                    kind,
                    f"{kind} name '{name}' is used {count} times",
                    f"give each {kind} its own name (Triton loads it, but every request then fails)",
                )
        for index, tensor in enumerate(tensors):
            _check_tensor(ctx, kind, index, tensor, batching)
    shared = {t.name for t in config.input} & {t.name for t in config.output}
    for name in sorted(shared - {""}):
        ctx.warning(
            "io.input-output-name",
            "output",
            f"'{name}' is both an input and an output",
            "rename one of them: clients cannot tell them apart in requests",
        )


def _check_tensor(ctx: ModelContext, kind: str, index: int, tensor: Any, batching: bool) -> None:
    path = f"{kind}[{index}]"
    label = f"{kind} '{tensor.name}'" if tensor.name else f"{kind} #{index}"
    if not tensor.name:
        ctx.error("io.name-missing", f"{path}.name", f"{label} has no name", "set name")
    if tensor.data_type == 0:
        ctx.error(
            "io.data-type-missing",
            f"{path}.data_type",
            f"{label} has no data_type",
            "set data_type, e.g. TYPE_FP32",
        )
    dims = list(tensor.dims)
    has_reshape = tensor.HasField("reshape")
    reshape = list(tensor.reshape.shape) if has_reshape else None
    if not dims:
        ctx.error(
            "io.dims-missing",
            f"{path}.dims",
            f"{label} has no dims",
            "give the dims without the batch dim; a scalar is dims: [1] with reshape: { shape: [] }",
        )
    if has_reshape and reshape == [] and not batching:
        ctx.error(
            "io.reshape-scalar",
            f"{path}.reshape",
            f"{label} reshapes to a scalar on a model without batching",
            "drop the reshape, or enable batching (max_batch_size > 0)",
        )
    bad = [d for d in dims if d < 1 and d != -1]
    if bad:
        ctx.error(
            "io.dims-value",
            f"{path}.dims",
            f"{label} has dim {bad[0]}; dims are >= 1, or -1 for variable",
            "use a positive size, or -1 for a dim that varies",
        )
    if reshape:
        bad = [d for d in reshape if d < 1 and d != -1]
        if bad:
            ctx.error(
                "io.reshape-value",
                f"{path}.reshape.shape",
                f"{label} reshapes to dim {bad[0]}",
                "use a positive size, or -1 for a dim that varies",
            )
    if reshape is not None and dims and not any(d < 1 and d != -1 for d in dims + reshape):
        _check_reshape(ctx, path, label, dims, reshape)
    if kind == "input" and tensor.format in (1, 2) and len(dims) != 3:
        ctx.error(
            "io.format-dims",
            f"{path}.format",
            f"{label} has format {enum_name(tensor, 'format')} but {len(dims)} dims",
            "NHWC/NCHW inputs have exactly 3 dims (without the batch dim)",
        )
    if tensor.is_shape_tensor and ctx.platform != "tensorrt_plan":
        ctx.error(
            "io.shape-tensor",
            f"{path}.is_shape_tensor",
            f"{label} is a shape tensor on a model that is not TensorRT",
            "drop is_shape_tensor: only TensorRT has shape tensors",
        )
    if tensor.is_non_linear_format_io and ctx.platform != "tensorrt_plan":
        ctx.error(
            "io.non-linear",
            f"{path}.is_non_linear_format_io",
            f"{label} uses a non-linear format on a model that is not TensorRT",
            "drop is_non_linear_format_io",
        )


def _check_reshape(ctx: ModelContext, path: str, label: str, dims: list[int], reshape: list[int]) -> None:
    a, b = element_count(dims), element_count(reshape)
    if b == 0 and a == 1:
        return
    if (a == -1) != (b == -1) or (a != -1 and a != b):
        ctx.error(
            "io.reshape-size",
            f"{path}.reshape",
            f"{label}: dims {dims} and reshape {reshape} hold a different number of elements",
            "make the reshape hold as many elements as the dims",
        )
        return
    if a == -1:
        if dims.count(-1) != reshape.count(-1):
            ctx.error(
                "io.reshape-variable",
                f"{path}.reshape",
                f"{label}: dims {dims} and reshape {reshape} differ in their number of variable dims",
                "use as many -1 in the reshape as in the dims",
            )
        elif _blocks(dims) != _blocks(reshape):
            ctx.error(
                "io.reshape-size",
                f"{path}.reshape",
                f"{label}: the fixed dims of {dims} and {reshape} "
                "between the variable ones hold different sizes",
                "keep each block's size the same",
            )


def check_batch_io(ctx: ModelContext) -> None:
    """batch_input and batch_output: kinds, source counts, known sources and targets."""
    config = ctx.config
    inputs = {t.name for t in config.input}
    outputs = {t.name for t in config.output}
    for index, item in enumerate(config.batch_input):
        path, kind = f"batch_input[{index}]", enum_name(item, "kind")
        if kind not in BATCH_INPUT_KINDS:
            ctx.error(
                "batch-input.kind",
                f"{path}.kind",
                f"unknown batch input kind '{kind}'",
                "use one of " + ", ".join(sorted(BATCH_INPUT_KINDS)),
            )
        elif len(item.source_input) != 1:
            ctx.error(
                "batch-input.sources",
                f"{path}.source_input",
                f"batch input kind '{kind}' takes 1 source input, got {len(item.source_input)}",
                "name exactly one source input",
            )
        if enum_name(item, "data_type") not in ("TYPE_INT32", "TYPE_FP32"):
            ctx.error(
                "batch-input.data-type",
                f"{path}.data_type",
                "batch input data type must be TYPE_INT32 or TYPE_FP32",
                "set data_type: TYPE_INT32 or TYPE_FP32",
            )
        for source in item.source_input:
            if source not in inputs:
                ctx.error(
                    "batch-input.source",
                    f"{path}.source_input",
                    f"source input '{source}' is not an input of the model",
                    "name one of the model's inputs",
                )
        for target in item.target_name:
            if target in inputs:
                ctx.warning(
                    "batch-input.target",
                    f"{path}.target_name",
                    f"target '{target}' is also a model input",
                    "give the batch input its own name",
                )
    for index, item in enumerate(config.batch_output):
        path, kind = f"batch_output[{index}]", enum_name(item, "kind")
        if kind != "BATCH_SCATTER_WITH_INPUT_SHAPE":
            ctx.error(
                "batch-output.kind",
                f"{path}.kind",
                f"unknown batch output kind '{kind}'",
                "use BATCH_SCATTER_WITH_INPUT_SHAPE",
            )
        elif len(item.source_input) != 1:
            ctx.error(
                "batch-output.sources",
                f"{path}.source_input",
                f"batch output kind '{kind}' takes 1 source input, got {len(item.source_input)}",
                "name exactly one source input",
            )
        for source in item.source_input:
            if source not in inputs:
                ctx.error(
                    "batch-output.source",
                    f"{path}.source_input",
                    f"source input '{source}' is not an input of the model",
                    "name one of the model's inputs",
                )
        for target, count in Counter(item.target_name).items():
            if target not in outputs:
                ctx.error(
                    "batch-output.target",
                    f"{path}.target_name",
                    f"target '{target}' is not an output of the model",
                    "name one of the model's outputs",
                )
            elif count > 1:
                ctx.error(
                    "batch-output.target-repeated",
                    f"{path}.target_name",
                    f"target '{target}' is named {count} times",
                    "name each target once",
                )


def check_dynamic_batching(ctx: ModelContext) -> None:
    """Preferred sizes, priority levels, queue policies and preserve_ordering."""
    config = ctx.config
    if not config.HasField("dynamic_batching"):
        return
    batching, max_batch = config.dynamic_batching, config.max_batch_size
    path = "dynamic_batching"
    sizes = list(batching.preferred_batch_size)
    if max_batch == 0:
        ctx.warning(
            "dynamic-batching.no-batching",
            path,
            "dynamic batching on a model with max_batch_size 0 cannot form batches",
            "set max_batch_size > 0, or drop dynamic_batching",
        )
    if any(s <= 0 for s in sizes):
        ctx.error(
            "dynamic-batching.preferred-positive",
            f"{path}.preferred_batch_size",
            f"preferred batch sizes {sizes} include one <= 0",
            "use positive sizes",
        )
    elif any(s > max_batch for s in sizes):
        ctx.error(
            "dynamic-batching.preferred-le-max",
            f"{path}.preferred_batch_size",
            f"preferred batch size {max(sizes)} exceeds max_batch_size {max_batch}",
            f"use sizes up to {max_batch}, or raise max_batch_size",
        )
    elif sizes != sorted(set(sizes)):
        ctx.warning(
            "dynamic-batching.preferred-order",
            f"{path}.preferred_batch_size",
            f"preferred batch sizes {sizes} are not increasing and distinct",
            "list each size once, smallest first",
        )
    levels = batching.priority_levels
    if levels:
        if not 1 <= batching.default_priority_level <= levels:
            ctx.error(
                "dynamic-batching.default-priority",
                f"{path}.default_priority_level",
                f"default priority level {batching.default_priority_level} is outside [1, {levels}]",
                f"set default_priority_level between 1 and {levels}",
            )
        for key in batching.priority_queue_policy:
            if not 1 <= key <= levels:
                ctx.error(
                    "dynamic-batching.priority-policy",
                    f"{path}.priority_queue_policy",
                    f"queue policy for priority {key} is outside [1, {levels}]",
                    f"use priority levels 1 to {levels}",
                )
    if batching.preserve_ordering:
        if levels > 1:
            ctx.error(
                "dynamic-batching.ordering-priority",
                f"{path}.preserve_ordering",
                f"preserve_ordering allows one priority level, not {levels}",
                "drop preserve_ordering or the priority levels",
            )
        policies = [batching.default_queue_policy] if batching.HasField("default_queue_policy") else []
        policies += list(batching.priority_queue_policy.values())
        if any(
            p.default_timeout_microseconds and enum_name(p, "timeout_action") == "DELAY" for p in policies
        ):
            ctx.error(
                "dynamic-batching.ordering-delay",
                f"{path}.default_queue_policy",
                "a DELAY timeout action cannot go with preserve_ordering",
                "use timeout_action: REJECT, or drop ordering",
            )
    slo = ctx.slo_p99_ms
    delay_ms = batching.max_queue_delay_microseconds / 1000
    if slo is not None and delay_ms > slo / 2:
        ctx.warning(
            "dynamic-batching.delay-vs-slo",
            f"{path}.max_queue_delay_microseconds",
            f"queue delay {delay_ms:g} ms is more than half the P99 budget of {slo:g} ms",
            "lower max_queue_delay_microseconds (tritongen tune finds a good value)",
        )


def check_sequence_batching(ctx: ModelContext) -> None:
    """Control tensors (kinds, counts, value pairs, data types) and the strategy's settings."""
    config = ctx.config
    if not config.HasField("sequence_batching"):
        return
    seq, path = config.sequence_batching, "sequence_batching"
    kinds: Counter[str] = Counter()
    names: Counter[str] = Counter()
    for index, control_input in enumerate(seq.control_input):
        where = f"{path}.control_input[{index}]"
        if not control_input.name:
            ctx.error("sequence.control-name", f"{where}.name", "control tensor has no name", "set name")
        names[control_input.name] += 1
        for control in control_input.control:
            kind = enum_name(control, "kind")
            kinds[kind] += 1
            pairs = [
                f for f in ("int32_false_true", "fp32_false_true", "bool_false_true") if getattr(control, f)
            ]
            if kind == "CONTROL_SEQUENCE_CORRID":
                if pairs:
                    ctx.error(
                        "sequence.corrid-values",
                        where,
                        "CONTROL_SEQUENCE_CORRID takes no false/true values",
                        f"drop {pairs[0]}; set data_type",
                    )
                if enum_name(control, "data_type") not in CORRID_TYPES:
                    ctx.error(
                        "sequence.corrid-type",
                        where,
                        "CONTROL_SEQUENCE_CORRID data type must be one of " + ", ".join(sorted(CORRID_TYPES)),
                        "set data_type, e.g. TYPE_UINT64",
                    )
                continue
            if not pairs:
                ctx.error(
                    "sequence.control-values",
                    where,
                    f"{kind} needs int32_false_true, fp32_false_true or bool_false_true",
                    "add e.g. int32_false_true: [0, 1]",
                )
            elif len(pairs) > 1:
                ctx.error(
                    "sequence.control-values",
                    where,
                    f"{kind} sets more than one of {', '.join(pairs)}",
                    "keep one",
                )
            elif len(getattr(control, pairs[0])) != 2:
                ctx.error(
                    "sequence.control-pair",
                    where,
                    f"{kind} {pairs[0]} needs exactly 2 entries (false, true)",
                    f"write e.g. {pairs[0]}: [0, 1]",
                )
    for kind, count in kinds.items():
        if count > 1:
            ctx.error(
                "sequence.control-repeated",
                f"{path}.control_input",
                f"{count} {kind} controls",
                "declare each control kind once",
            )
    for name, count in names.items():
        if name and count > 1:
            ctx.error(
                "sequence.control-tensor-repeated",
                f"{path}.control_input",
                f"control tensor '{name}' is used for several controls",
                "give each control its own tensor",
            )
    if seq.HasField("oldest"):
        sizes = list(seq.oldest.preferred_batch_size)
        if any(s <= 0 for s in sizes):
            ctx.error(
                "sequence.preferred-positive",
                f"{path}.oldest.preferred_batch_size",
                f"preferred batch sizes {sizes} include one <= 0",
                "use positive sizes",
            )
        elif any(s > config.max_batch_size for s in sizes):
            ctx.error(
                "sequence.preferred-le-max",
                f"{path}.oldest.preferred_batch_size",
                f"preferred batch size {max(sizes)} exceeds max_batch_size {config.max_batch_size}",
                "use sizes up to max_batch_size",
            )
    if seq.HasField("direct") and not 0.0 <= seq.direct.minimum_slot_utilization <= 1.0:
        ctx.error(
            "sequence.slot-utilization",
            f"{path}.direct.minimum_slot_utilization",
            "minimum slot utilization must be within [0, 1]",
            "use a value between 0 and 1",
        )
    if config.HasField("response_cache") and config.response_cache.enable:
        ctx.error(
            "response-cache.sequence",
            "response_cache",
            "the response cache does not work with sequence batching",
            "set response_cache { enable: false }",
        )


def check_scheduling(ctx: ModelContext) -> None:
    """Ensemble platform and ensemble scheduling go together; cache and decoupled do not."""
    config = ctx.config
    has_ensemble = config.HasField("ensemble_scheduling")
    if ctx.is_ensemble and not has_ensemble:
        ctx.error(
            "ensemble.scheduling-missing",
            "ensemble_scheduling",
            "platform ensemble without ensemble_scheduling",
            "add ensemble_scheduling { step [...] }",
        )
    if has_ensemble and not ctx.is_ensemble:
        ctx.error(
            "ensemble.platform",
            "ensemble_scheduling",
            "ensemble_scheduling on a model whose platform is not ensemble",
            'set platform: "ensemble", or drop ensemble_scheduling',
        )
    cache = config.HasField("response_cache") and config.response_cache.enable
    if cache and config.model_transaction_policy.decoupled:
        ctx.error(
            "response-cache.decoupled",
            "response_cache",
            "the response cache does not work with a decoupled model",
            "set response_cache { enable: false }",
        )


def check_instance_groups(ctx: ModelContext) -> None:
    """Kinds, GPU ids, counts and profiles of the instance groups."""
    if ctx.is_ensemble:
        return
    for index, group in enumerate(ctx.config.instance_group):
        path, kind = f"instance_group[{index}]", enum_name(group, "kind")
        if group.count < 1:
            ctx.warning(
                "instance-group.count",
                f"{path}.count",
                f"count {group.count} is replaced by Triton's default (1, or 2 on CPU for some backends)",
                "set count: 1 or more",
            )
        if kind in ("KIND_CPU", "KIND_MODEL") and group.gpus:
            ctx.error(
                "instance-group.gpus-on-cpu",
                f"{path}.gpus",
                f"{kind} instances cannot name GPUs",
                "drop gpus, or use kind: KIND_GPU",
            )
        negative = [g for g in group.gpus if g < 0]
        if negative:
            ctx.error(
                "instance-group.gpu-id",
                f"{path}.gpus",
                f"GPU id {negative[0]} is negative",
                "use GPU ids from 0",
            )
        if group.profile and ctx.platform != "tensorrt_plan":
            ctx.error(
                "instance-group.profile",
                f"{path}.profile",
                "profile is only for TensorRT models",
                "drop profile",
            )
        for profile in group.profile if ctx.platform == "tensorrt_plan" else []:
            if not profile.isdigit():
                ctx.error(
                    "instance-group.profile",
                    f"{path}.profile",
                    f"profile '{profile}' is not a non-negative integer",
                    "name TensorRT optimisation profiles by number",
                )


def check_ensemble_config(ctx: ModelContext) -> None:
    """What an ensemble must not carry, and the shape of its steps (without the step models)."""
    if not ctx.is_ensemble:
        return
    config = ctx.config
    if config.instance_group:
        ctx.error(
            "ensemble.instance-group",
            "instance_group",
            "an ensemble takes no instance_group",
            "drop instance_group: the step models have their own",
        )
    if config.HasField("optimization"):
        ctx.error("ensemble.optimization", "optimization", "an ensemble takes no optimization", "drop it")
    if config.model_warmup:
        ctx.error(
            "ensemble.warmup",
            "model_warmup",
            "an ensemble takes no model_warmup",
            "warm up the step models instead",
        )
    if not config.HasField("ensemble_scheduling"):
        return
    steps = config.ensemble_scheduling.step
    if not steps:
        ctx.error("ensemble.no-steps", "ensemble_scheduling.step", "the ensemble has no step", "add steps")
    written: Counter[str] = Counter()
    for index, step in enumerate(steps):
        path = f"ensemble_scheduling.step[{index}]"
        if not step.model_name:
            ctx.error("ensemble.step-model", f"{path}.model_name", "step names no model", "set model_name")
        if not step.input_map:
            ctx.error(
                "ensemble.step-input-map", f"{path}.input_map", "step has no input_map", "map its inputs"
            )
        if not step.output_map:
            ctx.error(
                "ensemble.step-output-map", f"{path}.output_map", "step has no output_map", "map its outputs"
            )
        written.update(step.output_map.values())
    for tensor, count in written.items():
        if count > 1:
            ctx.error(
                "ensemble.tensor-written-twice",
                "ensemble_scheduling.step",
                f"ensemble tensor '{tensor}' is written by several steps",
                "give each step output its own ensemble tensor",
            )
    _check_ensemble_flow(ctx, steps)


def _check_ensemble_flow(ctx: ModelContext, steps: Any) -> None:
    """Every ensemble input used, every output written and reachable, no dangling tensor."""
    inputs = {t.name for t in ctx.config.input}
    outputs = {t.name for t in ctx.config.output}
    consumed = {v for step in steps for v in step.input_map.values()}
    produced = {v for step in steps for v in step.output_map.values()}
    for name in sorted(inputs - consumed):
        ctx.error(
            "ensemble.input-unused",
            "input",
            f"ensemble input '{name}' is not used by any step",
            "map it into a step, or remove it",
        )
    for name in sorted(outputs - produced):
        ctx.error(
            "ensemble.output-unwritten",
            "output",
            f"ensemble output '{name}' is not written by any step",
            "map a step output to it",
        )
    reachable = set(inputs)
    changed = True
    while changed:
        changed = False
        for step in steps:
            if set(step.input_map.values()) <= reachable and not set(step.output_map.values()) <= reachable:
                reachable |= set(step.output_map.values())
                changed = True
    for name in sorted((outputs & produced) - reachable):
        ctx.error(
            "ensemble.output-unreachable",
            "output",
            f"ensemble output '{name}' cannot be computed from "
            "the ensemble inputs (a step waits on a tensor nothing writes, or on a cycle)",
            "feed every step from ensemble inputs or earlier steps",
        )
    for name in sorted(produced - outputs - consumed):
        ctx.error(
            "ensemble.tensor-unused",
            "ensemble_scheduling.step",
            f"ensemble tensor '{name}' is written but never used",
            "use it in a later step, or make it an ensemble output",
        )


def check_warmup(ctx: ModelContext) -> None:
    """Warm-up samples: a data source, concrete dims, and inputs that match the model's."""
    config = ctx.config
    model_inputs = {t.name: t for t in config.input}
    for index, sample in enumerate(config.model_warmup):
        path = f"model_warmup[{index}]"
        label = f"warm-up sample '{sample.name}'" if sample.name else f"warm-up sample #{index}"
        if not sample.name:
            ctx.warning(
                "warmup.name", f"{path}.name", f"{label} has no name", "name it (the log names samples)"
            )
        if sample.batch_size == 0:
            ctx.warning(
                "warmup.batch-size",
                f"{path}.batch_size",
                f"{label} has batch_size 0: Triton skips it",
                "set batch_size: 1 or more",
            )
            continue
        if config.max_batch_size and sample.batch_size > config.max_batch_size:
            ctx.warning(
                "warmup.batch-size",
                f"{path}.batch_size",
                f"{label} batch_size {sample.batch_size} exceeds max_batch_size {config.max_batch_size}",
                "use at most max_batch_size",
            )
        given = dict(sample.inputs)
        for name, tensor in model_inputs.items():
            if name not in given and not tensor.optional:
                ctx.error(
                    "warmup.input-missing",
                    f"{path}.inputs",
                    f"{label} gives no data for input '{name}'",
                    f'add inputs {{ key: "{name}" value: {{ ... }} }}',
                )
        for name, value in given.items():
            where = f"{path}.inputs[{name}]"
            if value.WhichOneof("input_data_type") is None:
                ctx.error(
                    "warmup.data-source",
                    where,
                    f"{label} input '{name}' has no data",
                    "set zero_data, random_data or input_data_file",
                )
            if any(d == -1 for d in value.dims):
                ctx.error(
                    "warmup.variable-dims",
                    f"{where}.dims",
                    f"{label} input '{name}' has variable dims",
                    "give every dim a size",
                )
            if value.WhichOneof("input_data_type") == "input_data_file" and ctx.directory is not None:
                data = ctx.directory / "warmup" / value.input_data_file
                if not data.is_file():
                    ctx.error(
                        "warmup.data-file",
                        f"{where}.input_data_file",
                        f"{data} does not exist",
                        f"put the file in {ctx.directory.name}/warmup/",
                    )
            tensor = model_inputs.get(name)
            if tensor is None:
                ctx.warning(
                    "warmup.unknown-input",
                    where,
                    f"{label} names '{name}', which is not a model input",
                    "fix the name (Triton passes unknown names on without checking)",
                )
                continue
            if value.data_type != tensor.data_type:
                ctx.error(
                    "warmup.data-type",
                    f"{where}.data_type",
                    f"{label} input '{name}' is "
                    f"{enum_name(value, 'data_type')}, the model expects {enum_name(tensor, 'data_type')}",
                    f"set data_type: {enum_name(tensor, 'data_type')}",
                )
            if not _dims_match(list(value.dims), list(tensor.dims)):
                ctx.error(
                    "warmup.dims",
                    f"{where}.dims",
                    f"{label} input '{name}' has dims {list(value.dims)}, "
                    f"the model expects {list(tensor.dims)}",
                    "use the model's dims (without the batch dim)",
                )


def _dims_match(given: list[int], declared: list[int]) -> bool:
    return len(given) == len(declared) and all(
        d == -1 or g == d for g, d in zip(given, declared, strict=True)
    )


MODEL_RULES: tuple[Callable[[ModelContext], None], ...] = (
    check_name,
    check_backend,
    check_versions,
    check_batching_size,
    check_io,
    check_batch_io,
    check_dynamic_batching,
    check_sequence_batching,
    check_scheduling,
    check_instance_groups,
    check_ensemble_config,
    check_warmup,
)


def lint_model(ctx: ModelContext) -> list[Finding]:
    """Run every model-level rule; a rule that trips over odd input does not stop the others."""
    for rule in MODEL_RULES:
        try:
            rule(ctx)
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as e:
            ctx.error(
                "lint.internal",
                "",
                f"rule {rule.__name__} could not judge this config: {e}",
                "report this to tritongen",
            )
    return ctx.findings


def iter_steps(ctx: ModelContext) -> Iterator[tuple[int, Any]]:
    """An ensemble's steps with their indexes."""
    if ctx.is_ensemble and ctx.config.HasField("ensemble_scheduling"):
        yield from enumerate(ctx.config.ensemble_scheduling.step)
