"""Render a docker compose file that serves a repository on a GPU host with the full Triton image."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tritongen.convert.tensorrt import TRTEXEC_IN_IMAGE, check_plan_matches_image
from tritongen.errors import ConfigError, MissingDependencyError, RepositoryError
from tritongen.triton.repository import read_metadata

COMPOSE_TEMPLATE = "compose.yaml.j2"

# Triton 2.40 shipped as the 23.11 container; since then one minor version a month.
_BASE_MINOR, _BASE_YEAR, _BASE_MONTH = 40, 2023, 11


def triton_release_for(client_version: str) -> str:
    """Map a tritonclient version (``2.51.0``) to its Triton container release (``24.10``).

    Raises:
        ConfigError: the version is not a 2.x release at or after 2.40.
    """
    parts = client_version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as e:
        raise ConfigError(
            f"cannot read tritonclient version {client_version!r}", "pass --image explicitly"
        ) from e
    if major != 2 or minor < _BASE_MINOR:
        raise ConfigError(
            f"tritonclient {client_version} predates the releases tritongen knows", "pass --image explicitly"
        )
    months = _BASE_YEAR * 12 + (_BASE_MONTH - 1) + (minor - _BASE_MINOR)
    return f"{months // 12 % 100:02d}.{months % 12 + 1:02d}"


def default_triton_image() -> str:
    """The Triton image matching the installed tritonclient (``nvcr.io/nvidia/tritonserver:YY.MM-py3``)."""
    try:
        client = version("tritonclient")
    except PackageNotFoundError as e:
        raise MissingDependencyError("tritonclient is not installed", "run `make install`") from e
    return f"nvcr.io/nvidia/tritonserver:{triton_release_for(client)}-py3"


@dataclass(frozen=True)
class ComposeSpec:
    """Inputs of the compose template."""

    repo: Path
    output: Path
    image: str | None = None
    public: bool = False
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    locust_workers: int = 2
    locustfile: Path = Path("loadtests/locustfile.py")


def _relative(path: Path, start: Path) -> str:
    rel = os.path.relpath(path.resolve(), start.resolve())
    return rel if rel.startswith(".") else f"./{rel}"


def repository_models(repo: Path) -> tuple[list[str], list[str]]:
    """Model names in ``repo`` and the pip packages their Python-backend wrappers need."""
    if not repo.is_dir():
        raise RepositoryError(
            f"{repo} is not a model repository", "pass the directory `tritongen convert` wrote"
        )
    models: list[str] = []
    requirements: list[str] = []
    for child in sorted(repo.iterdir()):
        if not (child / "config.pbtxt").is_file():
            continue
        models.append(child.name)
        meta = read_metadata(child) or {}
        for req in meta.get("python_requirements", []):
            if req not in requirements:
                requirements.append(req)
    if not models:
        raise RepositoryError(f"{repo} holds no models (no */config.pbtxt)", "run `tritongen convert` first")
    return models, requirements


def plan_tensorrt_version(model_dir: Path) -> str | None:
    """The TensorRT version recorded for a model's plan (metadata ``engine.tensorrt_version``), or None."""
    meta = read_metadata(model_dir)
    engine = meta.get("engine") if meta is not None else None
    version = engine.get("tensorrt_version") if isinstance(engine, dict) else None
    return version if isinstance(version, str) else None


def check_repository_plans(repo: Path, image: str) -> None:
    """Refuse a repository holding a TensorRT plan built for another TensorRT than ``image`` ships.

    Raises:
        ConfigError: a model's recorded TensorRT major.minor differs from the image's.
    """
    if not repo.is_dir():
        return
    for child in sorted(repo.iterdir()):
        if child.is_dir():
            try:
                check_plan_matches_image(plan_tensorrt_version(child), image)
            except ConfigError as e:
                raise ConfigError(f"model {child.name}: {e.message}", e.hint) from e


def render_compose(spec: ComposeSpec, templates_dir: Path | None = None) -> str:
    """Render ``compose.yaml.j2`` for ``spec`` and check that it is valid YAML.

    Raises:
        TritongenError: the repository is empty, holds a plan for another TensorRT
            than the image's, the template is broken, or the result is not YAML.
    """
    import yaml

    from tritongen.deploy.llm import llm_compose
    from tritongen.triton.templates import render_template

    models, requirements = repository_models(spec.repo)
    plain = spec.image or default_triton_image()
    llm = llm_compose(spec.repo, models, plain)
    image = llm.image if llm is not None else plain
    check_repository_plans(spec.repo, image)
    base = spec.output.parent
    text = render_template(
        COMPOSE_TEMPLATE,
        templates_dir,
        image=image,
        trtexec_path=TRTEXEC_IN_IMAGE,
        repo_path=_relative(spec.repo, base),
        locustfile_dir=_relative(spec.locustfile.parent, base),
        locustfile_name=spec.locustfile.name,
        bind="" if spec.public else "127.0.0.1:",
        http_port=spec.http_port,
        grpc_port=spec.grpc_port,
        metrics_port=spec.metrics_port,
        models=models,
        python_requirements=requirements,
        locust_version=installed_version("locust", "2.32.0"),
        tritonclient_version=installed_version("tritonclient", "2.51.0"),
        locust_workers=spec.locust_workers,
        ready_path=llm.ready_path if llm is not None else "/v2/health/ready",
        start_period=llm.start_period if llm is not None else "30s",
        engine_builds=list(llm.build_scripts) if llm is not None else [],
    )
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"rendered {COMPOSE_TEMPLATE} is not valid YAML: {e}", "fix the template") from e
    return text


def installed_version(package: str, fallback: str) -> str:
    """The installed version of ``package``, or ``fallback`` when it is not installed."""
    try:
        return version(package)
    except PackageNotFoundError:
        return fallback
