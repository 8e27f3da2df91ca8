"""The typed Triton model configuration.

Field names follow Triton's ``model_config.proto`` exactly (``input``, ``output``,
``instance_group`` ...), so a parsed protobuf message converts to this model through
``MessageToDict`` without a hand-written mapping. Fields tritongen does not model are
kept verbatim as protobuf text in :attr:`ModelConfig.passthrough` so that rewriting a
user's config never drops them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DataType = Literal[
    "TYPE_BOOL",
    "TYPE_UINT8",
    "TYPE_UINT16",
    "TYPE_UINT32",
    "TYPE_UINT64",
    "TYPE_INT8",
    "TYPE_INT16",
    "TYPE_INT32",
    "TYPE_INT64",
    "TYPE_FP16",
    "TYPE_FP32",
    "TYPE_FP64",
    "TYPE_STRING",
    "TYPE_BF16",
]
InstanceKind = Literal["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"]
TimeoutAction = Literal["REJECT", "DELAY"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Reshape(_Model):
    """The shape a tensor is reshaped to inside the model (``reshape { shape: [...] }``)."""

    shape: list[int] = Field(default_factory=list)


class ModelInput(_Model):
    """One input tensor: name, data type, dims without the batch dim."""

    name: str
    data_type: DataType
    dims: list[int] = Field(default_factory=list)
    reshape: Reshape | None = None
    is_shape_tensor: bool = False
    allow_ragged_batch: bool = False
    optional: bool = False


class ModelOutput(_Model):
    """One output tensor: name, data type, dims without the batch dim."""

    name: str
    data_type: DataType
    dims: list[int] = Field(default_factory=list)
    reshape: Reshape | None = None
    label_filename: str = ""
    is_shape_tensor: bool = False


class QueuePolicy(_Model):
    """How requests wait in a dynamic-batching queue."""

    timeout_action: TimeoutAction = "REJECT"
    default_timeout_microseconds: int = Field(default=0, ge=0)
    allow_timeout_override: bool = False
    max_queue_size: int = Field(default=0, ge=0)


class DynamicBatching(_Model):
    """Server-side batching of individual requests."""

    preferred_batch_size: list[int] = Field(default_factory=list)
    max_queue_delay_microseconds: int = Field(default=0, ge=0)
    preserve_ordering: bool = False
    priority_levels: int = Field(default=0, ge=0)
    default_priority_level: int = Field(default=0, ge=0)
    default_queue_policy: QueuePolicy | None = None
    priority_queue_policy: dict[int, QueuePolicy] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_priorities(self) -> DynamicBatching:
        if any(size <= 0 for size in self.preferred_batch_size):
            raise ValueError("preferred_batch_size entries must be positive")
        if self.priority_levels and not 1 <= self.default_priority_level <= self.priority_levels:
            raise ValueError(
                f"default_priority_level {self.default_priority_level} must be within "
                f"1..priority_levels ({self.priority_levels})"
            )
        for level in self.priority_queue_policy:
            if not 1 <= level <= self.priority_levels:
                raise ValueError(f"priority_queue_policy level {level} is not a priority level")
        return self


class InstanceGroup(_Model):
    """How many copies of the model run, and where."""

    name: str = ""
    kind: InstanceKind = "KIND_AUTO"
    count: int = Field(default=1, ge=1)
    gpus: list[int] = Field(default_factory=list)
    profile: list[str] = Field(default_factory=list)
    passive: bool = False
    host_policy: str = ""

    @field_validator("gpus")
    @classmethod
    def _non_negative_gpus(cls, gpus: list[int]) -> list[int]:
        if any(gpu < 0 for gpu in gpus):
            raise ValueError("gpus must be non-negative device ids")
        return gpus


class WarmupInput(_Model):
    """Data for one input of a warmup request: zeros, random, or a file."""

    data_type: DataType
    dims: list[int] = Field(default_factory=list)
    zero_data: bool = False
    random_data: bool = False
    input_data_file: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> WarmupInput:
        chosen = [self.zero_data, self.random_data, bool(self.input_data_file)]
        if sum(chosen) != 1:
            raise ValueError("a warmup input needs exactly one of zero_data, random_data, input_data_file")
        return self


class ModelWarmup(_Model):
    """A warmup request the server sends before the model is marked ready."""

    name: str
    batch_size: int = Field(default=0, ge=0)
    inputs: dict[str, WarmupInput] = Field(default_factory=dict)
    count: int = Field(default=0, ge=0)


class Accelerator(_Model):
    """An execution accelerator (e.g. ``tensorrt`` or ``openvino`` for ONNX Runtime)."""

    name: str
    parameters: dict[str, str] = Field(default_factory=dict)


class ExecutionAccelerators(_Model):
    """Accelerators for GPU and CPU instances."""

    gpu_execution_accelerator: list[Accelerator] = Field(default_factory=list)
    cpu_execution_accelerator: list[Accelerator] = Field(default_factory=list)


class CudaOptimization(_Model):
    """CUDA-specific settings."""

    graphs: bool = False
    busy_wait_events: bool = False
    output_copy_stream: bool = False


class GraphOptimization(_Model):
    """Framework graph optimisation level (TensorFlow/ONNX Runtime backends)."""

    level: int = 0


class PinnedMemory(_Model):
    """Whether pinned host memory is used for staging tensors."""

    enable: bool = False


class Optimization(_Model):
    """The ``optimization`` block."""

    graph: GraphOptimization | None = None
    priority: Literal["PRIORITY_DEFAULT", "PRIORITY_MAX", "PRIORITY_MIN"] = "PRIORITY_DEFAULT"
    cuda: CudaOptimization | None = None
    execution_accelerators: ExecutionAccelerators | None = None
    input_pinned_memory: PinnedMemory | None = None
    output_pinned_memory: PinnedMemory | None = None


class VersionLatest(_Model):
    """Serve the newest ``num_versions`` versions."""

    num_versions: int = Field(default=1, ge=1)


class VersionAll(_Model):
    """Serve every version."""


class VersionSpecific(_Model):
    """Serve the listed versions."""

    versions: list[int] = Field(default_factory=list)


class VersionPolicy(_Model):
    """Which versions of the model are served (exactly one of the three)."""

    latest: VersionLatest | None = None
    all: VersionAll | None = None
    specific: VersionSpecific | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> VersionPolicy:
        if sum(x is not None for x in (self.latest, self.all, self.specific)) != 1:
            raise ValueError("version_policy needs exactly one of latest, all, specific")
        return self


class ResponseCache(_Model):
    """Triton's response cache for this model."""

    enable: bool = False


class ModelConfig(_Model):
    """A Triton model configuration (the fields of ``config.pbtxt`` tritongen writes)."""

    name: str
    platform: str = ""
    backend: str = ""
    default_model_filename: str = ""
    version_policy: VersionPolicy | None = None
    max_batch_size: int = Field(default=0, ge=0)
    input: list[ModelInput] = Field(default_factory=list)
    output: list[ModelOutput] = Field(default_factory=list)
    dynamic_batching: DynamicBatching | None = None
    instance_group: list[InstanceGroup] = Field(default_factory=list)
    optimization: Optimization | None = None
    model_warmup: list[ModelWarmup] = Field(default_factory=list)
    response_cache: ResponseCache | None = None
    parameters: dict[str, str] = Field(default_factory=dict)
    passthrough: str = ""
    """Protobuf text of the config fields tritongen does not model, written back verbatim."""

    @field_validator("parameters", mode="before")
    @classmethod
    def _flatten_parameters(cls, value: Any) -> Any:
        # Triton's proto wraps each parameter: {"key": {"string_value": "v"}}.
        if isinstance(value, dict):
            return {
                key: (val.get("string_value", "") if isinstance(val, dict) else val)
                for key, val in value.items()
            }
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> ModelConfig:
        for kind, tensors in (("input", self.input), ("output", self.output)):
            names = [t.name for t in tensors]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{kind} names must be unique; repeated: {', '.join(dupes)}")
            for tensor in tensors:
                if any(d == 0 or d < -1 for d in tensor.dims):
                    raise ValueError(
                        f"{kind} '{tensor.name}' has illegal dims {tensor.dims}: "
                        "each dim is -1 (dynamic) or positive"
                    )
        if self.dynamic_batching is not None:
            if self.max_batch_size == 0 and self.dynamic_batching.preferred_batch_size:
                raise ValueError("preferred_batch_size needs batching: max_batch_size is 0")
            too_big = [s for s in self.dynamic_batching.preferred_batch_size if s > self.max_batch_size]
            if self.max_batch_size and too_big:
                raise ValueError(
                    f"preferred batch sizes {too_big} exceed max_batch_size {self.max_batch_size}"
                )
        return self

    @property
    def batching(self) -> bool:
        """Whether the model accepts a batch dimension (``max_batch_size > 0``)."""
        return self.max_batch_size > 0
