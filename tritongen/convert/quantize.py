"""Rewrite an ONNX model in reduced precision: static INT8 (Q/DQ), dynamic INT8, FP16.

Every rewrite takes a list of nodes to leave in FP32 (by hand with ``--keep-fp32``, or
found by the mixed-precision search). Static INT8 calibrates on a
:class:`~tritongen.convert.calibration.CalibrationSet` once per model and method; the
tensor ranges are cached in a file so that the mixed-precision search, which
re-quantizes the same model many times, calibrates only once.

Two flavours of static INT8: for ONNX Runtime on a CPU, unsigned activations and signed
per-channel weights (``U8S8``, what its kernels are fastest at); for TensorRT, symmetric
signed INT8 everywhere (zero point 0, the only kind TensorRT takes).
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tritongen.convert.calibration import CalibrationSet
from tritongen.errors import ConfigError, ConversionError, first_line

CALIBRATION_METHODS = ("minmax", "entropy", "percentile")

WEIGHTED_OPS = ("MatMul", "Gemm", "Conv", "ConvTranspose", "Attention", "LSTM", "GRU")
"""Operators whose precision the mixed-precision search decides, one node at a time:
those that carry weights and most of the arithmetic (and so most of the error)."""


class _PreprocessAdvice(logging.Filter):
    """Drops the quantizer's advice to pre-process: :func:`preprocess` has done it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing" not in record.getMessage()


_ADVICE = _PreprocessAdvice()


def _quiet() -> None:
    """ONNX Runtime's quantizer logs every node at INFO; keep it to warnings, minus the advice."""
    logging.getLogger("onnxruntime").setLevel(logging.WARNING)
    root = logging.getLogger()
    root.setLevel(max(root.level, logging.WARNING))
    if _ADVICE not in root.filters:
        root.addFilter(_ADVICE)


@contextlib.contextmanager
def _inside(directory: Path) -> Iterator[None]:
    """Run in ``directory``, which then holds the temporary files ONNX Runtime leaves.

    Its shape inference and quantizer drop ``sym_shape_infer_temp.onnx`` and external
    ``<uuid>.data`` files in the working directory.
    """
    directory.mkdir(parents=True, exist_ok=True)
    previous = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(previous)


@contextlib.contextmanager
def _rewriting(output: Path, failure: str, hint: str) -> Iterator[None]:
    """Where a quantizer runs: quiet logs, its temporary files beside ``output``, one-line errors."""
    _quiet()
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _inside(output.parent):
            yield
    except (ConfigError, ConversionError):
        raise
    except Exception as e:  # ONNX Runtime raises plain exceptions of many kinds
        raise ConversionError(f"{failure}: {type(e).__name__}: {first_line(e)}", hint) from e


def preprocess(onnx_path: Path, output: Path) -> Path:
    """The model with shapes inferred for the quantizer and every node named.

    Graph optimisations are left out on purpose: they rename and fuse nodes, and the
    ``--keep-fp32`` names the user gave must still match. Unnamed nodes get
    ``<OpType>_<index>`` (their place in the graph), so that they can be kept in FP32 too.
    """
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    _quiet()
    onnx_path, output = onnx_path.resolve(), output.resolve()
    model = None
    for symbolic in (True, False):  # symbolic inference gives up on some graphs; ONNX's own rarely does
        try:
            with _inside(output.parent):
                quant_pre_process(
                    str(onnx_path), str(output), skip_optimization=True, skip_symbolic_shape=not symbolic
                )
            model = onnx.load(str(output))
            break
        except Exception:  # shape inference is an aid, not a requirement
            continue
    if model is None:
        model = onnx.load(str(onnx_path))
    taken = {node.name for node in model.graph.node if node.name}
    for index, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
    output.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(output))
    return output


def graph_nodes(onnx_path: Path) -> list[tuple[str, str]]:
    """``(name, op_type)`` of every node of the main graph."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return [(node.name, node.op_type) for node in model.graph.node]


def resolve_nodes(onnx_path: Path, patterns: Sequence[str], option: str = "--keep-fp32") -> tuple[str, ...]:
    """Node names matching ``patterns``: exact names, globs (``*attention*``) or ``op:TYPE``.

    Raises:
        ConfigError: a pattern matches no node, or the nodes are unnamed.
    """
    if not patterns:
        return ()
    nodes = graph_nodes(onnx_path)
    chosen: list[str] = []
    for pattern in patterns:
        if pattern.startswith("op:"):
            matched = [name for name, op in nodes if op == pattern[3:]]
        else:
            matched = [name for name, _ in nodes if name == pattern or fnmatch.fnmatchcase(name, pattern)]
        matched = [m for m in matched if m]
        if not matched:
            sample = (
                ", ".join(sorted(name for name, _ in nodes if name)[:4]) or "none (the nodes are unnamed)"
            )
            ops = ", ".join(sorted({op for _, op in nodes})[:6])
            raise ConfigError(
                f"{option} {pattern!r} matches no node of the model",
                f"use node names or globs (e.g. {sample}) or op:TYPE (e.g. op:{ops.split(', ')[0]})",
            )
        chosen.extend(m for m in matched if m not in chosen)
    return tuple(chosen)


def candidate_nodes(onnx_path: Path, exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """Named weighted nodes not already kept in FP32, in graph order.

    A weighted node is one of :data:`WEIGHTED_OPS` with a constant (initializer) input:
    the ``MatMul`` of a linear layer, not the one multiplying queries by keys.
    """
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    constants = {i.name for i in model.graph.initializer}
    constants |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    skip = set(exclude)
    return tuple(
        node.name
        for node in model.graph.node
        if node.op_type in WEIGHTED_OPS
        and node.name
        and node.name not in skip
        and any(i in constants for i in node.input)
    )


def _method(name: str) -> Any:
    from onnxruntime.quantization import CalibrationMethod

    if name not in CALIBRATION_METHODS:
        raise ConfigError(
            f"calibration method {name!r} is unknown", f"choose one of {', '.join(CALIBRATION_METHODS)}"
        )
    return {
        "minmax": CalibrationMethod.MinMax,
        "entropy": CalibrationMethod.Entropy,
        "percentile": CalibrationMethod.Percentile,
    }[name]


def quantize_static_int8(
    onnx_path: Path,
    output: Path,
    calibration: CalibrationSet,
    method: str = "minmax",
    exclude: Sequence[str] = (),
    symmetric: bool = False,
    cache: Path | None = None,
) -> Path:
    """Write a Q/DQ INT8 copy of ``onnx_path`` calibrated on ``calibration`` (per-channel weights).

    ``symmetric`` makes every zero point 0 (TensorRT); otherwise activations are unsigned
    (ONNX Runtime on a CPU). ``cache`` keeps the calibrated tensor ranges: a later call
    with the same model, data and method skips calibration.

    Raises:
        ConversionError: quantization fails (e.g. the data does not fit the model).
    """
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    batches = calibration.batches()

    class _Reader(CalibrationDataReader):  # type: ignore[misc]
        def get_next(self) -> dict[str, Any] | None:
            return next(batches, None)

    onnx_path, output = onnx_path.resolve(), output.resolve()
    # TensorRT: symmetric everywhere. ONNX Runtime: weight-times-activation MatMuls only,
    # the CPU recipe (its integer kernels gain little on activation-times-activation ones).
    extra: dict[str, Any] = (
        {"ActivationSymmetric": True, "WeightSymmetric": True} if symmetric else {"MatMulConstBOnly": True}
    )
    if method == "percentile":
        extra["CalibPercentile"] = 99.999
    failure = f"INT8 calibration of {onnx_path.name} failed"
    with _rewriting(output, failure, "check that the calibration arrays match the model inputs"):
        quantize_static(
            str(onnx_path),
            str(output),
            _Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QInt8 if symmetric else QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            # Weighted operators only: quantizing LayerNorm, Softmax or the attention mask's
            # Add (one range for -10000 and 0.1) is what breaks transformers at INT8.
            op_types_to_quantize=list(WEIGHTED_OPS),
            calibrate_method=_method(method),
            nodes_to_exclude=list(exclude),
            extra_options=extra,
            calibration_cache_path=str(cache.resolve()) if cache is not None else None,
        )
    return output


def quantize_dynamic_int8(onnx_path: Path, output: Path, exclude: Sequence[str] = ()) -> Path:
    """Write a dynamically quantized copy: INT8 weights, activations quantized per batch at run time.

    Raises:
        ConversionError: quantization fails.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx_path, output = onnx_path.resolve(), output.resolve()
    failure = f"dynamic INT8 quantization of {onnx_path.name} failed"
    with _rewriting(output, failure, "keep the failing nodes in FP32 (--keep-fp32) or use another precision"):
        quantize_dynamic(
            str(onnx_path),
            str(output),
            per_channel=True,
            weight_type=QuantType.QInt8,
            nodes_to_exclude=list(exclude),
        )
    return output


def convert_fp16(onnx_path: Path, output: Path, exclude: Sequence[str] = ()) -> Path:
    """Write an FP16 copy of ``onnx_path``: inputs and outputs keep their types, ``exclude`` stays FP32.

    Raises:
        ConversionError: the conversion fails.
    """
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    onnx_path, output = onnx_path.resolve(), output.resolve()
    with _rewriting(
        output, f"FP16 conversion of {onnx_path.name} failed", "keep the failing nodes in FP32 (--keep-fp32)"
    ):
        model = onnx.load(str(onnx_path))
        converted = convert_float_to_float16(model, keep_io_types=True, node_block_list=list(exclude))
        onnx.save(converted, str(output))
    return output
