"""PyTorch sources: a module factory (``package.module:factory``) or a TorchScript file.

Neither carries its input signature, so ``--input-spec`` supplies it; the outputs are
found by running the module at two different sample shapes (a dim that changes between
the runs is dynamic). Loading either runs the user's own code: a factory is imported and
called, and a TorchScript file may hold arbitrary TorchScript.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritongen.errors import MissingDependencyError, SourceError, engine_error, first_line
from tritongen.sources.input_spec import InputSpec, input_tensors, specs_batched
from tritongen.sources.samples import Array, Feed, random_feed
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature, TensorSpec

FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")

_NOT_FROM_TORCH = ("TYPE_UINT16", "TYPE_UINT32", "TYPE_UINT64", "TYPE_STRING")
"""Triton types no PyTorch output is mapped to: unsigned integers wider than 8 bits, and strings."""
_TORCH_TO_TRITON = {
    np.dtype(dtype).name: triton for triton, dtype in TRITON_TO_NUMPY.items() if triton not in _NOT_FROM_TORCH
}
"""An output's numpy dtype name (``float32``) -> its Triton data type."""

# Two probe shapes: (batch, value of every other dynamic dim). Distinct, small, not 1.
_PROBES = ((2, 7), (3, 11))


@dataclass(frozen=True)
class TorchSource:
    """A loaded PyTorch module (eager or TorchScript) with the signature found by running it."""

    kind: Literal["pytorch", "torchscript"]
    reference: str
    """The factory path or the TorchScript file, as given."""
    module: Any
    specs: tuple[InputSpec, ...]
    signature: Signature
    sha256: str
    output_structure: Literal["tensor", "sequence", "dict"]


def is_factory_reference(text: str) -> bool:
    """Whether ``text`` looks like ``package.module:factory`` rather than a file path."""
    return bool(FACTORY.match(text)) and not Path(text).exists()


def import_torch() -> Any:
    """Import torch or explain how to get it."""
    try:
        import torch
    except ImportError as e:
        raise MissingDependencyError(
            "PyTorch is not installed, and this source needs it",
            "install the torch extra: pip install 'tritongen[torch]'",
        ) from e
    return torch


def load_factory(reference: str) -> Any:
    """Import ``package.module`` and call ``factory()``; it must return a ``torch.nn.Module``.

    The current directory is importable, as it is for ``python -m``.

    Raises:
        SourceError: the reference is malformed, does not import, or returns something else.
    """
    torch = import_torch()
    if not FACTORY.match(reference):
        raise SourceError(
            f"{reference!r} is neither a model file nor a factory path",
            "give an .onnx or TorchScript .pt file, or package.module:factory",
        )
    module_name, _, attr_path = reference.partition(":")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # an import runs arbitrary user code
        raise SourceError(
            f"cannot import {module_name!r} for factory {reference!r}: {type(e).__name__}: {e}",
            "check the module path and that it imports in this Python environment",
        ) from e
    factory: Any = module
    for attr in attr_path.split("."):
        if not hasattr(factory, attr):
            raise SourceError(
                f"{module_name!r} has no attribute {attr!r} (factory {reference!r})",
                "name a callable that returns a torch.nn.Module",
            )
        factory = getattr(factory, attr)
    if not callable(factory):
        raise SourceError(f"{reference!r} is not callable", "name a function that returns a torch.nn.Module")
    try:
        model = factory()
    except Exception as e:
        raise SourceError(
            f"factory {reference!r} failed: {type(e).__name__}: {e}",
            "fix the factory; it is called with no arguments",
        ) from e
    if not isinstance(model, torch.nn.Module):
        raise SourceError(
            f"factory {reference!r} returned {type(model).__name__}, not a torch.nn.Module",
            "return the model instance from the factory",
        )
    return model.eval()


def load_torchscript(path: Path) -> Any:
    """Load a TorchScript file on the CPU.

    Raises:
        SourceError: the file is missing or is not TorchScript.
    """
    torch = import_torch()
    if not path.is_file():
        raise SourceError(f"{path} does not exist", "check the path to the TorchScript file")
    try:
        module = torch.jit.load(str(path), map_location="cpu")
    except Exception as e:  # torch raises RuntimeError, ValueError, zip errors ...
        raise SourceError(
            f"{path} is not a loadable TorchScript file: {first_line(e, 200)}",
            "save the model with torch.jit.trace(...).save() or torch.jit.script(...).save()",
        ) from e
    return module.eval()


def forward_argument_names(module: Any) -> list[str] | None:
    """The names of ``forward``'s tensor arguments, where they can be read."""
    schema = getattr(getattr(module, "forward", None), "schema", None)
    if schema is not None:  # TorchScript: the first argument is self
        return [a.name for a in schema.arguments[1:]]
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return None
    return [p.name for p in parameters]


def check_argument_order(module: Any, specs: Sequence[InputSpec], where: str) -> None:
    """Inputs go to ``forward`` positionally in ``--input-spec`` order; catch swapped specs early.

    Raises:
        SourceError: there are more specs than arguments, or the specs use forward's
            argument names in another order.
    """
    names = forward_argument_names(module)
    if names is None:
        return
    given = [s.name for s in specs]
    if len(given) > len(names):
        raise SourceError(
            f"{len(given)} --input-spec given, but {where}'s forward() takes {len(names)} "
            f"({', '.join(names)})",
            "give one --input-spec per forward() argument",
        )
    if set(given) <= set(names) and given != names[: len(given)]:
        raise SourceError(
            f"--input-spec order {', '.join(given)} differs from {where}'s forward({', '.join(names)})",
            "list the --input-spec options in forward()'s argument order",
        )


def module_sha256(module: Any, reference: str) -> str:
    """A content hash of the module's weights (stable across runs of the same model)."""
    digest = hashlib.sha256(reference.encode())
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def run_module(module: Any, specs: Sequence[InputSpec], feed: Feed) -> tuple[list[Array], str, list[str]]:
    """Run ``module`` on a numpy feed; return outputs, their structure and dict keys (if any)."""
    torch = import_torch()
    tensors = [torch.from_numpy(np.ascontiguousarray(feed[s.name])) for s in specs]
    with torch.inference_mode():
        result = module(*tensors)
    keys: list[str] = []
    if isinstance(result, dict):
        keys = [str(k) for k in result]
        values = list(result.values())
        structure = "dict"
    elif isinstance(result, (tuple, list)):
        values = list(result)
        structure = "sequence"
    else:
        values = [result]
        structure = "tensor"
    arrays = []
    for value in values:
        if not isinstance(value, torch.Tensor):
            raise SourceError(
                f"the model returned a {type(value).__name__} among its outputs",
                "return tensors only (a tensor, a tuple of tensors or a dict of tensors)",
            )
        arrays.append(value.detach().cpu().numpy())
    return arrays, structure, keys


def torch_signature(
    module: Any, specs: Sequence[InputSpec], output_names: Sequence[str], where: str
) -> tuple[Signature, str]:
    """Find the output signature by running ``module`` at two probe shapes.

    Raises:
        SourceError: the module rejects inputs shaped as the specs say, or the output
            names do not fit its outputs.
    """
    batched = specs_batched(specs)
    inputs = input_tensors(specs, batched)
    (first_out, structure, keys), (second_out, _, _) = _probe_runs(module, specs, inputs, batched, where)
    names = _output_names(output_names, keys, len(first_out), where)
    outputs_batched = batched and all(
        a.ndim >= 1 and b.ndim >= 1 and a.shape[0] == _PROBES[0][0] and b.shape[0] == _PROBES[1][0]
        for a, b in zip(first_out, second_out, strict=True)
    )
    notes: list[str] = []
    if batched and not outputs_batched:
        notes.append("an output does not follow the batch dim, so the model is served without batching")
    outputs = tuple(
        _output_spec(name, a, b, outputs_batched)
        for name, a, b in zip(names, first_out, second_out, strict=True)
    )
    if not outputs_batched:
        inputs = input_tensors(specs, batched=False)
    return Signature(inputs=inputs, outputs=outputs, batched=outputs_batched, notes=tuple(notes)), structure


def _probe_runs(
    module: Any, specs: Sequence[InputSpec], inputs: tuple[TensorSpec, ...], batched: bool, where: str
) -> list[tuple[list[Array], str, list[str]]]:
    """Run ``module`` on random inputs at each of the probe shapes (see :func:`run_module`).

    Raises:
        SourceError: the module rejects the inputs, or returns something other than tensors.
    """
    probe = Signature(inputs=inputs, outputs=(), batched=batched)
    rng = np.random.default_rng(0)
    runs = []
    for batch, dim_value in _PROBES:
        feed = random_feed(probe, batch, dim_value, rng)
        try:
            runs.append(run_module(module, specs, feed))
        except SourceError:
            raise
        except Exception as e:
            shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in feed.items())
            raise SourceError(
                f"{where} rejects inputs shaped as --input-spec says ({shapes}): {engine_error(e, 200)}",
                "fix --input-spec: names in forward() order, the right dtypes, -1 where a dim varies",
            ) from e
    return runs


def _output_names(given: Sequence[str], keys: list[str], count: int, where: str) -> list[str]:
    """The output names: ``--output-names``, else the keys of a returned dict, else ``output[_i]``.

    Raises:
        SourceError: the number of names differs from the number of outputs.
    """
    names = list(given) or keys or (["output"] if count == 1 else [f"output_{i}" for i in range(count)])
    if len(names) != count:
        raise SourceError(
            f"{where} returns {count} output(s), but {len(names)} output name(s) were given",
            "pass one name per output with --output-names",
        )
    return names


def _output_spec(name: str, first: Array, second: Array, batched: bool) -> TensorSpec:
    """One output's spec from its values at the two probe shapes: a dim that changed is dynamic.

    Raises:
        SourceError: Triton cannot serve the dtype, or the rank changed.
    """
    data_type = _TORCH_TO_TRITON.get(str(first.dtype))
    if data_type is None:
        raise SourceError(
            f"output {name!r} has dtype {first.dtype}, which Triton cannot serve", "cast it in forward()"
        )
    if first.ndim != second.ndim:
        raise SourceError(
            f"output {name!r} changes rank with the input shape", "return tensors of fixed rank"
        )
    dims = [x if x == y else -1 for x, y in zip(first.shape, second.shape, strict=True)]
    return TensorSpec(name=name, data_type=data_type, dims=tuple(dims[1:] if batched else dims))


def load_torch_source(
    reference: str, specs: Sequence[InputSpec], output_names: Sequence[str] = ()
) -> TorchSource:
    """Load a PyTorch factory or a TorchScript file and describe it.

    Raises:
        SourceError: no input specs, an unloadable source, or specs the model rejects.
        MissingDependencyError: torch is not installed.
    """
    path = Path(reference)
    kind: Literal["pytorch", "torchscript"] = "pytorch" if is_factory_reference(reference) else "torchscript"
    where = reference
    if not specs:
        raise SourceError(
            f"{reference} does not carry its input signature",
            "describe each input with --input-spec NAME:DTYPE:DIMS (first dim the batch, -1 dynamic)",
        )
    if kind == "pytorch":
        module = load_factory(reference)
        sha256 = module_sha256(module, reference)
    else:
        module = load_torchscript(path)
        sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    check_argument_order(module, specs, where)
    signature, structure = torch_signature(module, specs, output_names, where)
    return TorchSource(
        kind=kind,
        reference=reference,
        module=module,
        specs=tuple(specs),
        signature=signature,
        sha256=sha256,
        output_structure=structure,  # type: ignore[arg-type]
    )
