"""Ensemble rules within one config: platform and scheduling, what it must not carry, steps and flow."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from tritongen.lint.rules.context import ModelContext


def check_scheduling(ctx: ModelContext) -> None:
    """Ensemble platform and ensemble scheduling go together; cache and decoupled do not."""
    config = ctx.config
    has_ensemble = config.HasField("ensemble_scheduling")
    if ctx.is_ensemble and not has_ensemble:
        ctx.error(
            "ensemble.scheduling-missing",
            "ensemble_scheduling",
            "platform ensemble without ensemble_scheduling",
            "add ensemble_scheduling { step [...] }",
        )
    if has_ensemble and not ctx.is_ensemble:
        ctx.error(
            "ensemble.platform",
            "ensemble_scheduling",
            "ensemble_scheduling on a model whose platform is not ensemble",
            'set platform: "ensemble", or drop ensemble_scheduling',
        )
    cache = config.HasField("response_cache") and config.response_cache.enable
    if cache and config.model_transaction_policy.decoupled:
        ctx.error(
            "response-cache.decoupled",
            "response_cache",
            "the response cache does not work with a decoupled model",
            "set response_cache { enable: false }",
        )


def check_ensemble_config(ctx: ModelContext) -> None:
    """What an ensemble must not carry, and the shape of its steps (without the step models)."""
    if not ctx.is_ensemble:
        return
    config = ctx.config
    if config.instance_group:
        ctx.error(
            "ensemble.instance-group",
            "instance_group",
            "an ensemble takes no instance_group",
            "drop instance_group: the step models have their own",
        )
    if config.HasField("optimization"):
        ctx.error("ensemble.optimization", "optimization", "an ensemble takes no optimization", "drop it")
    if config.model_warmup:
        ctx.error(
            "ensemble.warmup",
            "model_warmup",
            "an ensemble takes no model_warmup",
            "warm up the step models instead",
        )
    if not config.HasField("ensemble_scheduling"):
        return
    steps = config.ensemble_scheduling.step
    if not steps:
        ctx.error("ensemble.no-steps", "ensemble_scheduling.step", "the ensemble has no step", "add steps")
    written: Counter[str] = Counter()
    for index, step in enumerate(steps):
        path = f"ensemble_scheduling.step[{index}]"
        if not step.model_name:
            ctx.error("ensemble.step-model", f"{path}.model_name", "step names no model", "set model_name")
        if not step.input_map:
            ctx.error(
                "ensemble.step-input-map", f"{path}.input_map", "step has no input_map", "map its inputs"
            )
        if not step.output_map:
            ctx.error(
                "ensemble.step-output-map", f"{path}.output_map", "step has no output_map", "map its outputs"
            )
        written.update(step.output_map.values())
    for tensor, count in written.items():
        if count > 1:
            ctx.error(
                "ensemble.tensor-written-twice",
                "ensemble_scheduling.step",
                f"ensemble tensor '{tensor}' is written by several steps",
                "give each step output its own ensemble tensor",
            )
    _check_ensemble_flow(ctx, steps)


def _check_ensemble_flow(ctx: ModelContext, steps: Any) -> None:
    """Every ensemble input used, every output written and reachable, no dangling tensor."""
    inputs = {t.name for t in ctx.config.input}
    outputs = {t.name for t in ctx.config.output}
    consumed = {v for step in steps for v in step.input_map.values()}
    produced = {v for step in steps for v in step.output_map.values()}
    for name in sorted(inputs - consumed):
        ctx.error(
            "ensemble.input-unused",
            "input",
            f"ensemble input '{name}' is not used by any step",
            "map it into a step, or remove it",
        )
    for name in sorted(outputs - produced):
        ctx.error(
            "ensemble.output-unwritten",
            "output",
            f"ensemble output '{name}' is not written by any step",
            "map a step output to it",
        )
    reachable = set(inputs)
    changed = True
    while changed:
        changed = False
        for step in steps:
            if set(step.input_map.values()) <= reachable and not set(step.output_map.values()) <= reachable:
                reachable |= set(step.output_map.values())
                changed = True
    for name in sorted((outputs & produced) - reachable):
        ctx.error(
            "ensemble.output-unreachable",
            "output",
            f"ensemble output '{name}' cannot be computed from "
            "the ensemble inputs (a step waits on a tensor nothing writes, or on a cycle)",
            "feed every step from ensemble inputs or earlier steps",
        )
    for name in sorted(produced - outputs - consumed):
        ctx.error(
            "ensemble.tensor-unused",
            "ensemble_scheduling.step",
            f"ensemble tensor '{name}' is written but never used",
            "use it in a later step, or make it an ensemble output",
        )


def iter_steps(ctx: ModelContext) -> Iterator[tuple[int, Any]]:
    """An ensemble's steps with their indexes."""
    if ctx.is_ensemble and ctx.config.HasField("ensemble_scheduling"):
        yield from enumerate(ctx.config.ensemble_scheduling.step)
