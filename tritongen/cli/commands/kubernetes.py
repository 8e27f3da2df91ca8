"""``tritongen kubernetes``: kustomize manifests, autoscaling on Triton's queue, in-cluster load."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.boundary import user_errors
from tritongen.cli.console import say
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.load import LoadFlags, RunFlags, load_spec
from tritongen.cli.options.output import OutputPath
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shared import Force, Image
from tritongen.client.endpoint import DEFAULT_PORTS
from tritongen.deploy.compose import repository_models
from tritongen.deploy.kubernetes.load import choose_load_model, cluster_load
from tritongen.deploy.kubernetes.resources import read_sources
from tritongen.deploy.kubernetes.spec import (
    DEFAULT_PROMETHEUS_URL,
    DEFAULT_SCRAPE_INTERVAL,
    KubernetesSpec,
    Scaling,
    parse_store,
)
from tritongen.deploy.kubernetes.triton import service_host
from tritongen.deploy.kubernetes.writer import KubernetesResult, write_kubernetes
from tritongen.loadtest.spec import parse_duration


@dataclass(frozen=True)
class ClusterFlags:
    """Names, image and schema version of the deployment."""

    # Not the model's --name of convert and compare: the name of the Kubernetes objects.
    name: Annotated[str, typer.Option("--name", help="Name of the Deployment, Service and the rest.")] = (
        "triton"
    )
    namespace: Annotated[str, typer.Option("--namespace", help="Namespace of every object.")] = "default"
    image: Image = None
    kubernetes_version: Annotated[
        str | None,
        typer.Option(
            "--kubernetes-version",
            help="Validate against this release's schemas (default: the newest the validator ships).",
        ),
    ] = None
    startup_timeout: Annotated[
        str,
        typer.Option("--startup-timeout", help="How long the startup probe lets a replica load its models."),
    ] = "15m"


@dataclass(frozen=True)
class StoreFlags:
    """Where the pods read the model repository from."""

    model_store: Annotated[
        str | None,
        typer.Option(
            "--model-store",
            help="s3://…, gs://…, as://… (read by Triton), pvc:CLAIM, nfs:SERVER:/EXPORT "
            "(default: a new PersistentVolumeClaim).",
        ),
    ] = None
    store_secret: Annotated[
        str | None,
        typer.Option(
            "--store-secret",
            help="Secret holding the bucket's credentials (referenced only).",
        ),
    ] = None
    storage_class: Annotated[
        str | None,
        typer.Option(
            "--storage-class",
            help="Storage class of the new claim (ReadWriteMany; not with --model-store).",
        ),
    ] = None


@dataclass(frozen=True)
class ScalingFlags:
    """How the Triton Deployment scales."""

    autoscaler: Annotated[
        str, typer.Option("--autoscaler", help="hpa (prometheus-adapter), keda or none.")
    ] = "hpa"
    min_replicas: Annotated[int, typer.Option("--min-replicas", help="Fewest replicas.")] = 1
    max_replicas: Annotated[int, typer.Option("--max-replicas", help="Most replicas.")] = 4
    scale_on: Annotated[
        str,
        typer.Option(
            "--scale-on",
            help="queue-time or queue-ratio (Triton's queue), llm-queue or llm-kv-cache (an LLM engine's "
            "waiting requests or KV cache share); auto: llm-queue for LLM models, else queue-time.",
        ),
    ] = "auto"
    scale_target: Annotated[
        float | None,
        typer.Option(
            "--scale-target",
            help="Target per replica (default: from --from tune.json, else documented).",
        ),
    ] = None
    scale_window: Annotated[
        str, typer.Option("--scale-window", help="Rate window of the signal (at least 2 scrapes).")
    ] = "1m"
    scrape_interval: Annotated[
        str, typer.Option("--scrape-interval", help="How often Prometheus scrapes each replica (PodMonitor).")
    ] = DEFAULT_SCRAPE_INTERVAL
    prometheus_url: Annotated[
        str, typer.Option("--prometheus-url", help="Prometheus KEDA and prometheus-adapter query.")
    ] = DEFAULT_PROMETHEUS_URL

    def scaling(self) -> Scaling:
        """As the workflow's settings."""
        return settings(
            Scaling, self, signal=self.scale_on, target=self.scale_target, window=self.scale_window
        )


@dataclass(frozen=True)
class ClusterLoadFlags:
    """The in-cluster Locust."""

    load_model: Annotated[
        str | None,
        typer.Option(
            "--load-model",
            help="Model the load test sends to (default: the model of --from tune.json, else the first).",
        ),
    ] = None
    load_workers: Annotated[
        int,
        typer.Option("--load-workers", help="Locust worker pods (default concurrency: one user each)."),
    ] = 2


@dataclass(frozen=True)
class WriteFlags:
    """How the result is written."""

    force: Annotated[bool, reworded(Force, "Replace a non-empty output directory.")] = False
    no_validate: Annotated[
        bool,
        typer.Option("--no-validate", help="Skip the schema and kustomize checks (no kubernetes-validate)."),
    ] = False


Sources = Annotated[
    list[Path] | None,
    typer.Option("--from", help="tune and/or compare JSON: scaling target and memory request."),
]


@option_groups(
    load=Pick(
        only=("concurrency", "rate", "batch_size", "duration", "warmup", "protocol", "seed", "string_length"),
        defaults={"duration": "60s"},
        helps={
            "concurrency": "Closed loop: in-flight requests of the in-cluster run (one level), e.g. 64.",
            "rate": "Open loop: requests/s of the in-cluster run (one level), e.g. 500.",
        },
    ),
    run=Pick(only=("arrival", "window", "request_timeout")),
)
def kubernetes_command(
    repo: Annotated[Path, typer.Argument(help="Model repository to deploy.")],
    output: Annotated[Path, reworded(OutputPath, "Directory of the kustomize layout.")],
    cluster: ClusterFlags,
    store: StoreFlags,
    scaling: ScalingFlags,
    load: LoadFlags,
    run: RunFlags,
    cluster_load_flags: ClusterLoadFlags,
    write: WriteFlags,
    sources: Sources = None,
) -> None:
    """Write kustomize manifests (base, gpu/cpu overlays), autoscaling on Triton's queue, a load test."""
    with user_errors():
        spec = settings(
            KubernetesSpec, cluster, write,
            repo=repo,
            output=output,
            store=parse_store(store.model_store, cluster.name, store.store_secret, store.storage_class),
            scaling=scaling.scaling(),
            sources=tuple(sources or ()),
            startup_timeout_s=round(parse_duration(cluster.startup_timeout, "--startup-timeout")),
            validate=not write.no_validate,
        )  # fmt: skip
        model = choose_load_model(
            repository_models(spec.repo)[0], cluster_load_flags.load_model, read_sources(spec.sources).tune
        )
        url = f"{service_host(spec)}:{DEFAULT_PORTS[load.protocol.value]}"
        workers = cluster_load_flags.load_workers
        if not (load.concurrency or load.rate):  # one user per worker pod, none idle (the count is checked)
            load = replace(load, concurrency=str(max(workers, 1)))
        spec = replace(spec, load=cluster_load(load_spec(model, url, load, run), workers))
        result = write_kubernetes(spec)
    _print_result(spec, result)


def _print_result(spec: KubernetesSpec, result: KubernetesResult) -> None:
    say(f"wrote {spec.output} (image {result.image}):")
    for item in result.files:
        say(f"  {item.path:<36} {item.purpose}")
    say(f"resources: {result.resources.provenance}")
    if result.scaling is not None:
        signal, target = result.scaling.signal, result.scaling.target
        say(f"scaling: {spec.scaling.autoscaler} on {signal.metric} ({signal.description})")
        say(f"  target {target.value:.6g}, from: {target.source}")
    summary = result.summary
    if not spec.validate:
        say("validation: skipped (--no-validate)")
    else:
        checked = len(summary.checked)
        say(f"validation: {checked} objects valid against Kubernetes {summary.version} schemas (strict)")
        if summary.custom:
            custom = ", ".join(summary.custom)
            say(f"  not schema-checked (custom resources, their CRDs' schemas are not shipped): {custom}")
        say("  kubectl kustomize: " + (summary.skipped or ", ".join(summary.builds)))
    for note in result.notes:
        say(f"note: {note}")

    def where(name: str) -> str:
        return shlex.quote(str(spec.output / name))

    say(f"deploy: kubectl apply -k {where('gpu')} (or {where('cpu')})")
    say(f"load test: kubectl apply -k {where('loadtest')}")
    if spec.load is not None:
        say(f"load test results: kubectl -n {spec.namespace} logs deploy/{spec.name}-load-master")
