"""Triton's images for language-model repositories: the vLLM and TensorRT-LLM builds of a release.

A repository holding a ``backend: "vllm"`` model is served by ``…-vllm-python-py3``, one holding
the TensorRT-LLM layout by ``…-trtllm-python-py3`` (the plain image has neither backend).
"""

from __future__ import annotations

from pathlib import Path

from tritongen.deploy.compose import default_triton_image
from tritongen.errors import ConfigError
from tritongen.triton.repository import read_metadata

IMAGE_FLAVOURS = {"vllm": "vllm-python-py3", "tensorrtllm": "trtllm-python-py3"}


def flavoured_image(base: str | None, flavour: str) -> str:
    """``base`` (default: the release matching tritonclient) as its ``flavour`` build."""
    image = base or default_triton_image()
    repository, _, tag = image.rpartition(":")
    release = tag.split("-", 1)[0]
    return f"{repository}:{release}-{IMAGE_FLAVOURS[flavour]}"


def vllm_image(base: str | None) -> str:
    """Triton's vLLM image of the release."""
    return flavoured_image(base, "vllm")


def tensorrtllm_image(base: str | None) -> str:
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


def image_for(repo: Path, base: str | None) -> str | None:
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
