"""Build model directories from a source model: convert, configure, render, publish atomically."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tritongen import __version__
from tritongen.convert.artifact import TARGETS, Artifact, Runner, Target
from tritongen.convert.formats import FORMATS, ConvertOptions, ConvertSession, discard, unavailable_reason
from tritongen.convert.precision import FP32, PrecisionOptions, Variant, variant_unavailable_reason
from tritongen.convert.reduced import PrecisionReport, onnxruntime_runner
from tritongen.convert.tensorrt import EngineUnavailableError, TensorRtOptions
from tritongen.convert.torch_export import TorchScriptMode
from tritongen.convert.tvm import TvmOptions
from tritongen.convert.verify import (
    TOLERANCES,
    Tolerance,
    Verification,
    broken_verification,
    load_verify_data,
    shaped_batches,
    verification_batches,
    verify_artifact,
)
from tritongen.errors import ConfigError, ConversionError, MissingDependencyError, engine_error
from tritongen.lint.repository import lint_model_text
from tritongen.sources.model_source import ModelSource, load_source
from tritongen.sources.samples import Feed
from tritongen.sources.signature import Signature, TensorSpec
from tritongen.triton.batching import DEFAULT_MAX_BATCH_SIZE, BatchingOptions, apply_batching, resolve_kind
from tritongen.triton.model_config import (
    CudaOptimization,
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
    Optimization,
    Reshape,
)
from tritongen.triton.names import check_model_name
from tritongen.triton.render import render_config
from tritongen.triton.repository import METADATA_FILE, check_free, ensure_writable_repo, publish, staging_dir

Progress = Callable[[str], None]

CONVERT_SCHEMA = "tritongen.convert/1"

OutcomeStatus = Literal["built", "kept", "failed", "unavailable"]
"""``kept``: failed verification but written anyway (``--keep-failed``)."""


@dataclass(frozen=True)
class VerifyOptions:
    """How artifacts are checked against the source before they enter the repository."""

    data: Path | None = None
    atol: float | None = None
    rtol: float | None = None
    keep_failed: bool = False
    skip: bool = False

    def tolerance(self, precision: str = "fp32") -> Tolerance:
        """The tolerance for ``precision``: the default, or the user's element-wise one.

        ``--atol``/``--rtol`` replace the default, INT8's relative RMS test included.
        """
        base = TOLERANCES.get(precision, TOLERANCES["fp32"])
        if self.atol is None and self.rtol is None:
            return base
        return Tolerance(
            atol=base.atol if self.atol is None else self.atol,
            rtol=base.rtol if self.rtol is None else self.rtol,
        )


@dataclass(frozen=True)
class BuildRequest:
    """Everything ``tritongen convert`` needs."""

    source: Path | str
    name: str
    repo: Path
    target: Target = "local"
    formats: tuple[str, ...] = ("onnx",)
    options: BatchingOptions = field(default_factory=BatchingOptions)
    force: bool = False
    templates_dir: Path | None = None
    input_specs: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    torchscript_mode: TorchScriptMode = "trace"
    tvm: TvmOptions = field(default_factory=TvmOptions)
    tensorrt: TensorRtOptions = field(default_factory=TensorRtOptions)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    precisions: tuple[Variant, ...] = (FP32,)
    """Every format is built in each of these precisions it takes (one model directory each)."""
    precision: PrecisionOptions = field(default_factory=PrecisionOptions)
    list_unsupported_precisions: bool = True
    """Report (format, precision) pairs no format takes as ``unavailable``; off for ``--formats all``."""


@dataclass(frozen=True)
class BuiltModel:
    """One model directory written into the repository."""

    name: str
    format: str
    path: Path
    files: tuple[str, ...]
    config: ModelConfig
    engine: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class FormatOutcome:
    """What happened to one requested format."""

    format: str
    name: str
    status: OutcomeStatus
    variant: Variant = FP32
    reason: str | None = None
    hint: str | None = None
    model: BuiltModel | None = None
    verification: Verification | None = None
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()
    """Lint warnings on the written config: legal, but probably not what was meant."""
    precision: PrecisionReport | None = None
    """How a reduced-precision variant was made and how far it drifts from FP32."""

    @property
    def label(self) -> str:
        """The format and, when reduced, the precision: ``onnx``, ``onnx int8 dynamic``."""
        return self.variant.of(self.format)


@dataclass(frozen=True)
class BuildResult:
    """What a build wrote, and the source signature it was built from."""

    source: Path | str
    signature: Signature
    outcomes: tuple[FormatOutcome, ...]
    source_kind: str = "onnx"

    @property
    def models(self) -> tuple[BuiltModel, ...]:
        """The model directories written (built or kept)."""
        return tuple(o.model for o in self.outcomes if o.model is not None)

    @property
    def failures(self) -> tuple[FormatOutcome, ...]:
        """Formats that were asked for and did not make it into the repository clean."""
        return tuple(o for o in self.outcomes if o.status != "built")

    def to_json(self, request: BuildRequest) -> dict[str, Any]:
        """The ``tritongen.convert/1`` document: every model directory, its verification and accuracy."""
        return {
            "schema": CONVERT_SCHEMA,
            "tritongen_version": __version__,
            "source": str(self.source),
            "name": request.name,
            "repo": str(request.repo),
            "target": request.target,
            "signature": self.signature.describe(),
            "precision_settings": request.precision.to_json(),
            "outcomes": [
                {
                    "format": o.format,
                    "variant": o.variant.key,
                    "label": o.label,
                    "model": o.name,
                    "status": o.status,
                    "reason": o.reason,
                    "seconds": round(o.seconds, 3),
                    "verification": o.verification.to_json() if o.verification is not None else None,
                    "precision": o.precision.to_json() if o.precision is not None else None,
                }
                for o in self.outcomes
            ],
        }


def model_dir_name(name: str, fmt: str, variant: Variant = FP32) -> str:
    """Directory (and Triton model) name of one format of a model, e.g. ``bert_onnx``, ``bert_onnx_int8``."""
    return f"{name}_{fmt}{variant.suffix}"


def build_plan(
    formats: tuple[str, ...], variants: tuple[Variant, ...]
) -> tuple[list[tuple[str, Variant]], list[tuple[str, Variant, str]]]:
    """The (format, precision) pairs to build, and those no format here takes (with why).

    Raises:
        ConfigError: no requested format takes any requested precision.
    """
    planned: list[tuple[str, Variant]] = []
    skipped: list[tuple[str, Variant, str]] = []
    for fmt in formats:
        for variant in variants:
            reason = variant_unavailable_reason(fmt, variant)
            if reason is None:
                planned.append((fmt, variant))
            else:
                skipped.append((fmt, variant, reason))
    if not planned:
        raise ConfigError(skipped[0][2], "add --formats onnx, or choose --precision fp32")
    return planned, skipped


def build_models(request: BuildRequest, progress: Progress | None = None) -> BuildResult:
    """Convert ``request.source`` into every requested format, verify each, publish the good ones.

    Every format is converted, configured, rendered and verified in a staging directory
    inside the repository; only then is each passing model directory renamed into
    place. A format that fails (conversion error, verification outside tolerance, engine
    missing) is reported in its :class:`FormatOutcome` and the others still build.

    Raises:
        TritongenError: problems with the source, the options, the templates or the
            repository (nothing is written then).
    """
    say = progress or (lambda _msg: None)
    check_model_name(request.name)
    if request.target not in TARGETS:
        raise ConfigError(f"unknown target {request.target!r}", "use --target local or --target container")
    if not request.formats:
        raise ConfigError("no format requested", f"pass --formats with some of: {', '.join(FORMATS)}")
    unknown = [f for f in request.formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"format {unknown[0]!r} is not supported", f"choose from: {', '.join(FORMATS)}")
    request.options.check()
    plan, skipped = build_plan(request.formats, request.precisions)
    request.precision.check(tuple(v for _, v in plan), tuple(f for f, v in plan if v.reduced))
    names = [model_dir_name(request.name, f, v) for f, v in plan]
    for name in names:
        check_model_name(name)

    say(f"loading {request.source}")
    source = load_source(str(request.source), request.input_specs, request.output_names)
    ensure_writable_repo(request.repo)
    check_free(request.repo, names, request.force)
    max_batch = resolve_max_batch_size(request.name, source.signature, request.options)
    batches = (
        [] if request.verify.skip else verification_batches(source.signature, max_batch, request.verify.data)
    )

    convert_options = ConvertOptions(
        target=request.target,
        max_batch_size=max_batch,
        torchscript_mode=request.torchscript_mode,
        tvm=request.tvm,
        tensorrt=request.tensorrt,
        precision=request.precision,
    )
    outcomes: list[FormatOutcome] = []
    with staging_dir(request.repo) as staged, tempfile.TemporaryDirectory(prefix="tritongen-") as work:
        session = ConvertSession(source, Path(work), convert_options, say)
        for fmt, variant in plan:
            if fmt == "tensorrt":  # impossible TensorRT options are refused before anything is built
                session.tensorrt_options(variant)
        session.verify_feeds = (
            load_verify_data(request.verify.data, source.signature, max(1, max_batch))
            if request.verify.data is not None
            else ()
        )
        session.random_feeds = verification_batches(source.signature, max_batch)
        _check_precision_inputs(session, plan)
        for (fmt, variant), name in zip(plan, names, strict=True):
            outcomes.append(_build_one(request, session, fmt, variant, name, staged, batches, say))
        for fmt, variant, reason in skipped if request.list_unsupported_precisions else ():
            outcomes.append(
                FormatOutcome(
                    format=fmt,
                    name=model_dir_name(request.name, fmt, variant),
                    status="unavailable",
                    variant=variant,
                    reason=reason,
                )
            )
        publishable = [o.name for o in outcomes if o.model is not None]
        if publishable:
            say("publishing")
            publish(staged, request.repo, publishable, request.force)
    return BuildResult(
        source=request.source, signature=source.signature, outcomes=tuple(outcomes), source_kind=source.kind
    )


def _build_one(
    request: BuildRequest,
    session: ConvertSession,
    fmt: str,
    variant: Variant,
    name: str,
    staged: Path,
    batches: list[Feed],
    say: Progress,
) -> FormatOutcome:
    source = session.source
    started = time.perf_counter()
    model_dir = staged / name
    label = variant.of(fmt)

    def outcome(status: OutcomeStatus, **kwargs: Any) -> FormatOutcome:
        return FormatOutcome(
            format=fmt,
            name=name,
            status=status,
            variant=variant,
            seconds=time.perf_counter() - started,
            precision=session.reports.get((fmt, variant)),
            **kwargs,
        )

    reason = unavailable_reason(fmt, source.kind)
    if reason is not None and fmt != "tensorrt":  # TensorRT explains itself: how to build elsewhere
        return outcome("unavailable", reason=reason)
    say(f"converting to {label}")
    try:
        artifact = session.convert(fmt, model_dir, request.repo / name, variant)
        config = model_config_for(name, source.signature, artifact, request.options, request.target)
        if request.tensorrt.cuda_graphs and fmt == "tensorrt":
            config = config.model_copy(
                update={"optimization": Optimization(cuda=CudaOptimization(graphs=True))}
            )
        text = render_config(config, request.templates_dir)
    except (ConversionError, MissingDependencyError) as e:  # this format fails, the others go on
        discard(model_dir)
        return outcome(
            "unavailable" if isinstance(e, EngineUnavailableError) else "failed",
            reason=e.message,
            hint=e.hint,
        )
    verification: Verification | None = None
    report = session.reports.get((fmt, variant))
    runner = None
    if batches or report is not None:
        tolerance = request.verify.tolerance(variant.precision)
        try:
            runner = session.runner(fmt, model_dir)
        except Exception as e:  # the artifact does not even load: that is its verdict
            verification = broken_verification(
                label,
                source.reference_name,
                tolerance,
                f"the {label} artifact does not load: {engine_error(e)}",
            )
        if runner is not None and batches:
            say(f"verifying {label} against {source.reference_name}")
            checked = batches + shaped_batches(source.signature, _tuned_shapes(artifact))
            if report is not None:  # reduced precision is judged on data like production's
                representative, described = session.reduced().evaluation()
                if not described.startswith("random"):
                    checked = representative
            verification = verify_artifact(
                label,
                runner,
                session.reference(),
                source.reference_name,
                source.signature,
                checked,
                tolerance,
            )
    if report is not None:
        _measure_accuracy(session, report, runner, model_dir, label, say)
    (model_dir / "config.pbtxt").write_text(text, encoding="utf-8")
    metadata = _metadata(request, source, artifact, verification, report)
    (model_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    dry = bool(artifact.engine.get("dry_run"))  # its plan is built later, elsewhere
    shown = str(request.repo / name / "config.pbtxt")
    findings = lint_model_text(text, model_dir, shown, check_files=not dry)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        discard(model_dir)
        return outcome(
            "failed",
            reason=f"the config breaks Triton's rules: {errors[0].text()}",
            hint="fix the template or the options (tritongen lint explains every rule)",
            verification=verification,
        )
    warnings = tuple(f.text() for f in findings)
    files = ("config.pbtxt", *artifact.files, METADATA_FILE)
    model = BuiltModel(
        name=name, format=fmt, path=request.repo / name, files=files, config=config, engine=artifact.engine
    )
    if verification is not None and not verification.passed:
        if request.verify.keep_failed:
            reason = verification.failure()
            return outcome("kept", reason=reason, model=model, verification=verification, warnings=warnings)
        discard(model_dir)
        return outcome(
            "failed",
            reason=f"verification failed: {verification.failure()}",
            hint=(
                f"the {fmt} engine cannot run this model; build another format (--formats)"
                if verification.error is not None
                else "keep sensitive nodes in FP32 (--keep-fp32, or --auto-mixed-precision --max-error X), "
                "calibrate on representative data, or loosen --atol/--rtol; --keep-failed writes it anyway"
                if variant.reduced
                else "fix the model or loosen --atol/--rtol; --keep-failed writes it anyway"
            ),
            verification=verification,
        )
    return outcome("built", model=model, verification=verification, warnings=warnings)


def _check_precision_inputs(session: ConvertSession, plan: list[tuple[str, Variant]]) -> None:
    """Read the calibration data and resolve ``--keep-fp32`` before any format is built.

    Raises:
        TritongenError: the data does not fit the model, or a pattern matches no node.
    """
    options = session.options.precision
    if not any(variant.reduced for _, variant in plan):
        return
    reduced = session.reduced()
    if options.keep_fp32:
        reduced.kept()
    if options.calibration is not None and any(variant.calibrated for _, variant in plan):
        reduced.calibration()


def _measure_accuracy(
    session: ConvertSession,
    report: PrecisionReport,
    runner: Runner | None,
    model_dir: Path,
    label: str,
    say: Progress,
) -> None:
    """Measure a reduced variant's drift: the artifact itself, or the Q/DQ model TensorRT builds from."""
    if runner is None:
        prepared = model_dir / "trt-build" / "model.onnx"
        if not prepared.is_file():
            return
        runner = onnxruntime_runner(prepared, session.source.signature)
        report.accuracy_of = "its Q/DQ model on ONNX Runtime (the plan is built elsewhere)"
    say(f"measuring the accuracy of {label} against FP32")
    try:
        session.reduced().measure(runner, report)
    except Exception as e:  # reported with the verification; the build goes on
        report.accuracy_data = f"not measured: {engine_error(e)}"


def _tuned_shapes(artifact: Artifact) -> dict[str, tuple[int, ...]]:
    """Input shapes an engine was specialised for (TVM tuning): verified on top of the random batches."""
    tuning = artifact.engine.get("tuning")
    shapes = tuning.get("shapes") if isinstance(tuning, dict) else None
    return {str(k): tuple(int(d) for d in v) for k, v in shapes.items()} if isinstance(shapes, dict) else {}


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
    ``--max-batch-size 0`` turns batching off and keeps the batch dim in the dims. A
    signature without a batch dim gets ``max_batch_size: 0``.

    Raises:
        ConfigError: batching was asked of a model without a batch dim, or the options
            are illegal.
    """
    max_batch = resolve_max_batch_size(name, signature, options)
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
    request: BuildRequest,
    source: ModelSource,
    artifact: Artifact,
    verification: Verification | None,
    precision: PrecisionReport | None = None,
) -> dict[str, object]:
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
