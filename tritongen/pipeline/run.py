"""Build model directories from a source model: convert, configure, render, publish atomically."""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritongen.convert.artifact import TARGETS, Artifact, Runner
from tritongen.convert.engine_log import default_log_path, engine_output_to, written
from tritongen.convert.formats import FORMATS, ConvertOptions, ConvertSession, discard, unavailable_reason
from tritongen.convert.precision import Variant
from tritongen.convert.reduced import PrecisionReport, onnxruntime_runner
from tritongen.convert.tensorrt import EngineUnavailableError
from tritongen.convert.tvm.samples import bucket_feeds, strict_buckets
from tritongen.convert.verify import (
    Verification,
    broken_verification,
    verify_artifact,
)
from tritongen.errors import ConfigError, ConversionError, MissingDependencyError, engine_error
from tritongen.lint.findings import Finding
from tritongen.lint.repository import lint_model_text
from tritongen.pipeline.applicable import check_applicable
from tritongen.pipeline.configs import model_config_for, model_metadata, resolve_max_batch_size
from tritongen.pipeline.gpu_kind import check_build_kind, trace_device, verification_device
from tritongen.pipeline.request import (
    BuildRequest,
    BuildResult,
    BuiltModel,
    FormatOutcome,
    OutcomeStatus,
    Progress,
    build_plan,
    model_dir_name,
)
from tritongen.pipeline.shapes import fix_shapes, plan_shapes, random_batches
from tritongen.pipeline.verify_data import verify_data_feeds
from tritongen.sources.model_source import ModelSource, load_source, source_kind, without_batching
from tritongen.sources.samples import Feed
from tritongen.sources.shape_plan import ShapePlan
from tritongen.sources.signature import Signature
from tritongen.triton.model_config import CudaOptimization, ModelConfig, Optimization
from tritongen.triton.names import check_model_name
from tritongen.triton.render import render_config
from tritongen.triton.repository import METADATA_FILE, check_free, ensure_writable_repo, publish, staging_dir


def build_models(request: BuildRequest, progress: Progress | None = None) -> BuildResult:
    """Build as :func:`build_in_place` does, the engines' own output going to the build's log file.

    Raises:
        TritongenError: see :func:`build_in_place`.
    """
    log = request.log_path or default_log_path(request.name)
    with engine_output_to(log):
        result = build_in_place(request, progress)
    return replace(result, log_path=written(log))


def build_in_place(request: BuildRequest, progress: Progress | None = None) -> BuildResult:
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
    plan, skipped = _check_request(request)
    names = [model_dir_name(request.name, f, v) for f, v in plan]
    for name in names:
        check_model_name(name)

    say(f"loading {request.source}")
    source, shape_plan = _load(request)
    ensure_writable_repo(request.repo)
    check_free(request.repo, names, request.force)
    max_batch = resolve_max_batch_size(request.name, source.signature, request.options)
    # Read once: --verify-data and the random batches verify every artifact (unless --no-verify)
    # and are the rows reduced precision falls back on.
    verify_feeds = (
        verify_data_feeds(request.verify.data, source.signature, max(1, max_batch))
        if request.verify.data is not None
        else []
    )
    outcomes: list[FormatOutcome] = []
    with staging_dir(request.repo) as staged, tempfile.TemporaryDirectory(prefix="tritongen-") as work:
        session = _open_session(request, source, Path(work), max_batch, plan, say)
        shape_plan, random_feeds = random_batches(session, shape_plan, request, bool(verify_feeds), say)
        batches = [] if request.verify.skip else [*random_feeds, *verify_feeds]
        session.random_feeds, session.verify_feeds = random_feeds, verify_feeds
        _check_precision_inputs(session, plan)
        shared = _Shared(request=request, session=session, staged=staged, batches=batches, say=say)
        for (fmt, variant), name in zip(plan, names, strict=True):
            outcomes.append(_ModelBuild(shared, fmt, variant, name).run())
        if request.list_unsupported_precisions:
            outcomes.extend(_unsupported_outcomes(request.name, skipped))
        publishable = [o.name for o in outcomes if o.model is not None]
        if publishable:
            say("publishing")
            publish(staged, request.repo, publishable, request.force)
    return BuildResult(
        source=request.source,
        signature=source.signature,
        outcomes=tuple(outcomes),
        source_kind=source.kind,
        shape_plan=None if request.verify.skip else shape_plan,
    )


def _load(request: BuildRequest) -> tuple[ModelSource, ShapePlan]:
    """The source, and the dims its random inputs are drawn at before any run (``--shape``, clues).

    Raises:
        TritongenError: the source cannot be loaded, or ``--shape`` does not fit it.
    """
    source = load_source(
        str(request.source), request.input_specs, request.output_names, request.shapes, request.constants
    )
    scalars = [t.name for t in source.signature.inputs if t.scalar]
    if request.target == "container" and scalars and source.signature.batched:
        reason = (
            f"scalar input(s) {', '.join(scalars)} are one value per request, and Triton's native backends "
            "would batch requests with other values together: served with max_batch_size 0"
        )
        source = without_batching(source, reason)
    shape_plan = plan_shapes(source, request.shapes)
    if request.fixed_shape:
        source = fix_shapes(source, shape_plan, request.shapes)
    return source, shape_plan


def _check_request(
    request: BuildRequest,
) -> tuple[list[tuple[str, Variant]], list[tuple[str, Variant, str]]]:
    """Check what can be checked before the source is read; return the build plan (see :func:`build_plan`).

    Raises:
        TritongenError: an illegal name, target, format list, option or precision setting.
    """
    check_model_name(request.name)
    if request.target not in TARGETS:
        raise ConfigError(f"unknown target {request.target!r}", "use --target local or --target container")
    if not request.formats:
        raise ConfigError("no format requested", f"pass --formats with some of: {', '.join(FORMATS)}")
    unknown = [f for f in request.formats if f not in FORMATS]
    if unknown:
        raise ConfigError(f"format {unknown[0]!r} is not supported", f"choose from: {', '.join(FORMATS)}")
    request.options.check()
    check_applicable(request, source_kind(str(request.source)))
    check_build_kind(request)  # before the source is read and any slow compile starts
    plan, skipped = build_plan(request.formats, request.precisions)
    request.precision.check(tuple(v for _, v in plan), tuple(f for f, v in plan if v.reduced))
    return plan, skipped


def _open_session(
    request: BuildRequest,
    source: ModelSource,
    workdir: Path,
    max_batch: int,
    plan: list[tuple[str, Variant]],
    say: Progress,
) -> ConvertSession:
    """The conversion session of a build, with impossible TensorRT options refused up front.

    Raises:
        TritongenError: impossible TensorRT options.
    """
    preferred = tuple(request.options.preferred_batch_sizes or ())
    convert_options = ConvertOptions(
        target=request.target,
        max_batch_size=max_batch,
        torchscript_mode=request.torchscript_mode,
        trace_device=trace_device(request),
        tvm=replace(request.tvm, preferred_batch_sizes=request.tvm.preferred_batch_sizes or preferred),
        tensorrt=request.tensorrt,
        precision=request.precision,
    )
    session = ConvertSession(source, workdir, convert_options, say)
    for fmt, variant in plan:
        if fmt == "tensorrt":  # impossible TensorRT options are refused before anything is built
            session.tensorrt_options(variant)
    return session


def _unsupported_outcomes(name: str, skipped: list[tuple[str, Variant, str]]) -> list[FormatOutcome]:
    """An ``unavailable`` outcome for each (format, precision) pair no format here takes."""
    return [
        FormatOutcome(
            format=fmt,
            name=model_dir_name(name, fmt, variant),
            status="unavailable",
            variant=variant,
            reason=reason,
        )
        for fmt, variant, reason in skipped
    ]


@dataclass(frozen=True)
class _Shared:
    """What every model directory of one build shares."""

    request: BuildRequest
    session: ConvertSession
    staged: Path
    """The staging directory the model directories are built in."""
    batches: list[Feed]
    """The random (or ``--verify-data``) batches every artifact is verified on; empty with ``--no-verify``."""
    say: Progress


class _ModelBuild:
    """One (format, precision) model directory, built in the staging directory step by step.

    Convert and configure, verify, measure the accuracy of a reduced variant, write and
    lint, then decide the outcome.
    """

    def __init__(self, shared: _Shared, fmt: str, variant: Variant, name: str) -> None:
        self.shared = shared
        self.session = shared.session
        self.request = shared.request
        self.fmt = fmt
        self.variant = variant
        self.name = name
        self.model_dir = shared.staged / name
        self.label = variant.of(fmt)
        self.started = time.perf_counter()
        self.device_id: int | None = None
        """The CUDA device the artifact is verified on (its instance group's); ``None``: the CPU."""

    def run(self) -> FormatOutcome:
        """Build the model directory and say what became of it."""
        reason = unavailable_reason(self.fmt, self.session.source.kind)
        if reason is not None and self.fmt != "tensorrt":  # TensorRT explains itself: how to build elsewhere
            return self.outcome("unavailable", reason=reason)
        self.shared.say(f"converting to {self.label}")
        try:
            artifact, config, text = self.configure()
        except (ConversionError, MissingDependencyError) as e:  # this format fails, the others go on
            discard(self.model_dir)
            return self.outcome(
                "unavailable" if isinstance(e, EngineUnavailableError) else "failed",
                reason=e.message,
                hint=e.hint,
            )
        report = self.session.reports.get((self.fmt, self.variant))
        verification, runner = self.verify(artifact, report)
        if report is not None:
            _measure_accuracy(self.session, report, runner, self.model_dir, self.label, self.shared.say)
        findings = self.write(artifact, text, verification, report)
        return self.decide(artifact, config, findings, verification)

    def outcome(self, status: OutcomeStatus, **kwargs: Any) -> FormatOutcome:
        """The outcome of this model directory, with the time taken so far and its precision report."""
        return FormatOutcome(
            format=self.fmt,
            name=self.name,
            status=status,
            variant=self.variant,
            seconds=time.perf_counter() - self.started,
            precision=self.session.reports.get((self.fmt, self.variant)),
            **kwargs,
        )

    def configure(self) -> tuple[Artifact, ModelConfig, str]:
        """Convert the source, then build and render the artifact's config.

        Raises:
            ConversionError: the conversion or the rendering failed.
            MissingDependencyError: the engine is missing here.
        """
        request = self.request
        artifact = self.session.convert(self.fmt, self.model_dir, request.repo / self.name, self.variant)
        config = model_config_for(
            self.name, self.session.source.signature, artifact, request.options, request.target
        )
        self.device_id = verification_device(self.fmt, config, request.target, artifact.engine)
        if request.tensorrt.cuda_graphs and self.fmt == "tensorrt":
            config = config.model_copy(
                update={"optimization": Optimization(cuda=CudaOptimization(graphs=True))}
            )
        return artifact, config, render_config(config, request.templates_dir)

    def verify(
        self, artifact: Artifact, report: PrecisionReport | None
    ) -> tuple[Verification | None, Runner | None]:
        """Verify the artifact against the source; also return its in-process runner, where it loads."""
        batches = self.shared.batches
        if not batches and report is None:
            return None, None
        source = self.session.source
        tolerance = self.request.verify.tolerance(_judged_as(self.variant, source.signature))
        device = "cpu" if self.device_id is None else f"cuda:{self.device_id}"
        try:
            runner = self.session.runner(self.fmt, self.model_dir, device_id=self.device_id)
        except Exception as e:  # the artifact does not even load: that is its verdict
            broken = broken_verification(
                self.label,
                source.reference_name,
                tolerance,
                f"the {self.label} artifact does not load on {device}: {engine_error(e)}",
            )
            return replace(broken, device=device), None
        if runner is None or not batches:
            return None, runner
        self.shared.say(f"verifying {self.label} against {source.reference_name}")
        verification = verify_artifact(
            self.label,
            runner,
            self.session.reference(),
            source.reference_name,
            source.signature,
            self.verification_feeds(artifact, report),
            tolerance,
        )
        return replace(verification, device=device), runner

    def verification_feeds(self, artifact: Artifact, report: PrecisionReport | None) -> list[Feed]:
        """The batches to verify on: random ones and the engine's tuned shapes, or representative rows.

        A reduced-precision variant is judged on data like production's where there is some.
        """
        facts = artifact.engine
        specialised = bucket_feeds(facts, self.session.source.signature)
        # strict buckets refuse the random batches no bucket holds; their own feeds cover them
        checked = specialised if strict_buckets(facts) else self.shared.batches + specialised
        if report is not None:
            evaluation = self.session.reduced().evaluation()
            if evaluation.representative:
                checked = evaluation.feeds
        return checked

    def write(
        self,
        artifact: Artifact,
        text: str,
        verification: Verification | None,
        report: PrecisionReport | None,
    ) -> list[Finding]:
        """Write the config and the metadata into the model directory; lint them."""
        request = self.request
        (self.model_dir / "config.pbtxt").write_text(text, encoding="utf-8")
        metadata = model_metadata(request, self.session.source, artifact, verification, report)
        (self.model_dir / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        dry = bool(artifact.engine.get("dry_run"))  # its plan is built later, elsewhere
        shown = str(request.repo / self.name / "config.pbtxt")
        return lint_model_text(text, self.model_dir, shown, check_files=not dry)

    def decide(
        self,
        artifact: Artifact,
        config: ModelConfig,
        findings: list[Finding],
        verification: Verification | None,
    ) -> FormatOutcome:
        """Keep the model directory, or discard it for a broken config or a failed verification."""
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            discard(self.model_dir)
            return self.outcome(
                "failed",
                reason=f"the config breaks Triton's rules: {errors[0].text()}",
                hint="fix the template or the options (tritongen lint explains every rule)",
                verification=verification,
            )
        warnings = tuple(f.text() for f in findings)
        files = ("config.pbtxt", *artifact.files, METADATA_FILE)
        path = self.request.repo / self.name
        model = BuiltModel(
            name=self.name, format=self.fmt, path=path, files=files, config=config, engine=artifact.engine
        )
        if verification is None or verification.passed:
            return self.outcome("built", model=model, verification=verification, warnings=warnings)
        if self.request.verify.keep_failed:
            reason = verification.failure()
            return self.outcome(
                "kept", reason=reason, model=model, verification=verification, warnings=warnings
            )
        discard(self.model_dir)
        return self.outcome(
            "failed",
            reason=f"verification failed: {verification.failure()}",
            hint=_verification_hint(self.fmt, self.variant, verification),
            verification=verification,
        )


def _judged_as(variant: Variant, signature: Signature) -> str:
    """The precision a variant's outputs are judged at: FP16's when the source itself answers in FP16/BF16."""
    half = any(t.data_type in ("TYPE_FP16", "TYPE_BF16") for t in signature.outputs)
    return "fp16" if half and variant.precision == "fp32" else variant.precision


def _verification_hint(fmt: str, variant: Variant, verification: Verification) -> str:
    """What to do about a failed verification."""
    if verification.reference_failed:
        return (
            "the source itself fails on these inputs (tritongen's random ones, unless from "
            "--verify-data), e.g. strings it cannot parse: give real inputs with --verify-data "
            "FILE (.npz or perf_analyzer's JSON), or skip the check with --no-verify"
        )
    if verification.error is not None:
        return f"the {fmt} engine cannot run this model; build another format (--formats)"
    if variant.reduced:
        return (
            "keep sensitive nodes in FP32 (--keep-fp32, or --auto-mixed-precision --max-error X), "
            "calibrate on representative data, or loosen --atol/--rtol; --keep-failed writes it anyway"
        )
    return "fix the model or loosen --atol/--rtol; --keep-failed writes it anyway"


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
