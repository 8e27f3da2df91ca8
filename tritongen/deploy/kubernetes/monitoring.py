"""The Prometheus Operator's PodMonitor: Prometheus scrapes every Triton replica's metrics port."""

from __future__ import annotations

from typing import Any

from tritongen.deploy.kubernetes.spec import KubernetesSpec
from tritongen.deploy.kubernetes.triton import metadata, selector

SCRAPE_INTERVAL = "15s"


def pod_monitor(spec: KubernetesSpec) -> dict[str, Any]:
    """A PodMonitor selecting the Triton pods, port ``metrics``, path ``/metrics``.

    Prometheus keeps the pod's ``namespace`` and ``pod`` labels on every series: the
    autoscaling rules select on them.
    """
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": metadata(spec, spec.name, "server"),
        "spec": {
            "selector": {"matchLabels": selector(spec)},
            "namespaceSelector": {"matchNames": [spec.namespace]},
            "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "interval": SCRAPE_INTERVAL}],
        },
    }
