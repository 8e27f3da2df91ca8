"""Autoscaling on Triton's queue signal: an ``autoscaling/v2`` HPA (through prometheus-adapter) or KEDA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritongen.deploy.kubernetes.llm import LlmServing, resolve_signal
from tritongen.deploy.kubernetes.objects import ANNOTATION_PREFIX, metadata
from tritongen.deploy.kubernetes.scaling import (
    ScalingSignal,
    ScalingTarget,
    adapter_rules,
    keda_query,
    quantity,
    scaling_target,
    signal_for,
)
from tritongen.deploy.kubernetes.spec import KubernetesSpec, parse_prometheus_url

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


def plan_scaling(
    spec: KubernetesSpec, tune_doc: dict[str, Any] | None, models: list[str], llm: LlmServing | None = None
) -> ScalingPlan:
    """The signal and its target: ``--scale-target``, else the tuned value, else the default.

    The window and target were checked with the spec. An LLM engine's signal (``llm-queue``,
    the default for LLM models) takes ``--scale-target`` or its default.

    Raises:
        ConfigError: an unknown signal, or an LLM signal without LLM models.
    """
    scaling = spec.scaling
    llm_signal = resolve_signal(scaling.signal, llm)
    signal = llm_signal or signal_for("queue-time" if scaling.signal == "auto" else scaling.signal)
    if scaling.target is not None:
        target = ScalingTarget(scaling.target, f"--scale-target {scaling.target:g}")
    elif llm_signal is not None:
        target = ScalingTarget(
            signal.default_target, f"default {signal.description} target {signal.default_target:g}"
        )
    else:
        target = scaling_target(signal, tune_doc)
        if tune_doc is not None and target.source.startswith("tune of") and len(models) > 1:
            note = (
                f"; the replica's signal covers all {len(models)} models it serves together, "
                "the target one model alone"
            )
            target = ScalingTarget(target.value, target.source + note)
    return ScalingPlan(signal, target, scaling.window)


def _annotations(plan: ScalingPlan) -> dict[str, str]:
    unit = f" {plan.signal.unit}" if plan.signal.unit else ""
    return {
        f"{ANNOTATION_PREFIX}/scale-signal": f"{plan.signal.name}: {plan.signal.description}",
        f"{ANNOTATION_PREFIX}/scale-target": f"{plan.target.value:.6g}{unit}",
        f"{ANNOTATION_PREFIX}/scale-target-from": plan.target.source,
    }


def pod_selector(spec: KubernetesSpec) -> str:
    """PromQL label matchers for this Deployment's pods: ``NAME-<ReplicaSet hash>-<5 characters>``.

    Neither another Deployment whose name starts with ``NAME-`` nor the load test's pods match.
    """
    return f'namespace="{spec.namespace}",pod=~"{spec.name}-[a-z0-9]+-[a-z0-9]+"'


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
    url = parse_prometheus_url(spec.scaling.prometheus_url)
    # The chart joins them again as {{url}}{{if port}}:{{port}}{{end}}{{path}}.
    values = {
        "prometheus": {"url": url.base, "port": url.port, "path": url.path},
        "rules": {"default": False, "custom": rules["rules"]},
    }
    return {"prometheus-adapter-rules.yaml": rules, "prometheus-adapter-values.yaml": values}
