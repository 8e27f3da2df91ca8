"""The Triton server objects: Deployment (probes, spread, resources), Service, PodDisruptionBudget."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from tritongen.deploy.kubernetes.objects import ANNOTATION_PREFIX, labels, metadata, selector
from tritongen.deploy.kubernetes.resources import ResourcePlan
from tritongen.deploy.kubernetes.spec import KubernetesSpec
from tritongen.deploy.kubernetes.store import StorePod

CONTAINER = "tritonserver"
PORTS = (("http", 8000), ("grpc", 8001), ("metrics", 8002))
PROBE_PERIOD_S = 10
SHM_LIMIT_MI = 1024
"""Size of the ``/dev/shm`` emptyDir (in memory: it counts against the container's memory limit)."""
MEMORY_LIMIT_FACTOR = 2
ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"
"""The NGC image's entrypoint (CUDA forward compatibility): a command of our own runs through it."""
DRAIN_S = 10
"""A stopping replica keeps serving this long, while the Service stops routing to it."""
TERMINATION_GRACE_S = 60


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
    """The container command: none (the image's), or one that first pip-installs packages.

    Those are what the repository's Python-backend models need and the image lacks (pip skips
    them quickly when an ``--image`` already has them). The shell runs through the image's
    entrypoint, as the image's own command would, and then execs the server with ``args``.
    """
    if not requirements:
        return []
    install = "pip install --no-cache-dir --quiet " + " ".join(shlex.quote(r) for r in requirements)
    return [ENTRYPOINT, "/bin/sh", "-c", f'{install} && exec "$@"', "--"]


def _probe(path: str, period_s: int, failures: int, timeout_s: int = 5) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period_s,
        "timeoutSeconds": timeout_s,
        "failureThreshold": failures,
    }


@dataclass(frozen=True)
class ServerParts:
    """What the Deployment is built from besides the spec."""

    image: str
    requirements: list[str]
    resources: ResourcePlan
    store: StorePod
    ready_path: str = "/v2/health/ready"
    """What the startup and readiness probes ask: the server, or the model an LLM engine serves."""


def _container(spec: KubernetesSpec, parts: ServerParts) -> dict[str, Any]:
    startup_failures = math.ceil(spec.startup_timeout_s / PROBE_PERIOD_S)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": parts.image,
        "args": server_args(spec),
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in PORTS],
        "startupProbe": _probe(parts.ready_path, PROBE_PERIOD_S, startup_failures),
        "readinessProbe": _probe(parts.ready_path, 5, 3),
        # A server busy at peak answers slowly: restart it only after a minute without an answer.
        "livenessProbe": _probe("/v2/health/live", 10, 6, timeout_s=10),
        # Keep serving while the endpoints controller takes the pod out of the Service.
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(DRAIN_S)]}}},
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
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{SHM_LIMIT_MI}Mi"}},
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
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
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
    """The Triton Service's DNS name inside the cluster (whatever the cluster's domain)."""
    return f"{spec.name}.{spec.namespace}.svc"


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

    Both set a memory limit: twice the request, plus the ``/dev/shm`` emptyDir, whose pages
    count against it; ``gpu`` adds one GPU and the toleration of GPU nodes' taint.
    """
    requests = base["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    request_mi = int(requests["memory"].removesuffix("Mi"))
    limits: dict[str, str] = {"memory": f"{MEMORY_LIMIT_FACTOR * request_mi + SHM_LIMIT_MI}Mi"}
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
