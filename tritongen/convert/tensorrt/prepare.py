"""The ONNX model a build reads: the kept-FP32 layers checked, and a Q/DQ or FP16 rewrite where needed."""

from __future__ import annotations

from pathlib import Path

from tritongen.convert.tensorrt.options import TensorRtOptions
from tritongen.errors import ConfigError
from tritongen.sources.signature import Signature


def check_layer_names(onnx_path: Path, layers: tuple[str, ...]) -> None:
    """Check that every kept-FP32 layer is a node of the ONNX graph (TensorRT names layers after nodes).

    Raises:
        ConfigError: a name is not a node of the graph.
    """
    if not layers:
        return
    import onnx

    nodes = {node.name for node in onnx.load(str(onnx_path), load_external_data=False).graph.node}
    missing = [name for name in layers if name not in nodes]
    if missing:
        sample = ", ".join(sorted(n for n in nodes if n)[:5]) or "none (the nodes are unnamed)"
        raise ConfigError(
            f"--keep-fp32 names unknown layer(s): {', '.join(missing)}",
            f"use ONNX node names, e.g. {sample}",
        )


def prepare_onnx(source: Path, build_dir: Path, signature: Signature, options: TensorRtOptions) -> Path:
    """The ONNX model the build reads: the source, or a Q/DQ (INT8) / FP16 rewrite of it in ``build_dir``.

    INT8 calibrates with the same reader and quantizer as ONNX Runtime's static INT8
    (symmetric, as TensorRT wants), so one calibration set and one keep-FP32 list serve both.
    """
    from tritongen.convert.calibration import load_calibration
    from tritongen.convert.quantize import convert_fp16, quantize_static_int8

    if options.precision == "int8" and options.calibration_data is not None:
        calibration = load_calibration(options.calibration_data, signature)
        return quantize_static_int8(
            source,
            build_dir / "model.onnx",
            calibration,
            options.calibration_method,
            options.keep_fp32_layers,
            symmetric=True,
        )
    if options.strongly_typed and options.precision == "fp16":
        return convert_fp16(source, build_dir / "model.onnx", options.keep_fp32_layers)
    return source
