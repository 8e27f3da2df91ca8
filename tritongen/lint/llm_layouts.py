"""What must agree across a TensorRT-LLM layout: the ensemble, its tokenizer models and the engine.

An ensemble with a ``tensorrtllm`` step is checked against its steps: one max batch size
(the engine's; a step with another batches differently from the engine it feeds), the
engine decoupled when the ensemble maps a ``streaming`` input to it (a streamed answer needs
decoupled mode), and a tokenizer folder in each Python step that needs one.
"""

from __future__ import annotations

from tritongen.lint.findings import Finding
from tritongen.lint.rules.context import ModelContext
from tritongen.lint.rules.ensembles import iter_steps
from tritongen.lint.rules.llm import is_decoupled, parameters


def check_llm_layouts(models: dict[str, ModelContext], linted: list[ModelContext]) -> list[Finding]:
    """Each linted ensemble that drives a TensorRT-LLM engine, against its steps."""
    findings: list[Finding] = []
    for ctx in linted:
        if not ctx.is_ensemble:
            continue
        steps = [(index, step, models.get(step.model_name)) for index, step in iter_steps(ctx)]
        engines = [(i, s, m) for i, s, m in steps if m is not None and m.backend == "tensorrtllm"]
        if not engines:
            continue
        before = len(ctx.findings)
        for index, step, engine in engines:
            assert engine is not None
            _check_agreement(ctx, engine, [m for _, _, m in steps if m is not None and m is not engine])
            _check_streaming(ctx, index, step, engine)
        for index, _, model in steps:
            if model is not None and model.backend == "python":
                _check_tokenizer(ctx, index, model)
        findings += ctx.findings[before:]
    return findings


def _check_agreement(ctx: ModelContext, engine: ModelContext, others: list[ModelContext]) -> None:
    """The ensemble and its other steps batch as the engine does."""
    size = engine.config.max_batch_size
    for model in [ctx, *others]:
        if model.config.max_batch_size != size:
            ctx.warning(
                "llm.layout-batch-size",
                "max_batch_size",
                f"'{model.name}' has max_batch_size {model.config.max_batch_size}, the engine "
                f"'{engine.name}' {size}",
                "give the layout's models the engine's batch size (--max-num-seqs)",
            )


def _check_streaming(ctx: ModelContext, index: int, step: object, engine: ModelContext) -> None:
    """A ``streaming`` input mapped to the engine needs the engine decoupled."""
    mapping = getattr(step, "input_map", {})
    if "streaming" in mapping and not is_decoupled(engine):
        ctx.error(
            "llm.layout-decoupled",
            f"ensemble_scheduling.step[{index}].input_map",
            f"the ensemble maps '{mapping['streaming']}' to streaming of '{engine.name}', not decoupled",
            f"set model_transaction_policy {{ decoupled: true }} in '{engine.name}'",
        )


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")


def _check_tokenizer(ctx: ModelContext, index: int, model: ModelContext) -> None:
    """A tokenizer step (ids out of text, or text out of ids) has its tokenizer beside its model.py.

    A ``tokenizer_dir`` parameter names a folder of the image: it cannot be checked here.
    """
    names = {t.name for t in [*model.config.input, *model.config.output]}
    if model.directory is None or not ({"input_ids", "tokens_batch"} & names):
        return
    if parameters(model).get("tokenizer_dir", "").strip():
        return
    folder = model.directory / "1" / "tokenizer"
    if not any((folder / name).exists() for name in TOKENIZER_FILES):
        ctx.error(
            "llm.layout-tokenizer",
            f"ensemble_scheduling.step[{index}].model_name",
            f"'{model.name}' has no tokenizer in {model.name}/1/tokenizer",
            "put the model's tokenizer files there, or convert the model again",
        )
