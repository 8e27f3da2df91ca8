"""The dims a build verifies, calibrates and buckets at: ``--shape``, the source's clues, a search.

See :mod:`tritongen.sources.shape_plan` for the rules and :mod:`tritongen.sources.dim_search`
for the search.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from tritongen.convert.formats import ConvertSession
from tritongen.errors import SourceError, first_line
from tritongen.pipeline.request import BuildRequest, Progress
from tritongen.sources.dim_clues import read_clues
from tritongen.sources.dim_search import apply_clues, search_dims
from tritongen.sources.model_source import ModelSource
from tritongen.sources.samples import Feed
from tritongen.sources.shape_plan import (
    FREE,
    ShapePlan,
    apply_shapes,
    default_plan,
    export_dim_names,
    fixed_signature,
)
from tritongen.sources.signature import Signature


def dim_names(source: ModelSource) -> dict[str, tuple[str, ...]]:
    """Each input's dim names (full dims): the ONNX graph's, or those PyTorch's export gives."""
    if source.onnx is not None:
        return read_clues(source.onnx.model).names
    return export_dim_names(source.signature)


def plan_shapes(source: ModelSource, shapes: Mapping[str, tuple[int, ...]]) -> ShapePlan:
    """The plan before any run: dynamic dims free, ``--shape`` values set, then the graph's clues.

    Raises:
        ConfigError: ``--shape`` names an unknown input or contradicts the model.
    """
    signature = source.signature
    names = dim_names(source)
    plan = apply_shapes(default_plan(signature, names), signature, shapes, names)
    if source.onnx is not None:
        plan = apply_clues(plan, read_clues(source.onnx.model), signature)
    return plan


def fix_shapes(source: ModelSource, plan: ShapePlan, shapes: Mapping[str, tuple[int, ...]]) -> ModelSource:
    """``--fixed-shape``: the source with the ``--shape`` dims written into its signature."""
    return replace(source, signature=fixed_signature(source.signature, plan))


def settle_shapes(
    plan: ShapePlan, signature: Signature, reference: Callable[[Feed], object], has_data: bool
) -> tuple[ShapePlan, str | None]:
    """The plan the source runs on (see :func:`search_dims`), and a note when it runs on none.

    With ``--verify-data`` given, a source that runs on no random input is verified on the
    data alone (the note says so) instead of refused.

    Raises:
        SourceError: the source runs on no random input, and there is no data to verify on.
    """
    try:
        return search_dims(plan, signature, reference), None
    except SourceError as e:
        if not has_data:
            raise
        return plan, e.message


def tvm_dim_values(
    plan: ShapePlan, signature: Signature, names: Mapping[str, tuple[str, ...]]
) -> dict[str, int]:
    """Values of named ONNX dims that the plan sets (``--shape``, clues or the search), for TVM's buckets."""
    if plan.chosen_by in ("default", "static"):
        return {}
    lead = 1 if signature.batched else 0
    values: dict[str, int] = {}
    for tensor in signature.inputs:
        dims = names.get(tensor.name, ())
        full = plan.shape(tensor.name, signature.batched, 1, plan.free_values[0])
        for axis in range(lead, len(full)):
            rule = plan.dims[tensor.name][axis - lead]
            if axis < len(dims) and dims[axis] and (rule > 0 or rule == FREE):
                values.setdefault(dims[axis], full[axis])
    return values


def random_batches(
    session: ConvertSession, plan: ShapePlan, request: BuildRequest, has_data: bool, say: Progress
) -> tuple[ShapePlan, list[Feed]]:
    """The dims the source runs at (settled by running it, unless ``--no-verify``) and the random batches.

    Raises:
        SourceError: the source runs on no random input and there is no ``--verify-data``.
    """
    signature = session.source.signature
    if not request.verify.skip:
        say("running the source on random inputs")
        plan, note = settle_shapes(plan, signature, session.reference(), has_data)
        if note is not None:
            say(f"{note}: verifying on --verify-data alone")
    session.shape_plan = plan
    _bucket_at(session, plan, request)
    feeds = plan.batches(signature, session.options.max_batch_size)
    if has_data and not request.verify.skip:
        feeds = _feeds_the_source_runs(session, feeds, say)
    return plan, feeds


def _bucket_at(session: ConvertSession, plan: ShapePlan, request: BuildRequest) -> None:
    """TVM's default buckets at the dims the plan sets (unless ``--tvm-buckets`` names them)."""
    if "tvm" not in request.formats or session.options.tvm.dim_values:
        return
    values = tvm_dim_values(plan, session.source.signature, dim_names(session.source))
    if values:
        session.options = replace(session.options, tvm=replace(session.options.tvm, dim_values=values))


def _feeds_the_source_runs(session: ConvertSession, feeds: list[Feed], say: Progress) -> list[Feed]:
    """The random feeds the source itself runs on: with ``--verify-data`` given, the others are dropped.

    A model that parses its inputs (a Cast of strings to numbers) fails on random strings;
    the user's data is what it is verified on then.
    """
    reference = session.reference()
    kept, failure = [], None
    for feed in feeds:
        try:
            reference(feed)
        except Exception as e:  # the source's runtime may raise anything
            failure = failure or first_line(e)
            continue
        kept.append(feed)
    if failure is not None:
        say(f"the source fails on random inputs ({failure}): verifying on --verify-data alone")
    return kept
