"""``tritongen kubernetes``: lint, check, build every object, prove it offline, then write it atomically."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.deploy.compose import check_repository_plans, default_triton_image, repository_models
from tritongen.deploy.kubernetes.autoscaling import (
    KEDA_HEADER,
    ScalingPlan,
    adapter_files,
    hpa,
    plan_scaling,
    scaled_object,
)
from tritongen.deploy.kubernetes.kustomize import HEADER, ManifestFile, kustomization_file, publish, stage
from tritongen.deploy.kubernetes.load import load_objects
from tritongen.deploy.kubernetes.monitoring import pod_monitor
from tritongen.deploy.kubernetes.resources import (
    ResourcePlan,
    plan_resources,
    read_sources,
    repository_size_gi,
)
from tritongen.deploy.kubernetes.spec import SECRET_KEYS, KubernetesSpec
from tritongen.deploy.kubernetes.store import copy_commands, copy_pod, model_claim, store_pod
from tritongen.deploy.kubernetes.triton import (
    ANNOTATION_PREFIX,
    ServerParts,
    accelerator_deployment,
    accelerator_patch,
    deployment,
    disruption_budget,
    metadata,
    service,
)
from tritongen.deploy.kubernetes.validate import (
    ValidationSummary,
    check_kubernetes_version,
    default_kubernetes_version,
    kustomize_build,
    validate_objects,
)
from tritongen.errors import ConfigError
from tritongen.lint.repository import LintUsageError, lint_paths

KUSTOMIZATIONS = ("base", "gpu", "cpu", "loadtest")


@dataclass
class KubernetesResult:
    """What was written and proved."""

    files: list[ManifestFile]
    resources: ResourcePlan
    scaling: ScalingPlan | None
    summary: ValidationSummary
    image: str
    notes: list[str] = field(default_factory=list)


def lint_repository(repo: Path) -> None:
    """``tritongen lint`` on the repository: errors refuse the deployment.

    Raises:
        ConfigError: the repository has lint errors or nothing to lint.
    """
    try:
        report = lint_paths([repo])
    except LintUsageError as e:
        raise ConfigError(f"cannot lint {repo}: {e}", "pass the directory `tritongen convert` wrote") from e
    if report.errors:
        raise ConfigError(
            f"tritongen lint: {len(report.errors)} error(s) in {repo}, first: {report.errors[0].text()}",
            f"run `tritongen lint {repo}` and fix them",
        )


def _server_files(spec: KubernetesSpec, parts: ServerParts, plan: ScalingPlan | None) -> list[ManifestFile]:
    annotations = {f"{ANNOTATION_PREFIX}/resources-from": parts.resources.provenance}
    base = deployment(spec, parts, annotations)
    files = [
        ManifestFile("base/deployment.yaml", "Triton Deployment: image, server args, probes, spread", [base]),
        ManifestFile("base/service.yaml", "Service: http 8000, grpc 8001, metrics 8002", [service(spec)]),
        ManifestFile(
            "base/pdb.yaml", "PodDisruptionBudget: one replica evicted at a time", [disruption_budget(spec)]
        ),
        ManifestFile(
            "base/podmonitor.yaml", "PodMonitor: Prometheus scrapes the metrics port", [pod_monitor(spec)]
        ),
    ]
    claim = model_claim(spec.store, metadata(spec, spec.store.claim, "models"), repository_size_gi(spec.repo))
    if claim is not None:
        files.append(
            ManifestFile("base/pvc.yaml", "PersistentVolumeClaim holding the model repository", [claim])
        )
    if plan is not None and spec.scaling.autoscaler == "hpa":
        files.append(
            ManifestFile(
                "base/hpa.yaml", "HPA on the Triton queue signal (prometheus-adapter)", [hpa(spec, plan)]
            )
        )
        for name, doc in adapter_files(spec, plan).items():
            files.append(
                ManifestFile(
                    name,
                    f"prometheus-adapter {name.split('-')[-1][:-5]}: the signal rule",
                    [doc],
                    validate=False,
                )
            )
    if plan is not None and spec.scaling.autoscaler == "keda":
        keda = ManifestFile(
            "base/scaledobject.yaml",
            "KEDA ScaledObject on the Triton queue signal",
            [scaled_object(spec, plan)],
        )
        keda.header = HEADER + KEDA_HEADER
        files.append(keda)
    files.append(kustomization_file("base", files))
    for accelerator in ("gpu", "cpu"):
        files.append(
            ManifestFile(
                f"{accelerator}/accelerator-patch.yaml",
                f"{accelerator} overlay patch"
                + (": nvidia.com/gpu limit, toleration" if accelerator == "gpu" else ": no GPU"),
                [accelerator_patch(base, accelerator)],
                validate=False,
            )
        )
        files.append(kustomization_file(accelerator, [], patches=["accelerator-patch.yaml"]))
    pod = copy_pod(spec.store, metadata(spec, f"{spec.name}-models-copy", "models"))
    if pod is not None:
        files.append(
            ManifestFile("copy-models-pod.yaml", "helper pod to copy the repository into the claim", [pod])
        )
    return files


def _load_files(spec: KubernetesSpec) -> list[ManifestFile]:
    if spec.load is None:
        return []
    config_map, master, master_service, worker = load_objects(spec, spec.load)
    files = [
        ManifestFile("loadtest/locustfile.yaml", "ConfigMap: loadtests/locustfile.py", [config_map]),
        ManifestFile(
            "loadtest/master.yaml",
            "Locust master Deployment + Service (5557, web 8089)",
            [master, master_service],
        ),
        ManifestFile("loadtest/worker.yaml", f"Locust workers ({spec.load.workers} replicas)", [worker]),
    ]
    return [*files, kustomization_file("loadtest", files)]


def _objects_to_validate(files: list[ManifestFile]) -> list[dict[str, Any]]:
    objects = [obj for f in files if f.validate for obj in f.objects]
    base = next(f.objects[0] for f in files if f.path == "base/deployment.yaml")
    return [*objects, *(accelerator_deployment(base, a) for a in ("gpu", "cpu"))]


def _prove_and_publish(spec: KubernetesSpec, files: list[ManifestFile], summary: ValidationSummary) -> None:
    staged = stage(files, spec.output)
    try:
        if spec.validate:
            for name in KUSTOMIZATIONS:
                if (staged / name).is_dir() and not kustomize_build(staged / name, summary.version, summary):
                    break
        publish(staged, spec.output)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def write_kubernetes(spec: KubernetesSpec) -> KubernetesResult:
    """Write the kustomize deployment of ``spec.repo`` into ``spec.output``; nothing on any error.

    Raises:
        TritongenError: lint errors, a plan for another TensorRT, bad options, a missing
            validator, or an object that does not validate.
    """
    spec.check()
    version = (
        check_kubernetes_version(spec.kubernetes_version or default_kubernetes_version())
        if spec.validate
        else ""
    )
    lint_repository(spec.repo)
    models, requirements = repository_models(spec.repo)
    image = spec.image or default_triton_image()
    check_repository_plans(spec.repo, image)
    sources = read_sources(spec.sources)
    plan = plan_scaling(spec, sources.tune) if spec.scaling.autoscaler != "none" else None
    resources = plan_resources(sources, models)
    parts = ServerParts(
        image=image, requirements=requirements, resources=resources, store=store_pod(spec.store)
    )
    files = [*_server_files(spec, parts, plan), *_load_files(spec)]
    summary = ValidationSummary(version=version)
    if spec.validate:
        validate_objects(_objects_to_validate(files), version, summary)
    _prove_and_publish(spec, files, summary)
    return KubernetesResult(files, resources, plan, summary, image, _notes(spec, requirements))


def _notes(spec: KubernetesSpec, requirements: list[str]) -> list[str]:
    notes = copy_commands(
        spec.store, spec.namespace, f"{spec.name}-models-copy", str(spec.repo), str(spec.output)
    )
    if spec.store.is_bucket:
        keys = SECRET_KEYS[spec.store.kind]
        notes.append(
            f"Secret {spec.store.secret} must hold: {keys}"
            if spec.store.secret
            else "no --store-secret: the pods need the bucket's access from their service account"
        )
    if requirements:
        notes.append(
            f"the Triton container pip-installs at start: {', '.join(requirements)} (needs PyPI access)"
        )
    return notes
