"""Offline proof of the manifests: Kubernetes OpenAPI schemas (strict) and ``kubectl kustomize``."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritongen.errors import ConfigError, MissingDependencyError

CUSTOM_KINDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("keda.sh/v1alpha1", "ScaledObject")}
"""Custom resources: their schemas come with the operators' CRDs, not with Kubernetes."""
INSTALL_HINT = "pip install 'tritongen[kubernetes]' (or pass --no-validate)"
KUSTOMIZE_TIMEOUT_S = 120


def _validator() -> Any:
    try:
        from kubernetes_validate import utils  # type: ignore[import-untyped]
    except ImportError as e:
        raise MissingDependencyError("kubernetes-validate is not installed", INSTALL_HINT) from e
    return utils


def default_kubernetes_version() -> str:
    """The newest Kubernetes release whose schemas the installed validator ships (``1.37``).

    Raises:
        MissingDependencyError: kubernetes-validate is not installed.
    """
    version = str(_validator().latest_version())
    return ".".join(version.split(".")[:2])


def check_kubernetes_version(version: str) -> str:
    """``--kubernetes-version`` as ``MAJOR.MINOR`` when the validator has its schemas.

    Raises:
        ConfigError: not a version the validator ships.
    """
    known = sorted({".".join(v.split(".")[:2]) for v in _validator().all_versions()}, key=_key)
    text = version.removeprefix("v")
    text = ".".join(text.split(".")[:2])
    if text not in known:
        raise ConfigError(
            f"--kubernetes-version {version} has no schemas here",
            f"use one of {known[0]} … {known[-1]}",
        )
    return text


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


@dataclass
class ValidationSummary:
    """What was proved."""

    version: str = ""
    checked: list[str] = field(default_factory=list)
    """``Kind/name`` of each object validated against the schemas."""
    custom: list[str] = field(default_factory=list)
    """Custom resources checked only for apiVersion, kind, metadata.name and spec."""
    builds: list[str] = field(default_factory=list)
    """Kustomizations ``kubectl kustomize`` built."""
    skipped: str | None = None


def _label(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def validate_objects(objects: list[dict[str, Any]], version: str, summary: ValidationSummary) -> None:
    """Validate each object strictly (no unknown field, none missing) against ``version``'s schemas.

    Raises:
        ConfigError: an object does not validate (a tritongen bug or a bad option value).
    """
    utils = _validator()
    summary.version = version
    for obj in objects:
        label = _label(obj)
        if (obj.get("apiVersion"), obj.get("kind")) in CUSTOM_KINDS:
            missing = [k for k in ("apiVersion", "kind", "spec") if not obj.get(k)]
            if not (obj.get("metadata") or {}).get("name"):
                missing.append("metadata.name")
            if missing:
                raise ConfigError(f"{label} lacks {', '.join(missing)}", "report this as a tritongen bug")
            if label not in summary.custom:
                summary.custom.append(label)
            continue
        try:
            utils.validate(obj, version, strict=True)
        except utils.ValidationError as e:
            where = ".".join(str(p) for p in e.path) or "(top)"
            raise ConfigError(
                f"{label} does not validate against Kubernetes {version}: {where}: {e.message}",
                "check the option values (or report a tritongen bug)",
            ) from e
        except utils.SchemaNotFoundError as e:
            raise ConfigError(f"{label}: {e.message}", "choose another --kubernetes-version") from e
        summary.checked.append(label)


def kustomize_build(directory: Path, version: str, summary: ValidationSummary) -> bool:
    """``kubectl kustomize DIR`` and strict validation of what it builds; False when kubectl is absent.

    Raises:
        ConfigError: the build fails or an object it builds does not validate.
    """
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        summary.skipped = "kubectl is not on PATH: kustomize builds skipped"
        return False
    try:
        result = subprocess.run(
            [kubectl, "kustomize", str(directory)],
            capture_output=True,
            text=True,
            check=False,
            timeout=KUSTOMIZE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise ConfigError(
            f"kubectl kustomize {directory.name} took more than {KUSTOMIZE_TIMEOUT_S} s",
            "check kubectl (or pass --no-validate)",
        ) from e
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(
            f"kubectl kustomize {directory.name} failed: {reason}", "report this as a tritongen bug"
        )
    built = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    validate_objects(built, version, ValidationSummary())
    summary.builds.append(f"{directory.name} ({len(built)} objects)")
    return True
