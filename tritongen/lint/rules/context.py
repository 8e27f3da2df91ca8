"""What every rule family shares: the model being judged, enum names and batch-size checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from tritongen.lint.findings import Finding, Severity
from tritongen.lint.rules.layout import PLATFORM_BACKENDS, detect_backend
from tritongen.triton.pbtxt.written import normalized, written_fields


@dataclass
class ModelContext:
    """One model as lint sees it: its parsed config and, when known, its directory."""

    name: str
    """The directory name (or the config's name for a lone file)."""
    config: Any
    """The parsed ``inference.ModelConfig`` message."""
    file: str
    """The config's path as findings show it."""
    directory: Path | None = None
    """The model directory (None for a config judged on its own: file and directory rules are skipped)."""
    slo_p99_ms: float | None = None
    """The P99 latency budget the dynamic-batching queue delay is judged against, when one is given."""
    check_files: bool = True
    """Whether the version directories and model files are judged (not for a config about to be written)."""
    text: str = ""
    """The config's text (to place findings on their line)."""
    auto_completed: bool = False
    """Whether the directory has no config.pbtxt: ``config`` is what Triton fills in from the files."""
    findings: list[Finding] = field(default_factory=list)

    def report(self, severity: Severity, rule: str, path: str, message: str, fix: str) -> None:
        """Record one finding."""
        self.findings.append(Finding(severity, self.name, self.file, rule, path, message, fix))

    def error(self, rule: str, path: str, message: str, fix: str) -> None:
        """Record an error: Triton refuses this model (or every request to it fails)."""
        self.report("error", rule, path, message, fix)

    def warning(self, rule: str, path: str, message: str, fix: str) -> None:
        """Record a warning: legal, but probably not what was meant."""
        self.report("warning", rule, path, message, fix)

    def note(self, rule: str, path: str, message: str, fix: str) -> None:
        """Record a note: what Triton does on its own here (nothing is wrong)."""
        self.report("info", rule, path, message, fix)

    @cached_property
    def written(self) -> frozenset[str] | None:
        """The field paths the config's text writes (``None``: no text, or text the tree cannot follow)."""
        return written_fields(self.text) if self.text else None

    def wrote(self, path: str) -> bool:
        """Whether the config writes the field at ``path`` (``instance_group[1].count``).

        Without its text, a config is taken to write every field it holds.
        """
        return self.written is None or normalized(path) in self.written

    @property
    def platform(self) -> str:
        """The platform as written."""
        return str(self.config.platform)

    @property
    def backend(self) -> str:
        """The backend as written, else as Triton would fill it in from the platform or the files."""
        if self.config.backend:
            return str(self.config.backend)
        if self.platform in PLATFORM_BACKENDS:
            return PLATFORM_BACKENDS[self.platform]
        return detect_backend(self.directory) or ""

    @property
    def is_ensemble(self) -> bool:
        """Whether the config declares an ensemble."""
        return self.platform == "ensemble"


def enum_name(message: Any, field_name: str) -> str:
    """The name of an enum field's value (its number when unknown)."""
    value = getattr(message, field_name)
    enum = message.DESCRIPTOR.fields_by_name[field_name].enum_type
    found = enum.values_by_number.get(value)
    return str(found.name) if found is not None else str(value)


def check_preferred_sizes(
    ctx: ModelContext, family: str, path: str, sizes: list[int], max_batch: int, fix_le_max: str
) -> bool:
    """Preferred batch sizes are positive and at most max_batch_size.

    Args:
        ctx: The model being judged.
        family: The rule family, e.g. ``dynamic-batching`` (rules are ``<family>.preferred-*``).
        path: The field path of the preferred sizes.
        sizes: The preferred batch sizes.
        max_batch: The model's max_batch_size.
        fix_le_max: The fix shown when a size exceeds max_batch_size.

    Returns:
        Whether an error was reported.
    """
    if any(s <= 0 for s in sizes):
        ctx.error(
            f"{family}.preferred-positive",
            path,
            f"preferred batch sizes {sizes} include one <= 0",
            "use positive sizes",
        )
        return True
    if any(s > max_batch for s in sizes):
        ctx.error(
            f"{family}.preferred-le-max",
            path,
            f"preferred batch size {max(sizes)} exceeds max_batch_size {max_batch}",
            fix_le_max,
        )
        return True
    return False
