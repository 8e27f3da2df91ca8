"""PyTorch module -> ONNX file and TorchScript file (tracing or scripting)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritongen.errors import ConversionError, first_line
from tritongen.sources.samples import random_array, random_feed
from tritongen.sources.torch_source import TorchSource, import_torch

ONNX_OPSET = 17

TorchScriptMode = Literal["trace", "script"]

# The sample that tracing and export run on: batch 2 and 7 for other dynamic dims,
# so that no dim is 1 (a 1 can be mistaken for a broadcastable dim and baked in).
_SAMPLE_BATCH = 2
_SAMPLE_DIM = 7


def sample_args(source: TorchSource, device: str = "cpu") -> tuple[Any, ...]:
    """Example input tensors, positional in ``--input-spec`` order, on ``device``: at the shapes it ran at."""
    torch = import_torch()
    rng = np.random.default_rng(0)
    feed = random_feed(source.signature, _SAMPLE_BATCH, _SAMPLE_DIM, rng)
    for tensor in source.signature.inputs:
        shape = source.sample_shapes.get(tensor.name)
        if shape is not None:
            feed[tensor.name] = random_array(tensor.data_type, shape, rng)
    return tuple(torch.from_numpy(feed[t.name]).to(device) for t in source.signature.inputs)


def dynamic_axes(source: TorchSource) -> dict[str, dict[int, str]]:
    """Named dynamic axes for the exporter: one shared ``batch``; inputs share a name per axis.

    Inputs that are dynamic at the same axis (``input_ids`` and ``attention_mask`` at
    axis 1) get the same symbol, so backends see that those lengths agree.
    """
    signature = source.signature
    lead = 1 if signature.batched else 0
    axes: dict[str, dict[int, str]] = {}
    for tensor in signature.inputs:
        named = {0: "batch"} if signature.batched else {}
        named.update({i + lead: f"dim{i + lead}" for i, d in enumerate(tensor.dims) if d == -1})
        if named:
            axes[tensor.name] = named
    for tensor in signature.outputs:
        named = {0: "batch"} if signature.batched else {}
        named.update({i + lead: f"{tensor.name}_dim{i + lead}" for i, d in enumerate(tensor.dims) if d == -1})
        if named:
            axes[tensor.name] = named
    return axes


def export_onnx(source: TorchSource, path: Path, opset: int = ONNX_OPSET) -> Path:
    """Export ``source`` to one ONNX file with its dynamic dims kept symbolic.

    Raises:
        ConversionError: the exporter fails (the message carries its reason).
    """
    torch = import_torch()
    names_in = [t.name for t in source.signature.inputs]
    names_out = [t.name for t in source.signature.outputs]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            module = source.module
            if source.adapt is not None:  # a wrapper around a TorchScript module exports once traced
                module = torch.jit.trace(module, sample_args(source), check_trace=False, strict=False)
            torch.onnx.export(
                module,
                sample_args(source),
                str(path),
                input_names=names_in,
                output_names=names_out,
                dynamic_axes=dynamic_axes(source),
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as e:  # the exporter raises many types
        raise ConversionError(
            f"exporting {source.reference} to ONNX failed: {first_line(e)}",
            "make forward() exportable (no data-dependent Python control flow), or give an ONNX file",
        ) from e
    return path


def export_torchscript(
    source: TorchSource, path: Path, mode: TorchScriptMode = "trace", device: str = "cpu"
) -> Path:
    """Trace (or script) ``source`` into a TorchScript file; a TorchScript source is saved as is.

    A trace records the device of every tensor ``forward`` creates, so a model served on a
    GPU is traced there (``device="cuda:0"``); the module is back on the CPU afterwards.

    Raises:
        ConversionError: tracing or scripting fails.
    """
    torch = import_torch()
    path.parent.mkdir(parents=True, exist_ok=True)
    if source.kind == "torchscript" and source.adapt is None:
        source.module.save(str(path))
        return path
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if (
                mode == "script" and source.adapt is not None
            ):  # the user's module scripted, the wrapper traced
                wrapped = source.adapt(torch.jit.script(source.original))
                torch.jit.trace(wrapped, sample_args(source), check_trace=False, strict=False).save(str(path))
            elif mode == "script":
                torch.jit.script(source.module).save(str(path))
            else:
                module = source.module.to(device) if device != "cpu" else source.module
                try:
                    traced = torch.jit.trace(
                        module, sample_args(source, device), check_trace=False, strict=False
                    )
                    traced.save(str(path))  # before the move back: the trace shares the module's weights
                finally:
                    if device != "cpu":
                        source.module.to("cpu")
    except Exception as e:
        hint = (
            "trace instead (drop --torchscript script), or make forward() scriptable"
            if mode == "script"
            else "script instead with --torchscript script, or give a TorchScript file"
        )
        raise ConversionError(f"{mode} of {source.reference} failed: {first_line(e)}", hint) from e
    return path
