"""The target formats: which can be built from a source here, how, and how to run the result.

Each format's converter lives in its own module (``onnx``, ``torchscript``, ``tvm``,
``tensorrt``); this module dispatches to them and holds what they share: the ONNX file
a PyTorch source is exported to once, and the reference that every artifact is checked
against.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tritongen.convert.artifact import Artifact, OnnxBuild, Runner, Target
from tritongen.convert.calibration import Draw
from tritongen.convert.precision import FP32, PrecisionOptions, Variant
from tritongen.convert.reduced import PrecisionReport, ReducedPrecision
from tritongen.convert.tensorrt import TensorRtOptions
from tritongen.convert.torch_export import TorchScriptMode
from tritongen.convert.tvm import TvmOptions
from tritongen.errors import ConfigError
from tritongen.sources.model_source import ModelSource
from tritongen.sources.onnx_source import OnnxSource
from tritongen.sources.samples import Feed
from tritongen.sources.shape_plan import ShapePlan

FORMATS = ("onnx", "torchscript", "tvm", "tensorrt")
"""Every format tritongen builds, in the order it builds them."""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ConvertOptions:
    """Format-specific settings of one conversion."""

    target: Target = "local"
    max_batch_size: int = 0
    torchscript_mode: TorchScriptMode = "trace"
    trace_device: str = "cpu"
    """Where a PyTorch module is traced to TorchScript: ``cuda:0`` for a model served on a GPU,
    so that devices the trace records (tensors made inside ``forward``) are the GPU's."""
    tvm: TvmOptions = field(default_factory=TvmOptions)
    tensorrt: TensorRtOptions = field(default_factory=TensorRtOptions)
    precision: PrecisionOptions = field(default_factory=PrecisionOptions)


def parse_formats(text: str, source_kind: str | None = None) -> tuple[str, ...]:
    """Parse ``--formats``: a comma-separated subset of :data:`FORMATS`, or ``all``.

    ``all`` means every format this machine can build from this kind of source.

    Raises:
        ConfigError: an unknown or repeated format, or an empty list.
    """
    items = [item.strip().lower() for item in text.split(",") if item.strip()]
    if items == ["all"]:
        return tuple(f for f in FORMATS if unavailable_reason(f, source_kind) is None)
    if not items:
        raise ConfigError(
            "no format requested", f"pass --formats with some of: {', '.join(FORMATS)} (or all)"
        )
    for item in items:
        if item not in FORMATS:
            raise ConfigError(
                f"format {item!r} is not supported", f"choose from: {', '.join(FORMATS)} or all"
            )
    if len(set(items)) != len(items):
        raise ConfigError("--formats names a format twice", "list each format once")
    return tuple(f for f in FORMATS if f in items)


def unavailable_reason(fmt: str, source_kind: str | None = None) -> str | None:
    """Why ``fmt`` cannot be built here from this kind of source; ``None`` when it can."""
    if fmt == "torchscript":
        if source_kind == "onnx":
            return "TorchScript is made from a PyTorch module or file, not from ONNX"
        try:
            import torch  # noqa: F401
        except ImportError:
            return "PyTorch is not installed (pip install 'tritongen[torch]')"
    if fmt == "tvm":
        from tritongen.convert.tvm import tvm_unavailable_reason

        return tvm_unavailable_reason()
    if fmt == "tensorrt":
        from tritongen.convert.tensorrt import tensorrt_unavailable_reason

        return tensorrt_unavailable_reason()
    return None


class ConvertSession:
    """Builds artifacts from one source; exports the source to ONNX at most once."""

    def __init__(
        self, source: ModelSource, workdir: Path, options: ConvertOptions, progress: Progress
    ) -> None:
        """Hold the source and a scratch directory for intermediate files."""
        self.source = source
        self.workdir = workdir
        self.options = options
        self.say = progress
        self._onnx: OnnxSource | None = source.onnx if not source.adaptation.needed else None
        self._reduced: ReducedPrecision | None = None
        self.verify_feeds: Sequence[Feed] = ()
        """The user's --verify-data: what accuracy is measured on first."""
        self.random_feeds: Sequence[Feed] = ()
        """Random verification batches: what accuracy is measured on when there is nothing better."""
        self.reports: dict[tuple[str, Variant], PrecisionReport] = {}
        """The precision report of every reduced variant built so far."""
        self.shape_plan: ShapePlan | None = None
        """The dims random inputs are drawn at (random calibration rows too)."""
        self._reference: Runner | None = None

    def onnx(self) -> OnnxSource:
        """The source as served, in ONNX: the file, its adapted copy, or a PyTorch source exported once."""
        if self._onnx is None:
            from tritongen.sources.onnx_source import load_onnx

            if self.source.onnx is not None:
                from tritongen.convert.served_onnx import write_served_onnx

                self.say("adapting the graph for Triton")
                path = write_served_onnx(
                    self.source.onnx.path, self.source.adaptation, self.workdir / "served.onnx"
                )
            else:
                from tritongen.convert.torch_export import export_onnx

                assert self.source.torch is not None
                self.say("exporting to ONNX")
                path = export_onnx(self.source.torch, self.workdir / "exported.onnx")
            self._onnx = load_onnx(path)
        return self._onnx

    def reduced(self) -> ReducedPrecision:
        """The maker of reduced-precision copies of the source's ONNX model (one per session)."""
        if self._reduced is None:
            self._reduced = ReducedPrecision(
                self.onnx().path,
                self.source.signature,
                self.options.precision,
                self.workdir,
                verify_feeds=self.verify_feeds,
                random_feeds=self.random_feeds,
                say=self.say,
                draw=self._draw(),
            )
        return self._reduced

    def _draw(self) -> Draw | None:
        """Random calibration rows at the dims the shape plan settled on (``None``: the default dims)."""
        plan = self.shape_plan
        if plan is None or plan.chosen_by in ("default", "static"):
            return None
        signature = self.source.signature
        return lambda rows, rng: plan.feed(signature, rows, plan.free_values[0], rng)

    def tensorrt_options(self, variant: Variant, kept: tuple[str, ...] = ()) -> TensorRtOptions:
        """The TensorRT options of one variant: its precision, calibration and kept FP32 layers.

        Raises:
            ConfigError: the combination is impossible (see :class:`TensorRtOptions`).
        """
        precision = self.options.precision
        int8 = variant.precision == "int8"
        return dataclasses.replace(
            self.options.tensorrt,
            precision=variant.precision,  # type: ignore[arg-type]
            calibration_data=precision.calibration if int8 and precision.calibration_cache is None else None,
            calibration_cache=precision.calibration_cache if int8 else None,
            calibration_method=precision.calibration_method,
            keep_fp32_layers=kept,
        )

    def convert(
        self, fmt: str, model_dir: Path, final_dir: Path | None = None, variant: Variant = FP32
    ) -> Artifact:
        """Write the ``fmt`` artifact in ``variant`` into ``model_dir`` (published later as ``final_dir``)."""
        if fmt == "onnx":
            return self._onnx_artifact(model_dir, variant)
        if fmt == "torchscript":
            return self._torchscript_artifact(model_dir)
        if fmt == "tvm":
            return self._tvm_artifact(model_dir)
        if fmt == "tensorrt":
            return self._tensorrt_artifact(model_dir, final_dir, variant)
        raise ConfigError(f"format {fmt!r} is not supported", f"choose from: {', '.join(FORMATS)}")

    def _onnx_artifact(self, model_dir: Path, variant: Variant) -> Artifact:
        """The source's ONNX model, or a reduced-precision copy of it (its report kept)."""
        from tritongen.convert.onnx import write_onnx_artifact

        target = self.options.target
        if not variant.reduced:
            return write_onnx_artifact(self.onnx().path, model_dir, target)
        path, report = self.reduced().make(variant, self.workdir / f"onnx-{variant.key}.onnx")
        self.reports[("onnx", variant)] = report
        artifact = write_onnx_artifact(path, model_dir, target)
        return dataclasses.replace(artifact, engine={**artifact.engine, "precision": variant.key})

    def _torchscript_artifact(self, model_dir: Path) -> Artifact:
        """The PyTorch source traced or scripted to TorchScript."""
        from tritongen.convert.torchscript import write_torchscript_artifact

        options = self.options
        if self.source.torch is None:
            raise ConfigError(
                f"cannot build TorchScript from {self.source.reference}",
                "TorchScript is made from a PyTorch module or file, not from ONNX",
            )
        self.say(f"{options.torchscript_mode} to TorchScript")
        return write_torchscript_artifact(
            self.source.torch,
            model_dir,
            options.target,
            options.torchscript_mode,
            device=options.trace_device,
        )

    def _tvm_artifact(self, model_dir: Path) -> Artifact:
        """The source's ONNX model compiled by TVM."""
        from tritongen.convert.tvm import write_tvm_artifact

        options = self.options
        onnx_path = self.onnx().path
        return write_tvm_artifact(
            OnnxBuild(onnx_path, self.source.signature, model_dir, options.target, options.max_batch_size),
            options.tvm,
            progress=self.say,
        )

    def _tensorrt_artifact(self, model_dir: Path, final_dir: Path | None, variant: Variant) -> Artifact:
        """A TensorRT plan of the source's ONNX model (or what builds it elsewhere)."""
        from tritongen.convert.tensorrt import tensorrt_unavailable_reason, write_tensorrt_artifact

        options = self.options
        onnx_path = self.onnx().path
        trt_options = self.tensorrt_options(variant)
        prepared: Path | None = None
        buildable = options.target != "local" and (
            trt_options.dry_run or tensorrt_unavailable_reason() is None
        )
        if variant.reduced and buildable:
            trt_options, prepared = self._reduced_tensorrt(variant, trt_options)
        return write_tensorrt_artifact(
            OnnxBuild(onnx_path, self.source.signature, model_dir, options.target, options.max_batch_size),
            trt_options,
            progress=self.say,
            repo_model_dir=final_dir,
            prepared_onnx=prepared,
        )

    def _reduced_tensorrt(
        self, variant: Variant, trt_options: TensorRtOptions
    ) -> tuple[TensorRtOptions, Path | None]:
        """The options of a reduced TensorRT variant, and the ONNX model it is built from.

        ``None`` for the model means the source's; the variant's precision report is kept.
        """
        from tritongen.convert.tensorrt import needs_prepared_onnx

        reduced = self.reduced()
        prepared: Path | None = None
        if self.options.precision.auto_mixed or needs_prepared_onnx(trt_options):
            # The Q/DQ (or FP16) model TensorRT builds from, made like ONNX Runtime's.
            prepared, report = reduced.make(
                variant, self.workdir / f"tensorrt-{variant.key}.onnx", tensorrt=True
            )
        else:  # FP16 by builder flags: only the kept layers to resolve
            report = PrecisionReport(variant=variant.key, flavour="tensorrt")
            report.kept_fp32 = list(reduced.kept())
        self.reports[("tensorrt", variant)] = report
        trt_options = self.tensorrt_options(variant, tuple(report.kept_fp32))
        if not needs_prepared_onnx(trt_options):
            # Builder flags on the FP32 model; kept layers are named as in the named copy.
            prepared = reduced.prepared() if report.kept_fp32 else None
        return trt_options, prepared

    def runner(
        self, fmt: str, model_dir: Path, version: int = 1, device_id: int | None = None
    ) -> Runner | None:
        """Run the artifact in-process, as the server will; ``None`` where this machine cannot.

        ``device_id``: the CUDA device of a KIND_GPU instance group (TorchScript and TVM run
        there, as served); ``None`` runs on the CPU.
        """
        version_dir = model_dir / str(version)
        signature = self.source.signature
        if fmt == "onnx":
            from tritongen.convert.onnx import onnx_runner

            return onnx_runner(version_dir / "model.onnx", signature)
        if fmt == "torchscript":
            from tritongen.convert.torchscript import torchscript_runner

            return torchscript_runner(version_dir, signature, device_id=device_id)
        if fmt == "tvm":  # the served wrapper itself: same libraries, same input conversion
            from tritongen.convert.tvm import METADATA, foreign_arch
            from tritongen.convert.wrappers import wrapper_runner

            if foreign_arch(json.loads((version_dir / METADATA).read_text(encoding="utf-8"))):
                return None  # cross-compiled: it runs only on a machine of its architecture
            return wrapper_runner(version_dir, signature, self.options.max_batch_size, device_id=device_id)
        if fmt == "tensorrt":
            from tritongen.convert.tensorrt import tensorrt_runner

            return tensorrt_runner(version_dir, signature)
        return None

    def reference(self) -> Runner:
        """The source itself, run in-process (made once): ONNX Runtime on an ONNX source, else the module."""
        if self._reference is None:
            signature = self.source.signature
            if self.source.onnx is not None:
                from tritongen.convert.onnx import adapted_runner, onnx_runner

                runner = onnx_runner(self.source.onnx.path, signature)
                self._reference = adapted_runner(runner, self.source.adaptation, signature)
            else:
                from tritongen.convert.torchscript import module_runner

                assert self.source.torch is not None
                self._reference = module_runner(self.source.torch.module, signature)
        return self._reference


def discard(path: Path) -> None:
    """Remove a staged model directory that will not be published."""
    shutil.rmtree(path, ignore_errors=True)
