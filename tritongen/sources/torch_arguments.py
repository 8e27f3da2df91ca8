"""``forward()``'s arguments (tensors, or Python values frozen with ``--constant``) and its state.

Triton sends tensors only, so a ``forward(self, x, sr: int)`` is served with ``sr`` frozen
(``--constant sr=16000``). A module that writes its attributes in ``forward`` and answers
differently for it cannot be served as it is: Triton hands each request to any instance, in
any order, so state kept in the module does not follow a client's stream.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tritongen.errors import SourceError
from tritongen.sources.adaptation import parse_value, unknown_constant
from tritongen.sources.input_spec import InputSpec
from tritongen.sources.samples import Feed

_PYTHON_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str"}
"""Annotations of arguments Triton cannot send (a Python value, not a tensor) -> how a value is parsed."""
_SET_ATTR = re.compile(r'prim::SetAttr\[name="([^"]+)"\]')


@dataclass(frozen=True)
class Argument:
    """One argument of ``forward`` (``self`` excluded)."""

    name: str
    kind: str
    """``tensor``, or the Python type of a value argument (``int``, ``float``, ``bool``, ``str``)."""
    required: bool


@dataclass(frozen=True)
class Call:
    """How ``forward`` is called: its arguments in order, and the frozen ones' values."""

    order: tuple[str, ...]
    """Per argument up to the last one given: the ``--input-spec`` name of a tensor, or a frozen name."""
    constants: dict[str, Any]


def forward_arguments(module: Any) -> list[Argument] | None:
    """``forward``'s arguments, where they can be read (TorchScript's schema, or the Python signature)."""
    schema = getattr(getattr(module, "forward", None), "schema", None)
    if schema is not None:  # TorchScript: the first argument is self
        return [
            Argument(a.name, _PYTHON_KINDS.get(str(a.type), "tensor"), not a.has_default_value())
            for a in schema.arguments[1:]
        ]
    try:
        parameters = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return None
    return [Argument(p.name, _annotation_kind(p.annotation), p.default is p.empty) for p in parameters]


def _annotation_kind(annotation: Any) -> str:
    name = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return _PYTHON_KINDS.get(str(name), "tensor")


def plan_call(module: Any, specs: Sequence[InputSpec], constants: Mapping[str, str], where: str) -> Call:
    """The arguments ``forward`` is called with: the specs' tensors and the frozen values, in its order.

    Raises:
        SourceError: a value argument without ``--constant``, a ``--constant`` naming no argument,
            or specs in another order than ``forward``'s.
    """
    arguments = forward_arguments(module)
    given = [s.name for s in specs]
    if arguments is None:
        if constants:
            raise SourceError(
                f"--constant needs forward()'s argument names, and {where}'s forward takes *args",
                "give forward() named arguments, or freeze the value inside the module",
            )
        return Call(order=tuple(given), constants={})
    names = [a.name for a in arguments]
    refused = unknown_constant(list(constants), names, f"an argument of {where}'s forward()")
    if refused is not None:
        raise SourceError(refused.message, refused.hint)
    both = [n for n in given if n in constants]
    if both:
        raise SourceError(
            f"--input-spec and --constant both name '{both[0]}'",
            "a frozen argument is not an input: drop its --input-spec",
        )
    values = {
        a.name: parse_value(constants[a.name], a.kind, f"--constant {a.name}")
        if a.kind != "tensor"
        else _tensor_value(constants[a.name], f"--constant {a.name}")
        for a in arguments
        if a.name in constants
    }
    free = [a for a in arguments if a.name not in constants]
    for argument in free[len(given) :]:  # the specs cover the first free arguments, in order
        if argument.kind != "tensor" and argument.required:
            raise SourceError(
                f"{where}'s forward() takes '{argument.name}: {argument.kind}', a Python value Triton cannot "
                "send (it sends tensors)",
                f"freeze it with --constant {argument.name}=VALUE",
            )
    _check_order(given, [a.name for a in free], where)
    order: list[str] = []
    pending = list(given)
    for name in names:  # tensors go positionally, in --input-spec order, between the frozen values
        if not pending and not any(c not in order for c in constants):
            break
        if name in constants:
            order.append(name)
        elif pending:
            order.append(pending.pop(0))
    return Call(order=tuple(order), constants=values)


def _tensor_value(text: str, label: str) -> np.ndarray[Any, Any]:
    """A frozen tensor argument: a rank-0 INT64 tensor for an integer, else FP32.

    Raises:
        ConfigError: the text is no number.
    """
    value = parse_value(text, "float", label)
    as_int = text.lstrip("+-").isdigit()
    return np.asarray(int(text) if as_int else value, dtype=np.int64 if as_int else np.float32)


def _check_order(given: list[str], free: list[str], where: str) -> None:
    """Inputs go to ``forward`` in ``--input-spec`` order; catch swapped or extra specs early.

    Raises:
        SourceError: more specs than arguments, or forward's names in another order.
    """
    if len(given) > len(free):
        raise SourceError(
            f"{len(given)} --input-spec given, but {where}'s forward() takes {len(free)} ({', '.join(free)})",
            "give one --input-spec per forward() argument",
        )
    if set(given) <= set(free) and given != free[: len(given)]:
        raise SourceError(
            f"--input-spec order {', '.join(given)} differs from {where}'s forward({', '.join(free)})",
            "list the --input-spec options in forward()'s argument order",
        )


def written_attributes(module: Any) -> list[str]:
    """The attributes a TorchScript ``forward`` assigns (``self.total = ...``); none for an eager module."""
    graph = getattr(module, "inlined_graph", None)
    if graph is None:
        return []
    return sorted(set(_SET_ATTR.findall(str(graph))))


def check_stateless(
    run: Callable[[Feed], list[Any]], first: Feed, second: Feed, what: str, where: str
) -> None:
    """Refuse a module whose answer to ``first`` changes after it has seen ``second``.

    ``what`` names the state it writes (``self.total``).

    Raises:
        SourceError: the answers differ.
    """
    before = run(first)
    run(second)
    after = run(first)
    same = all(
        np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
        for a, b in zip(before, after, strict=True)
    )
    if not same:
        raise SourceError(
            f"{where} keeps state in {what} between calls, and its answers depend on it: Triton hands each "
            "request to any instance in any order, so state kept in a module does not follow a client",
            "export the state as an input and an output (state in, new state out), as RNN exports do",
        )


def adapted_module(
    inner: Any,
    call: Call,
    served: Sequence[str],
    scalars: Sequence[str],
    batched: bool,
) -> Any:
    """A module taking the served tensors (``served`` order) that calls ``inner`` as ``call`` says.

    Scalar inputs arrive as ``[1]`` (``[batch, 1]`` when ``batched``: the first row counts) and
    are handed on as rank 0; rank-0 outputs are answered as ``[1]``. Tracing it records the
    call into ``inner`` (a TorchScript module keeps its own code).
    """
    import torch

    class Adapted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *tensors: Any) -> Any:
            given = dict(zip(served, tensors, strict=True))
            args = []
            for name in call.order:
                if name in call.constants:
                    value = call.constants[name]
                    args.append(torch.from_numpy(value) if isinstance(value, np.ndarray) else value)
                elif name in scalars:
                    args.append(given[name].reshape(-1)[0] if batched else given[name].reshape(()))
                else:
                    args.append(given[name])
            result = self.inner(*args)
            return _outputs_of_rank_one(result)

    return Adapted().eval()


def _outputs_of_rank_one(result: Any) -> Any:
    """Rank-0 tensors among ``result`` reshaped to ``[1]``."""
    if isinstance(result, dict):
        return {k: _outputs_of_rank_one(v) for k, v in result.items()}
    if isinstance(result, (tuple, list)):
        return type(result)(_outputs_of_rank_one(v) for v in result)
    if getattr(result, "dim", None) is not None and result.dim() == 0:
        return result.reshape(1)
    return result
