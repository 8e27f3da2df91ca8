"""Autoscaling on Triton's queue signal: an ``autoscaling/v2`` HPA (through prometheus-adapter) or KEDA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tritongen.deploy.kubernetes.scaling import (
    ScalingSignal,
    ScalingTarget,
    adapter_rules,
    check_window,
    keda_query,
    quantity,
    scaling_target,
    signal_for,
)
from tritongen.deploy.kubernetes.spec import KubernetesSpec
from tritongen.deploy.kubernetes.triton import ANNOTATION_PREFIX, metadata

KEDA_HEADER = """\
# KEDA ScaledObject written by `tritongen kubernetes`.
# metricType Value: the query returns the AVERAGE signal over this deployment's pods (not a
# total), so the HPA KEDA creates computes desired replicas = current x value / threshold.
"""

# Scale up at once (queues grow fast); scale down slowly, after five calm minutes.
BEHAVIOR: dict[str, Any] = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 30},
            {"type": "Pods", "value": 4, "periodSeconds": 30},
        ],
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 300,
        "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}],
    },
}


@dataclass(frozen=True)
class ScalingPlan:
    """The signal, its target and provenance, and the checked window."""

    signal: ScalingSignal
    target: ScalingTarget
    window: str


def plan_scaling(spec: KubernetesSpec, tune_doc: dict[str, Any] | None) -> ScalingPlan:
    """The signal and its target: ``--scale-target``, else the tuned value, else the default.

    Raises:
        ConfigError: an unknown signal or a bad window.
    """
    scaling = spec.scaling
    signal = signal_for(scaling.signal)
    window = check_window(scaling.window)
    if scaling.target is not None:
        target = ScalingTarget(scaling.target, f"--scale-target {scaling.target:g}")
    else:
        target = scaling_target(signal, tune_doc)
    quantity(target.value)  # a target of 0 is refused here, before anything is written
    return ScalingPlan(signal, target, window)


def _annotations(plan: ScalingPlan) -> dict[str, str]:
    unit = f" {plan.signal.unit}" if plan.signal.unit else ""
    return {
        f"{ANNOTATION_PREFIX}/scale-signal": f"{plan.signal.name}: {plan.signal.description}",
        f"{ANNOTATION_PREFIX}/scale-target": f"{plan.target.value:.6g}{unit}",
        f"{ANNOTATION_PREFIX}/scale-target-from": plan.target.source,
    }


def pod_selector(spec: KubernetesSpec) -> str:
    """PromQL label matchers for this deployment's Triton pods."""
    return f'namespace="{spec.namespace}",pod=~"{spec.name}-.*"'


def hpa(spec: KubernetesSpec, plan: ScalingPlan) -> dict[str, Any]:
    """The ``autoscaling/v2`` HPA on the Pods metric prometheus-adapter serves."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(spec, spec.name, "server", _annotations(plan)),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name},
            "minReplicas": spec.scaling.min_replicas,
            "maxReplicas": spec.scaling.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": plan.signal.metric},
                        "target": {"type": "AverageValue", "averageValue": quantity(plan.target.value)},
                    },
                }
            ],
            "behavior": BEHAVIOR,
        },
    }


def scaled_object(spec: KubernetesSpec, plan: ScalingPlan) -> dict[str, Any]:
    """KEDA's ScaledObject: a Prometheus trigger on the same expression, averaged over the pods."""
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": metadata(spec, spec.name, "server", _annotations(plan)),
        "spec": {
            "scaleTargetRef": {"name": spec.name},
            "minReplicaCount": spec.scaling.min_replicas,
            "maxReplicaCount": spec.scaling.max_replicas,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": BEHAVIOR}},
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "Value",
                    "metadata": {
                        "serverAddress": spec.scaling.prometheus_url,
                        "query": keda_query(plan.signal, pod_selector(spec), plan.window),
                        "threshold": f"{plan.target.value:g}",
                    },
                }
            ],
        },
    }


def adapter_files(spec: KubernetesSpec, plan: ScalingPlan) -> dict[str, dict[str, Any]]:
    """prometheus-adapter's rule file (its ``config.yaml``) and Helm values carrying the same rule."""
    rules = adapter_rules(plan.signal, plan.window)
    parsed = urlsplit(spec.scaling.prometheus_url)
    base = f"{parsed.scheme}://{parsed.hostname}{parsed.path}".rstrip("/")
    values = {
        "prometheus": {"url": base, "port": parsed.port or 9090},
        "rules": {"default": False, "custom": rules["rules"]},
    }
    return {"prometheus-adapter-rules.yaml": rules, "prometheus-adapter-values.yaml": values}
