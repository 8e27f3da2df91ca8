"""Triton's load-time rules for one model's config, one module per rule family.

Each check reads the parsed ``inference.ModelConfig`` message (and, where Triton does, the
model directory) and reports a :class:`~tritongen.lint.findings.Finding` per broken rule:
errors for what makes Triton refuse the model (or fail every request), warnings for legal
but suspicious settings. Nothing here raises on odd input: a rule that cannot apply is
skipped. :func:`lint_model` runs them all.
"""

from tritongen.lint.rules.run import lint_model

__all__ = ["lint_model"]
