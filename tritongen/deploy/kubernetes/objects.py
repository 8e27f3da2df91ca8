"""What every object of the deployment carries: recommended labels, selectors, metadata, namespace."""

from __future__ import annotations

from typing import Any

from tritongen.deploy.kubernetes.spec import KubernetesSpec

ANNOTATION_PREFIX = "tritongen.io"
"""Prefix of the annotations and labels tritongen adds (where a figure came from, the overlay)."""


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


def namespace_object(spec: KubernetesSpec) -> dict[str, Any] | None:
    """The Namespace to create (None for ``default``, which every cluster has)."""
    if spec.namespace == "default":
        return None
    meta = {"name": spec.namespace, "labels": {"app.kubernetes.io/managed-by": "tritongen"}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
