"""Build model directories from a source model: convert, configure, render, publish atomically."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

from tritongen.build.configs import model_config_for, model_metadata, resolve_max_batch_size
from tritongen.build.request import (
    BuildRequest,
    BuildResult,
    BuiltModel,
    FormatOutcome,
    OutcomeStatus,
    Progress,
    build_plan,
    model_dir_name,
)
from tritongen.convert.artifact import TARGETS, Artifact, Runner
from tritongen.convert.formats import FORMATS, ConvertOptions, ConvertSession, discard, unavailable_reason
from tritongen.convert.precision import Variant
from tritongen.convert.reduced import PrecisionReport, onnxruntime_runner
from tritongen.convert.tensorrt import EngineUnavailableError
from tritongen.convert.verify import (
    Verification,
    broken_verification,
    load_verify_data,
    shaped_batches,
    verification_batches,
    verify_artifact,
)
from tritongen.errors import ConfigError, ConversionError, MissingDependencyError, engine_error
from tritongen.lint.repository import lint_model_text
from tritongen.sources.model_source import load_source
from tritongen.sources.samples import Feed
from tritongen.triton.model_config import (
    CudaOptimization,
    Optimization,
)
from tritongen.triton.names import check_model_name
from tritongen.triton.render import render_config
from tritongen.triton.repository import METADATA_FILE, check_free, ensure_writable_repo, publish, staging_dir


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
    metadata = model_metadata(request, source, artifact, verification, report)
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


