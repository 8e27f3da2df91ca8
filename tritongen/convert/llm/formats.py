"""The LLM formats: which builds for which target, and what stops one here.

``vllm`` builds for both targets (ours on the embedded server, Triton's vLLM backend in its
image); ``tensorrtllm`` only for the container target (Triton's TensorRT-LLM image), its
engine built where TensorRT-LLM lives.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tritongen.convert.artifact import Target
from tritongen.errors import ConfigError
from tritongen.triton.repository import read_metadata

LLM_FORMATS = ("vllm", "tensorrtllm")
"""The formats a language model builds to, in the order they are built."""
DEFAULT_LLM_FORMAT = "vllm"


def parse_llm_formats(text: str, target: Target) -> tuple[str, ...]:
    """``--formats`` of a language model: a comma-separated subset of :data:`LLM_FORMATS`, or ``all``.

    ``all`` is every format the target serves.

    Raises:
        ConfigError: an unknown or repeated format, or an empty list.
    """
    items = [item.strip().lower() for item in text.split(",") if item.strip()]
    if items == ["all"]:
        return tuple(f for f in LLM_FORMATS if target_refusal(f, target) is None)
    if not items:
        raise ConfigError("no format requested", f"pass --formats with some of: {', '.join(LLM_FORMATS)}")
    for item in items:
        if item not in LLM_FORMATS:
            raise ConfigError(
                f"format {item!r} does not serve a language model",
                f"a Hugging Face model folder builds to {', '.join(LLM_FORMATS)} (or all)",
            )
    if len(set(items)) != len(items):
        raise ConfigError("--formats names a format twice", "list each format once")
    return tuple(f for f in LLM_FORMATS if f in items)


def target_refusal(fmt: str, target: Target) -> str | None:
    """Why ``fmt`` does not serve on ``target``; None when it does."""
    if fmt == "tensorrtllm" and target == "local":
        return (
            "TensorRT-LLM serves only in Triton's TensorRT-LLM image (a GPU host): "
            "use --target container, or --formats vllm here"
        )
    return None


def tensorrtllm_build_reason() -> str | None:
    """Why the TensorRT-LLM engine is not built on this machine; None where ``trtllm-build`` is."""
    if shutil.which("trtllm-build") is None:
        return "TensorRT-LLM is not installed here (no trtllm-build)"
    return None


LLM_START_TIMEOUT_S = 900.0
"""How long a server is given to start a local LLM engine: minutes on a busy CPU."""


def local_llm_models(repo: Path, models: list[str] | None = None) -> list[str]:
    """The local-target LLM models of ``repo`` (of ``models`` when named): engines that start in minutes."""
    if not repo.is_dir():
        return []
    names = models or sorted(p.name for p in repo.iterdir() if p.is_dir())
    found = []
    for name in names:
        metadata = read_metadata(repo / name) or {}
        if metadata.get("format") in LLM_FORMATS and metadata.get("target") == "local":
            found.append(name)
    return found
