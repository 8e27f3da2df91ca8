"""Triton's images for language-model repositories: the vLLM and TensorRT-LLM builds of a release.

A repository holding a ``backend: "vllm"`` model is served by ``…-vllm-python-py3``, one holding
the TensorRT-LLM layout by ``…-trtllm-python-py3`` (the plain image has neither backend).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritongen.errors import ConfigError
from tritongen.triton.repository import read_metadata

IMAGE_FLAVOURS = {"vllm": "vllm-python-py3", "tensorrtllm": "trtllm-python-py3"}


def flavoured_image(base: str, flavour: str) -> str:
    """``base`` (a Triton image, ``…/tritonserver:YY.MM-py3``) as its ``flavour`` build of the release."""
    repository, _, tag = base.rpartition(":")
    release = tag.split("-", 1)[0]
    return f"{repository}:{release}-{IMAGE_FLAVOURS[flavour]}"


def vllm_image(base: str) -> str:
    """Triton's vLLM image of the release."""
    return flavoured_image(base, "vllm")


def tensorrtllm_image(base: str) -> str:
    """Triton's TensorRT-LLM image of the release."""
    return flavoured_image(base, "tensorrtllm")


def llm_engines(repo: Path) -> set[str]:
    """The LLM engines (``vllm``, ``tensorrtllm``) whose models the repository holds, by backend."""
    engines: set[str] = set()
    for config in sorted(repo.glob("*/config.pbtxt")):
        text = config.read_text(encoding="utf-8", errors="replace")
        for engine in IMAGE_FLAVOURS:
            if f'backend: "{engine}"' in text:
                engines.add(engine)
        metadata = read_metadata(config.parent) or {}
        if metadata.get("format") in IMAGE_FLAVOURS and metadata.get("target") == "local":
            raise ConfigError(
                f"{config.parent.name} is a local-target LLM model (the embedded server's)",
                "convert the model with --target container for a GPU host",
            )
    return engines


def image_for(repo: Path, base: str) -> str | None:
    """The image a repository of LLM models needs (None: no LLM model in it).

    Raises:
        ConfigError: vLLM and TensorRT-LLM models in one repository (no image has both), or a
            local-target LLM model.
    """
    engines = llm_engines(repo)
    if len(engines) > 1:
        raise ConfigError(
            f"{repo} holds vLLM and TensorRT-LLM models: no Triton image serves both",
            "put each engine's models in a repository of its own",
        )
    return flavoured_image(base, engines.pop()) if engines else None


@dataclass(frozen=True)
class LlmCompose:
    """What the compose file of a repository of LLM models changes: image, healthcheck, engine builds."""

    image: str
    ready_path: str
    """The model users call is ready: its engine has loaded (minutes)."""
    start_period: str
    build_scripts: tuple[str, ...]
    """The TensorRT-LLM engines' build scripts, relative to the repository."""


def entry_model(repo: Path, models: list[str], engine: str) -> str:
    """The model users call: the vLLM model, or the TensorRT-LLM layout's ensemble."""
    role = "ensemble" if engine == "tensorrtllm" else "engine"
    for name in models:
        metadata = read_metadata(repo / name) or {}
        if metadata.get("format") == engine and metadata.get("role") == role:
            return name
    wanted = 'platform: "ensemble"' if engine == "tensorrtllm" else 'backend: "vllm"'
    for name in models:  # written by hand: the model whose config says so
        if wanted in (repo / name / "config.pbtxt").read_text(encoding="utf-8", errors="replace"):
            return name
    return models[0]


def llm_compose(repo: Path, models: list[str], base: str) -> LlmCompose | None:
    """The compose settings of a repository of LLM models (None: it holds none).

    Raises:
        ConfigError: engines that share no image, or a local-target LLM model.
    """
    image = image_for(repo, base)
    if image is None:
        return None
    engine = "tensorrtllm" if image.endswith(IMAGE_FLAVOURS["tensorrtllm"]) else "vllm"
    scripts = tuple(sorted(str(p.relative_to(repo)) for p in repo.glob("*/build_engine.sh")))
    model = entry_model(repo, models, engine)
    return LlmCompose(image, f"/v2/models/{model}/ready", "600s", scripts)
