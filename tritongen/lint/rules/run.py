"""Every model-level rule, in the order findings are reported, and the function that runs them."""

from __future__ import annotations

from collections.abc import Callable

from tritongen.lint.findings import Finding
from tritongen.lint.rules.autocomplete import check_auto_complete
from tritongen.lint.rules.batching import check_batch_io, check_batching_size, check_dynamic_batching
from tritongen.lint.rules.context import ModelContext
from tritongen.lint.rules.ensembles import check_ensemble_config, check_scheduling
from tritongen.lint.rules.instances import check_instance_groups
from tritongen.lint.rules.llm import check_execution_env, check_tensorrtllm, check_vllm
from tritongen.lint.rules.model import check_backend, check_name, check_versions
from tritongen.lint.rules.sequence import check_sequence_batching
from tritongen.lint.rules.tensors import check_io
from tritongen.lint.rules.warmup import check_warmup

MODEL_RULES: tuple[Callable[[ModelContext], None], ...] = (
    check_name,
    check_backend,
    check_versions,
    check_batching_size,
    check_io,
    check_batch_io,
    check_dynamic_batching,
    check_sequence_batching,
    check_scheduling,
    check_instance_groups,
    check_ensemble_config,
    check_warmup,
    check_auto_complete,
    check_execution_env,
    check_vllm,
    check_tensorrtllm,
)


def lint_model(ctx: ModelContext) -> list[Finding]:
    """Run every model-level rule; a rule that trips over odd input does not stop the others."""
    for rule in MODEL_RULES:
        try:
            rule(ctx)
        except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as e:
            ctx.error(
                "lint.internal",
                "",
                f"rule {rule.__name__} could not judge this config: {e}",
                "report this to tritongen",
            )
    return ctx.findings
