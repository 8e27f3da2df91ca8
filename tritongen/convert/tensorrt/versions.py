"""TensorRT versions: which one each Triton image ships, and whether a plan matches an image.

A plan only runs on the TensorRT major.minor that built it, so the version is read from
the builder's log, compared with the version the serving image ships, and recorded.
"""

from __future__ import annotations

import re

from tritongen.errors import ConfigError

# Triton container release -> TensorRT version it ships (the ``-py3`` images); releases
# not listed are unknown (None). Only the ``-py3`` images count: the
# ``-trtllm-python-py3`` images ship another TensorRT (24.10: 10.4.0 there, 10.5.0 here),
# so the TRT-LLM compatibility matrix is no source for this table.
# "source" entries were read in the Triton release notes, as kept in
# github.com/triton-inference-server/server docs/introduction/release_notes.md, mirroring
# https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-YY-MM.html
# ("The container also includes the following: ... NVIDIA TensorRT X.Y.Z.B").
# "unverified" entries were checked against no source; no source seen contradicts them.
# 25.03 and later: unknown (no source seen lists their TensorRT line).
TRITON_TENSORRT_VERSIONS: dict[str, str] = {
    "24.01": "8.6.1",  # unverified
    "24.02": "8.6.3",  # unverified
    "24.03": "8.6.3",  # unverified
    "24.04": "8.6.3",  # unverified
    "24.05": "10.0.1",  # unverified
    "24.06": "10.1.0",  # unverified
    "24.07": "10.2.0",  # unverified
    "24.08": "10.3.0",  # unverified
    "24.09": "10.4.0",  # unverified
    "24.10": "10.5.0",  # source: rel-24-10.html, NVIDIA TensorRT 10.5.0.18
    "24.11": "10.6.0",  # unverified
    "24.12": "10.7.0",  # source: rel-24-12.html, NVIDIA TensorRT 10.7.0.23
    "25.01": "10.8.0",  # source: rel-25-01.html, NVIDIA TensorRT 10.8.0.43
    "25.02": "10.8.0",  # unverified
}


def major_minor(version: str) -> tuple[int, int] | None:
    """The ``(major, minor)`` of a version text such as ``10.3`` or ``10.3.0``; None when unreadable."""
    match = re.match(r"^\s*(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def triton_release_of_image(image: str) -> str | None:
    """The Triton release (``24.08``) of an image reference or bare tag, or None."""
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else image
    match = re.match(r"^(\d{2}\.\d{2})(?:$|[-.])", tag)
    return match.group(1) if match else None


def tensorrt_version_for_image(image: str) -> str | None:
    """The TensorRT version a Triton image ships (``24.08`` -> ``10.3.0``); None when unknown."""
    release = triton_release_of_image(image)
    return TRITON_TENSORRT_VERSIONS.get(release) if release else None


def check_plan_matches_image(plan_trt_version: str | None, image: str) -> None:
    """Refuse a plan whose TensorRT major.minor differs from the image's (unknown passes).

    Raises:
        ConfigError: both versions are known and their major.minor differ.
    """
    image_version = tensorrt_version_for_image(image)
    if plan_trt_version is None or image_version is None:
        return
    if major_minor(plan_trt_version) != major_minor(image_version):
        raise ConfigError(
            f"the plan was built with TensorRT {plan_trt_version} but {image} ships TensorRT {image_version}",
            "rebuild the plan inside that image (`docker compose run --rm trt-build ...`) or pick a "
            "Triton image with the plan's TensorRT",
        )


def check_built_version(built: str | None, serving: str | None) -> None:
    """Refuse a plan built by another TensorRT major.minor than the target serves (unknown passes).

    Raises:
        ConfigError: both versions are known and their major.minor differ.
    """
    if serving and built and major_minor(serving) != major_minor(built):
        raise ConfigError(
            f"TensorRT {built} built the plan but the target serves TensorRT {serving}",
            "build inside the serving image with `docker compose run --rm trt-build ...`",
        )


def version_from_log(log: str) -> str | None:
    """The TensorRT version in a ``trtexec`` log (``[TensorRT v100300]``, ``TensorRT version: 10.3.0``)."""
    match = re.search(r"TensorRT version:\s*(\d+\.\d+\.\d+)", log)
    if match:
        return match.group(1)
    match = re.search(r"\[TensorRT v(\d+)\]", log)
    if not match:
        return None
    code = int(match.group(1))
    if code >= 100000:  # 10.x and later: MMmmpp
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"  # 8.x: Mmpp
