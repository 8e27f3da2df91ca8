"""Warm-up rules: each sample's batch size, its data sources and how its inputs match the model's."""

from __future__ import annotations

from typing import Any

from tritongen.lint.rules.context import ModelContext, enum_name


def check_warmup(ctx: ModelContext) -> None:
    """Warm-up samples: a data source, concrete dims, and inputs that match the model's."""
    model_inputs = {t.name: t for t in ctx.config.input}
    for index, sample in enumerate(ctx.config.model_warmup):
        _check_sample(ctx, index, sample, model_inputs)


def _check_sample(ctx: ModelContext, index: int, sample: Any, model_inputs: dict[str, Any]) -> None:
    """One sample: a name, a batch size Triton runs, and data for the model's inputs."""
    path = f"model_warmup[{index}]"
    label = f"warm-up sample '{sample.name}'" if sample.name else f"warm-up sample #{index}"
    if not sample.name:
        ctx.warning("warmup.name", f"{path}.name", f"{label} has no name", "name it (the log names samples)")
    if not _check_batch_size(ctx, path, label, sample):
        return
    given = dict(sample.inputs)
    for name, tensor in model_inputs.items():
        if name not in given and not tensor.optional:
            ctx.error(
                "warmup.input-missing",
                f"{path}.inputs",
                f"{label} gives no data for input '{name}'",
                f'add inputs {{ key: "{name}" value: {{ ... }} }}',
            )
    for name, value in given.items():
        where = f"{path}.inputs[{name}]"
        _check_input_data(ctx, where, f"{label} input '{name}'", value)
        _check_input_match(ctx, where, label, name, value, model_inputs.get(name))


def _check_batch_size(ctx: ModelContext, path: str, label: str, sample: Any) -> bool:
    """A batch size Triton runs and the model takes; returns whether Triton runs the sample."""
    max_batch = ctx.config.max_batch_size
    if sample.batch_size == 0:
        ctx.warning(
            "warmup.batch-size",
            f"{path}.batch_size",
            f"{label} has batch_size 0: Triton skips it"
            if ctx.wrote(f"{path}.batch_size")
            else f"{label} leaves batch_size out, so it is 0: Triton skips it",
            "set batch_size: 1 or more",
        )
        return False
    if max_batch and sample.batch_size > max_batch:
        ctx.warning(
            "warmup.batch-size",
            f"{path}.batch_size",
            f"{label} batch_size {sample.batch_size} exceeds max_batch_size {max_batch}",
            "use at most max_batch_size",
        )
    return True


def _check_input_data(ctx: ModelContext, where: str, label: str, value: Any) -> None:
    """One sample input's data: a source, fixed dims, and a data file that exists."""
    source = value.WhichOneof("input_data_type")
    if source is None:
        ctx.error(
            "warmup.data-source",
            where,
            f"{label} has no data",
            "set zero_data, random_data or input_data_file",
        )
    if any(d == -1 for d in value.dims):
        ctx.error(
            "warmup.variable-dims",
            f"{where}.dims",
            f"{label} has variable dims",
            "give every dim a size",
        )
    if source == "input_data_file" and ctx.directory is not None and ctx.check_files:
        data = ctx.directory / "warmup" / value.input_data_file
        if not data.is_file():
            ctx.error(
                "warmup.data-file",
                f"{where}.input_data_file",
                f"{data} does not exist",
                f"put the file in {ctx.directory.name}/warmup/",
            )


def _check_input_match(ctx: ModelContext, where: str, label: str, name: str, value: Any, tensor: Any) -> None:
    """One sample input against the model input of that name: it exists, with its data type and dims."""
    if tensor is None:
        ctx.warning(
            "warmup.unknown-input",
            where,
            f"{label} names '{name}', which is not a model input",
            "fix the name (Triton passes unknown names on without checking)",
        )
        return
    if value.data_type != tensor.data_type:
        ctx.error(
            "warmup.data-type",
            f"{where}.data_type",
            f"{label} input '{name}' is "
            f"{enum_name(value, 'data_type')}, the model expects {enum_name(tensor, 'data_type')}",
            f"set data_type: {enum_name(tensor, 'data_type')}",
        )
    if not _dims_match(list(value.dims), list(tensor.dims)):
        ctx.error(
            "warmup.dims",
            f"{where}.dims",
            f"{label} input '{name}' has dims {list(value.dims)}, the model expects {list(tensor.dims)}",
            "use the model's dims (without the batch dim)",
        )


def _dims_match(given: list[int], declared: list[int]) -> bool:
    """Same rank, and every declared size (other than -1) given as is."""
    return len(given) == len(declared) and all(
        d == -1 or g == d for g, d in zip(given, declared, strict=True)
    )
