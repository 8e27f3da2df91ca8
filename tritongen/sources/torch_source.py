"""PyTorch sources: a module factory (``package.module:factory``) or a TorchScript file.

Neither carries its input signature, so ``--input-spec`` supplies it; the outputs are
found by running the module at two different sample shapes (a dim that changes between
the runs is dynamic). Loading either runs the user's own code: a factory is imported and
called, and a TorchScript file may hold arbitrary TorchScript.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import itertools
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritongen.errors import MissingDependencyError, SourceError, engine_error, first_line
from tritongen.sources.adaptation import Adaptation
from tritongen.sources.dim_search import LADDER, describe_free, shape_hint
from tritongen.sources.input_spec import InputSpec, input_tensors, specs_batched
from tritongen.sources.samples import Array, Feed, random_array
from tritongen.sources.shape_plan import ShapePlan, apply_shapes, default_plan, export_dim_names
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature, TensorSpec
from tritongen.sources.torch_arguments import adapted_module, check_stateless, plan_call, written_attributes

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
    sample_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Input shapes the module ran at (batch 2): what tracing and export run on."""
    adapt: Callable[[Any], Any] | None = None
    """Wraps the user's module as served (frozen arguments, scalars as ``[1]``); ``None`` when
    ``module`` is the user's own. ``module`` is then already wrapped."""

    @property
    def original(self) -> Any:
        """The user's own module, unwrapped."""
        return self.module.inner if self.adapt is not None else self.module


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
    module: Any,
    specs: Sequence[InputSpec],
    output_names: Sequence[str],
    where: str,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> tuple[Signature, str, dict[str, tuple[int, ...]]]:
    """Find the output signature by running ``module`` at two probe shapes; also the first probe's shapes.

    Raises:
        SourceError: the module rejects inputs shaped as the specs say, or the output
            names do not fit its outputs.
    """
    batched = specs_batched(specs)
    inputs = input_tensors(specs, batched)
    runs, sample_shapes = _probe_runs(module, specs, inputs, batched, where, shapes or {})
    (first_out, structure, keys), (second_out, _, _) = runs
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
    signature = Signature(inputs=inputs, outputs=outputs, batched=outputs_batched, notes=tuple(notes))
    return signature, structure, sample_shapes


def _probe_runs(
    module: Any,
    specs: Sequence[InputSpec],
    inputs: tuple[TensorSpec, ...],
    batched: bool,
    where: str,
    shapes: Mapping[str, tuple[int, ...]],
) -> tuple[list[tuple[list[Array], str, list[str]]], dict[str, tuple[int, ...]]]:
    """Run ``module`` on random inputs at two shapes (see :func:`run_module`); also the first feed's shapes.

    Free dims are 7 and 11, else the first pair of :data:`LADDER` rungs the module runs at;
    dims given with ``--shape`` are doubled in the second run, so that outputs following them
    are found dynamic.

    Raises:
        SourceError: the module rejects the inputs at every size, or returns something other than tensors.
    """
    probe = Signature(inputs=inputs, outputs=(), batched=batched)
    names = export_dim_names(probe)
    plan = apply_shapes(default_plan(probe, names), probe, shapes, names)
    doubled = _doubled(plan, inputs)
    rng = np.random.default_rng(0)
    pairs = [_PROBES[0][1:] + _PROBES[1][1:], *itertools.pairwise(LADDER[1:])]
    error: Exception | None = None
    tried: list[int] = []
    for first, second in pairs if plan.has_free else pairs[:1]:
        feeds = [plan.feed(probe, _PROBES[0][0], first, rng), doubled.feed(probe, _PROBES[1][0], second, rng)]
        tried.append(first)
        try:
            runs = [run_module(module, specs, feed) for feed in feeds]
        except SourceError:
            raise
        except Exception as e:
            error = e
            continue
        return runs, {k: tuple(v.shape) for k, v in feeds[0].items()}
    assert error is not None
    if plan.has_free and len(tried) > 1:
        raise SourceError(
            f"{where} rejects random inputs at every size tried for its dynamic dims "
            f"({describe_free(plan, probe)} at {', '.join(map(str, tried))}): {engine_error(error, 200)}",
            f"give the dims it takes: {shape_hint(plan, probe, tried[-1])}",
        ) from error
    shown = ", ".join(f"{n}{list(plan.shape(n, batched, 2, 7))}" for n in plan.dims)
    raise SourceError(
        f"{where} rejects inputs shaped as --input-spec says ({shown}): {engine_error(error, 200)}",
        "fix --input-spec: names in forward() order, the right dtypes, -1 where a dim varies",
    ) from error


def _doubled(plan: ShapePlan, inputs: tuple[TensorSpec, ...]) -> ShapePlan:
    """``plan`` with the dims ``--shape`` set on dynamic dims doubled (the second probe)."""
    dims = {
        t.name: tuple(
            v * 2 if d == -1 and v > 0 else v for d, v in zip(t.dims, plan.dims[t.name], strict=True)
        )
        for t in inputs
    }
    return replace(plan, dims=dims)


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
    reference: str,
    specs: Sequence[InputSpec],
    output_names: Sequence[str] = (),
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    constants: Mapping[str, str] | None = None,
) -> TorchSource:
    """Load a PyTorch factory or a TorchScript file and describe it as served.

    Value arguments are frozen (``constants``), scalar inputs are taken as ``[1]`` and rank-0
    outputs answered as ``[1]`` (see :func:`adapted_module`); a module whose answers depend on
    state it keeps in its attributes is refused.

    Raises:
        SourceError: no input specs, an unloadable source, specs the model rejects, a value
            argument left free, or a stateful module.
        MissingDependencyError: torch is not installed.
    """
    kind: Literal["pytorch", "torchscript"] = "pytorch" if is_factory_reference(reference) else "torchscript"
    where = reference
    if not specs:
        raise SourceError(
            f"{reference} does not carry its input signature",
            "describe each input with --input-spec NAME:DTYPE:DIMS (first dim the batch, -1 dynamic)",
        )
    module, sha256 = _load_module(reference, kind)
    call = plan_call(module, specs, constants or {}, where)
    wrap = functools.partial(
        adapted_module,
        call=call,
        served=[s.name for s in specs],
        scalars=[s.name for s in specs if not s.shape],
        batched=specs_batched(specs),
    )
    adapted = (
        bool(call.constants) or any(not s.shape for s in specs) or list(call.order) != [s.name for s in specs]
    )
    served = wrap(module) if adapted else module
    signature, structure, sample_shapes = torch_signature(served, specs, output_names, where, shapes)
    if not adapted and any(t.dims == () and not signature.batched for t in signature.outputs):
        adapted, served = True, wrap(module)  # rank-0 outputs are answered as [1]
        signature, structure, sample_shapes = torch_signature(served, specs, output_names, where, shapes)
    note = _check_state(module, served, specs, sample_shapes, sha256 if kind == "pytorch" else None, where)
    scalars = tuple(s.name for s in specs if not s.shape)
    described = Adaptation(
        scalar_inputs=scalars, constants=call.constants, batched=signature.batched
    ).describe()
    signature = replace(signature, notes=(*signature.notes, *described, *([note] if note else [])))
    return TorchSource(
        kind=kind,
        reference=reference,
        module=served,
        specs=tuple(specs),
        signature=signature,
        sha256=sha256,
        output_structure=structure,  # type: ignore[arg-type]
        sample_shapes=sample_shapes,
        adapt=wrap if adapted else None,
    )


def _load_module(reference: str, kind: str) -> tuple[Any, str]:
    """The user's module and its digest (a factory's weights, or the TorchScript file's bytes).

    Raises:
        SourceError: the factory or the file cannot be loaded.
    """
    if kind == "pytorch":
        module = load_factory(reference)
        return module, module_sha256(module, reference)
    path = Path(reference)
    module = load_torchscript(path)
    return module, hashlib.sha256(path.read_bytes()).hexdigest()


def _check_state(
    module: Any,
    served: Any,
    specs: Sequence[InputSpec],
    shapes: Mapping[str, tuple[int, ...]],
    digest: str | None,
    where: str,
) -> str | None:
    """Refuse a module that answers by state kept in its attributes; a note when it writes some harmlessly.

    ``digest``: an eager module's weights digest before it ran (its buffers changing tells of state).

    Raises:
        SourceError: the module's answer to an input changes after another input.
    """
    written = [f"self.{name}" for name in written_attributes(module)]
    if digest is not None and module_sha256(module, where) != digest:
        written.append("its buffers")
    if not written:
        return None
    feeds = []
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        feeds.append({s.name: random_array(s.data_type, shapes[s.name], rng) for s in specs})
    what = ", ".join(written)
    check_stateless(lambda feed: run_module(served, specs, feed)[0], feeds[0], feeds[1], what, where)
    return f"forward() writes {what}, but its answers do not depend on it (checked by calling it in turn)"
