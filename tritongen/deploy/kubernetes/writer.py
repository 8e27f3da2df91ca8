"""``tritongen kubernetes``: lint, check, build every object, prove it offline, then write it atomically."""

from __future__ import annotations

import shlex
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
from tritongen.deploy.kubernetes.llm import llm_serving
from tritongen.deploy.kubernetes.load import load_objects
from tritongen.deploy.kubernetes.monitoring import pod_monitor
from tritongen.deploy.kubernetes.objects import ANNOTATION_PREFIX, metadata, namespace_object
from tritongen.deploy.kubernetes.resources import (
    ResourcePlan,
    plan_resources,
    read_sources,
    repository_size_gi,
)
from tritongen.deploy.kubernetes.spec import SECRET_KEYS, KubernetesSpec
from tritongen.deploy.kubernetes.store import copy_commands, copy_pod, model_claim, store_pod
from tritongen.deploy.kubernetes.triton import (
    ServerParts,
    accelerator_deployment,
    accelerator_patch,
    deployment,
    disruption_budget,
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

KUSTOMIZATIONS = ("namespace", "storage", "base", "gpu", "cpu", "loadtest")
"""Every kustomization the layout may hold: the first two are applied once and outlive the server."""
ADAPTER_PURPOSES = {
    "prometheus-adapter-rules.yaml": "prometheus-adapter config: the signal rule",
    "prometheus-adapter-values.yaml": "prometheus-adapter Helm values: Prometheus URL and the signal rule",
}
OVERLAY_PURPOSES = {
    "gpu": "gpu overlay patch: nvidia.com/gpu limit, toleration, memory limit",
    "cpu": "cpu overlay patch: no GPU, memory limit",
}


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


def _base_files(spec: KubernetesSpec, parts: ServerParts) -> list[ManifestFile]:
    """The server's objects, which ``kubectl delete -k`` of an overlay removes (never the models)."""
    annotations = {f"{ANNOTATION_PREFIX}/resources-from": parts.resources.provenance}
    return [
        ManifestFile(
            "base/deployment.yaml",
            "Triton Deployment: image, server args, probes, spread",
            [deployment(spec, parts, annotations)],
        ),
        ManifestFile("base/service.yaml", "Service: http 8000, grpc 8001, metrics 8002", [service(spec)]),
        ManifestFile(
            "base/pdb.yaml", "PodDisruptionBudget: one replica evicted at a time", [disruption_budget(spec)]
        ),
        ManifestFile(
            "base/podmonitor.yaml", "PodMonitor: Prometheus scrapes the metrics port", [pod_monitor(spec)]
        ),
    ]


def _autoscaler_files(spec: KubernetesSpec, plan: ScalingPlan | None) -> list[ManifestFile]:
    """The HPA and the adapter's configuration, or KEDA's ScaledObject (nothing without an autoscaler)."""
    if plan is None:
        return []
    if spec.scaling.autoscaler == "keda":
        keda = ManifestFile(
            "base/scaledobject.yaml",
            f"KEDA ScaledObject on {plan.signal.description}",
            [scaled_object(spec, plan)],
        )
        keda.header = HEADER + KEDA_HEADER
        return [keda]
    files = [
        ManifestFile(
            "base/hpa.yaml", f"HPA on {plan.signal.description} (prometheus-adapter)", [hpa(spec, plan)]
        )
    ]
    for name, doc in adapter_files(spec, plan).items():
        files.append(ManifestFile(name, ADAPTER_PURPOSES[name], [doc], validate=False))
    return files


def _overlay_files(base: dict[str, Any]) -> list[ManifestFile]:
    """The ``gpu`` and ``cpu`` overlays: a patch of the base Deployment each."""
    files = []
    for accelerator in ("gpu", "cpu"):
        patch = accelerator_patch(base, accelerator)
        path = f"{accelerator}/accelerator-patch.yaml"
        files.append(ManifestFile(path, OVERLAY_PURPOSES[accelerator], [patch], validate=False))
        files.append(kustomization_file(accelerator, [], patches=["accelerator-patch.yaml"]))
    return files


def _once_files(spec: KubernetesSpec) -> list[ManifestFile]:
    """What is applied once and outlives the server: the namespace, the model claim, its copy pod."""
    files: list[ManifestFile] = []
    namespace = namespace_object(spec)
    if namespace is not None:
        item = ManifestFile("namespace/namespace.yaml", f"Namespace {spec.namespace}", [namespace])
        files += [item, kustomization_file("namespace", [item])]
    if spec.store.kind == "new-pvc":  # the repository is walked only for a claim to size
        meta = metadata(spec, spec.store.claim, "models")
        claim = model_claim(spec.store, meta, repository_size_gi(spec.repo))
        if claim is not None:
            item = ManifestFile(
                "storage/pvc.yaml", "PersistentVolumeClaim holding the model repository", [claim]
            )
            files += [item, kustomization_file("storage", [item])]
    pod = copy_pod(spec.store, metadata(spec, f"{spec.name}-models-copy", "models"))
    if pod is not None:
        files.append(
            ManifestFile("copy-models-pod.yaml", "helper pod to copy the repository into the claim", [pod])
        )
    return files


def _server_files(spec: KubernetesSpec, parts: ServerParts, plan: ScalingPlan | None) -> list[ManifestFile]:
    base = [*_base_files(spec, parts), *_autoscaler_files(spec, plan)]
    in_base = [f for f in base if f.path.startswith("base/")]
    deployment_doc = in_base[0].objects[0]
    return [
        *_once_files(spec),
        *in_base,
        kustomization_file("base", in_base),
        *_overlay_files(deployment_doc),
        *(f for f in base if not f.path.startswith("base/")),
    ]


def _load_files(spec: KubernetesSpec) -> list[ManifestFile]:
    if spec.load is None:
        return []
    config_map, master, master_service, worker = load_objects(spec, spec.load)
    files = [
        ManifestFile(
            "loadtest/locustfile.yaml", "ConfigMap: loadtests/locustfile.py and tritonload/", [config_map]
        ),
        ManifestFile(
            "loadtest/master.yaml",
            "Locust master Deployment + Service (5557, web 8089); results in its log",
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
    staged: Path | None = None
    try:
        staged = stage(files, spec.output)
        if spec.validate:
            for name in KUSTOMIZATIONS:
                if (staged / name).is_dir() and not kustomize_build(staged / name, summary.version, summary):
                    break
        publish(staged, spec.output)
    finally:
        if staged is not None:
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
    base = spec.image or default_triton_image()
    llm = llm_serving(spec.repo, models, base, spec.store)
    image = llm.image if llm is not None else base
    check_repository_plans(spec.repo, image)
    sources = read_sources(spec.sources)
    plan = plan_scaling(spec, sources.tune, models, llm) if spec.scaling.autoscaler != "none" else None
    resources = plan_resources(sources, models)
    parts = ServerParts(
        image=image,
        requirements=requirements,
        resources=resources,
        store=store_pod(spec.store),
        ready_path=llm.ready_path if llm is not None else "/v2/health/ready",
    )
    files = [*_server_files(spec, parts, plan), *_load_files(spec)]
    summary = ValidationSummary(version=version)
    if spec.validate:
        validate_objects(_objects_to_validate(files), version, summary)
    _prove_and_publish(spec, files, summary)
    return KubernetesResult(files, resources, plan, summary, image, _notes(spec, requirements))


def _notes(spec: KubernetesSpec, requirements: list[str]) -> list[str]:
    out = str(spec.output)
    first = f"first, once: kubectl apply -k {shlex.quote(out + '/namespace')}"
    notes = [first] if namespace_object(spec) else []
    notes += copy_commands(spec.store, spec.namespace, f"{spec.name}-models-copy", str(spec.repo), out)
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
