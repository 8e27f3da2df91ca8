"""One entry point for every source kind: an ONNX file, a TorchScript file, a PyTorch factory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from tritongen.errors import SourceError
from tritongen.sources.adaptation import Adaptation, scalars_of
from tritongen.sources.input_spec import InputSpec, check_specs_match, narrow_to_specs, parse_input_specs
from tritongen.sources.onnx_source import OnnxSource
from tritongen.sources.signature import Signature, TensorSpec
from tritongen.sources.torch_source import TorchSource, is_factory_reference

SourceKind = Literal["onnx", "torchscript", "pytorch"]

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript", ".jit")


@dataclass(frozen=True)
class ModelSource:
    """A loaded source; exactly one of ``onnx`` and ``torch`` is set."""

    kind: SourceKind
    reference: str
    """The path or ``package.module:function`` the source was loaded from."""
    sha256: str
    """Digest of the source file, or of a PyTorch factory's reference and weights."""
    signature: Signature
    onnx: OnnxSource | None = None
    torch: TorchSource | None = None
    adaptation: Adaptation = field(default_factory=Adaptation)
    """How the served ONNX model differs from the source's graph (a PyTorch source's module is
    wrapped already)."""

    @property
    def reference_name(self) -> str:
        """What artifacts are verified against, in words."""
        return {
            "onnx": "ONNX Runtime on the source ONNX",
            "torchscript": "the source TorchScript module",
            "pytorch": "the eager PyTorch module",
        }[self.kind]


def source_kind(reference: str) -> SourceKind:
    """Classify a source reference by its form: file suffix or ``package.module:factory``.

    Raises:
        SourceError: it is none of the supported kinds.
    """
    path = Path(reference)
    if path.suffix.lower() == ".onnx":
        return "onnx"
    if path.suffix.lower() in TORCHSCRIPT_SUFFIXES:
        return "torchscript"
    if is_factory_reference(reference):
        return "pytorch"
    raise SourceError(
        f"cannot tell what {reference!r} is",
        f"give an .onnx file, a TorchScript file ({', '.join(TORCHSCRIPT_SUFFIXES)}) "
        "or a PyTorch factory as package.module:function",
    )


def load_source(
    reference: str,
    input_specs: Sequence[str] = (),
    output_names: Sequence[str] = (),
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    constants: Mapping[str, str] | None = None,
) -> ModelSource:
    """Load any source and describe its signature.

    Raises:
        SourceError: unreadable source, malformed or contradicting ``--input-spec``.
        MissingDependencyError: a PyTorch source without torch installed.
    """
    kind = source_kind(reference)
    specs = parse_input_specs(input_specs)
    if kind == "onnx":
        return _load_onnx_source(reference, specs, output_names, constants or {})
    from tritongen.sources.torch_source import load_torch_source

    torch_source = load_torch_source(reference, specs, output_names, shapes, constants)
    return ModelSource(
        kind=kind,
        reference=reference,
        sha256=torch_source.sha256,
        signature=torch_source.signature,
        torch=torch_source,
    )


def _load_onnx_source(
    reference: str, specs: Sequence[InputSpec], output_names: Sequence[str], constants: Mapping[str, str]
) -> ModelSource:
    """An ONNX source, its signature narrowed by ``--input-spec`` and less the ``--constant`` inputs.

    Raises:
        SourceError: unreadable source, contradicting ``--input-spec`` or ``--output-names``.
        ConfigError: a ``--constant`` naming no input, or one its input cannot take.
    """
    from tritongen.sources.onnx_source import frozen_inputs, load_onnx

    onnx_source = load_onnx(Path(reference), frozen=tuple(constants))
    values = frozen_inputs(onnx_source.model, constants, reference)
    check_specs_match(specs, onnx_source.signature, reference)
    if specs:  # the spec's fixed dims narrow the graph's dynamic ones
        onnx_source = replace(onnx_source, signature=narrow_to_specs(onnx_source.signature, specs))
    declared = [t.name for t in onnx_source.signature.outputs]
    if output_names and list(output_names) != declared:
        raise SourceError(
            f"--output-names {','.join(output_names)} differ from {reference}'s outputs {','.join(declared)}",
            "drop --output-names for ONNX sources; the graph names its outputs",
        )
    scalar_inputs, scalar_outputs = scalars_of(onnx_source.signature)
    adaptation = Adaptation(scalar_inputs, scalar_outputs, values, onnx_source.signature.batched)
    signature = onnx_source.signature
    return ModelSource(
        kind="onnx",
        reference=reference,
        sha256=onnx_source.sha256,
        signature=replace(signature, notes=(*signature.notes, *adaptation.describe())),
        onnx=onnx_source,
        adaptation=adaptation,
    )


def without_batching(source: ModelSource, reason: str) -> ModelSource:
    """``source`` served with ``max_batch_size 0``: the batch dim kept in every dim list, ``reason`` noted."""
    signature = source.signature
    if not signature.batched:
        return source

    def full(tensor: TensorSpec) -> TensorSpec:
        return tensor if tensor.scalar else replace(tensor, dims=(-1, *tensor.dims))

    signature = replace(
        signature,
        inputs=tuple(full(t) for t in signature.inputs),
        outputs=tuple(full(t) for t in signature.outputs),
        batched=False,
        notes=(*signature.notes, reason),
    )
    return replace(source, signature=signature, adaptation=replace(source.adaptation, batched=False))
