"""What lint reports: one finding per broken rule, with where, why and how to fix it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    """One broken rule in one model's config."""

    severity: Severity
    model: str
    """The model the rule was checked on (its directory name)."""
    file: str
    """The config file, as the user named it."""
    rule: str
    """Short stable id, e.g. ``dynamic-batching.preferred-le-max``."""
    field: str
    """Field path in the config, e.g. ``input[1].dims`` (empty for the whole file)."""
    message: str
    """What is wrong, in one sentence."""
    fix: str
    """What to do about it."""
    line: int | None = None
    column: int | None = None

    @property
    def location(self) -> str:
        """``file:line:column`` where known, else the file."""
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    def text(self) -> str:
        """One line: where, severity, model and field, what, rule, and the fix."""
        where = f"{self.model}: {self.field}: " if self.field else f"{self.model}: "
        return f"{self.location}: {self.severity}: {where}{self.message} [{self.rule}] fix: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


@dataclass
class LintReport:
    """Every finding of one lint run, and what was read."""

    findings: list[Finding] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        """Findings that make Triton (or every request) fail."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """Legal but suspicious settings."""
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def notes(self) -> list[Finding]:
        """What Triton does on its own that the user should know (e.g. it fills the config in)."""
        return [f for f in self.findings if f.severity == "info"]

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.lint/1`` document."""
        return {
            "schema": "tritongen.lint/1",
            "models": self.models,
            "files": self.files,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "notes": len(self.notes),
            "findings": [f.to_json() for f in self.findings],
        }
