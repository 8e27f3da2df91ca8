"""Build model directories from a source model: convert, configure, render, publish atomically."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tritongen import __version__
from tritongen.convert.artifact import TARGETS, Artifact, Target
from tritongen.errors import ConfigError, SourceError
from tritongen.sources.onnx_source import OnnxSource
from tritongen.sources.signature import Signature, TensorSpec
from tritongen.triton.batching import DEFAULT_MAX_BATCH_SIZE, BatchingOptions, apply_batching, resolve_kind
from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput, Reshape
from tritongen.triton.names import check_model_name
from tritongen.triton.render import render_config
from tritongen.triton.repository import METADATA_FILE, check_free, ensure_writable_repo, publish, staging_dir

FORMATS = ("onnx",)
"""Target formats this version can build."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildRequest:
    """Everything ``tritongen convert`` needs."""

    source: Path
    name: str
    repo: Path
    target: Target = "local"
    formats: tuple[str, ...] = ("onnx",)
    options: BatchingOptions = field(default_factory=BatchingOptions)
    force: bool = False
    templates_dir: Path | None = None


@dataclass(frozen=True)
class BuiltModel:
    """One model directory written into the repository."""

    name: str
    format: str
    path: Path
    files: tuple[str, ...]
    config: ModelConfig


@dataclass(frozen=True)
class BuildResult:
    """What a build wrote, and the source signature it was built from."""

    source: Path
    signature: Signature
    models: tuple[BuiltModel, ...]


def model_dir_name(name: str, fmt: str) -> str:
    """Directory (and Triton model) name of one format of a model, e.g. ``bert_onnx``."""
    return f"{name}_{fmt}"


def build_models(request: BuildRequest, progress: Progress | None = None) -> BuildResult:
    """Convert ``request.source`` into every requested format and publish the models.

    Nothing is written into the repository until every format has been converted,
    configured, rendered and checked; then each model directory is renamed into place.

    Raises:
        TritongenError: any problem with the source, the options, the templates or the
            repository; the repository is left as it was.
    """
    say = progress or (lambda _msg: None)
    check_model_name(request.name)
    if request.target not in TARGETS:
        raise ConfigError(f"unknown target {request.target!r}", "use --target local or --target container")
    unknown = [f for f in request.formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"format {unknown[0]!r} is not supported", f"choose from: {', '.join(FORMATS)}")
    if not request.formats:
        raise ConfigError("no format requested", f"pass --formats with some of: {', '.join(FORMATS)}")
    request.options.check()
    names = [model_dir_name(request.name, f) for f in request.formats]
    for name in names:
        check_model_name(name)

    say(f"loading {request.source}")
    source = _load_source(request.source)
    ensure_writable_repo(request.repo)
    check_free(request.repo, names, request.force)

    built: list[BuiltModel] = []
    with staging_dir(request.repo) as staged:
        for fmt, name in zip(request.formats, names, strict=True):
            say(f"converting to {fmt}")
            model_dir = staged / name
            artifact = _convert(fmt, source, model_dir, request.target)
            config = model_config_for(name, source.signature, artifact, request.options, request.target)
            text = render_config(config, request.templates_dir)
            (model_dir / "config.pbtxt").write_text(text, encoding="utf-8")
            metadata = _metadata(request, source.sha256, source.signature, artifact)
            (model_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
            files = ("config.pbtxt", *artifact.files, METADATA_FILE)
            built.append(
                BuiltModel(name=name, format=fmt, path=request.repo / name, files=files, config=config)
            )
        say("publishing")
        publish(staged, request.repo, names, request.force)
    return BuildResult(source=request.source, signature=source.signature, models=tuple(built))


def _load_source(path: Path) -> OnnxSource:
    if path.suffix.lower() != ".onnx":
        raise SourceError(
            f"{path} is not an ONNX file (.onnx)",
            "this version converts ONNX sources; export the model to ONNX",
        )
    from tritongen.sources.onnx_source import load_onnx

    return load_onnx(path)


def _convert(fmt: str, source: OnnxSource, model_dir: Path, target: Target) -> Artifact:
    from tritongen.convert.onnx import write_onnx_artifact

    return write_onnx_artifact(source, model_dir, target)


def model_config_for(
    name: str, signature: Signature, artifact: Artifact, options: BatchingOptions, target: Target
) -> ModelConfig:
    """Build the config of one artifact: I/O from the signature, then the user's options.

    A batched signature gets ``max_batch_size`` (default 32) and dynamic batching on;
    ``--max-batch-size 0`` turns batching off and keeps the batch dim in the dims. A
    signature without a batch dim gets ``max_batch_size: 0``.

    Raises:
        ConfigError: batching was asked of a model without a batch dim, or the options
            are illegal.
    """
    if signature.batched:
        max_batch = DEFAULT_MAX_BATCH_SIZE if options.max_batch_size is None else options.max_batch_size
    else:
        if options.max_batch_size:
            raise ConfigError(
                f"'{name}' cannot batch: its inputs have no dynamic leading dim, "
                f"so --max-batch-size {options.max_batch_size} is impossible",
                "drop --max-batch-size, or re-export the model with a dynamic batch dim",
            )
        max_batch = 0
    keep_batch_dim = signature.batched and max_batch == 0
    base = ModelConfig(
        name=name,
        backend=artifact.backend,
        platform=artifact.platform,
        max_batch_size=max_batch,
        input=[ModelInput(**_tensor_fields(t, keep_batch_dim)) for t in signature.inputs],
        output=[ModelOutput(**_tensor_fields(t, keep_batch_dim)) for t in signature.outputs],
        instance_group=[InstanceGroup(count=1, kind=resolve_kind("auto", target))],
        parameters=dict(artifact.parameters),
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
        kind=options.kind,
    )
    return apply_batching(base, resolved, target)


def _tensor_fields(tensor: TensorSpec, keep_batch_dim: bool) -> dict[str, object]:
    dims = [-1, *tensor.dims] if keep_batch_dim else list(tensor.dims)
    fields: dict[str, object] = {"name": tensor.name, "data_type": tensor.data_type, "dims": dims}
    if not dims:
        # Triton wants at least one dim; a scalar per batch item travels as [1].
        fields["dims"] = [1]
        fields["reshape"] = Reshape(shape=[])
    return fields


def _metadata(
    request: BuildRequest, sha256: str, signature: Signature, artifact: Artifact
) -> dict[str, object]:
    return {
        "schema": "tritongen.model/1",
        "tritongen_version": __version__,
        "format": artifact.format,
        "target": request.target,
        "source": {"path": str(request.source), "sha256": sha256},
        "signature": {
            "batched": signature.batched,
            "inputs": [
                {"name": t.name, "data_type": t.data_type, "dims": list(t.dims)} for t in signature.inputs
            ],
            "outputs": [
                {"name": t.name, "data_type": t.data_type, "dims": list(t.dims)} for t in signature.outputs
            ],
        },
        "python_requirements": list(artifact.python_requirements),
    }
