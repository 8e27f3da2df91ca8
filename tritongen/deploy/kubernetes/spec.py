"""What ``tritongen kubernetes`` is asked to write, typed and checked before anything is built."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from tritongen.deploy.kubernetes.scaling import check_window, duration_seconds
from tritongen.errors import ConfigError

StoreKind = Literal["s3", "gs", "as", "pvc", "new-pvc", "nfs"]
Autoscaler = Literal["hpa", "keda", "none"]
AUTOSCALERS: tuple[str, ...] = ("hpa", "keda", "none")
DEFAULT_PROMETHEUS_URL = "http://prometheus-operated.monitoring.svc:9090"
DEFAULT_SCRAPE_INTERVAL = "15s"
MODELS_MOUNT = "/models"
"""Where a volume-backed model repository is mounted in the Triton container."""

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NAME = re.compile(f"^{_LABEL}$")
_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_BUCKETS = {"s3://": "s3", "gs://": "gs", "as://": "as"}
SECRET_KEYS: dict[str, str] = {
    "s3": "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION (as environment variables)",
    "gs": "credentials.json (a service-account key file; GOOGLE_APPLICATION_CREDENTIALS points at it)",
    "as": "AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY (as environment variables)",
}
"""The keys the ``--store-secret`` Secret must hold, per bucket scheme."""


@dataclass(frozen=True)
class ModelStore:
    """Where the Triton pods read the model repository from."""

    kind: StoreKind
    uri: str = ""
    """The bucket URI (``s3``, ``gs``, ``as``) passed to ``--model-repository`` as it is."""
    claim: str = ""
    """The PersistentVolumeClaim (``pvc``: an existing one; ``new-pvc``: the one written)."""
    server: str = ""
    export: str = ""
    secret: str | None = None
    """Secret with the bucket's credentials (referenced, never copied)."""
    storage_class: str | None = None

    @property
    def is_bucket(self) -> bool:
        """Whether Triton reads the repository from a cloud bucket itself."""
        return self.kind in ("s3", "gs", "as")

    @property
    def repository_arg(self) -> str:
        """The value of ``tritonserver --model-repository``."""
        return self.uri if self.is_bucket else MODELS_MOUNT


def check_name(value: str, option: str) -> str:
    """The deployment's name (a DNS-1123 label), at most 40 characters so that suffixes fit.

    Raises:
        ConfigError: not a valid name.
    """
    if len(value) > 40 or not _NAME.match(value):
        raise ConfigError(
            f"{option} {value!r} is not a Kubernetes name",
            "use lower-case letters, digits and '-', at most 40 characters, e.g. triton",
        )
    return value


def check_namespace(value: str) -> str:
    """A namespace (a DNS-1123 label: at most 63 characters).

    Raises:
        ConfigError: not a valid namespace.
    """
    if len(value) > 63 or not _NAME.match(value):
        raise ConfigError(
            f"--namespace {value!r} is not a Kubernetes namespace",
            "use lower-case letters, digits and '-', at most 63 characters, e.g. inference",
        )
    return value


def check_reference(value: str, option: str) -> str:
    """The name of an existing Secret, claim or storage class (a DNS-1123 subdomain, dots allowed).

    Raises:
        ConfigError: not a valid name.
    """
    if len(value) > 253 or not _SUBDOMAIN.match(value):
        raise ConfigError(
            f"{option} {value!r} is not a Kubernetes object name",
            "use lower-case letters, digits, '-' and '.', at most 253 characters",
        )
    return value


def parse_store(
    text: str | None, name: str, secret: str | None = None, storage_class: str | None = None
) -> ModelStore:
    """``--model-store``: a bucket URI, ``pvc:CLAIM``, ``nfs:SERVER:/EXPORT``, or None (a new claim).

    Raises:
        ConfigError: an unknown scheme, a malformed value, a secret given for a volume, or a
            storage class given for a store that creates no claim.
    """
    if secret is not None:
        check_reference(secret, "--store-secret")
    if storage_class is not None:
        check_reference(storage_class, "--storage-class")
        if text:
            raise ConfigError(
                f"--storage-class is for the new claim; --model-store {text} creates none",
                "drop --storage-class (the class of an existing claim is set where it was created)",
            )
    if text is None or text == "":
        store = ModelStore(kind="new-pvc", claim=f"{name}-models", storage_class=storage_class)
    elif text.startswith(tuple(_BUCKETS)):
        kind = _BUCKETS[text[:5]]
        if len(text) <= 5 or text[5] == "/":
            raise ConfigError(f"--model-store {text!r} names no bucket", f"e.g. {text[:5]}my-bucket/models")
        return ModelStore(kind=kind, uri=text, secret=secret)  # type: ignore[arg-type]
    elif text.startswith("pvc:"):
        store = ModelStore(kind="pvc", claim=check_reference(text[4:], "--model-store pvc:"))
    elif text.startswith("nfs:"):
        server, _, export = text[4:].partition(":")
        if not server or not export.startswith("/"):
            raise ConfigError(
                f"--model-store {text!r} is not nfs:SERVER:/EXPORT", "e.g. nfs:10.0.0.5:/models"
            )
        store = ModelStore(kind="nfs", server=server, export=export)
    else:
        scheme = text.split(":", 1)[0] if ":" in text else text
        raise ConfigError(
            f"--model-store {text!r}: unknown scheme {scheme!r}",
            "use s3://…, gs://…, as://…, pvc:CLAIM or nfs:SERVER:/EXPORT (or nothing: a new claim)",
        )
    if secret is not None:
        raise ConfigError(
            "--store-secret is for bucket stores (s3://, gs://, as://)", "drop it for a volume store"
        )
    return store


@dataclass(frozen=True)
class PrometheusUrl:
    """``--prometheus-url`` in the parts prometheus-adapter's Helm chart joins again."""

    base: str
    """``scheme://host``."""
    port: int
    path: str


def parse_prometheus_url(url: str) -> PrometheusUrl:
    """Split ``--prometheus-url``; the port is the scheme's when the URL has none.

    Raises:
        ConfigError: no http(s) scheme, no host, or a bad port.
    """
    parsed = urlsplit(url)
    try:
        port = parsed.port
    except ValueError:
        port = -1
    if parsed.scheme not in ("http", "https") or not parsed.hostname or port == -1:
        raise ConfigError(
            f"--prometheus-url {url!r} is not an http(s) URL with a host",
            "e.g. http://prometheus-operated.monitoring.svc:9090",
        )
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    default = 443 if parsed.scheme == "https" else 80
    return PrometheusUrl(f"{parsed.scheme}://{host}", port or default, parsed.path.rstrip("/"))


@dataclass(frozen=True)
class Scaling:
    """How the Triton Deployment scales."""

    autoscaler: Autoscaler = "hpa"
    min_replicas: int = 1
    max_replicas: int = 4
    signal: str = "queue-time"
    target: float | None = None
    """``--scale-target``: overrides the tuned or default target."""
    window: str = "1m"
    prometheus_url: str = DEFAULT_PROMETHEUS_URL
    scrape_interval: str = DEFAULT_SCRAPE_INTERVAL
    """How often the PodMonitor has Prometheus scrape each replica."""

    def check(self) -> None:
        """Reject impossible replica counts, unknown autoscalers, and windows or URLs that cannot work.

        Raises:
            ConfigError: min above max, a count below 1, an unknown autoscaler, a target not
                above 0, a window shorter than two scrapes, or a Prometheus URL without a host.
        """
        if self.autoscaler not in AUTOSCALERS:
            raise ConfigError(f"--autoscaler {self.autoscaler!r} is unknown", "use hpa, keda or none")
        if self.min_replicas < 1:
            raise ConfigError(f"--min-replicas {self.min_replicas} is below 1", "run at least one replica")
        if self.min_replicas > self.max_replicas:
            raise ConfigError(
                f"--min-replicas {self.min_replicas} is above --max-replicas {self.max_replicas}",
                "give a minimum no larger than the maximum",
            )
        if self.target is not None and self.target <= 0:
            raise ConfigError(f"--scale-target {self.target:g} must be above 0", "pass a positive value")
        if self.autoscaler == "none" and (
            self.target is not None or self.signal not in ("queue-time", "auto")
        ):
            raise ConfigError(
                "--scale-on and --scale-target need an autoscaler",
                "drop them, or pass --autoscaler hpa or keda",
            )
        scrape_s = duration_seconds(self.scrape_interval, "--scrape-interval")
        if self.autoscaler != "none":
            check_window(self.window, scrape_s, self.scrape_interval)
            parse_prometheus_url(self.prometheus_url)


@dataclass(frozen=True)
class ClusterLoad:
    """The in-cluster Locust: one level of the ``loadtest`` options, run by a master and workers."""

    argv: tuple[str, ...]
    """Locust options shared by master and workers (the ``--triton-*`` options)."""
    master_argv: tuple[str, ...]
    """Options only the master takes (users, spawn rate, run time)."""
    workers: int = 2
    model: str = ""


@dataclass(frozen=True)
class KubernetesSpec:
    """Everything ``tritongen kubernetes`` writes from (``repo`` and ``output`` made absolute)."""

    repo: Path
    output: Path
    name: str = "triton"
    namespace: str = "default"
    image: str | None = None
    store: ModelStore = field(default_factory=lambda: ModelStore(kind="new-pvc", claim="triton-models"))
    scaling: Scaling = field(default_factory=Scaling)
    sources: tuple[Path, ...] = ()
    """``--from`` JSON files: a tune result (scaling target) and/or a compare result (memory)."""
    load: ClusterLoad | None = None
    kubernetes_version: str | None = None
    """Schema version to validate against (None: the newest the validator ships)."""
    startup_timeout_s: int = 900
    """How long the startup probe lets a replica load its models."""
    force: bool = False
    validate: bool = True

    def __post_init__(self) -> None:
        """Resolve the paths: ``-o .`` is the current directory by its name."""
        object.__setattr__(self, "repo", Path(self.repo).expanduser().resolve())
        object.__setattr__(self, "output", Path(self.output).expanduser().resolve())

    def check(self) -> None:
        """Check every setting before anything is built.

        Raises:
            ConfigError: a bad name, namespace, replica count, timeout, or output directory.
        """
        check_name(self.name, "--name")
        check_namespace(self.namespace)
        self.scaling.check()
        if self.startup_timeout_s < 30:
            raise ConfigError(
                f"--startup-timeout {self.startup_timeout_s}s is too short to load models", "give 30s or more"
            )
        self._check_output()

    def _check_output(self) -> None:
        out, repo, cwd = self.output, self.repo, Path.cwd().resolve()
        if out == cwd or out in cwd.parents:
            raise ConfigError(
                f"-o {out} is the current directory or holds it",
                "give a directory of its own, e.g. -o deploy",
            )
        if out == repo or out in repo.parents or repo in out.parents:
            raise ConfigError(
                f"-o {out} overlaps the model repository {repo}",
                "write the manifests outside the repository, e.g. -o deploy",
            )
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out} exists and is not a directory", "choose another -o")
        if out.is_dir() and any(out.iterdir()) and not self.force:
            raise ConfigError(
                f"{out} exists and is not empty", "pass --force to replace it, or choose another -o"
            )
