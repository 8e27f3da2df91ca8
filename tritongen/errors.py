"""The one exception root of tritongen and its families.

Every error a user can cause is a :class:`TritongenError` carrying a one-line
``message`` (what is wrong) and a ``hint`` (what to do). Only the CLI turns them
into output and exit codes.
"""

from __future__ import annotations


class TritongenError(Exception):
    """An error the user can act on: what went wrong and how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        """Return the message and the hint joined on one line."""
        text = self.message.rstrip(".")
        if self.hint:
            return f"{text}. {self.hint.rstrip('.')}."
        return f"{text}."


class SourceError(TritongenError):
    """A source model is missing, unreadable or cannot be described."""


class ConfigError(TritongenError):
    """A model configuration is illegal or does not survive Triton's schema."""


class WorkloadInputError(ConfigError):
    """A workload that cannot be sent: a bad ``--trace``, requests the model refuses, too long a session."""

    exit_code = 2


class TemplateError(TritongenError):
    """A Jinja template is missing, malformed or uses an undefined variable."""


class RepositoryError(TritongenError):
    """A model repository cannot be read or written as asked."""


class ConversionError(TritongenError):
    """A converter cannot build an artifact, or the artifact disagrees with the source."""


class UnavailableHereError(ConversionError):
    """A format cannot be built or served here (engine not installed, or not servable on the target)."""


class MissingDependencyError(TritongenError):
    """An optional framework or tool needed for this step is not installed."""


class ServerError(TritongenError):
    """A Triton server cannot be started, reached or stopped."""


class ValidationError(TritongenError):
    """Responses of a load test differed from the data's expected outputs (``validation_data``)."""


class ModelLoadError(ServerError):
    """One or more models failed to load; ``reasons`` maps each model to the server's reason."""

    def __init__(self, reasons: dict[str, str], hint: str | None = None) -> None:
        self.reasons = dict(reasons)
        names = ", ".join(sorted(reasons))
        super().__init__(f"{len(reasons)} model(s) failed to load: {names}", hint)


class LoadTimeoutError(ServerError):
    """Models did not finish loading within the time allowed; ``models`` names those still loading."""

    def __init__(self, models: list[str], message: str, hint: str | None = None) -> None:
        self.models = list(models)
        super().__init__(message, hint)


def first_line(error: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type name when empty), for one-line errors."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    if len(line) <= limit:
        return line
    cut = line[:limit]
    sentence = cut.rfind(". ")
    return cut[: sentence + 1] if sentence > limit // 2 else cut.rstrip() + "…"


def engine_error(error: BaseException, limit: int = 300) -> str:
    """What an engine says went wrong, without its call site.

    Both engines put the cause last. ONNX Runtime after a file, line and C++ signature:
    ``[ONNXRuntimeError] : 1 : FAIL : Load model from m.onnx failed:/src/model.cc:256
    onnxruntime::Model::Model(...) Unsupported model IR version: 14, ...``; the TorchScript
    interpreter after a traceback, as ``RuntimeError: mat1 and mat2 shapes cannot be ...``.
    """
    text = str(error).strip()
    if "[ONNXRuntimeError]" in text and "onnxruntime::" in text:
        tail = text.rsplit("onnxruntime::", 1)[1]
        cause = tail.split(") ", 1)[1] if ") " in tail else tail
        return first_line(RuntimeError(f"ONNX Runtime: {cause.strip()}"), limit)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and "TorchScript interpreter" in lines[0]:
        last = lines[-1]
        return first_line(RuntimeError(last.split(": ", 1)[1] if ": " in last else last), limit)
    return first_line(error, limit)
