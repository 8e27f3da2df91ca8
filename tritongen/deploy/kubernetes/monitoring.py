"""The Prometheus Operator's PodMonitor: Prometheus scrapes every Triton replica's metrics port."""

from __future__ import annotations

from typing import Any

from tritongen.deploy.kubernetes.objects import metadata, selector
from tritongen.deploy.kubernetes.spec import KubernetesSpec


def pod_monitor(spec: KubernetesSpec) -> dict[str, Any]:
    """A PodMonitor on the Triton pods: port ``metrics``, path ``/metrics``, every ``--scrape-interval``.

    Prometheus keeps the pod's ``namespace`` and ``pod`` labels on every series: the
    autoscaling rules select on them.
    """
    endpoint = {"port": "metrics", "path": "/metrics", "interval": spec.scaling.scrape_interval}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": metadata(spec, spec.name, "server"),
        "spec": {
            "selector": {"matchLabels": selector(spec)},
            "namespaceSelector": {"matchNames": [spec.namespace]},
            "podMetricsEndpoints": [endpoint],
        },
    }
