"""The Triton server objects: Deployment (probes, spread, resources), Service, PodDisruptionBudget."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from tritongen.deploy.kubernetes.resources import ResourcePlan
from tritongen.deploy.kubernetes.spec import KubernetesSpec
from tritongen.deploy.kubernetes.store import StorePod

CONTAINER = "tritonserver"
PORTS = (("http", 8000), ("grpc", 8001), ("metrics", 8002))
PROBE_PERIOD_S = 10
SHM_LIMIT = "1Gi"
MEMORY_LIMIT_FACTOR = 2
ANNOTATION_PREFIX = "tritongen.io"


def labels(spec: KubernetesSpec, component: str) -> dict[str, str]:
    """The recommended labels of every object of this deployment."""
    return {
        "app.kubernetes.io/name": "locust" if component.startswith("load") else "tritonserver",
        "app.kubernetes.io/instance": spec.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "tritongen",
    }


def selector(spec: KubernetesSpec, component: str = "server") -> dict[str, str]:
    """The labels that select this deployment's pods of ``component``."""
    full = labels(spec, component)
    return {k: full[k] for k in ("app.kubernetes.io/instance", "app.kubernetes.io/component")}


def metadata(
    spec: KubernetesSpec, name: str, component: str, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """``metadata`` of one object."""
    meta: dict[str, Any] = {"name": name, "namespace": spec.namespace, "labels": labels(spec, component)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def server_args(spec: KubernetesSpec) -> list[str]:
    """``tritonserver``'s arguments: explicit model control off, so every replica loads every model."""
    return [
        "tritonserver",
        f"--model-repository={spec.store.repository_arg}",
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--metrics-config=summary_latencies=true",
        "--allow-metrics=true",
        "--allow-gpu-metrics=true",
    ]


def server_command(requirements: list[str]) -> list[str]:
    """The container command: none (the image's), or a shell that first pip-installs packages.

    Those are what the repository's Python-backend models need and the image lacks (pip skips
    them quickly when an ``--image`` already has them).
    """
    if not requirements:
        return []
    install = "pip install --no-cache-dir --quiet " + " ".join(shlex.quote(r) for r in requirements)
    return ["/bin/sh", "-c", f'{install} && exec "$@"', "--"]


def _probe(path: str, period_s: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period_s,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


@dataclass(frozen=True)
class ServerParts:
    """What the Deployment is built from besides the spec."""

    image: str
    requirements: list[str]
    resources: ResourcePlan
    store: StorePod


def _container(spec: KubernetesSpec, parts: ServerParts) -> dict[str, Any]:
    startup_failures = math.ceil(spec.startup_timeout_s / PROBE_PERIOD_S)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": parts.image,
        "args": server_args(spec),
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in PORTS],
        "startupProbe": _probe("/v2/health/ready", PROBE_PERIOD_S, startup_failures),
        "readinessProbe": _probe("/v2/health/ready", 5, 3),
        "livenessProbe": _probe("/v2/health/live", 10, 3),
        "resources": {"requests": {"cpu": parts.resources.cpu, "memory": parts.resources.memory}},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, *parts.store.mounts],
    }
    command = server_command(parts.requirements)
    if command:
        container["command"] = command
        container["env"] = [{"name": "PIP_BREAK_SYSTEM_PACKAGES", "value": "1"}]
    if parts.store.env:
        container["env"] = [*container.get("env", []), *parts.store.env]
    if parts.store.env_from:
        container["envFrom"] = parts.store.env_from
    return container


def deployment(spec: KubernetesSpec, parts: ServerParts, annotations: dict[str, str]) -> dict[str, Any]:
    """The Triton Deployment of the base (no GPU, no accelerator-specific setting)."""
    pod_spec: dict[str, Any] = {
        "containers": [_container(spec, parts)],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_LIMIT}},
            *parts.store.volumes,
        ],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector(spec)},
            }
        ],
        "terminationGracePeriodSeconds": 60,
    }
    dep_spec: dict[str, Any] = {
        "selector": {"matchLabels": selector(spec)},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": labels(spec, "server")}, "spec": pod_spec},
    }
    if spec.scaling.autoscaler == "none":  # else the autoscaler owns the replica count
        dep_spec = {"replicas": spec.scaling.min_replicas, **dep_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(spec, spec.name, "server", annotations),
        "spec": dep_spec,
    }


def service(spec: KubernetesSpec) -> dict[str, Any]:
    """The Service in front of the replicas: named http, grpc and metrics ports."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(spec, spec.name, "server"),
        "spec": {
            "selector": selector(spec),
            "ports": [
                {"name": name, "port": port, "targetPort": name, "protocol": "TCP"} for name, port in PORTS
            ],
        },
    }


def disruption_budget(spec: KubernetesSpec) -> dict[str, Any]:
    """A PodDisruptionBudget: voluntary evictions (drains, upgrades) take one replica at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(spec, spec.name, "server"),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(spec)}},
    }


def service_host(spec: KubernetesSpec) -> str:
    """The Triton Service's DNS name inside the cluster."""
    return f"{spec.name}.{spec.namespace}.svc.cluster.local"


def accelerator_deployment(base: dict[str, Any], accelerator: str) -> dict[str, Any]:
    """``base`` as an overlay makes it: the patch of :func:`accelerator_patch` applied."""
    import copy

    merged = copy.deepcopy(base)
    patch = accelerator_patch(base, accelerator)["spec"]["template"]
    pod = merged["spec"]["template"]
    pod["metadata"]["labels"].update(patch["metadata"]["labels"])
    container = pod["spec"]["containers"][0]
    limits = patch["spec"]["containers"][0]["resources"]["limits"]
    container["resources"]["limits"] = limits
    if "tolerations" in patch["spec"]:
        pod["spec"]["tolerations"] = patch["spec"]["tolerations"]
    return merged


def accelerator_patch(base: dict[str, Any], accelerator: str) -> dict[str, Any]:
    """Strategic-merge patch of an overlay.

    Both set a memory limit (twice the request); ``gpu`` adds one GPU and the toleration of
    GPU nodes' taint.
    """
    requests = base["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    limits: dict[str, str] = {
        "memory": f"{MEMORY_LIMIT_FACTOR * int(requests['memory'].removesuffix('Mi'))}Mi"
    }
    pod: dict[str, Any] = {"containers": [{"name": CONTAINER, "resources": {"limits": limits}}]}
    if accelerator == "gpu":
        limits["nvidia.com/gpu"] = "1"
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": base["metadata"]["name"], "namespace": base["metadata"]["namespace"]},
        "spec": {
            "template": {
                "metadata": {"labels": {f"{ANNOTATION_PREFIX}/accelerator": accelerator}},
                "spec": pod,
            }
        },
    }
