"""The config and metadata of one built model directory: I/O from the signature, then the user's options."""

from __future__ import annotations

from tritongen import __version__
from tritongen.convert.artifact import Artifact, Target
from tritongen.convert.reduced import PrecisionReport
from tritongen.convert.verify import (
    Verification,
)
from tritongen.convert.wrappers import SCALARS_PARAMETER
from tritongen.errors import ConfigError
from tritongen.pipeline.request import BuildRequest
from tritongen.sources.model_source import ModelSource
from tritongen.sources.signature import Signature, TensorSpec
from tritongen.triton.batching import DEFAULT_MAX_BATCH_SIZE, BatchingOptions, apply_batching, resolve_kind
from tritongen.triton.model_config import (
    InstanceGroup,
    InstanceKind,
    ModelConfig,
    ModelInput,
    ModelOutput,
    Reshape,
)


def resolve_max_batch_size(name: str, signature: Signature, options: BatchingOptions) -> int:
    """The max batch size the configs will get (see :func:`model_config_for`).

    Raises:
        ConfigError: batching was asked of a model without a batch dim.
    """
    if signature.batched:
        return DEFAULT_MAX_BATCH_SIZE if options.max_batch_size is None else options.max_batch_size
    if options.max_batch_size:
        raise ConfigError(
            f"'{name}' cannot batch: its inputs have no dynamic leading dim, "
            f"so --max-batch-size {options.max_batch_size} is impossible",
            "drop --max-batch-size, or re-export the model with a dynamic batch dim",
        )
    return 0


def model_config_for(
    name: str, signature: Signature, artifact: Artifact, options: BatchingOptions, target: Target
) -> ModelConfig:
    """Build the config of one artifact: I/O from the signature, then the user's options.

    A batched signature gets ``max_batch_size`` (default 32) and dynamic batching on;
    instances are one on the target's default kind (a CPU-built TVM library: KIND_CPU);
    ``--max-batch-size 0`` turns batching off and keeps the batch dim in the dims. A
    signature without a batch dim gets ``max_batch_size: 0``.

    Raises:
        ConfigError: batching was asked of a model without a batch dim, or the options
            are illegal.
    """
    max_batch = resolve_max_batch_size(name, signature, options)
    keep_batch_dim = signature.batched and max_batch == 0
    # A TVM library built for a CPU runs on the CPU on every target: ``auto`` means KIND_CPU for it.
    cpu_only = artifact.format == "tvm" and artifact.engine.get("device") != "cuda"
    auto_kind: InstanceKind = "KIND_CPU" if cpu_only else resolve_kind("auto", target)
    base = ModelConfig(
        name=name,
        backend=artifact.backend,
        platform=artifact.platform,
        max_batch_size=max_batch,
        input=[ModelInput(**_tensor_fields(t, keep_batch_dim)) for t in signature.inputs],
        output=[ModelOutput(**_tensor_fields(t, keep_batch_dim)) for t in signature.outputs],
        instance_group=[InstanceGroup(count=1, kind=auto_kind)],
        parameters={**artifact.parameters, **_scalar_parameter(signature, max_batch)},
    )
    dynamic = options.dynamic_batching
    if dynamic is None and max_batch > 0:
        dynamic = True
    resolved = BatchingOptions(
        max_batch_size=None,
        dynamic_batching=dynamic if max_batch > 0 else options.dynamic_batching,
        preferred_batch_sizes=options.preferred_batch_sizes,
        max_queue_delay_us=options.max_queue_delay_us,
        instances=options.instances,
        kind="cpu" if cpu_only and options.kind == "auto" else options.kind,
    )
    return apply_batching(base, resolved, target)


def _scalar_parameter(signature: Signature, max_batch: int) -> dict[str, str]:
    """Tell the served wrapper which inputs are one value per request, on a model that batches."""
    scalars = [t.name for t in signature.inputs if t.scalar]
    return {SCALARS_PARAMETER: ",".join(scalars)} if scalars and max_batch > 0 else {}


def _tensor_fields(tensor: TensorSpec, keep_batch_dim: bool) -> dict[str, object]:
    dims = [-1, *tensor.dims] if keep_batch_dim else list(tensor.dims)
    fields: dict[str, object] = {"name": tensor.name, "data_type": tensor.data_type, "dims": dims}
    if not dims:
        # Triton wants at least one dim; a scalar per batch item travels as [1].
        fields["dims"] = [1]
        fields["reshape"] = Reshape(shape=[])
    return fields


def model_metadata(
    request: BuildRequest,
    source: ModelSource,
    artifact: Artifact,
    verification: Verification | None,
    precision: PrecisionReport | None = None,
) -> dict[str, object]:
    """The ``tritongen.json`` written beside a built model: source, signature, engine, verification."""
    signature = source.signature
    return {
        "schema": "tritongen.model/1",
        "tritongen_version": __version__,
        "format": artifact.format,
        "target": request.target,
        "source": {"path": str(request.source), "kind": source.kind, "sha256": source.sha256},
        "signature": {
            "batched": signature.batched,
            "inputs": [
                {"name": t.name, "data_type": t.data_type, "dims": list(t.dims)} for t in signature.inputs
            ],
            "outputs": [
                {"name": t.name, "data_type": t.data_type, "dims": list(t.dims)} for t in signature.outputs
            ],
        },
        "engine": artifact.engine,
        "verification": verification.to_json() if verification is not None else None,
        "precision": precision.to_json() if precision is not None else None,
        "python_requirements": list(artifact.python_requirements),
    }
